#!/usr/bin/env bash
# Checks deploy/docker/Dockerfile without a Docker engine: lints it
# (dockerfile-utils), checks it against the repository and the build tree
# (dockerfile_check.py, which also runs the build stage's bundle.sh call), and
# runs the runtime stage's dependency step (install_deps.sh --runtime-only)
# here. The build stage's install_deps.sh and build.sh are what CI itself
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
