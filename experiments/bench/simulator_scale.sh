#!/usr/bin/env bash
# The simulator's own speed and memory (docs/simulator.md, "Scale"): every
# all-reduce and ps at N = 4,096 ranks, 64 MiB each, on a two-level fabric
# of 64 racks of 64 hosts at 1 Gbit/s behind 4:1 uplinks (ps: 64 dedicated
# shards on the spine), one `testbed simulate` process per algorithm, so
# each one's peak memory is its own. Prints per algorithm the simulated
# time, the simulator's own time as it reports it (the flows), the process's
# wall time (the schedules built for the simulation, the row's traffic
# counts and cost model included) and its peak resident memory, then the
# totals. Uses GNU time (/usr/bin/time).
#
# usage: experiments/bench/simulator_scale.sh [BUILD_DIR] [N]   (default: build 4096)
set -euo pipefail
build=${1:-build}
n=${2:-4096}
testbed=$build/experiments/testbed
[[ -x $testbed ]] || { echo "simulator_scale: $testbed not built (./.ci/build)" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "simulator_scale: needs GNU time (apt-get install time)" >&2; exit 2; }
racks=$(( n >= 64 ? 64 : 1 ))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "simulator_scale: N = $n, 64 MiB, whole steps (--segment off), $racks racks at 1gbit, 4:1 uplinks; load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-17s %14s %12s %10s %10s\n' algorithm simulated_s simulator_s wall_s peak_MiB
total_wall=0 peak_max=0
for algorithm in ps naive ring tree butterfly halving-doubling hierarchical; do
  /usr/bin/time -f '%e %M' -o "$work/time" "$testbed" simulate --link-rate 1gbit -n "$n" \
    --racks "$racks" --oversubscription 4 --servers 64 -a "$algorithm" -s 64MiB --segment off \
    --format csv \
    > "$work/rows.csv" 2> "$work/err" || { cat "$work/err" >&2; exit 1; }
  read -r wall peak_kb < "$work/time"
  # "testbed simulate: N = 4096, ring, 64MiB: 1.48 s simulated in 6.4 s"
  line=$(grep "^testbed simulate: N = " "$work/err" | tail -1)
  simulated=$(sed -E 's/.*: ([0-9.e+-]+) s simulated in .*/\1/' <<< "$line")
  simulator=$(sed -E 's/.* simulated in ([0-9.e+-]+) s$/\1/' <<< "$line")
  printf '%-17s %14.3f %12.2f %10.2f %10.0f\n' "$algorithm" "$simulated" "$simulator" "$wall" \
    "$(( peak_kb / 1024 ))"
  total_wall=$(python3 -c "print($total_wall + $wall)")
  (( peak_kb > peak_max )) && peak_max=$peak_kb
done
echo "simulator_scale: all $((7)) algorithms in ${total_wall} s wall, peak $(( peak_max / 1024 )) MiB"
