#!/usr/bin/env bash
# Builds a relocatable attnserve bundle from a build tree:
#
#   <out>/bin/   attn_server, attn_cli, attn_loadgen (+ attn_bench, attn_tune
#                in CUDA builds), with RUNPATH $ORIGIN/../lib
#   <out>/lib/   every shared library they need that is not part of the
#                target's base system (gRPC, protobuf, Abseil, c-ares, re2,
#                OpenSSL, zlib, ..., and libcudart when linked dynamically),
#                each with RUNPATH $ORIGIN
#   <out>/lib/libattn_client_c.so  the client's C ABI (client/c_api), which
#                the Python package's native transport loads with ctypes
#   <out>/python/attnserve_client  the Python package (with its protobuf
#                stubs under python/attnserve/); it finds ../../lib/ by
#                itself: PYTHONPATH=<out>/python python3 -m attnserve_client
#                needs NumPy, and grpcio only for its fallback transport
#   <out>/MANIFEST  source commit, build settings, sha256 of every file
#   <out>/smoke.sh  starts the bundled server, checks a request with the
#                   bundled client, stops it (deploy/bundle_smoke.sh)
#
# so the server and clients run on a GPU host without those packages, from
# any directory, with no LD_LIBRARY_PATH.
#
# Left to the host (never bundled): glibc (libc, libm, libpthread, libdl,
# librt, libresolv, libutil, ... and the dynamic loader), whose copy must
# match the host's loader; libstdc++ and libgcc_s, which are ABI-compatible
# upwards and newer on the targets (Ubuntu 24.04: GCC 14's, built here with
# Debian 12's GCC 12); and the NVIDIA driver's libraries (libcuda,
# libnvidia-*), which must match the host's kernel module. MANIFEST names
# the newest glibc/libstdc++ symbol versions the bundle needs from the host;
# the host's driver must support the CUDA toolkit the bundle was built with.
#
#   bundle.sh [--build-dir DIR] [--out DIR] [--tar] [--bin-only]
#     --build-dir  build tree (default: $BUILD_DIR, else build/)
#     --out        output folder, replaced (default: <build-dir>/bundle)
#     --tar        also write <out>.tar.gz
#     --bin-only   binaries only, no lib/, no python/ and no RUNPATH change
#                  (the container image installs the libraries from the
#                  distribution)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
out=""
tar=0
bin_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --build-dir=*) build_dir="${1#*=}"; shift ;;
    --out) out="$2"; shift 2 ;;
    --out=*) out="${1#*=}"; shift ;;
    --tar) tar=1; shift ;;
    --bin-only) bin_only=1; shift ;;
    *) echo "bundle.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
build_dir="$(cd "$build_dir" && pwd)"
out="${out:-$build_dir/bundle}"

die() { echo "bundle.sh: $*" >&2; exit 1; }

# Binaries: <path in the build tree>:<required?>. The service binaries are
# required as soon as the source tree defines them; the CUDA-only tools are
# taken when the build has them.
defined() { grep -qs "add_executable($1\b" "$root"/*/CMakeLists.txt; }
binaries=()
for spec in server/attn_server client/attn_cli client/attn_loadgen bench/attn_bench bench/attn_tune; do
  name="${spec##*/}"
  if [ -x "$build_dir/$spec" ]; then
    binaries+=("$build_dir/$spec")
  elif defined "$name" && [ "${spec%%/*}" != bench ]; then
    die "$name is defined in the source tree but $build_dir/$spec is missing (build first)"
  fi
