#!/usr/bin/env bash
# How long each long-running subcommand takes to exit after SIGTERM, sent in
# the middle of its work: `local` mid-sweep, `local -a auto` mid-fit (ring
# rows at N = 1024 in its --tuning file), `train` on threads and on daemons
# mid-run, `lab` serving. The goal is under a second each (docs/security.md,
# "Signals"); tests/integration/adversarial_test.cc checks that the fit's
# signal is not held back at all. Loopback only; leaves nothing running.
#
# usage: experiments/bench/sigterm_exit.sh [BUILD_DIR]   (default: build)
set -euo pipefail
build=${1:-build}
testbed=$build/experiments/testbed
[[ -x $testbed ]] || { echo "sigterm_exit: no $testbed; build first (.ci/build)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/sigterm-exit.XXXXXX")
trap 'rm -rf "$work"' EXIT

tuning=$work/tuning.jsonl
for i in $(seq 600); do
  printf '{"record": "result", "algorithm": "ring", "workers": 1024, "bytes": %d, "time_us_avg": %d}\n' \
    $((4096 * i)) $((100 + i))
done >"$tuning"

# measure NAME DELAY_S COMMAND...: starts it, signals it DELAY_S later, and
# prints its exit status and the seconds from the signal to its exit.
measure() {
  local name=$1 delay=$2
  shift 2
  "$@" >/dev/null 2>"$work/err" &
  local pid=$!
  sleep "$delay"
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "$name: ended before the signal; its stderr:" >&2
    cat "$work/err" >&2
    return 1
  fi
  local start end status=0
  start=$(date +%s.%N)
  kill -TERM "$pid"
  wait "$pid" || status=$?
  end=$(date +%s.%N)
  printf '%-32s exit %3d  %.2f s after SIGTERM\n' "$name" "$status" "$(echo "$end - $start" | bc)"
}

echo "sigterm_exit: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
measure "local, mid-sweep" 3 "$testbed" local -n 4 -a ring -s 16MiB --iters 100000
measure "local -a auto, mid-fit" 3 "$testbed" local -n 2 -a auto -s 4KiB --iters 1 --tuning "$tuning"
measure "train on threads, mid-run" 3 "$testbed" train --workers 2 --hidden 16 --steps 1000000
measure "train on daemons, mid-run" 4 "$testbed" train --network loopback --workers 2 --hidden 16 \
  --steps 1000000
measure "lab, serving" 2 "$testbed" lab --listen 127.0.0.1:0
