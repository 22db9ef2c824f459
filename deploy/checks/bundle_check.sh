#!/usr/bin/env bash
# Builds the relocatable bundle from $BUILD_DIR, moves it to a fresh
# directory and checks that it is self-contained:
#   * every binary has RUNPATH $ORIGIN/../lib and every bundled library
#     RUNPATH $ORIGIN; no glibc, loader, libstdc++ or driver library is bundled;
#   * each binary starts with --help from an empty environment
#     (LD_LIBRARY_PATH empty) in an empty working directory, and every shared
#     object the loader initialises comes from the bundle or is one of the
#     host libraries the bundle leaves out (LD_DEBUG=libs);
#   * when the bundle has attn_server and attn_cli: the bundled server starts
#     on the CPU backend, the bundled client sees it SERVING and gets a
#     correct result for a small request (attend --check), and SIGTERM makes
#     the server exit 0.
set -euo pipefail
# shellcheck source=deploy/checks/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tool patchelf readelf

bundle="$work_dir/bundle"
bash "$root/deploy/bundle.sh" --build-dir "$build_dir" --out "$bundle"

clean="$(mktemp -d /tmp/attn-bundle-check.XXXXXX)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill -KILL "$server_pid" 2>/dev/null || true; fi
  rm -rf "$clean"
}
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

  # absl's --help prints usage and exits 1; 127 or a loader message means
  # the binary did not start.
  rc=0
  (cd "$clean/cwd" && env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH= LD_DEBUG=libs \
     LD_DEBUG_OUTPUT="$clean/ld.$name" "$bin" --help) >"$clean/help.$name" 2>&1 || rc=$?
  if [ "$rc" -gt 1 ] || grep -q 'error while loading shared libraries' "$clean/help.$name" ||
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

# End to end through the bundle: server on the CPU backend, client health.
if [ -x "$b/bin/attn_server" ] && [ -x "$b/bin/attn_cli" ]; then
  port_file="$clean/port"
  (cd "$clean/cwd" && exec env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH= "$b/bin/attn_server" \
     --listen=127.0.0.1:0 --port_file="$port_file" --backend=cpu) >"$clean/server.log" 2>&1 &
  server_pid=$!
  healthy=0
  for _ in $(seq 1 150); do
    if [ -s "$port_file" ] &&
       env -i PATH=/usr/bin:/bin "$b/bin/attn_cli" health \
         --address="127.0.0.1:$(cat "$port_file")" >/dev/null 2>&1; then
      healthy=1
      break
    fi
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.2
  done
  if [ "$healthy" -eq 1 ]; then
    echo "bundle_check: bundled attn_cli sees the bundled attn_server SERVING on port $(cat "$port_file")"
    # One small request through both, checked against the float64 reference.
    if env -i PATH=/usr/bin:/bin "$b/bin/attn_cli" attend --address="127.0.0.1:$(cat "$port_file")" \
         --shape=1,128,2,64 --check >"$clean/attend.log" 2>&1; then
      echo "bundle_check: attn_cli attend --check through the bundle: $(grep -o 'check:.*' "$clean/attend.log")"
    elif grep -q UNIMPLEMENTED "$clean/attend.log"; then
      # A server without the Attention service yet (health only).
      echo "bundle_check: SKIPPED attend: this attn_server does not implement it yet"
    else
      problem "attn_cli attend --check through the bundle failed:"
      sed 's/^/    /' "$clean/attend.log" >&2
    fi
  else
    problem "bundled attn_server did not become SERVING within 30 s"
  fi
  kill -TERM "$server_pid" 2>/dev/null || true
  rc=0
  wait "$server_pid" || rc=$?
  server_pid=""
  [ "$rc" -eq 0 ] || problem "attn_server exited $rc after SIGTERM"
  if [ "$problems" -gt 0 ]; then sed 's/^/    server: /' "$clean/server.log" >&2; fi
elif [ -x "$b/bin/attn_server" ]; then
  echo "bundle_check: no attn_cli in the build yet: skipped the end-to-end start"
fi

echo "bundle_check: $(find "$b/bin" -type f | wc -l) binaries, $(find "$b/lib" -type f | wc -l) libraries, $problems problem(s)"
[ "$problems" -eq 0 ]
