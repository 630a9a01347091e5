#!/usr/bin/env bash
# experiments/bench/soak.sh for a few experiments: the daemons stay up across
# back-to-back submissions, and every sample and the summary are printed.
set -euo pipefail
script=$1
build=$2
out=$(SAMPLE_EVERY=4 "$script" "$build" 12 2 2>&1) || { echo "$out"; echo "soak.sh failed"; exit 1; }
fail() { echo "$out"; echo "soak_test: $1"; exit 1; }
# Nothing but the CSV on stdout (the daemons log to their own files), and the
# progress counts the experiments.
grep -qE '^\[' <<<"$out" && fail "daemon log lines mixed into the output"
grep -q "soak.sh: 12 of 12 experiments" <<<"$out" || fail "progress does not count experiments"
# 3 samples of 3 daemons.
[[ $(grep -cE '^(4|8|12),(server|worker-[01]),[0-9]+,[0-9]+,[0-9]+,[0-9]+$' <<<"$out") == 9 ]] ||
  fail "expected 9 samples"
for daemon in server worker-0 worker-1; do
  grep -qE "^$daemon,[0-9]+,[0-9]+,-?[0-9]+$" <<<"$out" || fail "no summary for $daemon"
done
echo "soak_test: 12 experiments against one cluster, every sample present"
