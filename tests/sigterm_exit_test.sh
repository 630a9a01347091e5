#!/usr/bin/env bash
# experiments/bench/sigterm_exit.sh once: every subcommand it signals ends
# with its signal's exit status and a time is printed for each (the times
# themselves are the benchmark's, not judged here).
set -euo pipefail
script=$1
build=$2
out=$("$script" "$build" 2>&1) || { echo "$out"; echo "sigterm_exit.sh failed"; exit 1; }
echo "$out"
fail() { echo "sigterm_exit_test: $1"; exit 1; }
for expected in "local, mid-sweep.* exit 130" "local -a auto, mid-fit.* exit 130" \
  "train on threads, mid-run.* exit 143" "train on daemons, mid-run.* exit 130" \
  "lab, serving.* exit   0"; do
  grep -qE "^$expected  [0-9]+\.[0-9]+ s after SIGTERM$" <<<"$out" || fail "no line '$expected'"
done
echo "sigterm_exit_test: every subcommand ended on SIGTERM"
