#!/usr/bin/env bash
# experiments/bench/soak.sh for a few experiments: the daemons stay up across
# back-to-back submissions, and every sample and the summary are printed.
set -euo pipefail
script=$1
build=$2
out=$(SAMPLE_EVERY=4 "$script" "$build" 12 2 2>&1) || { echo "$out"; echo "soak.sh failed"; exit 1; }
fail() { echo "$out"; echo "soak_test: $1"; exit 1; }
# 3 samples of 3 daemons.
[[ $(grep -cE '^(4|8|12),(server|worker-[01]),[0-9]+,[0-9]+,[0-9]+,[0-9]+$' <<<"$out") == 9 ]] ||
  fail "expected 9 samples"
for daemon in server worker-0 worker-1; do
  grep -qE "^$daemon,[0-9]+,[0-9]+,-?[0-9]+$" <<<"$out" || fail "no summary for $daemon"
done
echo "soak_test: 12 experiments against one cluster, every sample present"
