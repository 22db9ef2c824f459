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
#   ATTN_TLS_CERT, ATTN_TLS_KEY  --tls_cert, --tls_key: serve TLS (PEM files, e.g. a
#                                mounted Kubernetes TLS Secret's tls.crt, tls.key)
#   ATTN_TLS_CLIENT_CA           --tls_client_ca: require client certificates
#   ATTN_TOKEN_FILE              --token_file: accepted bearer tokens, one per line
#   ATTN_INSECURE                "1": --insecure (beyond loopback without TLS or
#                                tokens; the server refuses to start otherwise)
#   ATTN_METRICS_PORT            --metrics_port: Prometheus /metrics (server/METRICS.md)
#   ATTN_EXTRA_ARGS              more flags, split on whitespace
#
# The health check speaks TLS when ATTN_TLS_CERT is set: it trusts ATTN_TLS_CA
# (default: ATTN_TLS_CERT, right for a self-signed certificate) and expects
# the name ATTN_TLS_SERVER_NAME (default localhost) in the certificate; with
# ATTN_TLS_CLIENT_CA it presents ATTN_HEALTH_TLS_CERT/ATTN_HEALTH_TLS_KEY.
# Health needs no token.
set -euo pipefail

bin_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port="${ATTN_PORT:-50051}"

case "${1:-}" in
  health)
    shift
    tls=()
    if [ -n "${ATTN_TLS_CERT:-}" ]; then
      tls=("--tls_ca=${ATTN_TLS_CA:-$ATTN_TLS_CERT}"
           "--tls_server_name=${ATTN_TLS_SERVER_NAME:-localhost}")
      if [ -n "${ATTN_HEALTH_TLS_CERT:-}" ]; then
        tls+=("--tls_cert=$ATTN_HEALTH_TLS_CERT" "--tls_key=${ATTN_HEALTH_TLS_KEY:-}")
      fi
    fi
    exec "$bin_dir/attn_cli" health "--address=127.0.0.1:$port" "${tls[@]}" "$@"
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
add_flag tls_cert "${ATTN_TLS_CERT:-}"
add_flag tls_key "${ATTN_TLS_KEY:-}"
add_flag tls_client_ca "${ATTN_TLS_CLIENT_CA:-}"
add_flag token_file "${ATTN_TOKEN_FILE:-}"
if [ "${ATTN_INSECURE:-}" = 1 ]; then args+=(--insecure); fi
add_flag metrics_port "${ATTN_METRICS_PORT:-}"
if [ -n "${ATTN_EXTRA_ARGS:-}" ]; then
  read -r -a extra <<<"$ATTN_EXTRA_ARGS"
  args+=("${extra[@]}")
fi

echo "entrypoint: attn_server ${args[*]} $*" >&2
exec "$bin_dir/attn_server" "${args[@]}" "$@"
