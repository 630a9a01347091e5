#!/usr/bin/env bash
# Speed comparison, N processes on this machine (loopback only), float32 sum:
#   testbed ring / butterfly over UCX (TCP on lo, then shared memory), at its
#     defaults (no flags: what a new user gets) and tuned (--tuned ARGS)
#   OpenMPI MPI_Allreduce (ob1 + tcp btl on lo; ob1 + vader shm btl), each also
#     with GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (OpenMPI mallocs temporaries
#     per call, which can cost first-touch page faults; the benches report
#     page_faults_per_iter so the raw JSON shows whether that happened)
#   Gloo AllreduceRingChunked (bandwidth-optimal ring), AllreduceHalvingDoubling
#     and AllreduceRing (passes the whole buffer around), TCP on 127.0.0.1
# then prints Markdown tables (baseline_tables.py) headed by the machine they
# were measured on (machine.txt: CPU model, cores, kernel, versions) and ending
# with the goals of docs/speed.md checked. Installs nothing; needs mpirun and the binaries
# built from experiments/bench/baselines (apt-get install openmpi-bin libopenmpi-dev
# libgloo-dev, then build). Every result line is also kept as JSON lines.
#
# usage: experiments/bench/baselines/compare_baselines.sh [BUILD_DIR] [options]
#   BUILD_DIR               the project's build dir (default: build); testbed is
#                           BUILD_DIR/experiments/testbed
#   --baselines-dir DIR     where mpi_allreduce_bench and gloo_allreduce_bench
#                           are (default: BUILD_DIR/experiments/bench/baselines, else
#                           BUILD_DIR)
#   --workers N             default 4
#   --iters K, --warmup W   per size (default 20, 5)
#   --min-bytes B, --max-bytes B   default 8, 64MiB (sizes double)
#   --tuned ARGS            the tuned testbed runs' extra flags (default
#                           "--segment auto"); the tables name them
#   --no-tuned              skip the tuned runs (testbed and OpenMPI + hugetlb)
#   --out DIR               raw results (default results-baselines-DATE-TIME)
#   --only LIST             comma list of: testbed,openmpi,gloo (default: all)
#   --timeout S             limit per run in seconds (default 1200)
#   --repeat R              run every configuration R times, interleaved
#                           (default 1); the tables show, per cell, the run
#                           with the median time_us_avg. This machine is
#                           shared and small: single runs vary 2-4x.
# Environment for the testbed runs (override if the harness needs more):
#   TESTBED_TCP_ENV   default "UCX_TLS=tcp UCX_NET_DEVICES=lo"
#   TESTBED_SHM_ENV   default "UCX_TLS=sm"  (UCX 1.13: sm = posix,sysv + cma)
#   TESTBED_TUNED_ENV added to the tuned runs' environment (default none)
#   MPIRUN_EXTRA      extra mpirun arguments
set -euo pipefail

build_dir=build
baselines_dir=""
workers=4
iters=20
warmup=5
min_bytes=8
max_bytes=64MiB
tuned_args="--segment auto"
out_dir=""
tuned=1
only="testbed,openmpi,gloo"
run_timeout=1200
repeat=1

die() { echo "compare_baselines: $*" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --baselines-dir) baselines_dir=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --min-bytes) min_bytes=$2; shift 2 ;;
    --max-bytes) max_bytes=$2; shift 2 ;;
    --tuned) tuned_args=$2; shift 2 ;;
    --no-tuned) tuned=0; shift ;;
    --out) out_dir=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --timeout) run_timeout=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) build_dir=$1; shift ;;
  esac
done
want() { [[ ",$only," == *",$1,"* ]]; }

command -v python3 >/dev/null || die "python3 is needed for the tables"
testbed="$build_dir/experiments/testbed"
if [[ -z "$baselines_dir" ]]; then
  if [[ -d "$build_dir/experiments/bench/baselines" ]]; then
    baselines_dir="$build_dir/experiments/bench/baselines"
  else
    baselines_dir="$build_dir"
  fi
fi
mpi_bench="$baselines_dir/mpi_allreduce_bench"
gloo_bench="$baselines_dir/gloo_allreduce_bench"
out_dir=${out_dir:-results-baselines-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)
echo "compare_baselines: N=$workers, $min_bytes..$max_bytes, iters $iters," \
     "warmup $warmup; raw results in $out_dir"

