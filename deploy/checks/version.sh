#!/usr/bin/env bash
# One version number in one place: the VERSION file. The deployment's
# scripts, profiles, compose files and Dockerfile derive image tags from it,
# so none of them may spell the version itself. The exceptions, each checked
# or frozen elsewhere: the Kustomize overlays (Kustomize cannot read a file;
# k8s_check.py holds their tags to VERSION), the released proto snapshots,
# the checks' own npm package metadata, and prose (*.md).
set -euo pipefail
# shellcheck source=deploy/checks/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

version="$(head -n1 "$root/VERSION")"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "VERSION is '$version', not MAJOR.MINOR.PATCH"

checked=0
spelled=()
while IFS= read -r f; do
  case "$f" in
    deploy/k8s/overlays/*/kustomization.yaml | deploy/checks/proto_released/* | \
      deploy/checks/js/package*.json | *.md) continue ;;
  esac
  checked=$((checked + 1))
  if grep -qF -- "$version" "$root/$f"; then spelled+=("$f"); fi
done < <(repo_files | grep '^deploy/')

if [ ${#spelled[@]} -gt 0 ]; then
  for f in "${spelled[@]}"; do
    grep -nF -- "$version" "$root/$f" | sed "s|^|  $f:|" >&2
  done
  fail "${#spelled[@]} deployment file(s) spell the version $version; derive it from VERSION"
fi
echo "version: $version is written only in VERSION ($checked deployment files read it or need none)"
