#!/usr/bin/env bash
# Builds the relocatable bundle from $BUILD_DIR, moves it to a fresh
# directory and checks that it is self-contained:
#   * every binary has RUNPATH $ORIGIN/../lib and every bundled library
#     RUNPATH $ORIGIN; no glibc, loader, libstdc++ or driver library is bundled;
#   * each binary starts with --help from an empty environment
#     (LD_LIBRARY_PATH empty) in an empty working directory, and every shared
#     object the loader initialises comes from the bundle or is one of the
#     host libraries the bundle leaves out (LD_DEBUG=libs);
#   * when the bundle has attn_server and attn_cli: the bundle's smoke.sh
#     (the one run on GPU hosts) passes on the CPU backend: the bundled server
#     starts, the bundled client sees it SERVING and gets a correct result for
#     a small request (attend --check), and SIGTERM makes the server exit 0.
set -euo pipefail
# shellcheck source=deploy/checks/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tool patchelf readelf

bundle="$work_dir/bundle"
bash "$root/deploy/bundle.sh" --build-dir "$build_dir" --out "$bundle"
[ -x "$bundle/smoke.sh" ] || fail "bundle.sh did not install smoke.sh"

clean="$(mktemp -d /tmp/attn-bundle-check.XXXXXX)"
cleanup() { rm -rf "$clean"; }
trap cleanup EXIT
cp -a "$bundle" "$clean/attnserve"
mkdir "$clean/cwd"
b="$(realpath "$clean/attnserve")"

problems=0
problem() { echo "FAIL: $*" >&2; problems=$((problems + 1)); }

# Host libraries a bundled binary may load (what bundle.sh leaves out).
host_lib_ok() {
  case "$(basename "$1")" in
    ld-linux*.so.* | libc.so.* | libm.so.* | libmvec.so.* | libpthread.so.* | libdl.so.* | \
    librt.so.* | libresolv.so.* | libutil.so.* | libanl.so.* | libnsl.so.* | \
    libstdc++.so.* | libgcc_s.so.* | libcuda.so.* | libnvidia-*.so.*) return 0 ;;
  esac
  return 1
}

for lib in "$b"/lib/*; do
  [ -e "$lib" ] || continue
  if host_lib_ok "$lib"; then problem "bundled a host library: $(basename "$lib")"; fi
  rp="$(readelf -d "$lib" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')"
  # shellcheck disable=SC2016  # a literal $ORIGIN
  [ "$rp" = '$ORIGIN' ] || problem "$(basename "$lib"): RUNPATH '$rp', want \$ORIGIN"
done

for bin in "$b"/bin/*; do
  name="$(basename "$bin")"
  rp="$(readelf -d "$bin" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')"
  # shellcheck disable=SC2016  # a literal $ORIGIN
  [ "$rp" = '$ORIGIN/../lib' ] || problem "$name: RUNPATH '$rp', want \$ORIGIN/../lib"

  # --help prints usage and exits 0 (attn/command_line.h); 127 or a loader
  # message means the binary did not start.
  rc=0
  (cd "$clean/cwd" && env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH= LD_DEBUG=libs \
     LD_DEBUG_OUTPUT="$clean/ld.$name" "$bin" --help) >"$clean/help.$name" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ] || grep -q 'error while loading shared libraries' "$clean/help.$name" ||
     ! grep -qi 'usage\|--help\|flags' "$clean/help.$name"; then
    problem "$name --help exited $rc:"
    sed 's/^/    /' "$clean/help.$name" >&2
    continue
  fi
  loaded=0
  while read -r path; do
    loaded=$((loaded + 1))
    path="$(realpath -m "$path")"
    case "$path" in
      "$b"/lib/*) ;;
      *) host_lib_ok "$path" || problem "$name loaded $path from outside the bundle" ;;
    esac
  done < <(cat "$clean/ld.$name".* | sed -n 's/.*calling init: //p' | sort -u)
  [ "$loaded" -gt 0 ] || problem "$name: LD_DEBUG recorded no loaded libraries"
  echo "bundle_check: $name starts from the bundle ($loaded shared objects)"
done

# End to end through the bundle: its own smoke test (deploy/bundle_smoke.sh),
# on the CPU backend, from an empty environment.
if [ -x "$b/bin/attn_server" ] && [ -x "$b/bin/attn_cli" ]; then
  rc=0
  (cd "$clean/cwd" && env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH= SMOKE_LOG_DIR="$clean/smoke" \
     "$b/smoke.sh" --backend=cpu --shape=1,128,2,64) >"$clean/smoke.log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "bundle_check: smoke.sh on the CPU backend passed: $(grep -o 'check:.*' "$clean/smoke.log" | head -1)"
  else
    problem "smoke.sh through the bundle failed:"
    sed 's/^/    /' "$clean/smoke.log" >&2
    sed 's/^/    server: /' "$clean/smoke/server.log" >&2 || true
  fi
elif [ -x "$b/bin/attn_server" ]; then
  echo "bundle_check: no attn_cli in the build yet: skipped the end-to-end start"
fi

echo "bundle_check: $(find "$b/bin" -type f | wc -l) binaries, $(find "$b/lib" -type f | wc -l) libraries, $problems problem(s)"
[ "$problems" -eq 0 ]
