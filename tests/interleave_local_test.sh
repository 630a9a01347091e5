#!/usr/bin/env bash
# experiments/bench/interleave_local.sh, the A/B loop behind docs/speed.md's
# "Where the time goes": two configurations, two rounds of a tiny run, give a
# median and both runs' means for each, and each configuration's settings
# reach its runs (the raw rows record the UCX environment that ran).
set -euo pipefail
script=$1 build=$2
out_dir=$(mktemp -d "${TMPDIR:-/tmp}/interleave-local-test.XXXXXX")
trap 'rm -rf "$out_dir"' EXIT
fail() { echo "$out"; echo "interleave_local_test: $1"; exit 1; }
out=$("$script" --build "$build" --rounds 2 --out "$out_dir" \
  --args "-n 2 -a ring -s 1KiB --iters 3 --warmup 1" \
  "base||" "eager|UCX_RNDV_THRESH=1M|--segment off" 2>&1) || fail "the script failed"
grep -q "^ring, 1024 B: median of run means" <<<"$out" || fail "no heading for ring at 1 KiB"
grep -Eq "^ +base +[0-9,]+ +[0-9,]+ [0-9,]+$" <<<"$out" || fail "no line for base with two runs"
grep -Eq "^ +eager +[0-9,]+ +[0-9,]+ [0-9,]+$" <<<"$out" || fail "no line for eager with two runs"
grep -q 'UCX_RNDV_THRESH=1M' "$out_dir/eager.r2.jsonl" || fail "eager's environment did not reach its run"
if grep -q 'UCX_RNDV_THRESH' "$out_dir/base.r1.jsonl"; then fail "base got eager's environment"; fi
if "$script" --build "$build" >/dev/null 2>&1; then fail "no CONFIG was accepted"; fi
echo "interleave_local_test: both configurations measured, interleaved"
