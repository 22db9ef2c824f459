#!/usr/bin/env bash
# yamllint on every YAML file of the repository (config: deploy/checks/yamllint.yaml).
set -euo pipefail
# shellcheck source=deploy/checks/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tool yamllint

files=()
while IFS= read -r f; do
  case "$f" in *.yaml | *.yml | .yamllint) files+=("$f") ;; esac
done < <(repo_files)
[ ${#files[@]} -gt 0 ] || fail "no YAML files found"
cd "$root"
yamllint --strict -c deploy/checks/yamllint.yaml "${files[@]}"
echo "yamllint: ${#files[@]} files clean"
