#!/usr/bin/env bash
# Lints every shell script of the repository (by extension or by a sh/bash
# shebang) with ShellCheck at its default level: style notes fail too.
set -euo pipefail
# shellcheck source=deploy/checks/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tool shellcheck

scripts=()
while IFS= read -r f; do
  case "$f" in
    *.sh | *.bash) scripts+=("$f") ;;
    *)
      if head -c 64 "$root/$f" 2>/dev/null | head -1 | grep -qE '^#!.*\b(ba)?sh\b'; then
        scripts+=("$f")
      fi ;;
  esac
done < <(repo_files)
[ ${#scripts[@]} -gt 0 ] || fail "no shell scripts found"
cd "$root"
shellcheck --external-sources --source-path=SCRIPTDIR "${scripts[@]}"
echo "shellcheck: ${#scripts[@]} scripts clean: ${scripts[*]}"
