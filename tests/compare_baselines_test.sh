#!/usr/bin/env bash
# experiments/bench/baselines/compare_baselines.sh with the testbed alone (CI has
# no OpenMPI or Gloo): two interleaved rounds of tiny sizes, at the defaults
# and tuned, give every testbed cell, the small-message table, the machine's
# record and the goals' lines, so the script behind docs/speed.md keeps reading
# the rows as their columns change.
set -euo pipefail
script=$1 build=$2
out_dir=$(mktemp -d "${TMPDIR:-/tmp}/compare-baselines-test.XXXXXX")
trap 'rm -rf "$out_dir"' EXIT
out=$("$script" "$build" --only testbed --workers 2 --min-bytes 8 --max-bytes 64 \
  --iters 3 --warmup 1 --repeat 2 --tuned "--segment 32" --out "$out_dir" 2>&1) ||
  { echo "$out"; echo "compare_baselines.sh failed"; exit 1; }
fail() { echo "$out"; echo "compare_baselines_test: $1"; exit 1; }
cell='[0-9.,]+ µs / [0-9]+\.[0-9]{3}'
for round in 1 2; do
  for run in tcp shm tcp_tuned shm_tuned; do
    [[ -s "$out_dir/testbed_$run.r$round.jsonl" ]] ||
      fail "no raw results for testbed_$run round $round"
  done
done
# The tuned runs ran with their flags; the defaults' rows say what ran.
grep -q '"segment_bytes": 32' "$out_dir/testbed_tcp_tuned.r1.jsonl" ||
  fail "the tuned runs did not get --tuned's flags"
grep -q '"ucx_environment": "[^"]*UCX_TLS=tcp' "$out_dir/testbed_tcp.r1.jsonl" ||
  fail "the rows do not record the UCX settings that ran"
grep -q "^## The machine" <<<"$out" || fail "no record of the machine"
grep -Eq "^- cores: [0-9]+$" <<<"$out" || fail "the machine's record has no core count"
grep -Eq "^- kernel: .+" <<<"$out" || fail "the machine's record has no kernel"
grep -q "Median over 2 interleaved runs." <<<"$out" || fail "the table does not say how it was measured"
grep -q "Tuned: the testbed with \`--segment 32\`" <<<"$out" || fail "the tuned table does not name its flags"
# size | testbed tcp | 4 baseline columns not run | testbed shm | OpenMPI shm not run
grep -Eq "^\| 8 B \| $cell \| – \| – \| – \| – \| $cell \| – \|$" <<<"$out" ||
  fail "no testbed ring cells at 8 B at the defaults"
# size | testbed tcp tuned | OpenMPI + hugetlb | testbed shm tuned | OpenMPI shm + hugetlb
grep -Eq "^\| 8 B \| $cell \| – \| $cell \| – \|$" <<<"$out" || fail "no tuned ring cells at 8 B"
grep -Eq "^\| 64 B \| [0-9.,]+ \| – \| – \| [0-9.,]+ \| – \| – \|$" <<<"$out" ||
  fail "no butterfly row at 64 B"
grep -q "^## The goals, at defaults" <<<"$out" || fail "no goals"
grep -q "^- 64 B, testbed ring vs OpenMPI tcp (goal ≥ 1.1x): no baseline result" <<<"$out" ||
  fail "the goals do not say the baseline is missing"
if grep -q "WRONG" <<<"$out"; then fail "a testbed result was wrong"; fi
echo "compare_baselines_test: every testbed cell present"
