#!/usr/bin/env bash
# Speed comparison, N processes on this machine (loopback only), float32 sum:
#   testbed ring / butterfly over UCX (TCP on lo, then shared memory)
#   OpenMPI MPI_Allreduce (ob1 + tcp btl on lo; ob1 + vader shm btl), each also
#     with GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (OpenMPI mallocs temporaries
#     per call, which can cost first-touch page faults; the benches report
#     page_faults_per_iter so the raw JSON shows whether that happened)
#   Gloo AllreduceRingChunked (bandwidth-optimal ring) and AllreduceRing (passes
#     the whole buffer around), TCP on 127.0.0.1
# then prints Markdown tables. Installs nothing; needs mpirun and the binaries
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
#   --segment S             the testbed runs' --segment: auto (default), off or
#                           a size; the tables name it
#   --out DIR               raw results (default results-baselines-DATE-TIME)
#   --no-hugetlb            skip the OpenMPI runs with glibc.malloc.hugetlb=1
#   --only LIST             comma list of: testbed,openmpi,gloo (default: all)
#   --timeout S             limit per run in seconds (default 1200)
#   --repeat R              run every configuration R times, interleaved
#                           (default 1); the tables show, per cell, the run
#                           with the median time_us_avg. This machine is
#                           shared and small: single runs vary 2-4x.
# Environment for the testbed runs (override if the harness needs more):
#   TESTBED_TCP_ENV   default "UCX_TLS=tcp UCX_NET_DEVICES=lo"
#   TESTBED_SHM_ENV   default "UCX_TLS=sm"  (UCX 1.13: sm = posix,sysv + cma)
#   MPIRUN_EXTRA      extra mpirun arguments
set -euo pipefail

build_dir=build
baselines_dir=""
workers=4
iters=20
warmup=5
min_bytes=8
max_bytes=64MiB
segment=auto
out_dir=""
hugetlb=1
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
    --segment) segment=$2; shift 2 ;;
    --out) out_dir=$2; shift 2 ;;
    --no-hugetlb) hugetlb=0; shift ;;
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
    local_args=(local --workers "$workers" --algorithms "ring,butterfly"
                --sizes "$min_bytes:$max_bytes:x2" --iters "$iters"
                --warmup "$warmup" --segment "$segment" --format json)
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
  fi
  if ((run_openmpi)); then
    run_logged "openmpi_tcp$sfx" mpirun "${mpirun_args[@]}" "${mpi_tcp[@]}" \
      "$mpi_bench" "${sweep[@]}" --transport tcp
    run_logged "openmpi_shm$sfx" mpirun "${mpirun_args[@]}" "${mpi_shm[@]}" \
      "$mpi_bench" "${sweep[@]}" --transport shm
    if ((hugetlb)); then
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
python3 - "$out_dir" "$workers" "$repeat" "$segment" <<'PY' | tee "$out_dir/table.md"
import json, os, sys

out_dir, workers, repeat, segment = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

def records(label):
    """JSON objects from LABEL.jsonl (or LABEL.rK.jsonl, one per round):
    JSON lines, or one array/object."""
    paths = [os.path.join(out_dir, label + ".jsonl")]
    paths += [os.path.join(out_dir, f"{label}.r{k}.jsonl") for k in range(1, repeat + 1)]
    out = []
    for path in paths:
        if os.path.exists(path):
            out += records_in(open(path).read())
    return out

def records_in(text):
    try:
        whole = json.loads(text)
        if isinstance(whole, dict):
            whole = whole.get("results", [whole])
        return [r for r in whole if isinstance(r, dict)]
    except ValueError:
        pass
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out

