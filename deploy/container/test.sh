#!/usr/bin/env bash
# The container test: builds the CPU image from deploy/docker/Dockerfile with
# podman on a local Debian base (base.sh), runs it as the deployment does and
# talks to it from this host; then the same image through a node profile's
# compose file (deploy/cpu) under podman-compose. Removes what it made (the
# base image and its cached tar stay, for the next run).
#
#   deploy/container/test.sh [--keep] [--image=NAME]
#     --keep        leave the image (the logs under BUILD_DIR/container/test
#                   stay anyway)
#     --image=NAME  test an image built before (e.g. with --keep) instead of
#                   building one; it is not removed
#
# Steps, each timed: base; image build (its size reported); run with a
# non-root UID, a read-only root filesystem with a tmpfs /tmp, TLS and a
# bearer token from mounted files, --init, published on 127.0.0.1 only;
# health through the image's HEALTHCHECK (`podman healthcheck run`);
# attn_cli from this host's build tree (attend and session --check against
# float64; a call without the token must be refused UNAUTHENTICATED);
# /metrics scraped; `podman stop`, which must drain (exit code 0, the
# server's "drained" log line); then compose up, one checked call, compose
# down; then the GPU image (sm_80) is built where its nvidia/cuda bases are
# in podman's storage, else the output says it was not built.
#
# Exit status: 0 passed, 1 failed, 77 skipped: podman cannot run here (the
# reason is printed; ctest shows the test as skipped, never as passed).
# Environment: BUILD_DIR (the host build tree with attn_cli; the base's
# cache and this test's files go under it); ATTN_CCACHE_DIR (test.sh sets
# it): a ccache folder the image build compiles through, mounted into it
# (the hits are reported), so the objects CI's own build made are reused.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="$(cd "${BUILD_DIR:-$root/build}" && pwd)"
keep=0
given_image=""
for arg in "$@"; do
  case "$arg" in
    --keep) keep=1 ;;
    --image=*) given_image="${arg#*=}" ;;
    *) echo "container test: unknown option '$arg'" >&2; exit 2 ;;
  esac
done

work="$build_dir/container/test"
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=deploy/container/podman_env.sh
. "$root/deploy/container/podman_env.sh" "$work"

skip() { echo "container test: SKIPPED: $*"; exit 77; }
fail() { echo "container test: FAIL: $*" >&2; exit 1; }
started=$SECONDS
step_started=$SECONDS
timings=()
step() {  # step MESSAGE: prints it with the time since the start
  echo "container test: [$((SECONDS - started)) s] $*"
}
timed() {  # timed LABEL: records the time since the last timed call
  timings+=("$1: $((SECONDS - step_started)) s")
  step_started=$SECONDS
}

for tool in podman runc mmdebstrap openssl python3; do
  command -v "$tool" >/dev/null 2>&1 ||
    skip "'$tool' not found (deploy/scripts/install_deps.sh --with-checks installs it)"
done
podman info >"$work/podman-info.txt" 2>&1 ||
  skip "podman cannot run on this host: $(tail -n 3 "$work/podman-info.txt" | tr '\n' ' ')"
cli="$build_dir/client/attn_cli"
[ -x "$cli" ] || fail "$cli not found (build first)"

version="$(head -n1 "$root/VERSION")"
# Names of this run's own: the image's tag is the one deploy/cpu/compose.yaml
# names for ATTN_IMAGE_REPO=$image_repo.
image_repo="localhost/attnserve-test$$"
image="$image_repo:$version-cpu"
container="attnserve-test$$"
compose_project="attnserve-test$$"
made_image=0
cleanup() {
  local rc=$?
  podman rm --force --time 0 "$container" >/dev/null 2>&1 || true
  if [ -f "$work/compose.env" ]; then compose down >/dev/null 2>&1 || true; fi
  podman network rm --force "${compose_project}_default" >/dev/null 2>&1 || true
  if [ -n "$given_image" ]; then
    podman untag "$image" >/dev/null 2>&1 || true
  elif [ "$made_image" -eq 1 ] && [ "$keep" -eq 0 ]; then
    podman rmi --force "$image" >/dev/null 2>&1 || true
    # The build stage's layers (untagged once the image is gone).
    podman image prune --force >/dev/null 2>&1 || true
  fi
  exit "$rc"
}
trap cleanup EXIT

