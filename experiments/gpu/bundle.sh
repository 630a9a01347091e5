#!/usr/bin/env bash
# bundle.sh BUILD_DIR BUNDLE_DIR: a copy of the build that runs on a machine
# without our Debian libraries (the GPU machine: CUDA and a driver, none of
# gRPC, abseil or UCX), for experiments/gpu/check.sh.
#
#   BUNDLE_DIR/bin/      testbed, its daemons, testbed-gpu-probe, the CUDA
#                        kernel tests, ucx_info (of the UCX the worker links)
#   BUNDLE_DIR/lib/      their shared-library closure (ldd), glibc left out
#   BUNDLE_DIR/lib/ucx/  UCX's plug-in modules (dlopened, so not in ldd) and
#                        what they need, less the driver's own libraries
#   BUNDLE_DIR/env.sh    puts lib/ first and points UCX_MODULE_DIR at lib/ucx
#   BUNDLE_DIR/check.sh  the check itself
#
# libcuda.so.1 and libnvidia-ml.so.1 belong to the target's driver and are
# never copied. Binaries are stripped (the RelWithDebInfo worker alone is 20
# MB). Build BUILD_DIR with -DTESTBED_UCX_DIR=PREFIX (.ci/build-ucx-cuda) for a
# bundle whose UCX has CUDA transports; with Debian's UCX, direct is refused.
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR BUNDLE_DIR" >&2
  exit 2
fi
build=$(realpath "$1")
bundle=$(realpath -m "$2")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# What a bundle must hold; the kernel tests only where the build has CUDA.
binaries=("$build/experiments/testbed" "$build/server/testbed-server"
          "$build/worker/testbed-worker")
for optional in "$build/experiments/gpu/testbed-gpu-probe" "$build/tests/cuda_memory_test"; do
  [[ -x $optional ]] && binaries+=("$optional")
done
for exe in "${binaries[@]:0:3}"; do
  [[ -x $exe ]] || { echo "bundle.sh: $exe is not built" >&2; exit 1; }
done

# The UCX the worker links decides which ucx_info and which modules travel.
libucs=$(ldd "$build/worker/testbed-worker" | awk '$1 == "libucs.so.0" {print $3}')
[[ -n $libucs ]] || { echo "bundle.sh: testbed-worker links no libucs.so.0" >&2; exit 1; }
ucx_lib=$(dirname "$(realpath "$libucs")")
ucx_info=$(dirname "$ucx_lib")/bin/ucx_info
[[ -x $ucx_info ]] || ucx_info=$(command -v ucx_info || true)
[[ -n $ucx_info ]] && binaries+=("$ucx_info")

rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib/ucx"

# Copies the libraries `file` needs into `dest`, less glibc's (the target's own
# are used) and the driver's (the target's, matching its kernel module).
copy_closure() {
  local file=$1 dest=$2
  ldd "$file" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
  while read -r name path; do
    case $name in
      libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*|libresolv.so.*) ;;
      libcuda.so.*|libnvidia-ml.so.*) ;;
      *) [[ -e $dest/$name ]] || cp -L "$path" "$dest/$name" ;;
    esac
  done
}

for exe in "${binaries[@]}"; do
  install -m 755 "$exe" "$bundle/bin/"
  copy_closure "$exe" "$bundle/lib"
done
# Modules keep libucs.so.0's suffix; their own needs (libcudart for the cuda
# module) go to lib/ beside the rest.
for module in "$ucx_lib"/ucx/*.so.0; do
  [[ -e $module ]] || continue
  cp -L "$module" "$bundle/lib/ucx/"
  copy_closure "$module" "$bundle/lib"
done
# The cuda module needs libcudart; where ldd did not find it, CUDA's own.
if [[ -e $bundle/lib/ucx/libuct_cuda.so.0 ]] && ! ls "$bundle"/lib/libcudart.so.* &> /dev/null; then
  cp -L "${CUDA:-/usr/local/cuda}"/lib64/libcudart.so.[0-9]* "$bundle/lib/"
fi
chmod u+w "$bundle"/bin/* "$bundle"/lib/*.so* "$bundle"/lib/ucx/* 2>/dev/null || true
strip --strip-unneeded "$bundle"/bin/* "$bundle"/lib/*.so* 2>/dev/null || true
strip --strip-unneeded "$bundle"/lib/ucx/* 2>/dev/null || true

install -m 755 "$here/check.sh" "$bundle/check.sh"
cat > "$bundle/env.sh" <<'EOS'
# Source this: the bundle's libraries first, then the machine's own path (where
# the driver's libcuda.so.1 and libnvidia-ml.so.1 may be), and UCX's modules.
bundle_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH="$bundle_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UCX_MODULE_DIR="$bundle_dir/lib/ucx"
export TESTBED_BIN_DIR="$bundle_dir/bin"
EOS
{
  echo "built from: $build"
  echo "ucx: $ucx_lib"
  (cd "$bundle" && find bin lib -type f | sort)
} > "$bundle/MANIFEST"
echo "bundle.sh: $(du -sh "$bundle" | cut -f1) in $bundle ($(ls "$bundle/bin" | wc -l) binaries," \
     "$(ls "$bundle/lib" | grep -c '\.so') libraries, $(ls "$bundle/lib/ucx" | wc -l) UCX modules)"
