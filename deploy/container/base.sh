#!/usr/bin/env bash
# Makes, or reuses, the local base image the CPU image builds and runs on:
# a Debian 12 (bookworm) minbase root filesystem that mmdebstrap makes from
# Debian's packages, imported into podman. No registry is needed.
#
#   base.sh [--image=NAME] [--cache-dir=DIR]
#
# Reuses, in this order: the image if podman has it, the cached tar
# (DIR/debian-bookworm-minbase.tar), else runs mmdebstrap (30-80 s) and keeps
# the tar there. The mirror is the one apt uses here when this host is
# bookworm too (Debian's sources files), else deb.debian.org. Prints the image
# name on the last line. Needs podman's settings in CONTAINERS_CONF on hosts
# like CI's (deploy/container/podman_env.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
image=localhost/attnserve-base:bookworm
cache_dir="${BUILD_DIR:-$root/build}/container"
for arg in "$@"; do
  case "$arg" in
    --image=*) image="${arg#*=}" ;;
    --cache-dir=*) cache_dir="${arg#*=}" ;;
    *) echo "base.sh: unknown option '$arg'" >&2; exit 2 ;;
  esac
done
tar="$cache_dir/debian-bookworm-minbase.tar"
started=$SECONDS

if podman image exists "$image"; then
  echo "base.sh: reusing the image $image"
  echo "$image"
  exit 0
fi
if [ ! -s "$tar" ]; then
  command -v mmdebstrap >/dev/null 2>&1 || {
    echo "base.sh: mmdebstrap not found (apt-get install mmdebstrap)" >&2
    exit 1
  }
  mirrors=()
  # shellcheck disable=SC1091
  if [ "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" = bookworm ]; then
    # Debian's own files only: a third-party source's key is not in the base.
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/debian.sources; do
      if [ -s "$f" ] && grep -Eq '^(deb |Types:.*deb)' "$f"; then mirrors+=("$f"); fi
    done
  fi
  [ ${#mirrors[@]} -gt 0 ] || mirrors=(http://deb.debian.org/debian)
  mkdir -p "$cache_dir"
  echo "base.sh: mmdebstrap bookworm minbase from ${mirrors[*]} into $tar"
  # stdin closed: mmdebstrap reads extra sources from a stdin that is no terminal.
  mmdebstrap --variant=minbase --format=tar --quiet bookworm "$tar.part" "${mirrors[@]}" \
    </dev/null
  mv "$tar.part" "$tar"
fi
echo "base.sh: [$((SECONDS - started)) s] importing $tar ($(du -m "$tar" | cut -f1) MB) as $image"
podman import --quiet "$tar" "$image" >/dev/null
echo "base.sh: [$((SECONDS - started)) s] base image ready"
echo "$image"