# 1. The base.
step "base image"
base="$(BUILD_DIR="$build_dir" bash "$root/deploy/container/base.sh" | tail -n 1)"
timed "base"

# 2. The CPU image, from the Dockerfile, with the repository as the context
# (Dockerfile.dockerignore keeps build trees out).
if [ -n "$given_image" ]; then
  podman image exists "$given_image" || fail "no image $given_image"
  podman tag "$given_image" "$image"  # compose finds it by the profile's name
  made_image=1                        # the tag is ours; the image stays
  step "testing the given image $given_image (as $image)"
else
  step "building $image from deploy/docker/Dockerfile on $base"
  cache_args=()
  if [ -n "${ATTN_CCACHE_DIR:-}" ] && command -v ccache >/dev/null 2>&1; then
    mkdir -p "$ATTN_CCACHE_DIR"
    CCACHE_DIR="$ATTN_CCACHE_DIR" ccache --zero-stats >/dev/null
    cache_args=(--volume "$ATTN_CCACHE_DIR:/ccache" --build-arg CXX_LAUNCHER=ccache
                --build-arg CCACHE_DIR=/ccache)
  fi
  # --layers=false: no layer per step (nothing reuses them; committing the
  # build stage's 1 GB costs time).
  if ! podman build --pull=never --format docker --layers=false "${cache_args[@]}" \
         -f "$root/deploy/docker/Dockerfile" \
         --build-arg BUILD_BASE="$base" --build-arg RUNTIME_BASE="$base" \
         --build-arg ENABLE_CUDA=OFF --build-arg CUDA_ARCH=none \
         --build-arg VCS_REF="$(git -C "$root" rev-parse --short HEAD)" \
         -t "$image" "$root" >"$work/build.log" 2>&1; then
    tail -n 40 "$work/build.log" >&2
    fail "podman build failed (log: $work/build.log)"
  fi
  made_image=1
  timed "image build"
  if [ "${#cache_args[@]}" -gt 0 ]; then
    # ccache 4.7's --print-stats: one "name<TAB>count" line per counter.
    stats="$(CCACHE_DIR="$ATTN_CCACHE_DIR" ccache --print-stats)"
    count() { awk -F'\t' -v k="$1" '$1 == k {print $2}' <<<"$stats"; }
    step "image build through ccache: $(( $(count direct_cache_hit) + $(count preprocessed_cache_hit) )) hits, $(count cache_miss) misses"
  fi
fi
size_mb=$(( $(podman image inspect --format '{{.Size}}' "$image") / 1000000 ))
step "image $image: $size_mb MB"
grep -q '"Healthcheck"' <(podman image inspect "$image") ||
  fail "the image lost its HEALTHCHECK (build with --format docker)"

# 3. Secrets as the deployment mounts them (deploy/README.md, "Secrets"): a
# self-signed certificate for localhost, its CA (the same file) and a token
# file, readable by the image's UID 10001.
secrets="$work/secrets"
mkdir -p "$secrets"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
  -keyout "$secrets/tls.key" -out "$secrets/tls.crt" >/dev/null 2>&1 ||
  fail "openssl could not make a certificate"
