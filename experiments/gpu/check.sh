#!/usr/bin/env bash
# check.sh OUTDIR: the prepared GPU check (issue 13), everything into OUTDIR,
# in at most 8 minutes on one H200. Run it from a bundle (bundle.sh), which
# carries its binaries and libraries:
#
#   experiments/gpu/bundle.sh build /tmp/bundle && /tmp/bundle/check.sh /tmp/gpu-check
#
# Steps, each writing its own files and a line in OUTDIR/summary.txt:
#   1 host     the machine, glibc, the bundle            host.txt
#   2 ucx      ucx_info -v, ucx_info -d | grep cuda, UCX's memory types
#              (the gate of --gpu-path direct), why modules did not load
#                                                        ucx_*.txt, ucx_memory_types.json
#   3 device   nvidia-smi, and the CUDA devices as the testbed's runtime sees
#              them. The first step that needs a GPU: without one the check
#              stops here, exit 3, naming the CUDA error.  nvidia_smi.txt, devices.json
#   4 kernels  the CUDA kernel and memory tests (ctest -R cuda's binary)
#                                                        kernel_tests.{txt,json}
#   5 memcpy   cudaMemcpy host<->device, pageable and pinned, 4 KiB-256 MiB
#                                                        memcpy_bandwidth.jsonl
#   6 exact    every all-reduce and ps x N in {2,3,4} x float32, float64,
#              int32, float16 x sum, min, max (ps: sum, and not float16) x
#              {staged, direct}, on
#              1,000,003 elements of cuda memory, checked exact by testbed
#              local                                     gpu_exact.jsonl, exact_*.{json,err}
#   7 busbw    ring, 4 ranks on the GPU, 4 KiB-256 MiB: host, staged, direct;
#              staged rows are pipelined in segments by default (their
#              segment_bytes say which: StagedSegmentBytes), and a staged run
#              in whole steps (spec segment "off", 1 MiB up) shows what the
#              pipeline hides               gpu_ring_busbw.jsonl, ring_*.{json,err}
# A direct run that UCX refuses (no CUDA memory) is recorded with its one-line
# error and the check goes on; so is any failed run after step 3. Exit: 0 when
# every step ran and every checked row is exact, 1 otherwise, 3 without a GPU.
set -uo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUTDIR   (run from a bundle made by experiments/gpu/bundle.sh)" >&2
  exit 2
fi
bundle=${TESTBED_BUNDLE:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
if [[ ! -x $bundle/bin/testbed || ! -f $bundle/env.sh ]]; then
  echo "check.sh: no bundle at $bundle (make one: experiments/gpu/bundle.sh BUILD_DIR" \
       "BUNDLE_DIR, then run BUNDLE_DIR/check.sh)" >&2
  exit 2
fi
out=$(realpath -m "$1")
mkdir -p "$out"
# A second run into the same folder starts its summary and results afresh
# (testbed's --out appends).
rm -f "$out/summary.txt" "$out"/gpu_*.jsonl "$out"/gpu_*.md
# shellcheck source=/dev/null
source "$bundle/env.sh"
# The driver's libraries, where a container keeps them off the loader's path.
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1' && [[ -d /usr/local/nvidia/lib64 ]]; then
  export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/nvidia/lib64
fi
# The testbed links cudart statically, out of reach of UCX's CUDA allocation
# hooks (UCX's FAQ); the transport names each buffer's memory type anyway.
export UCX_MEMTYPE_CACHE=n
bin=$bundle/bin
# For a dry run of steps 4-7 without a GPU (a stand-in probe in bin/, device
# memory fake-device, smaller sizes); the defaults are the check's.
device_memory=${CHECK_DEVICE_MEMORY:-cuda}
elements=${CHECK_ELEMENTS:-1000003}
max_size=${CHECK_MAX_SIZE:-256MiB}
started=$(date +%s)
failures=0

note() { echo "$*" | tee -a "$out/summary.txt"; }
step() { note "== step $1 ($2) at +$(( $(date +%s) - started )) s"; }

step 1 host
{
  date -u; uname -a; ldd --version 2>&1 | head -1; nproc; free -g 2>/dev/null | head -2
  echo "bundle: $bundle"; cat "$bundle/MANIFEST" 2>/dev/null
  env | grep -E '^(UCX_|LD_LIBRARY_PATH|CUDA_VISIBLE_DEVICES|TESTBED_)' | sort
} > "$out/host.txt" 2>&1

step 2 ucx
"$bin/ucx_info" -v > "$out/ucx_version.txt" 2>&1
"$bin/ucx_info" -d > "$out/ucx_info_d.txt" 2>&1
grep -i cuda "$out/ucx_info_d.txt" > "$out/ucx_info_cuda.txt"
note "ucx_info -d | grep cuda: $(wc -l < "$out/ucx_info_cuda.txt") lines"
UCX_LOG_LEVEL=debug "$bin/ucx_info" -d 2>&1 | grep -iE 'dlopen|loading modules' \
  > "$out/ucx_modules.txt"
if [[ -x $bin/testbed-gpu-probe ]]; then
  "$bin/testbed-gpu-probe" ucx > "$out/ucx_memory_types.json" 2>&1
  note "UCX memory types: $(cat "$out/ucx_memory_types.json")"
fi

step 3 device
if command -v nvidia-smi > /dev/null; then
  { nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id \
      --format=csv; } > "$out/nvidia_smi.txt" 2>&1
else
  echo "nvidia-smi: not found" > "$out/nvidia_smi.txt"
fi
note "nvidia-smi: $(head -1 "$out/nvidia_smi.txt")"
if [[ ! -x $bin/testbed-gpu-probe ]]; then
  note "check.sh: stopped at step 3 (device): the bundle has no testbed-gpu-probe (a build" \
       "without CUDA: configure with TESTBED_CUDA=ON)"
  exit 3
fi
if ! "$bin/testbed-gpu-probe" devices > "$out/devices.json" 2> "$out/devices.err"; then
  rm -f "$out/devices.json"  # empty: the error is in devices.err
  note "check.sh: stopped at step 3 (device), the first that needs a GPU: no usable GPU:" \
       "$(tail -1 "$out/devices.err")"
  exit 3
fi
note "devices: $(head -1 "$out/devices.json")"

# Runs a command with a time limit, its stdout and stderr into files; records
# a failure (and the last line of stderr) without stopping the check. Past
# the check's budget (8 minutes, less a margin for starting up), runs are
# skipped and counted as failures: a run starts only if its own limit still
# ends inside the budget, so the whole check ends within it.
budget_s=${CHECK_BUDGET_S:-470}
run() {
  local name=$1 limit=$2
  shift 2
  if (( $(date +%s) - started + limit > budget_s )); then
    failures=$((failures + 1))
    note "  $name: SKIPPED (past the check's ${budget_s} s budget)"
    return 1
  fi
  timeout "$limit" "$@" > "$out/$name.json" 2> "$out/$name.err"
  local status=$?
  if [[ $status -ne 0 ]]; then
    failures=$((failures + 1))
    note "  $name: FAILED (exit $status): $(grep -m1 'error' "$out/$name.err" ||
                                           tail -1 "$out/$name.err")"
  fi
  return $status
}

