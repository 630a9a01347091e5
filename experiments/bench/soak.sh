#!/usr/bin/env bash
# Long-lived daemons, measured: one coordinator and N workers started once, as
# compose runs them, then EXPERIMENTS back-to-back `testbed run` submissions
# (ps, ring, tree and butterfly in turn, 64 KiB, two iterations). Every
# SAMPLE_EVERY experiments each daemon's resident memory, threads and open
# files are sampled; at the end, each daemon's growth after the first sample
# (the warm-up) is printed. The daemons should hold flat.
#
# usage: experiments/bench/soak.sh [BUILD_DIR] [EXPERIMENTS] [WORKERS]
#   defaults: build 1000 4; SAMPLE_EVERY (default 100) sets the sampling.
# Prints CSV (experiments,daemon,pid,rss_kib,threads,fds) to stdout, then a
# summary; exits 1 if an experiment fails or a daemon dies.
set -euo pipefail
build=${1:-build}
total=${2:-1000}
workers=${3:-4}
every=${SAMPLE_EVERY:-100}
testbed="$build/experiments/testbed"
for binary in "$testbed" "$build/server/testbed-server" "$build/worker/testbed-worker"; do
  [[ -x "$binary" ]] || { echo "soak.sh: $binary missing: build first" >&2; exit 2; }
done

work=$(mktemp -d /tmp/testbed-soak-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  sleep 0.5
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

export TESTBED_JOB_ID=soak
TESTBED_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
export TESTBED_TOKEN

"$build/server/testbed-server" --listen 127.0.0.1:0 --port-file "$work/port" \
  >"$work/server.log" 2>&1 &
pids+=($!)
names=(server)
for _ in $(seq 1 100); do [[ -s "$work/port" ]] && break; sleep 0.1; done
[[ -s "$work/port" ]] || { echo "soak.sh: the server did not start" >&2; cat "$work/server.log" >&2; exit 1; }
coordinator="127.0.0.1:$(cat "$work/port")"
for w in $(seq 0 $((workers - 1))); do
  "$build/worker/testbed-worker" --coordinator "$coordinator" >"$work/worker-$w.log" 2>&1 &
  pids+=($!)
  names+=("worker-$w")
done

declare -A first_rss
sample() {
  local done_count=$1 d
  for d in "${!pids[@]}"; do
    local pid=${pids[$d]} name=${names[$d]}
    [[ -d /proc/$pid ]] || { echo "soak.sh: $name (pid $pid) died" >&2; exit 1; }
    local rss threads fds
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
    threads=$(awk '/^Threads:/ {print $2}' "/proc/$pid/status")
    fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 | wc -l)
    echo "$done_count,$name,$pid,$rss,$threads,$fds"
    if [[ -z "${first_rss[$name]:-}" ]]; then first_rss[$name]=$rss; fi
    last_rss[$name]=$rss
  done
}
declare -A last_rss

algorithms=(ps ring tree butterfly)
echo "experiments,daemon,pid,rss_kib,threads,fds"
start=$(date +%s)
for i in $(seq 1 "$total"); do
  algorithm=${algorithms[$(( (i - 1) % ${#algorithms[@]} ))]}
  if ! "$testbed" run --coordinator "$coordinator" --workers "$workers" --algorithms "$algorithm" \
      --sizes 64KiB --iters 2 --warmup 0 --wait-for-workers 60 --format csv \
      >"$work/run.out" 2>"$work/run.err"; then
    echo "soak.sh: experiment $i ($algorithm) failed:" >&2
    cat "$work/run.err" >&2
    exit 1
  fi
  if (( i % every == 0 )); then
    sample "$i"
    echo "soak.sh: $i of $total experiments, $(( $(date +%s) - start )) s" >&2
  fi
done

echo
echo "daemon,rss_first_sample_kib,rss_last_kib,growth_kib"
for name in "${names[@]}"; do
  echo "$name,${first_rss[$name]},${last_rss[$name]},$(( last_rss[$name] - first_rss[$name] ))"
done
