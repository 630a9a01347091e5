#!/usr/bin/env bash
# experiments/bench/baselines/compare_baselines.sh with the testbed alone (CI has
# no OpenMPI or Gloo): two interleaved rounds of tiny sizes give every testbed
# cell, the small-message table and a headline, so the script behind
# docs/speed.md keeps reading the rows as their columns change.
set -euo pipefail
script=$1 build=$2
out_dir=$(mktemp -d "${TMPDIR:-/tmp}/compare-baselines-test.XXXXXX")
trap 'rm -rf "$out_dir"' EXIT
out=$("$script" "$build" --only testbed --workers 2 --min-bytes 8 --max-bytes 64 \
  --iters 3 --warmup 1 --repeat 2 --segment off --out "$out_dir" 2>&1) ||
  { echo "$out"; echo "compare_baselines.sh failed"; exit 1; }
fail() { echo "$out"; echo "compare_baselines_test: $1"; exit 1; }
cell='[0-9.,]+ µs / [0-9]+\.[0-9]{3}'
for round in 1 2; do
  for transport in tcp shm; do
    [[ -s "$out_dir/testbed_$transport.r$round.jsonl" ]] ||
      fail "no raw results for testbed_$transport round $round"
  done
done
grep -q "Median over 2 interleaved runs. testbed runs: --segment off." <<<"$out" ||
  fail "the table does not say how it was measured"
# size | testbed tcp | 4 baseline columns not run | testbed shm | 2 not run
grep -Eq "^\| 8 B \| $cell \| – \| – \| – \| – \| $cell \| – \| – \|$" <<<"$out" ||
  fail "no testbed ring cells at 8 B"
grep -Eq "^\| 64 B \| [0-9.,]+ \| – \| – \| [0-9.,]+ \| – \| – \|$" <<<"$out" ||
  fail "no butterfly row at 64 B"
grep -q "^## Headline at 64 B" <<<"$out" || fail "no headline at the largest size"
grep -q "^- testbed ring UCX tcp vs OpenMPI tcp: no baseline result" <<<"$out" ||
  fail "the headline does not say the baseline is missing"
if grep -q "WRONG" <<<"$out"; then fail "a testbed result was wrong"; fi
echo "compare_baselines_test: every testbed cell present"