done
[ ${#binaries[@]} -gt 0 ] || die "no attnserve binaries in $build_dir (build first)"

# The Python package and the C ABI its native transport loads: required
# once the source tree defines the library.
client_lib="$build_dir/client/c_api/libattn_client_c.so"
python_pkg="$build_dir/client/python"
shared_objects=()
if [ "$bin_only" -eq 0 ]; then
  if [ -f "$client_lib" ]; then
    shared_objects+=("$client_lib")
  elif grep -qs "add_library(attn_client_c SHARED" "$root/client/c_api/CMakeLists.txt"; then
    die "libattn_client_c.so is defined in the source tree but $client_lib is missing (build first)"
  fi
fi

# Sonames that stay on the host (see the header).
is_system_lib() {
  case "$1" in
    linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libmvec.so.* | \
    libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.* | libutil.so.* | \
    libanl.so.* | libnsl.so.* | libBrokenLocale.so.* | libthread_db.so.* | \
    libstdc++.so.* | libgcc_s.so.* | \
    libcuda.so.* | libnvidia-*.so.* | libnvcuvid.so.* | libdxcore.so*)
      return 0 ;;
  esac
  return 1
}

rm -rf "$out"
mkdir -p "$out/bin"
for bin in "${binaries[@]}"; do
  cp -L "$bin" "$out/bin/"
done

if [ "$bin_only" -eq 0 ]; then
  command -v patchelf >/dev/null 2>&1 ||
    die "patchelf not found (apt-get install patchelf; install_deps.sh --with-checks has it)"
  mkdir -p "$out/lib"
  # ldd lists the whole dependency closure of each binary.
  declare -A libs=()
  for bin in "${binaries[@]}" "${shared_objects[@]}"; do
    while read -r soname _ path _; do
      if is_system_lib "$soname"; then continue; fi
      if [ "$path" = "not" ]; then die "$bin: $soname not found"; fi
      if [ -z "$path" ] || [ "${path:0:1}" != / ]; then continue; fi
      libs["$soname"]="$path"
    done < <(ldd "$bin" | grep '=>')
  done
  for soname in "${!libs[@]}"; do
    cp -L "${libs[$soname]}" "$out/lib/$soname"
    chmod u+w "$out/lib/$soname"
    # shellcheck disable=SC2016  # a literal $ORIGIN, expanded by the loader
    patchelf --set-rpath '$ORIGIN' "$out/lib/$soname"
  done
  for so in "${shared_objects[@]}"; do
    cp -L "$so" "$out/lib/"
    chmod u+w "$out/lib/$(basename "$so")"
    # shellcheck disable=SC2016  # a literal $ORIGIN, expanded by the loader
    patchelf --set-rpath '$ORIGIN' "$out/lib/$(basename "$so")"
  done
  for bin in "$out"/bin/*; do
    # shellcheck disable=SC2016  # a literal $ORIGIN, expanded by the loader
    patchelf --set-rpath '$ORIGIN/../lib' "$bin"
  done
  if [ -f "$python_pkg/attnserve_client/__init__.py" ]; then
    # The sources, _version.py and the stubs; not the build tree's copy of
    # the .so (the package finds lib/ above it) nor caches.
    mkdir -p "$out/python"
    python_out="$(cd "$out/python" && pwd)"
    (cd "$python_pkg" && find attnserve_client attnserve -name '*.py' -not -path '*/__pycache__/*' \
      -exec cp --parents -t "$python_out" {} +)
  fi
  cp "$root/deploy/bundle_smoke.sh" "$out/smoke.sh"
  chmod +x "$out/smoke.sh"
fi

{
  echo "attnserve bundle"
  if commit="$(git -C "$root" rev-parse HEAD 2>/dev/null)"; then
    git -C "$root" diff --quiet HEAD -- 2>/dev/null || commit+=" (with local changes)"
  else
    commit="unknown (no git metadata)"
  fi
  echo "commit: $commit"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(sed -n 's/^PRETTY_NAME="\(.*\)"/\1/p' /etc/os-release)," \
       "glibc $(ldd --version | head -1 | awk '{print $NF}')"
  grep -hE '^(ATTN_CUDA_ARCHITECTURES|CMAKE_CUDA_COMPILER|CMAKE_BUILD_TYPE):' \
    "$build_dir/CMakeCache.txt" 2>/dev/null || true
  # The newest glibc/libstdc++ symbol versions the bundle uses: the host's
  # libc and libstdc++ must provide them.
  if command -v objdump >/dev/null 2>&1; then
    echo "requires from the host: $(find "$out" -type f -path '*/[bl]i[nb]/*' -exec objdump -T {} + 2>/dev/null |
      grep -oE '\b(GLIBC|GLIBCXX|CXXABI)_[0-9.]+' | sort -V -u |
      awk -F_ '{last[$1] = $0} END {for (k in last) printf "%s ", last[k]}')"
  fi
  echo "files (sha256):"
  dirs=(bin)
  if [ -d "$out/lib" ]; then dirs+=(lib); fi
  if [ -d "$out/python" ]; then dirs+=(python); fi
  (cd "$out" && find "${dirs[@]}" -type f | sort | xargs sha256sum)
} >"$out/MANIFEST"

if [ "$tar" -eq 1 ]; then
  tar -C "$(dirname "$out")" -czf "$out.tar.gz" "$(basename "$out")"
  echo "bundle.sh: wrote $out.tar.gz"
fi
nlibs=0
if [ -d "$out/lib" ]; then nlibs="$(find "$out/lib" -type f | wc -l)"; fi
echo "bundle.sh: $out: $(find "$out/bin" -type f | wc -l) binaries, $nlibs libraries," \
     "$(du -sh "$out" | cut -f1)"
