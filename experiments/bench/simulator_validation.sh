#!/usr/bin/env bash
# The emulated points the simulator is validated against (docs/simulator.md,
# "Validation"): measured `testbed local --network netns` runs, one results
# file, then the table that compares the simulator with them. Needs root
# (network namespaces) and about 18 minutes; prints each part's wall time and
# CPU load beside it, so a reader can see the links, not the two cores,
# decided (1 Gbit/s is the exception: the cores are busy there).
#
#   experiments/bench/simulator_validation.sh [BUILD_DIR] [OUT.jsonl]
#     (default: build experiments/reference/simulator_validation.jsonl)
#
# Then the recorded table is regenerated from the file, with no emulation:
#   build/experiments/testbed simulate --against OUT.jsonl > OUT.md
set -euo pipefail
build=${1:-build}
out=${2:-experiments/reference/simulator_validation.jsonl}
testbed=$build/experiments/testbed
[[ -x $testbed ]] || { echo "simulator_validation: $testbed not built (./.ci/build)" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "simulator_validation: needs root for network namespaces" >&2; exit 2; }
rm -f "$out"
cpu() { awk '/^cpu /{print $2+$3+$4+$6+$7+$8, $5}' /proc/stat; }
part() {
  local name=$1; shift
  local b0 i0 b1 i1 t0=$SECONDS
  read -r b0 i0 < <(cpu)
  "$testbed" local --network netns --segment off --name "$name" --out "$out" "$@" > /dev/null
  read -r b1 i1 < <(cpu)
  echo "$name: $((SECONDS - t0)) s, CPU busy $(awk -v b=$((b1 - b0)) -v i=$((i1 - i0)) \
    'BEGIN{printf "%.2f", 2 * b / (b + i)}') of 2 cores"
}
all=ps,naive,ring,tree,butterfly,halving-doubling
part flat-100mbit --link-rate 100mbit -n 2,4,8 -a $all -s 64KiB:16MiB --iters 3 -w 1
part racks-100mbit --link-rate 100mbit -n 8 --racks 2 --oversubscription 4 \
  -a ps,ring,hierarchical,tree,butterfly,halving-doubling -s 64KiB:16MiB --iters 3 -w 1
part flat-100mbit-64mib --link-rate 100mbit -n 4 -a $all -s 64MiB --iters 2 -w 1
part flat-1gbit --link-rate 1gbit -n 2,4 -a $all -s 64KiB:16MiB --iters 5 -w 1
echo "simulator_validation: $(grep -c '"record": "result"' "$out") points in $out"
