# shellcheck shell=bash
# Sourced after deploy/checks/lib.sh: fresh_copy DIR puts the files a clone
# of the repository would have (lib.sh's repo_files: tracked, or new and not
# ignored, as they are in the working tree) into DIR, and nothing built.
# shellcheck disable=SC2154 # root: lib.sh sets it
fresh_copy() {
  mkdir -p "$1"
  (cd "$root" && repo_files | tar -cf - -T -) | tar -xf - -C "$1"
}
