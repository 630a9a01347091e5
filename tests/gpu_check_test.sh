#!/usr/bin/env bash
# experiments/gpu/check.sh from a bundle of this build (bundle.sh), on a
# machine without a GPU: it must run its steps up to the first that needs one
# and stop there, exit 3, with one line naming the CUDA error, leaving in its
# folder what the earlier steps wrote and nothing of the later ones. Skipped
# (77) where there is a GPU: the whole check then takes minutes.
set -euo pipefail
build=$1
source_dir=$2
probe=$build/experiments/gpu/testbed-gpu-probe
for exe in "$probe" "$build/experiments/testbed" "$build/server/testbed-server" \
           "$build/worker/testbed-worker"; do
  [[ -x $exe ]] || { echo "not built: $exe"; exit 1; }
done
if "$probe" devices > /dev/null 2>&1; then
  echo "a GPU is here: run $source_dir/experiments/gpu/check.sh from a bundle instead"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$source_dir/experiments/gpu/bundle.sh" "$build" "$dir/bundle"

# The bundle must carry what the check runs, and no driver library.
for f in bin/testbed bin/testbed-server bin/testbed-worker bin/testbed-gpu-probe bin/ucx_info \
         env.sh check.sh lib/libucp.so.0 lib/libucs.so.0; do
  [[ -e $dir/bundle/$f ]] || { echo "bundle lacks $f"; ls -R "$dir/bundle"; exit 1; }
done
ls "$dir/bundle/lib/ucx/"*.so.0 > /dev/null || { echo "bundle has no UCX modules"; exit 1; }
if ls "$dir/bundle/lib" | grep -qE '^lib(cuda|nvidia-ml)\.so'; then
  echo "bundle carries a driver library"; exit 1
fi

status=0
"$dir/bundle/check.sh" "$dir/out" > "$dir/stdout" 2>&1 || status=$?
cat "$dir/stdout"
[[ $status -eq 3 ]] || { echo "check.sh exited $status, not 3"; exit 1; }
last=$(tail -1 "$dir/stdout")
[[ $last =~ ^check.sh:\ stopped\ at\ step\ 3\ \(device\).*cudaError[A-Za-z]+ ]] ||
  { echo "last line does not name step 3 and the CUDA error: $last"; exit 1; }
[[ $(tail -1 "$dir/out/summary.txt") == "$last" ]] || { echo "summary.txt lacks the stop"; exit 1; }
for f in summary.txt host.txt ucx_version.txt ucx_info_d.txt ucx_info_cuda.txt ucx_modules.txt \
         ucx_memory_types.json nvidia_smi.txt devices.err; do
  [[ -e $dir/out/$f ]] || { echo "check.sh did not write $f"; ls "$dir/out"; exit 1; }
done
grep -q '"memory_types"' "$dir/out/ucx_memory_types.json"
grep -q 'Version' "$dir/out/ucx_version.txt"
for f in devices.json kernel_tests.txt memcpy_bandwidth.jsonl gpu_exact.jsonl; do
  [[ ! -e $dir/out/$f ]] || { echo "check.sh went past step 3: $f"; exit 1; }
done
echo "check.sh stopped where it should: $last"
