#!/usr/bin/env bash
# Checks deploy/docker/Dockerfile without a Docker engine: lints it
# (dockerfile-utils), checks it against the repository and the build tree
# (dockerfile_check.py, which also runs the build stage's bundle.sh call),
# runs the runtime stage's dependency step (install_deps.sh --runtime-only)
# here, and checks that those packages provide every library the binaries
# load. The build stage's install_deps.sh and build.sh are what CI itself
# runs before the tests.
set -euo pipefail
# shellcheck source=deploy/checks/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tool /usr/bin/python3

js="$(js_dir)"
(cd "$js" && node dockerfile_lint.mjs "$root/deploy/docker/Dockerfile")
/usr/bin/python3 "$root/deploy/checks/dockerfile_check.py" \
  --build-dir "$build_dir" --work-dir "$work_dir"

# The runtime stage's package step, on this distribution (Debian 12 names;
# the script falls back to Ubuntu 24.04's t64 names where these do not exist).
# CI runs as root; a developer without root or password-less sudo skips it.
if [ "$(id -u)" -ne 0 ] && ! sudo -n true 2>/dev/null; then
  echo "dockerfile: SKIPPED install_deps.sh --runtime-only (needs root or sudo -n)"
else
  bash "$root/deploy/scripts/install_deps.sh" --runtime-only
fi

# The runtime stage's packages provide every library the image's binaries
# load: each library's owning package is among the runtime packages or their
# dependencies, or part of the CUDA base image (libc6, libstdc++6, libgcc-s1).
require_tool apt-cache dpkg-query
mapfile -t runtime_pkgs < <(bash "$root/deploy/scripts/install_deps.sh" --runtime-only --print-packages)
closure="$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
             --no-breaks --no-replaces --no-enhances "${runtime_pkgs[@]}" |
           grep -v '^ ' | sed 's/:.*//' | sort -u)"
missing=0
checked=0
for bin in "$work_dir/docker-out/bin/"*; do
  while read -r lib; do
    checked=$((checked + 1))
    owner="$(dpkg-query -S "$lib" 2>/dev/null || dpkg-query -S "$(realpath "$lib")" 2>/dev/null ||
             dpkg-query -S "${lib#/usr}" 2>/dev/null || true)"
    owner="${owner%%:*}"
    case "$owner" in libc6 | libstdc++6 | libgcc-s1) continue ;; esac
    if [ -z "$owner" ] || ! grep -qx -- "$owner" <<<"$closure"; then
      echo "FAIL: $(basename "$bin") needs $lib (package '${owner:-none}'), which the runtime stage does not install" >&2
      missing=$((missing + 1))
    fi
  done < <(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3}')
done
[ "$missing" -eq 0 ] || fail "$missing libraries not covered by install_deps.sh --runtime-only"
echo "dockerfile: the runtime packages (${runtime_pkgs[*]}) provide all $checked libraries the image's binaries load"
