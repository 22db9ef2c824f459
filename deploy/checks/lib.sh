#!/usr/bin/env bash
# Helpers shared by the deploy/checks scripts (sourced, not run).
#   $root       repository root
#   $build_dir  the build tree the checks inspect ($BUILD_DIR, default build/)
#   $work_dir   scratch space for the checks under the build tree

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
if ! build_dir="$(cd "$build_dir" 2>/dev/null && pwd)"; then
  echo "FAIL: build tree ${BUILD_DIR:-$root/build} not found (build first)" >&2
  exit 1
fi
work_dir="$build_dir/deploy-checks"
mkdir -p "$work_dir"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Missing tools fail the check: CI installs them (install_deps.sh --with-checks).
require_tool() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 ||
      fail "'$tool' not found; run deploy/scripts/install_deps.sh --with-checks"
  done
}

# Every file of the repository that git knows (tracked, or new and not
# ignored), relative to $root: what a fresh clone would hold.
repo_files() {
  git -C "$root" ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do
      [ -e "$root/$f" ] && printf '%s\n' "$f"
    done
}

# Installs the pinned npm packages of deploy/checks/js into $work_dir/js (once
# per lockfile) and prints that folder; the scripts run from there.
js_dir() {
  require_tool node npm
  local dir="$work_dir/js"
  mkdir -p "$dir"
  cp "$root/deploy/checks/js/"*.mjs "$dir/"
  if ! cmp -s "$root/deploy/checks/js/package-lock.json" "$dir/package-lock.json" ||
     [ ! -d "$dir/node_modules" ]; then
    cp "$root/deploy/checks/js/package.json" "$root/deploy/checks/js/package-lock.json" "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2) ||
      fail "npm ci in $dir failed"
  fi
  printf '%s\n' "$dir"
}
