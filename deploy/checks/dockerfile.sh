#!/usr/bin/env bash
# Checks deploy/docker/Dockerfile without a Docker engine: lints it
# (dockerfile-utils), checks it against the repository and the build tree
# (dockerfile_check.py, which also runs the build stage's bundle.sh call),
# simulates the runtime stage's dependency step (install_deps.sh
# --runtime-only) here, and checks that those packages provide every library
# the binaries load. The build stage's install_deps.sh and build.sh are what
# CI itself runs before the tests.
set -euo pipefail
# shellcheck source=deploy/checks/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tool /usr/bin/python3

js="$(js_dir)"
(cd "$js" && node dockerfile_lint.mjs "$root/deploy/docker/Dockerfile")
/usr/bin/python3 "$root/deploy/checks/dockerfile_check.py" \
  --build-dir "$build_dir" --work-dir "$work_dir"

# The runtime stage's package step, on this distribution (Debian 12 names;
# the script falls back to Ubuntu 24.04's t64 names where these do not exist),
# simulated: apt-get resolves the packages and their dependencies from this
# machine's package lists without the network, without the dpkg lock (another
# apt run on a shared CI host made the real install fail) and without changing
# the machine.
require_tool apt-get apt-cache dpkg-query
mapfile -t runtime_pkgs < <(bash "$root/deploy/scripts/install_deps.sh" --runtime-only --print-packages)
apt-get --simulate -o Debug::NoLocking=true -qq install --no-install-recommends \
  "${runtime_pkgs[@]}" >/dev/null ||
  fail "apt-get cannot install the runtime packages (${runtime_pkgs[*]})"

# The runtime stage's packages provide every library the image's binaries
# load: each library's owning package is among the runtime packages or their
# dependencies, or part of the CUDA base image (libc6, libstdc++6, libgcc-s1).
closure="$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
             --no-breaks --no-replaces --no-enhances "${runtime_pkgs[@]}" |
           grep -v '^ ' | sed 's/:.*//' | sort -u)"
# Each library once, with the binaries that load it: the dpkg-query calls take
# most of this check's time (seconds each on a loaded machine), and the
# binaries share nearly all their libraries.
declare -A needed_by=()
for bin in "$work_dir/docker-out/bin/"*; do
  while read -r lib; do
    needed_by["$lib"]+="${needed_by["$lib"]:+, }$(basename "$bin")"
  done < <(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3}')
done
missing=0
checked=0
for lib in "${!needed_by[@]}"; do
  checked=$((checked + 1))
  owner="$(dpkg-query -S "$lib" 2>/dev/null || dpkg-query -S "$(realpath "$lib")" 2>/dev/null ||
           dpkg-query -S "${lib#/usr}" 2>/dev/null || true)"
  owner="${owner%%:*}"
  case "$owner" in libc6 | libstdc++6 | libgcc-s1) continue ;; esac
  if [ -z "$owner" ] || ! grep -qx -- "$owner" <<<"$closure"; then
    echo "FAIL: ${needed_by["$lib"]} load $lib (package '${owner:-none}'), which the runtime stage does not install" >&2
    missing=$((missing + 1))
  fi
done
[ "$missing" -eq 0 ] || fail "$missing libraries not covered by install_deps.sh --runtime-only"
echo "dockerfile: the runtime packages (${runtime_pkgs[*]}) provide all $checked libraries the image's binaries load"