# The machine the tables were measured on: its speed, not only the code's,
# decides them, so every table carries this record (the load, at start and
# end, is the notes' last line).
version_of() { "$@" 2>/dev/null | head -n 1 || true; }
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "revision: $(git -C "$(dirname "$0")" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "CPU: $(awk -F': ' '/^model name/ {m = $2} /^cpu family/ {f = $2} /^model\t/ {n = $2}
                       /^$/ {exit} END {printf "%s (family %s, model %s)", m, f, n}' /proc/cpuinfo)"
  echo "cores: $(nproc)"
  echo "memory: $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "kernel: $(uname -sr)"
  echo "UCX: $(version_of ucx_info -v | sed 's/^# *//')"
  echo "OpenMPI: $(version_of mpirun --version)"
  echo "Gloo: $(dpkg-query -W -f='libgloo-dev ${Version}' libgloo-dev 2>/dev/null || echo unknown)"
} >"$out_dir/machine.txt"

# Every child runs in the background under `timeout`, its PID recorded, so an
# interrupt or a failure kills exactly what this script started.
pids=()
rendezvous=""
cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  if [[ -n "$rendezvous" ]]; then rm -rf "$rendezvous"; fi
}
trap cleanup EXIT
trap 'echo "compare_baselines: interrupted" >&2; exit 130' INT TERM

# run_logged LABEL CMD... : stdout to LABEL.jsonl, stderr to LABEL.log.
run_logged() {
  local label=$1; shift
  echo "  running $label"
  timeout "$run_timeout" "$@" </dev/null >"$out_dir/$label.jsonl" \
    2>"$out_dir/$label.log" &
  local pid=$!
  pids=("$pid")
  local rc=0
  wait "$pid" || rc=$?
  pids=()
  if ((rc != 0)); then
    echo "  $label failed (exit $rc); last lines of $out_dir/$label.log:" >&2
    tail -n 5 "$out_dir/$label.log" >&2 || true
  fi
  return 0
}

note() { notes+=("$1"); echo "  NOTE: $1" >&2; }

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
sweep=(--min-bytes "$min_bytes" --max-bytes "$max_bytes" --factor 2
       --iters "$iters" --warmup "$warmup")
notes=()

# --- what can run ---------------------------------------------------------------
run_testbed=0 run_openmpi=0 run_gloo=0
if want testbed; then
  if [[ ! -x "$testbed" ]]; then
    note "testbed binary missing ($testbed): build the project first; testbed columns are empty"
  elif ! "$testbed" --help 2>/dev/null |
       awk '/^Subcommands:/ {s = 1; next} s && $1 == "local" {f = 1} END {exit !f}'; then
    note "'testbed local' is MISSING (this build of $testbed has no 'local' subcommand yet): testbed columns are empty"
  else
    run_testbed=1
    tcp_env=${TESTBED_TCP_ENV:-UCX_TLS=tcp UCX_NET_DEVICES=lo}
    shm_env=${TESTBED_SHM_ENV:-UCX_TLS=sm}
    tuned_env=${TESTBED_TUNED_ENV:-}
    local_args=(local --workers "$workers" --algorithms "ring,butterfly"
                --sizes "$min_bytes:$max_bytes:x2" --iters "$iters"
                --warmup "$warmup" --format json)
    # shellcheck disable=SC2206  # a list of flags
    tuned_flags=($tuned_args)
  fi
fi
if want openmpi; then
  if ! command -v mpirun >/dev/null; then
    note "mpirun missing: apt-get install openmpi-bin libopenmpi-dev"
  elif [[ ! -x "$mpi_bench" ]]; then
    note "$mpi_bench missing: build experiments/bench/baselines (needs libopenmpi-dev)"
  else
    run_openmpi=1
    # 4 ranks on 2 cores: oversubscribe, no binding, yield instead of spinning.
    mpirun_args=(-np "$workers" --oversubscribe --bind-to none
                 --mca mpi_yield_when_idle 1)
    if [[ $(id -u) == 0 ]]; then mpirun_args+=(--allow-run-as-root); fi
    # shellcheck disable=SC2206  # a list of arguments
    if [[ -n "${MPIRUN_EXTRA:-}" ]]; then mpirun_args+=($MPIRUN_EXTRA); fi
    mpi_tcp=(--mca pml ob1 --mca btl "tcp,self" --mca btl_tcp_if_include lo)
    # What Debian's OpenMPI picks by default on one node (its
    # openmpi-mca-params.conf excludes pml ucx): ob1 with the vader shm btl.
    mpi_shm=(--mca pml ob1 --mca btl "vader,self")
  fi
