#!/usr/bin/env bash
# experiments/bench/ps_speed.sh, one round: both TCP figures are measured and every
# parameter-server row reports a rate and its share of each, so the benchmark
# docs/speed.md quotes keeps working as the results' columns change.
set -euo pipefail
script=$1 build=$2
out=$("$script" "$build" 1 2>&1) || { echo "$out"; echo "ps_speed.sh failed"; exit 1; }
fail() { echo "$out"; echo "ps_speed_test: $1"; exit 1; }
number='[0-9]+(\.[0-9]+)?'
grep -Eq "^loopback TCP, tcp-loopback-bench .*: median $number GB/s" <<<"$out" ||
  fail "no cache-resident TCP figure"
grep -Eq "^loopback TCP from memory, tcp-loopback-bench .*: median $number GB/s" <<<"$out" ||
  fail "no TCP-from-memory figure"
for run in "N=4 S=1" "N=4 S=2" "N=1 S=1"; do
  grep -Eq "^\| ps $run \| $number ms \| $number-$number ms \| $number GB/s \| [0-9]+% \| [0-9]+% \|$" \
    <<<"$out" || fail "no complete row for ps $run"
  grep -Eq "^ps $run, each round against its own TCP run: [0-9]+% $" <<<"$out" ||
    fail "no per-round share for ps $run"
done
echo "ps_speed_test: every figure present"
