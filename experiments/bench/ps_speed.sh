#!/usr/bin/env bash
# The parameter server's speed benchmark: loopback TCP between two processes
# (tcp-loopback-bench, and iperf3 too where it is installed) and `testbed
# local` running ps at 64 MiB with N = 4, S = 1 and 2, and N = 1, interleaved
# so that a busy moment hits all alike; then the median (and range) of each,
# and ps's payload rate (2·N·M / step time) as a share of the TCP rate.
# The share is taken against tcp-loopback-bench, the faster of the two TCP
# figures on this kind of machine; each round's own share (ps against the TCP
# run just before it) follows the table, to show the spread.
#
# Both TCP figures send from and receive into buffers that stay in the CPU's
# cache (1 MiB, 128 KiB). ps moves 64 MiB tensors, which do not, so a third
# TCP figure walks 64 MiB buffers on both sides, 1 MiB per call: the same
# program, fetching its bytes from memory as ps does. The last column is ps's
# share of that one; the gap between the two TCP figures is the memory's part.
# Loopback only; installs nothing.
#
# usage: experiments/bench/ps_speed.sh [BUILD_DIR] [ROUNDS]   (default: build 5)
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
testbed=$build/experiments/testbed
tcp_bench=$build/experiments/tcp-loopback-bench
for bin in "$testbed" "$tcp_bench"; do
  [[ -x $bin ]] || { echo "ps_speed: $bin not built (./.ci/build)" >&2; exit 2; }
done
have_iperf3=$(command -v iperf3 >/dev/null && echo 1 || echo 0)
iperf3_port=5299

# One iperf3 run (one stream, 2 s) on loopback, in GB/s; the server is ours to end.
iperf3_gbps() {
  iperf3 -s -1 -p "$iperf3_port" >/dev/null 2>&1 &
  local server=$!
  sleep 0.3
  iperf3 -c 127.0.0.1 -p "$iperf3_port" -t 2 -J 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 8e9)' ||
    echo ""
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
}

# One tcp-loopback-bench run of 4 GiB (further options as given), in GB/s.
tcp_bench_gbps() {
  "$tcp_bench" --bytes 4GiB "$@" | sed -n 's/.*"gbps": \([0-9.]*\).*/\1/p'
}

bytes=67108864
configs=("4 1" "4 2" "1 1")
declare -A times
tcp=() tcp_memory=() iperf=()
for ((round = 1; round <= rounds; round++)); do
  echo "round $round of $rounds" >&2
  tcp+=("$(tcp_bench_gbps)")
  tcp_memory+=("$(tcp_bench_gbps --buffer "$bytes")")
  if ((have_iperf3)); then iperf+=("$(iperf3_gbps)"); fi
  for cfg in "${configs[@]}"; do
    read -r n s <<<"$cfg"
    t=$("$testbed" local --workers "$n" --servers "$s" --algorithms ps --sizes "$bytes" \
          --iters 10 --warmup 2 --format csv 2>/dev/null | tail -1 | cut -d, -f5)
    times[$cfg]+="$t "
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
range() { tr ' ' '\n' | grep . | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%s-%s", lo, hi}'; }
tcp_gbps=$(printf '%s\n' "${tcp[@]}" | median)
tcp_memory_gbps=$(printf '%s\n' "${tcp_memory[@]}" | median)
echo "loopback TCP, tcp-loopback-bench (4 GiB, 1 MiB writes): median $tcp_gbps GB/s, range $(printf '%s ' "${tcp[@]}" | range)"
echo "loopback TCP from memory, tcp-loopback-bench (4 GiB, 1 MiB calls through 64 MiB buffers): median $tcp_memory_gbps GB/s, range $(printf '%s ' "${tcp_memory[@]}" | range)"
if ((have_iperf3)); then
  echo "loopback TCP, iperf3 (one stream, 2 s): median $(printf '%s\n' "${iperf[@]}" | median) GB/s, range $(printf '%s ' "${iperf[@]}" | range)"
fi
echo
echo "| run | step time (median of $rounds) | range | 2·N·M / time | share of loopback TCP ($tcp_gbps GB/s) | share of TCP from memory ($tcp_memory_gbps GB/s) |"
echo "|---|---:|---:|---:|---:|---:|"
for cfg in "${configs[@]}"; do
  read -r n s <<<"$cfg"
  t=$(echo "${times[$cfg]}" | median)
  r=$(echo "${times[$cfg]}" | range)
  awk -v n="$n" -v s="$s" -v t="$t" -v r="$r" -v m="$bytes" -v tcp="$tcp_gbps" \
      -v tcp_memory="$tcp_memory_gbps" 'BEGIN {
    split(r, lh, "-")
    rate = 2 * n * m / (t * 1e-6) / 1e9
    printf "| ps N=%d S=%d | %.1f ms | %.0f-%.0f ms | %.3f GB/s | %.0f%% | %.0f%% |\n",
           n, s, t / 1000, lh[1] / 1000, lh[2] / 1000, rate, 100 * rate / tcp,
           100 * rate / tcp_memory }'
done
echo
for cfg in "${configs[@]}"; do
  read -r n s <<<"$cfg"
  read -r -a round_times <<<"${times[$cfg]}"
  shares=""
  for ((i = 0; i < rounds; i++)); do
    shares+=$(awk -v n="$n" -v t="${round_times[i]}" -v m="$bytes" -v tcp="${tcp[i]}" \
      'BEGIN { printf "%.0f%% ", 100 * 2 * n * m / (t * 1e-6) / 1e9 / tcp }')
  done
  echo "ps N=$n S=$s, each round against its own TCP run: $shares"
done
