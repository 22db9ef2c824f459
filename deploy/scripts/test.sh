#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, and runs the
# tests. The "cpu" label always runs; the "gpu" label runs when a CUDA device
# is visible (its tests skip cleanly otherwise); then the "container" label
# (deploy/container/test.sh). Then the ASan+UBSan and
# TSan builds and bounded fuzz runs (sanitizer_checks.sh, in
# $BUILD_DIR-sanitizers);
# ATTN_SKIP_SANITIZERS=1 skips them for a quick local run (CI runs them).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"

if [ "${ATTN_SKIP_DEPS:-0}" != "1" ]; then
  bash "$root/deploy/scripts/install_deps.sh" --with-checks
fi
# One compiler cache for the C++ files of every build here that compiles
# them with g++ (install_deps.sh installs ccache): this build fills it, and
# the tests that build the same sources again from nothing reuse it through
# ATTN_CCACHE_DIR — quickstart_fresh_clone_test's demo.sh build (CPU-only)
# and the container test's image build. ccache matches the preprocessed
# source when the command lines differ (a CPU-only build lacks the CUDA
# include path), and CCACHE_BASEDIR makes each tree's paths relative, so a
# file that does not see CUDA is compiled once; ccache_env.sh holds the
# settings those builds share. ATTN_CCACHE=0: no cache.
if [ "${ATTN_CCACHE:-1}" != "0" ] && command -v ccache >/dev/null 2>&1; then
  export ATTN_CCACHE_DIR="${ATTN_CCACHE_DIR:-$build_dir/ccache}"
  CCACHE_DIR="$ATTN_CCACHE_DIR"
  # shellcheck source=deploy/scripts/ccache_env.sh
  . "$root/deploy/scripts/ccache_env.sh"
  CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR="$root" bash "$root/deploy/scripts/build.sh"
else
  unset ATTN_CCACHE_DIR
  bash "$root/deploy/scripts/build.sh"
fi

labels="cpu"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  labels="cpu|gpu"
fi
echo "test.sh: running ctest labels '$labels'"
ctest --test-dir "$build_dir" -L "$labels" --output-on-failure --no-tests=error

# The container test: the CPU image built with podman from
# deploy/docker/Dockerfile and run as the deployment runs it (minutes: its
# build stage compiles the server). ATTN_SKIP_CONTAINER=1 skips it for a quick
# local run (CI runs it).
if [ "${ATTN_SKIP_CONTAINER:-0}" != "1" ]; then
  echo "test.sh: running ctest label 'container'"
  ctest --test-dir "$build_dir" -L container --output-on-failure --no-tests=error
fi

# ASan+UBSan over the CPU suites, the fuzz runs, and TSan over the suites
# whose threads are all ours (sanitizer_checks.sh says which and why).
if [ "${ATTN_SKIP_SANITIZERS:-0}" != "1" ]; then
  SANITIZER_BUILD_ROOT="${SANITIZER_BUILD_ROOT:-$build_dir-sanitizers}" \
    ATTN_SANITIZERS="${ATTN_SANITIZERS:-asan tsan}" bash "$root/deploy/scripts/sanitizer_checks.sh"
fi
