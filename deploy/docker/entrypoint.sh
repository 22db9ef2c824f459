#!/usr/bin/env bash
# Container entrypoint: starts attn_server with flags taken from environment
# variables (unset or empty variables leave the server's default), or runs
# the health check, or one of the bundled tools.
#
#   entrypoint.sh [extra attn_server flags...]   serve (default)
#   entrypoint.sh health                         exit 0 iff the server is SERVING
#   entrypoint.sh attn_cli|attn_loadgen ARGS...  run a client tool
#
# Variables (flag of attn_server):
#   ATTN_PORT (50051)            port to listen on; used by the health check
#   ATTN_LISTEN (0.0.0.0:PORT)   --listen, full HOST:PORT; overrides ATTN_PORT
#   ATTN_BACKEND                 --backend=auto|cuda|cpu
#   ATTN_DEVICES                 --devices
#   ATTN_MAX_MESSAGE_BYTES       --max_message_bytes
#   ATTN_MAX_TOKENS_PER_REQUEST  --max_tokens_per_request
#   ATTN_QUEUE_CAPACITY          --queue_capacity
#   ATTN_DRAIN_DELAY_S           --drain_delay_s: on SIGTERM, keep serving (health
#                                NOT_SERVING) this long so load balancers notice
#   ATTN_DRAIN_TIMEOUT_S         --drain_timeout_s: then let calls in flight
#                                finish this long (delay + timeout < stop timeout)
#   ATTN_MAX_CONNECTION_AGE_S    --max_connection_age_s: close client connections
#                                after this age so DNS-balanced clients re-resolve
#   ATTN_LOG_LEVEL               --log_level
#   ATTN_METRICS_PORT            --metrics_port: Prometheus /metrics (server/METRICS.md)
#   ATTN_EXTRA_ARGS              more flags, split on whitespace
set -euo pipefail

bin_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port="${ATTN_PORT:-50051}"

case "${1:-}" in
  health)
    shift
    exec "$bin_dir/attn_cli" health "--address=127.0.0.1:$port" "$@"
    ;;
  attn_cli | attn_loadgen | attn_server)
    tool="$1"
    shift
    exec "$bin_dir/$tool" "$@"
    ;;
esac

args=("--listen=${ATTN_LISTEN:-0.0.0.0:$port}")
add_flag() {  # add_flag FLAG VALUE: --FLAG=VALUE when VALUE is not empty
  if [ -n "$2" ]; then args+=("--$1=$2"); fi
}
add_flag backend "${ATTN_BACKEND:-}"
add_flag devices "${ATTN_DEVICES:-}"
add_flag max_message_bytes "${ATTN_MAX_MESSAGE_BYTES:-}"
add_flag max_tokens_per_request "${ATTN_MAX_TOKENS_PER_REQUEST:-}"
add_flag queue_capacity "${ATTN_QUEUE_CAPACITY:-}"
add_flag drain_delay_s "${ATTN_DRAIN_DELAY_S:-}"
add_flag drain_timeout_s "${ATTN_DRAIN_TIMEOUT_S:-}"
add_flag max_connection_age_s "${ATTN_MAX_CONNECTION_AGE_S:-}"
add_flag log_level "${ATTN_LOG_LEVEL:-}"
add_flag metrics_port "${ATTN_METRICS_PORT:-}"
if [ -n "${ATTN_EXTRA_ARGS:-}" ]; then
  read -r -a extra <<<"$ATTN_EXTRA_ARGS"
  args+=("${extra[@]}")
fi

echo "entrypoint: attn_server ${args[*]} $*" >&2
exec "$bin_dir/attn_server" "${args[@]}" "$@"
