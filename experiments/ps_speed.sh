#!/usr/bin/env bash
# The parameter server's speed benchmark: loopback TCP between two processes
# (tcp-loopback-bench) and `testbed local` running ps at 64 MiB with N = 4,
# S = 1 and 2, and N = 1, interleaved so that a busy moment hits all alike;
# then the median of each, and ps's payload rate (2·N·M / step time) as a share
# of the TCP rate. Loopback only; installs nothing.
#
# usage: experiments/ps_speed.sh [BUILD_DIR] [ROUNDS]   (default: build 3)
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
testbed=$build/experiments/testbed
tcp_bench=$build/experiments/tcp-loopback-bench
for bin in "$testbed" "$tcp_bench"; do
  [[ -x $bin ]] || { echo "ps_speed: $bin not built (./.ci/build)" >&2; exit 2; }
done
bytes=67108864
declare -A times
tcp=()
for ((round = 1; round <= rounds; round++)); do
  echo "round $round of $rounds" >&2
  tcp+=("$("$tcp_bench" --bytes 2GiB | sed -n 's/.*"gbps": \([0-9.]*\).*/\1/p')")
  for cfg in "4 1" "4 2" "1 1"; do
    read -r n s <<<"$cfg"
    t=$("$testbed" local --workers "$n" --servers "$s" --algorithms ps --sizes "$bytes" \
          --iters 10 --warmup 2 --format csv 2>/dev/null | tail -1 | cut -d, -f5)
    times[$cfg]+="$t "
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
tcp_gbps=$(printf '%s\n' "${tcp[@]}" | median)
echo "| run | step time (median of $rounds) | 2·N·M / time | share of loopback TCP ($tcp_gbps GB/s) |"
echo "|---|---:|---:|---:|"
for cfg in "4 1" "4 2" "1 1"; do
  read -r n s <<<"$cfg"
  t=$(echo "${times[$cfg]}" | median)
  awk -v n="$n" -v s="$s" -v t="$t" -v m="$bytes" -v tcp="$tcp_gbps" 'BEGIN {
    rate = 2 * n * m / (t * 1e-6) / 1e9
    printf "| ps N=%d S=%d | %.1f ms | %.3f GB/s | %.0f%% |\n", n, s, t / 1000, rate, 100 * rate / tcp }'
done