fi
if want gloo; then
  if [[ ! -x "$gloo_bench" ]]; then
    note "$gloo_bench missing: build experiments/bench/baselines (needs libgloo-dev)"
  else
    run_gloo=1
  fi
fi

# Gloo: N processes meeting in a FileStore directory; rank 0 prints.
run_gloo_round() {
  local label=$1
  echo "  running $label"
  rendezvous=$(mktemp -d "${TMPDIR:-/tmp}/gloo-rendezvous.XXXXXX")
  local gloo_pids=() r out pid other rc failed=0
  for ((r = 0; r < workers; r++)); do
    if ((r == 0)); then out="$out_dir/$label.jsonl"; else out=/dev/null; fi
    timeout "$run_timeout" "$gloo_bench" --rank "$r" --workers "$workers" \
      --rendezvous "$rendezvous" --prefix "run$$" --host 127.0.0.1 \
      "${sweep[@]}" --transport tcp </dev/null >"$out" \
      2>>"$out_dir/$label.log" &
    gloo_pids+=($!)
    pids+=($!)
  done
  for pid in "${gloo_pids[@]}"; do
    rc=0
    wait "$pid" || rc=$?
    if ((rc != 0 && !failed)); then
      failed=1
      echo "  gloo rank (pid $pid) failed (exit $rc); stopping the others" >&2
      for other in "${gloo_pids[@]}"; do kill -TERM "$other" 2>/dev/null || true; done
      tail -n 5 "$out_dir/$label.log" >&2 || true
    fi
  done
  pids=()
  rm -rf "$rendezvous"
  rendezvous=""
}

# --- the rounds: every configuration once per round, rounds interleaved --------
for ((round = 1; round <= repeat; round++)); do
  ((repeat > 1)) && echo "round $round of $repeat"
  sfx=""
  ((repeat > 1)) && sfx=".r$round"
  if ((run_testbed)); then
    # shellcheck disable=SC2086  # the *_ENV strings are VAR=value lists
    run_logged "testbed_tcp$sfx" env $tcp_env "$testbed" "${local_args[@]}"
    # shellcheck disable=SC2086
    run_logged "testbed_shm$sfx" env $shm_env "$testbed" "${local_args[@]}"
    if ((tuned)); then
      # shellcheck disable=SC2086
      run_logged "testbed_tcp_tuned$sfx" env $tcp_env $tuned_env "$testbed" \
        "${local_args[@]}" "${tuned_flags[@]}"
      # shellcheck disable=SC2086
      run_logged "testbed_shm_tuned$sfx" env $shm_env $tuned_env "$testbed" \
        "${local_args[@]}" "${tuned_flags[@]}"
    fi
  fi
  if ((run_openmpi)); then
    run_logged "openmpi_tcp$sfx" mpirun "${mpirun_args[@]}" "${mpi_tcp[@]}" \
      "$mpi_bench" "${sweep[@]}" --transport tcp
    run_logged "openmpi_shm$sfx" mpirun "${mpirun_args[@]}" "${mpi_shm[@]}" \
      "$mpi_bench" "${sweep[@]}" --transport shm
    if ((tuned)); then
      run_logged "openmpi_tcp_hugetlb$sfx" env GLIBC_TUNABLES=glibc.malloc.hugetlb=1 \
        mpirun "${mpirun_args[@]}" -x GLIBC_TUNABLES "${mpi_tcp[@]}" \
        "$mpi_bench" "${sweep[@]}" --transport tcp+hugetlb
      run_logged "openmpi_shm_hugetlb$sfx" env GLIBC_TUNABLES=glibc.malloc.hugetlb=1 \
        mpirun "${mpirun_args[@]}" -x GLIBC_TUNABLES "${mpi_shm[@]}" \
        "$mpi_bench" "${sweep[@]}" --transport shm+hugetlb
    fi
  fi
  if ((run_gloo)); then run_gloo_round "gloo_tcp$sfx"; fi
done

# --- tables -------------------------------------------------------------------
notes+=("load average at start: $load_start; at end: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)")
printf '%s\n' "${notes[@]}" >"$out_dir/notes.txt"
python3 "$(dirname "$0")/baseline_tables.py" "$out_dir" "$workers" "$repeat" "$tuned_args" |
  tee "$out_dir/table.md"
