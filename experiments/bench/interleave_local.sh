#!/usr/bin/env bash
# Compares configurations of `testbed local` on this machine, interleaved: every
# round runs each configuration once, in order, so drift in the machine's speed
# lands on all of them alike. Prints, per (algorithm, size) and configuration,
# the median over rounds of each run's mean time, and every run's mean, so the
# spread between runs is in view beside the difference (on a 2-core VM the same
# configuration's run means can differ 2x; docs/speed.md, "Where the time goes").
#
# usage: experiments/bench/interleave_local.sh [options] CONFIG...
#   CONFIG       LABEL|ENV|FLAGS: a name, environment settings (VAR=value ...)
#                and extra flags for `testbed local`, either may be empty,
#                e.g. 'base||'  'eager|UCX_RNDV_THRESH=1M|'  'auto||--segment auto'
#   --build DIR  the project's build dir (default: build)
#   --rounds R   default 8
#   --args ARGS  flags every run gets (default: -n 4 -a ring -s 1MiB,16MiB --iters 20 --warmup 5)
#   --out DIR    raw rows, one LABEL.rK.jsonl per run (default: a temporary dir, removed)
# Every run also gets UCX_TLS=tcp unless the environment or the CONFIG sets UCX_TLS.
set -euo pipefail

build=build rounds=8 out="" args="-n 4 -a ring -s 1MiB,16MiB --iters 20 --warmup 5"
configs=()
die() { echo "interleave_local: $*" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --args) args=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) configs+=("$1"); shift ;;
  esac
done
((${#configs[@]} > 0)) || die "give at least one CONFIG (see --help)"
testbed="$build/experiments/testbed"
[[ -x $testbed ]] || die "$testbed missing: build the project first"
if [[ -z $out ]]; then
  out=$(mktemp -d "${TMPDIR:-/tmp}/interleave-local.XXXXXX")
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"

labels=()
for config in "${configs[@]}"; do
  IFS='|' read -r label _ _ <<<"$config"
  [[ $label =~ ^[A-Za-z0-9_.-]+$ ]] || die "label '$label' must be letters, digits, _ . -"
  labels+=("$label")
done
for ((round = 1; round <= rounds; round++)); do
  echo "round $round of $rounds" >&2
  for config in "${configs[@]}"; do
    IFS='|' read -r label envs flags <<<"$config"
    # shellcheck disable=SC2086  # ENV and FLAGS are word lists
    if ! env UCX_TLS="${UCX_TLS:-tcp}" $envs "$testbed" local $args $flags --format json \
        </dev/null >"$out/$label.r$round.jsonl" 2>"$out/$label.r$round.log"; then
      echo "interleave_local: $label round $round failed; see $out/$label.r$round.log" >&2
    fi
  done
done

python3 - "$out" "${labels[@]}" <<'PY'
import glob, json, statistics, sys
out, labels = sys.argv[1], sys.argv[2:]
means = {}  # (algorithm, bytes) -> label -> [run means]
for label in labels:
    for path in sorted(glob.glob(f"{out}/{label}.r*.jsonl")):
        for line in open(path):
            if line.startswith("{"):
                r = json.loads(line)
                if int(r.get("wrong", 0)) > 0:
                    print(f"WRONG results in {path}", file=sys.stderr)
                means.setdefault((r["algorithm"], r["bytes"]), {}).setdefault(label, []).append(
                    r["time_us_avg"])
for (algorithm, size), by_label in sorted(means.items()):
    print(f"{algorithm}, {size} B: median of run means (every run's mean), µs")
    for label in labels:
        runs = by_label.get(label, [])
        if runs:
            print(f"  {label:>12} {statistics.median(runs):>12,.0f}   "
                  + " ".join(f"{m:,.0f}" for m in runs))
PY
