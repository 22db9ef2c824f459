#!/usr/bin/env bash
# The README's main job: installs dependencies, builds, starts attn_server on
# the best backend present (CUDA when a GPU is visible, else the CPU
# reference), sends one real attention request with attn_cli, prints the
# output check against a float64 reference and the timing breakdown, and
# stops the server (SIGTERM, graceful drain).
#
#   demo.sh [--shape=B,S,H,D] [--dtype=bf16|fp16] [other attn_cli attend flags]
# Defaults: B=4, S=4096, H=16, D=128 on a GPU; B=1, S=1024, H=8, D=128 on CPU.
#
# Builds only what it runs (attn_server, attn_cli: no tests, no benches) into
# $BUILD_DIR (default build/). With no GPU visible it builds no CUDA kernels
# either, even where nvcc is installed (ATTN_ENABLE_CUDA=OFF in that build
# tree's cache; a later `ATTN_ENABLE_CUDA=AUTO test.sh` turns them back on).
# Prints a line per phase with the seconds since the start.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
started=$SECONDS
phase() { printf '== [%4d s] %s\n' "$((SECONDS - started))" "$*"; }

gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then gpu=1; fi

if [ "${ATTN_SKIP_DEPS:-0}" != "1" ]; then
  phase "installing dependencies (apt-get; minutes on a fresh machine)"
  bash "$root/deploy/scripts/install_deps.sh"
fi
if [ "${ATTN_SKIP_BUILD:-0}" != "1" ]; then
  if [ "$gpu" -eq 1 ]; then
    phase "building attn_server and attn_cli with the CUDA kernels for this GPU"
    BUILD_TARGETS="attn_server attn_cli" bash "$root/deploy/scripts/build.sh"
  else
    phase "building attn_server and attn_cli, CPU only (no GPU visible)"
    ATTN_ENABLE_CUDA=OFF BUILD_TARGETS="attn_server attn_cli" bash "$root/deploy/scripts/build.sh"
  fi
fi
server="$build_dir/server/attn_server"
cli="$build_dir/client/attn_cli"

shape="1,1024,8,128"
if [ "$gpu" -eq 1 ]; then shape="4,4096,16,128"; fi
# The request as sent: the default shape unless the arguments give one.
attend_args=(--dtype=bf16 --check)
case " $* " in
  *" --shape="* | *" --shape "*) ;;
  *) attend_args=("--shape=$shape" "${attend_args[@]}") ;;
esac
attend_args+=("$@")

# shellcheck source=deploy/scripts/start_server.sh
. "$root/deploy/scripts/start_server.sh"
work="$(mktemp -d)"
trap 'stop_server TERM; rm -rf "$work"' EXIT

phase "starting attn_server (--backend=auto)"
start_server "$server" "$work" --backend=auto || exit 1
address="$server_address"

phase "attn_server is serving; its first log lines:"
head -n 3 "$work/server.log"
phase "attn_cli info"
"$cli" info --address="$address"
phase "attn_cli attend ${attend_args[*]}"
"$cli" attend --address="$address" "${attend_args[@]}"

kill -TERM "$server_pid"
if wait "$server_pid"; then
  phase "server drained and exited 0 on SIGTERM; its last log lines:"
else
  echo "demo.sh: attn_server exited with status $? on SIGTERM" >&2
  exit 1
fi
server_pid=""
tail -n 3 "$work/server.log"
phase "done"
