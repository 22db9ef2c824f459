#!/usr/bin/env bash
# Configures and builds attnserve (Release, Ninja) into $BUILD_DIR (default
# build/). CUDA kernels are built when nvcc is found; the GPU architectures
# come from $ATTN_CUDA_ARCHITECTURES, else from the local GPU, else "80;86;90".
#
#   build.sh [extra cmake -D options...]
# Environment: BUILD_DIR; BUILD_TARGETS, the targets to build (space
# separated; default all); BUILD_JOBS (default nproc); ATTN_ENABLE_CUDA
# (AUTO, ON or OFF), passed to CMake when set, else the build tree keeps its
# setting (AUTO when new).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
archs="${ATTN_CUDA_ARCHITECTURES:-}"
if [ -z "$archs" ] && command -v nvidia-smi >/dev/null 2>&1; then
  archs="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
           tr -d '.' | sort -u | paste -sd ';' || true)"
fi
archs="${archs:-80;86;90}"

cuda=()
if [ -n "${ATTN_ENABLE_CUDA:-}" ]; then cuda=("-DATTN_ENABLE_CUDA=$ATTN_ENABLE_CUDA"); fi
read -r -a targets <<<"${BUILD_TARGETS:-}"
jobs="${BUILD_JOBS:-$(nproc)}"
started=$SECONDS

echo "build.sh: configuring $build_dir (Release, Ninja)"
cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  "-DATTN_CUDA_ARCHITECTURES=$archs" "${cuda[@]}" "$@"
echo "build.sh: [$((SECONDS - started)) s] building ${targets[*]:-everything} with $jobs jobs"
cmake --build "$build_dir" --parallel "$jobs" ${targets[0]+--target "${targets[@]}"}
echo "build.sh: [$((SECONDS - started)) s] built ${targets[*]:-everything}"