def index(label, algorithm):
    """bytes -> the record with the median time_us_avg over the rounds (for an
    even count, the slower of the middle two)."""
    runs = {}
    for r in records(label):
        if str(r.get("algorithm", "")).lower() == algorithm.lower():
            runs.setdefault(int(r["bytes"]), []).append(r)
    table = {}
    for b, rs in runs.items():
        rs.sort(key=lambda r: r["time_us_avg"])
        table[b] = rs[len(rs) // 2]
    return table

columns = [
    ("testbed ring, UCX tcp", index("testbed_tcp", "ring")),
    ("OpenMPI, tcp", index("openmpi_tcp", "MPI_Allreduce")),
    ("OpenMPI, tcp + hugetlb", index("openmpi_tcp_hugetlb", "MPI_Allreduce")),
    ("Gloo AllreduceRingChunked, tcp", index("gloo_tcp", "AllreduceRingChunked")),
    ("Gloo AllreduceRing (whole buffer), tcp", index("gloo_tcp", "AllreduceRing")),
    ("testbed ring, UCX shm", index("testbed_shm", "ring")),
    ("OpenMPI, shm (vader)", index("openmpi_shm", "MPI_Allreduce")),
    ("OpenMPI, shm + hugetlb", index("openmpi_shm_hugetlb", "MPI_Allreduce")),
]
butterfly = [
    ("tcp", index("testbed_tcp", "butterfly"), index("openmpi_tcp", "MPI_Allreduce")),
    ("shm", index("testbed_shm", "butterfly"), index("openmpi_shm", "MPI_Allreduce")),
]

def size_name(b):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale and b % scale == 0:
            return f"{b // scale} {unit}"
    return f"{b} B"

def fmt_us(us):
    return f"{us:,.1f}" if us < 100 else f"{us:,.0f}"

def cell(r):
    if r is None:
        return "–"
    text = f"{fmt_us(r['time_us_avg'])} µs / {r['busbw_gbps']:.3f}"
    if int(r.get("wrong", 0)) != 0:
        text += f" **WRONG {r['wrong']}**"
    return text

sizes = sorted({b for _, t in columns for b in t} |
               {b for _, a, m in butterfly for b in list(a) + list(m)})
print()
print(f"## All-reduce, N = {workers}, float32 sum, loopback")
print()
print("Cells: average time per iteration (slowest rank) / busbw in GB/s "
      "(busbw = bytes/time · 2(N−1)/N, 1 GB = 1e9 B). '–' = not run."
      + (f" Median over {repeat} interleaved runs." if repeat > 1 else "")
      + f" testbed runs: --segment {segment}.")
print()
print("| size | " + " | ".join(name for name, _ in columns) + " |")
print("|---:|" + "---:|" * len(columns))
for b in sizes:
    print(f"| {size_name(b)} | " + " | ".join(cell(t.get(b)) for _, t in columns) + " |")

small = [b for b in sizes if b <= 4096]
print()
print("## Small messages (8 B – 4 KiB): testbed butterfly vs OpenMPI MPI_Allreduce")
print()
print("ratio = testbed time / OpenMPI time (below 1: testbed is faster).")
print()
print("| size | butterfly, UCX tcp (µs) | OpenMPI tcp (µs) | ratio tcp "
      "| butterfly, UCX shm (µs) | OpenMPI shm (µs) | ratio shm |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for b in small:
    row = [size_name(b)]
    for _, ours, theirs in butterfly:
        a, m = ours.get(b), theirs.get(b)
        row.append(fmt_us(a["time_us_avg"]) if a else "–")
        row.append(fmt_us(m["time_us_avg"]) if m else "–")
        row.append(f"{a['time_us_avg'] / m['time_us_avg']:.2f}" if a and m else "–")
    print("| " + " | ".join(row) + " |")

# The headline sizes: 16 MiB and above (the bandwidth regime), else the largest.
headline = [b for b in sizes if b >= 16 << 20] or sizes[-1:]
pairs = [
    ("testbed ring UCX tcp vs OpenMPI tcp", columns[0][1], columns[1][1]),
    ("testbed ring UCX tcp vs OpenMPI tcp + hugetlb", columns[0][1], columns[2][1]),
    ("testbed ring UCX tcp vs Gloo AllreduceRingChunked", columns[0][1], columns[3][1]),
    ("testbed ring UCX tcp vs Gloo AllreduceRing", columns[0][1], columns[4][1]),
    ("testbed ring UCX shm vs OpenMPI shm", columns[5][1], columns[6][1]),
    ("testbed ring UCX shm vs OpenMPI shm + hugetlb", columns[5][1], columns[7][1]),
]
for size in headline:
    print()
    print(f"## Headline at {size_name(size)}")
    print()
    print("speed-up = baseline time / testbed time, by the mean and by the median "
          "(p50, nearest rank) of the per-iteration times of the run cited above.")
    print()
    for label, table in (("OpenMPI tcp", columns[1][1]), ("OpenMPI tcp + hugetlb", columns[2][1]),
                         ("OpenMPI shm", columns[6][1]), ("OpenMPI shm + hugetlb", columns[7][1])):
        r = table.get(size)
        if r and "page_faults_per_iter" in r:
            print(f"- {label}: {r['page_faults_per_iter']} minor page faults per iteration "
                  f"(busiest rank)")
    for name, ours, theirs in pairs:
        a, m = ours.get(size), theirs.get(size)
        if not (a and m):
            print(f"- {name}: " + ("no testbed result" if not a else "no baseline result"))
            continue
        text = (f"- {name}: mean {fmt_us(a['time_us_avg'])} µs vs {fmt_us(m['time_us_avg'])} µs, "
                f"speed-up {m['time_us_avg'] / a['time_us_avg']:.2f}x")
        if a.get("time_us_p50") and m.get("time_us_p50"):
            text += (f"; median {fmt_us(a['time_us_p50'])} µs vs {fmt_us(m['time_us_p50'])} µs, "
                     f"speed-up {m['time_us_p50'] / a['time_us_p50']:.2f}x")
        print(text)

notes = [n for n in open(os.path.join(out_dir, "notes.txt")).read().splitlines() if n]
if notes:
    print()
    for n in notes:
        print(f"**Note:** {n}")
PY