step 4 kernels
[[ -x $bin/cuda_memory_test ]] || note "  no cuda_memory_test in the bundle"
if [[ -x $bin/cuda_memory_test ]]; then
  timeout 120 "$bin/cuda_memory_test" --gtest_output="json:$out/kernel_tests.json" \
    > "$out/kernel_tests.txt" 2>&1 || { failures=$((failures + 1)); note "  kernel tests FAILED"; }
  note "  $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/kernel_tests.txt" | tr '\n' ' ')"
fi

step 5 memcpy
timeout 90 "$bin/testbed-gpu-probe" memcpy > "$out/memcpy_bandwidth.jsonl" \
  2> "$out/memcpy_bandwidth.err" || { failures=$((failures + 1)); note "  memcpy FAILED"; }

step 6 exact
for path in staged direct; do
  for dtype in float32 float64 int32 float16; do
    case $dtype in
      float64) size=$((elements * 8)) ;;
      float16) size=$((elements * 2)) ;;
      *) size=$((elements * 4)) ;;
    esac
    for op in sum min max; do
      algorithms=naive,ring,tree,butterfly,halving-doubling
      # the parameter server sums only, and holds no float16 tensors
      [[ $op == sum && $dtype != float16 ]] && algorithms+=,ps
      run "exact_${path}_${dtype}_${op}" 60 "$bin/testbed" local --workers 2,3,4 \
        --algorithms "$algorithms" --sizes "$size" --dtype "$dtype" --op "$op" --iters 1 \
        --warmup 0 --memory "$device_memory" --gpu-path "$path" --timeout 60 --format json \
        --out "$out/gpu_exact.jsonl"
    done
  done
done
rows=$(cat "$out"/exact_*.json 2>/dev/null | grep -c '"wrong"' || true)
wrong=$(cat "$out"/exact_*.json 2>/dev/null | grep '"wrong"' | grep -vc '"wrong": "\?0"\?[,}]' ||
        true)
note "  $rows rows, $wrong not exact"
[[ $wrong -eq 0 ]] || failures=$((failures + 1))

step 7 busbw
for case in host:host:auto "staged:$device_memory:staged" "direct:$device_memory:direct"; do
  IFS=: read -r label memory path <<< "$case"
  run "ring_$label" 100 "$bin/testbed" local --workers 4 --algorithms ring \
    --sizes "4KiB:$max_size" --iters 5 --warmup 2 --memory "$memory" --gpu-path "$path" \
    --timeout 60 --format json --out "$out/gpu_ring_busbw.jsonl"
done
# Whole steps, staged: the flags' --segment off means "not given" (staged
# memory is then segmented), so a spec file says "off" for it.
echo 'segment: "off"' > "$out/whole_steps.textproto"
run ring_staged_whole_steps 60 "$bin/testbed" local --spec "$out/whole_steps.textproto" \
  --workers 4 --algorithms ring --sizes "1MiB:$max_size" --iters 5 --warmup 2 \
  --memory "$device_memory" --gpu-path staged --timeout 60 --format json \
  --out "$out/gpu_ring_busbw.jsonl"

note "== done at +$(( $(date +%s) - started )) s, $failures failed steps or runs; files in $out"
[[ $failures -eq 0 ]]
