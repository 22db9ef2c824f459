#!/usr/bin/env bash
# Builds and runs attnserve on one GPU node with plain Docker, from a node
# profile (deploy/<node>/node.env). The per-node build.sh and run.sh call this.
#
#   attnserve-node.sh NODE build [IMAGE]     build the image for the node's GPU
#   attnserve-node.sh NODE start [IMAGE]     start the server container
#   attnserve-node.sh NODE stop              drain and remove it
#   attnserve-node.sh NODE restart
#   attnserve-node.sh NODE status            container state and health
#   attnserve-node.sh NODE health            exit 0 iff the server is SERVING
#   attnserve-node.sh NODE info              server info and counters (attn_cli
#                                            info, stats)
#   attnserve-node.sh NODE logs [ARGS...]    docker logs ARGS (e.g. -f, --since 10m)
#   attnserve-node.sh NODE upgrade IMAGE     replace the server by IMAGE; rolls
#                                            back when IMAGE does not get healthy
#   attnserve-node.sh NODE rollback          go back to the image before the
#                                            last upgrade
#
# IMAGE defaults to ATTN_IMAGE, else $ATTN_IMAGE_REPO:<VERSION>-sm$ATTN_CUDA_ARCH
# with the repository's VERSION file. Environment variables override the
# profile (e.g. ATTN_HOST_PORT=50052 run.sh start).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 2 ] || usage
node="$1"
cmd="$2"
shift 2
profile="$root/deploy/$node/node.env"
[ -f "$profile" ] || { echo "attnserve-node.sh: no profile $profile" >&2; exit 2; }

# The profile, with variables already set in the environment taking precedence.
while IFS='=' read -r key value; do
  case "$key" in '' | \#*) continue ;; esac
  if [ -z "${!key+x}" ]; then
    printf -v "$key" '%s' "$value"
    export "${key?}"
  fi
done <"$profile"

# The version is written once, in VERSION; the tag is derived from it.
ATTN_IMAGE="${ATTN_IMAGE:-$ATTN_IMAGE_REPO:$(head -n1 "$root/VERSION")-sm$ATTN_CUDA_ARCH}"
name="$ATTN_CONTAINER"
previous="${ATTN_IMAGE%:*}:$node-previous"
health_timeout_s="${ATTN_HEALTH_TIMEOUT_S:-300}"

build() {
  local image="${1:-$ATTN_IMAGE}"
  docker build -f "$root/deploy/docker/Dockerfile" \
    --build-arg "CUDA_ARCH=$ATTN_CUDA_ARCH" \
    --build-arg "VCS_REF=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)" \
    -t "$image" "$root"
}

start() {
  local image="${1:-$ATTN_IMAGE}"
  local args=(
    --detach --name "$name"
    --gpus "$ATTN_GPUS"
    --publish "$ATTN_PUBLISH_ADDR:$ATTN_HOST_PORT:50051"
    --restart "$ATTN_RESTART"
    --log-driver json-file
    --log-opt "max-size=$ATTN_LOG_MAX_SIZE" --log-opt "max-file=$ATTN_LOG_MAX_FILE"
    --stop-timeout "$ATTN_STOP_TIMEOUT_S"
    --read-only --tmpfs /tmp
    --env ATTN_PORT=50051
    --volume "$root/deploy/$node/tuning.tsv:/etc/attnserve/tuning.tsv:ro"
    --env ATTN_TUNING_TABLE=/etc/attnserve/tuning.tsv
    # TLS and bearer tokens (the server refuses 0.0.0.0 without them).
    --volume "$ATTN_SECRETS_DIR:/run/secrets/attnserve:ro"
    --env ATTN_TLS_CERT=/run/secrets/attnserve/tls.crt
    --env ATTN_TLS_KEY=/run/secrets/attnserve/tls.key
    --env ATTN_TLS_CA=/run/secrets/attnserve/ca.crt
    --env ATTN_TOKEN_FILE=/run/secrets/attnserve/tokens
  )
  local var
  for var in ATTN_BACKEND ATTN_DEVICES ATTN_MAX_MESSAGE_BYTES ATTN_MAX_TOKENS_PER_REQUEST \
             ATTN_QUEUE_CAPACITY ATTN_DRAIN_DELAY_S ATTN_DRAIN_TIMEOUT_S ATTN_LOG_LEVEL \
             ATTN_EXTRA_ARGS; do
    if [ -n "${!var:-}" ]; then args+=(--env "$var=${!var}"); fi
  done
  docker run "${args[@]}" "$image"
}

stop() {
  if docker container inspect "$name" >/dev/null 2>&1; then
    docker stop --time "$ATTN_STOP_TIMEOUT_S" "$name" >/dev/null
    docker rm "$name" >/dev/null
    echo "stopped $name"
  fi
}

health() {
  docker exec "$name" /opt/attnserve/bin/entrypoint.sh health
}

# Waits until Docker's HEALTHCHECK reports the container healthy.
wait_healthy() {
  local deadline=$((SECONDS + health_timeout_s)) state
  while [ $SECONDS -lt $deadline ]; do
    state="$(docker inspect --format '{{.State.Health.Status}}' "$name" 2>/dev/null || echo missing)"
    case "$state" in
      healthy) echo "$name is healthy"; return 0 ;;
      missing) break ;;
    esac
    sleep 5
  done
  echo "$name did not get healthy within ${health_timeout_s}s (state: ${state:-unknown})" >&2
  return 1
}

case "$cmd" in
  build) build "$@" ;;
  start) start "$@" && wait_healthy ;;
  stop) stop ;;
  restart) stop && start && wait_healthy ;;
  status)
    docker ps --all --filter "name=^${name}\$" \
      --format 'table {{.Names}}\t{{.Image}}\t{{.Status}}\t{{.Ports}}'
    health && echo "health: SERVING"
    ;;
  health) health ;;
  info)
    docker exec "$name" /opt/attnserve/bin/attn_cli info --address=127.0.0.1:50051
    docker exec "$name" /opt/attnserve/bin/attn_cli stats --address=127.0.0.1:50051
    ;;
  logs) docker logs "$@" "$name" ;;
  upgrade)
    [ $# -eq 1 ] || usage
    current="$(docker inspect --format '{{.Image}}' "$name")"
    docker tag "$current" "$previous"
    echo "tagged the running image as $previous"
    stop
    if start "$1" && wait_healthy; then
      echo "upgraded $name to $1 (roll back with: run.sh rollback)"
    else
      echo "upgrade to $1 failed; rolling back to $previous" >&2
      docker logs --tail 50 "$name" >&2 || true
      stop
      start "$previous" && wait_healthy
      exit 1
    fi
    ;;
  rollback)
    docker image inspect "$previous" >/dev/null 2>&1 ||
      { echo "no $previous image: nothing to roll back to" >&2; exit 1; }
    stop
    start "$previous" && wait_healthy
    ;;
  *) usage ;;
esac