cp "$secrets/tls.crt" "$secrets/ca.crt"
python3 -c 'import secrets; print(secrets.token_hex(24))' >"$secrets/tokens"
chmod 0755 "$secrets" && chmod 0644 "$secrets"/*
tls=(--tls_ca="$secrets/ca.crt" --tls_server_name=localhost)
auth=(--token_file="$secrets/tokens")

# 4. Run it as the deployment does.
step "running $container"
podman run --detach --name "$container" --init --user 10001:10001 \
  --read-only --tmpfs /tmp \
  --publish 127.0.0.1::50051 --publish 127.0.0.1::9464 \
  --volume "$secrets:/run/secrets:ro" \
  --env ATTN_BACKEND=cpu --env ATTN_METRICS_PORT=9464 \
  --env ATTN_TLS_CERT=/run/secrets/tls.crt --env ATTN_TLS_KEY=/run/secrets/tls.key \
  --env ATTN_TLS_CA=/run/secrets/ca.crt --env ATTN_TOKEN_FILE=/run/secrets/tokens \
  --env ATTN_DRAIN_DELAY_S=1 --env ATTN_DRAIN_TIMEOUT_S=10 \
  --stop-timeout 30 "$image" >/dev/null 2>"$work/run.log" ||
  { cat "$work/run.log" >&2; fail "podman run failed"; }
port="$(podman port "$container" 50051/tcp | sed 's/.*://')"
metrics_port="$(podman port "$container" 9464/tcp | sed 's/.*://')"
if [ -z "$port" ] || [ -z "$metrics_port" ]; then
  fail "no published ports ($(podman port "$container"))"
fi
address="127.0.0.1:$port"

# 5. Health through the image's own HEALTHCHECK command.
healthy=0
for _ in $(seq 1 120); do
  if podman healthcheck run "$container" >/dev/null 2>&1; then healthy=1; break; fi
  [ "$(podman inspect --format '{{.State.Running}}' "$container")" = true ] || break
  sleep 1
done
if [ "$healthy" -ne 1 ]; then
  podman logs "$container" 2>&1 | tail -n 30 >&2
  fail "the container never became healthy"
fi
timed "start to healthy"
step "healthy; serving at $address (TLS, token), metrics at 127.0.0.1:$metrics_port"

# 6. Real calls from this host, checked against float64.
calls=(
  "attend --shape=1,256,4,64 --check"
  "attend --shape=2,300,8,128 --kv_shape=2,300,2,128 --causal --lse --check"
  "session --session_shape=2,8,2,64 --prompt=100 --chunk=32 --generate=8 --check"
)
for call in "${calls[@]}"; do
  read -r -a argv <<<"$call"
  step "attn_cli $call"
  "$cli" "${argv[@]}" --address="$address" "${tls[@]}" "${auth[@]}" >"$work/call.log" 2>&1 || {
    cat "$work/call.log" >&2
    fail "attn_cli $call"
  }
  grep -E 'check' "$work/call.log" | sed 's/^/    /'
done
rc=0
"$cli" attend --shape=1,16,1,64 --address="$address" "${tls[@]}" >"$work/noauth.log" 2>&1 || rc=$?
if [ "$rc" -eq 0 ] || ! grep -q UNAUTHENTICATED "$work/noauth.log"; then
  fail "a call without the token was not refused UNAUTHENTICATED: $(cat "$work/noauth.log")"
fi
step "a call without the token: refused UNAUTHENTICATED"
timed "calls"

# 7. /metrics.
python3 - "$metrics_port" >"$work/metrics.txt" <<'PY' || fail "could not scrape /metrics"
import sys, urllib.request
print(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10).read().decode())
PY
ok_calls="$(awk '/^attn_inference_request_success_total/ {s += $NF} END {print s + 0}' \
              "$work/metrics.txt")"
[ "${ok_calls%.*}" -ge 2 ] || fail "/metrics counts $ok_calls successful calls, expected at least 2"
step "/metrics: $ok_calls successful calls counted"

# 8. Stop: SIGTERM through --init, the server drains and exits 0.
step "podman stop"
# (podman logs a harmless error where no systemd runs the health timer.)
podman stop --time 30 "$container" >/dev/null 2>"$work/stop.log" ||
  { cat "$work/stop.log" >&2; fail "podman stop failed"; }
exit_code="$(podman inspect --format '{{.State.ExitCode}}' "$container")"
podman logs "$container" >"$work/server.log" 2>&1 || true
[ "$exit_code" = 0 ] || { tail -n 20 "$work/server.log" >&2; fail "exit code $exit_code after podman stop"; }
grep -q 'drained' "$work/server.log" ||
  { tail -n 20 "$work/server.log" >&2; fail "no 'drained' line in the server's log"; }
step "stopped: exit code 0, $(grep -o 'drained[^"]*' "$work/server.log" | head -n 1)"
podman rm "$container" >/dev/null 2>>"$work/stop.log"
timed "stop"

# 9. The CPU node profile through compose, with this image. podman-compose
# 1.0 has no --env-file (it reads the environment), and its extends does not
# bring the base file's top-level secrets: the base file is named first.
compose() {
  # shellcheck disable=SC1091
  (set -a && . "$work/compose.env" && set +a && cd "$root/deploy/cpu" &&
     podman-compose --project-name "$compose_project" \
       -f ../node/compose.base.yaml -f compose.yaml "$@")
}
if command -v podman-compose >/dev/null 2>&1; then
  compose_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  {
    grep -Ev '^(ATTN_SECRETS_DIR|ATTN_HOST_PORT|ATTN_PUBLISH_ADDR|ATTN_CONTAINER|ATTN_IMAGE_REPO)=' \
      "$root/deploy/cpu/node.env"
    echo "ATTN_SECRETS_DIR=$secrets"
    echo "ATTN_CONTAINER=$container-compose"
    echo "ATTN_HOST_PORT=$compose_port"
    echo "ATTN_PUBLISH_ADDR=127.0.0.1"
    echo "ATTN_IMAGE_REPO=$image_repo"
    echo "ATTN_VERSION=$version"
    echo "ATTN_DRAIN_DELAY_S=1"
  } >"$work/compose.env"
  step "podman-compose up (deploy/cpu, published on 127.0.0.1:$compose_port)"
  compose up --detach --no-build >"$work/compose.log" 2>&1 ||
    { tail -n 30 "$work/compose.log" >&2; fail "podman-compose up failed"; }
  ok=0
  for _ in $(seq 1 120); do
    if "$cli" health --address="127.0.0.1:$compose_port" "${tls[@]}" >/dev/null 2>&1; then
      ok=1; break
    fi
    sleep 1
  done
  if [ "$ok" -ne 1 ]; then
    podman logs "$container-compose" 2>&1 | tail -n 30 >&2
    fail "the compose service never became SERVING"
  fi
  "$cli" attend --shape=1,128,2,64 --check --address="127.0.0.1:$compose_port" "${tls[@]}" \
    "${auth[@]}" >"$work/call.log" 2>&1 || { cat "$work/call.log" >&2; fail "compose call"; }
  grep -E 'check' "$work/call.log" | sed 's/^/    /'
  compose down >>"$work/compose.log" 2>&1 || fail "podman-compose down failed"
  rm -f "$work/compose.env"
  step "compose: SERVING, a checked call, down"
  timed "compose"
else
  step "podman-compose not found: the compose step did not run"
  timings+=("compose: not run (no podman-compose)")
fi

# 10. The GPU image, where its bases are here (no registry is reachable from
# CI: `podman load` them, deploy/README.md says how). Built for sm_80, not
# run (no GPU); its binaries must start (--help) inside it.
cuda_version="$(sed -n 's/^ARG CUDA_VERSION=//p' "$root/deploy/docker/Dockerfile")"
ubuntu_version="$(sed -n 's/^ARG UBUNTU_VERSION=//p' "$root/deploy/docker/Dockerfile")"
gpu_build="nvidia/cuda:$cuda_version-devel-ubuntu$ubuntu_version"
gpu_runtime="nvidia/cuda:$cuda_version-runtime-ubuntu$ubuntu_version"
if podman image exists "$gpu_build" && podman image exists "$gpu_runtime"; then
  gpu_image="$image_repo:$version-sm80"
  step "building the GPU image $gpu_image on $gpu_build"
  podman build --pull=never --format docker -f "$root/deploy/docker/Dockerfile" \
    --build-arg CUDA_ARCH=80 -t "$gpu_image" "$root" >"$work/build-gpu.log" 2>&1 ||
    { tail -n 40 "$work/build-gpu.log" >&2; fail "the GPU image's build failed"; }
  podman run --rm --entrypoint /opt/attnserve/bin/attn_server "$gpu_image" --help \
    >/dev/null 2>&1 || fail "attn_server --help fails in the GPU image"
  [ "$keep" -eq 1 ] || podman rmi --force "$gpu_image" >/dev/null 2>&1 || true
  timed "GPU image build"
else
  step "GPU image: NOT built ($gpu_build and $gpu_runtime are not in podman's storage)"
  timings+=("GPU image: not built (no local CUDA bases)")
fi

step "PASS; image $size_mb MB; ${timings[*]/%/;} total $((SECONDS - started)) s"
