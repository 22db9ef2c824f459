#!/usr/bin/env bash
# Checks the single-node deployment (deploy/<node>/ and deploy/node/) without
# a Docker engine:
#   * build.sh / run.sh drive a stand-in `docker` that records its arguments:
#     the image, tagged <repo>:<VERSION file>-sm<arch>, is built with the
#     node's CUDA_ARCH, and the container runs
#     with --gpus, the published port, the restart policy, log rotation, a
#     stop timeout covering the drain, and the profile's server settings;
#     upgrade keeps the running image as <repo>:<node>-previous;
#   * compose.yaml renders with the profile (docker-compose config) to the
#     same image, build argument, settings and GPU reservation; the CPU
#     profile (deploy/cpu: compose only, run for real by
#     deploy/container/test.sh) to its image, ENABLE_CUDA=OFF and no GPU;
#   * tuning.tsv (GPU nodes) parses as a tuning table (kernels/ladder/include/attn/tuning.h).
set -euo pipefail
# shellcheck source=deploy/checks/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tool docker-compose /usr/bin/python3

fake="$work_dir/fake-docker"
rm -rf "$fake" && mkdir -p "$fake/bin"
cat >"$fake/bin/docker" <<'FAKE'
#!/usr/bin/env bash
printf '%s\n' "$*" >>"$FAKE_DOCKER_LOG"
case "$*" in
  *"{{.State.Health.Status}}"*) echo healthy ;;
  *"{{.Image}}"*) echo sha256:0123abcd ;;
esac
FAKE
chmod +x "$fake/bin/docker"
export FAKE_DOCKER_LOG="$fake/log"

problems=0
expect() {  # expect NODE WHAT REGEX: the recorded docker calls match REGEX
  if ! grep -qE -- "$3" "$FAKE_DOCKER_LOG"; then
    echo "FAIL: $1: $2: no docker call matches '$3'" >&2
    sed 's/^/    docker /' "$FAKE_DOCKER_LOG" >&2
    problems=$((problems + 1))
  fi
}

version="$(head -n1 "$root/VERSION")"
nodes=()
for profile in "$root"/deploy/*/node.env; do
  node="$(basename "$(dirname "$profile")")"
  nodes+=("$node")
  # Read the profile in a subshell-free way for the expectations.
  declare -A p=()
  while IFS='=' read -r key value; do
    case "$key" in '' | \#*) continue ;; esac
    p[$key]="$value"
  done <"$profile"

  # GPU nodes run through build.sh/run.sh (attnserve-node.sh) and compose;
  # the CPU profile (deploy/cpu, ATTN_BACKEND=cpu) through compose only.
  kind=gpu
  image="${p[ATTN_IMAGE_REPO]}:$version-sm${p[ATTN_CUDA_ARCH]}"
  if [ "${p[ATTN_BACKEND]:-}" = cpu ]; then
    kind=cpu
    image="${p[ATTN_IMAGE_REPO]}:$version-cpu"
  fi
  if [ "$kind" = gpu ]; then
    : >"$FAKE_DOCKER_LOG"
    env -i PATH="$fake/bin:/usr/bin:/bin" HOME="$fake" FAKE_DOCKER_LOG="$FAKE_DOCKER_LOG" \
      bash "$root/deploy/$node/build.sh" >/dev/null
    expect "$node" build "^build -f $root/deploy/docker/Dockerfile --build-arg CUDA_ARCH=${p[ATTN_CUDA_ARCH]} .* -t $image $root\$"

    : >"$FAKE_DOCKER_LOG"
    env -i PATH="$fake/bin:/usr/bin:/bin" HOME="$fake" FAKE_DOCKER_LOG="$FAKE_DOCKER_LOG" \
      bash "$root/deploy/$node/run.sh" start >/dev/null
    run="^run --detach --name ${p[ATTN_CONTAINER]} --gpus ${p[ATTN_GPUS]} --publish ${p[ATTN_PUBLISH_ADDR]}:${p[ATTN_HOST_PORT]}:50051 --restart ${p[ATTN_RESTART]} --log-driver json-file --log-opt max-size=${p[ATTN_LOG_MAX_SIZE]} --log-opt max-file=${p[ATTN_LOG_MAX_FILE]} --stop-timeout ${p[ATTN_STOP_TIMEOUT_S]} "
    expect "$node" start "$run"
    for var in ATTN_BACKEND ATTN_MAX_MESSAGE_BYTES ATTN_MAX_TOKENS_PER_REQUEST ATTN_QUEUE_CAPACITY \
               ATTN_DRAIN_DELAY_S ATTN_DRAIN_TIMEOUT_S ATTN_LOG_LEVEL; do
      if [ -n "${p[$var]:-}" ]; then expect "$node" "start $var" "^run .*--env $var=${p[$var]} "; fi
    done
    expect "$node" "start tuning" "^run .*--volume $root/deploy/$node/tuning.tsv:/etc/attnserve/tuning.tsv:ro "
    expect "$node" "start secrets" "^run .*--volume ${p[ATTN_SECRETS_DIR]}:/run/secrets/attnserve:ro "
    for var in ATTN_TLS_CERT ATTN_TLS_KEY ATTN_TOKEN_FILE; do
      expect "$node" "start $var" "^run .*--env $var=/run/secrets/attnserve/"
    done
    expect "$node" "start image" "^run .* $image\$"
    if [ $((p[ATTN_DRAIN_DELAY_S] + p[ATTN_DRAIN_TIMEOUT_S] + 5)) -gt "${p[ATTN_STOP_TIMEOUT_S]}" ]; then
      echo "FAIL: $node: ATTN_STOP_TIMEOUT_S does not cover drain delay + timeout + 5 s" >&2
      problems=$((problems + 1))
    fi

    : >"$FAKE_DOCKER_LOG"
    env -i PATH="$fake/bin:/usr/bin:/bin" HOME="$fake" FAKE_DOCKER_LOG="$FAKE_DOCKER_LOG" \
      bash "$root/deploy/$node/run.sh" upgrade "${image%:*}:next" >/dev/null
    expect "$node" upgrade "^tag sha256:0123abcd ${image%:*}:$node-previous\$"
    expect "$node" upgrade "^stop --time ${p[ATTN_STOP_TIMEOUT_S]} ${p[ATTN_CONTAINER]}\$"
    expect "$node" upgrade "^run .* ${image%:*}:next\$"
  fi

  # Compose renders with the profile to the same settings.
  rendered="$work_dir/compose-$node.yaml"
  (cd "$root/deploy/$node" &&
    ATTN_VERSION="$version" docker-compose --env-file node.env -f compose.yaml config) >"$rendered"
  /usr/bin/python3 - "$rendered" "$profile" "$node" "$image" "$kind" <<'PY' || problems=$((problems + 1))
import sys, yaml
rendered, profile, node, image, kind = sys.argv[1:]
svc = yaml.safe_load(open(rendered))["services"]["attnserve"]
p = dict(l.strip().split("=", 1) for l in open(profile) if "=" in l and not l.startswith("#"))
bad = []
def want(what, got, exp):
    if str(got) != str(exp):
        bad.append(f"{what}: {got!r} != {exp!r}")
want("image", svc.get("image"), image)
want("build arg CUDA_ARCH", svc["build"]["args"].get("CUDA_ARCH"), p["ATTN_CUDA_ARCH"])
if kind == "cpu":
    want("build arg ENABLE_CUDA", svc["build"]["args"].get("ENABLE_CUDA"), "OFF")
    want("build arg BUILD_BASE", svc["build"]["args"].get("BUILD_BASE"), p["ATTN_BUILD_BASE"])
    want("build arg RUNTIME_BASE", svc["build"]["args"].get("RUNTIME_BASE"), p["ATTN_RUNTIME_BASE"])
want("restart", svc.get("restart"), p["ATTN_RESTART"])
want("stop_grace_period", svc.get("stop_grace_period"), p["ATTN_STOP_TIMEOUT_S"] + "s")
want("port", svc["ports"][0].split("/")[0],
     f'{p["ATTN_PUBLISH_ADDR"]}:{p["ATTN_HOST_PORT"]}:50051')
for k in ("ATTN_BACKEND", "ATTN_MAX_MESSAGE_BYTES", "ATTN_MAX_TOKENS_PER_REQUEST",
          "ATTN_QUEUE_CAPACITY", "ATTN_DRAIN_DELAY_S", "ATTN_DRAIN_TIMEOUT_S", "ATTN_LOG_LEVEL"):
    want(k, svc["environment"].get(k), p.get(k, ""))
devs = svc.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])
has_gpu = any("gpu" in d.get("capabilities", []) for d in devs)
if kind == "gpu":
    if not has_gpu:
        bad.append("no GPU reservation")
    if not any(v.endswith(":/etc/attnserve/tuning.tsv:ro") for v in svc.get("volumes", [])):
        bad.append("tuning table not mounted")
else:
    if has_gpu:
        bad.append("a GPU reservation on the CPU profile")
    want("ATTN_TUNING_TABLE", svc["environment"].get("ATTN_TUNING_TABLE"), "")
# TLS and a token from compose secrets (mounted at /run/secrets/<name>).
secrets = {s if isinstance(s, str) else s["source"] for s in svc.get("secrets", [])}
for k in ("ATTN_TLS_CERT", "ATTN_TLS_KEY", "ATTN_TOKEN_FILE"):
    path = str(svc["environment"].get(k, ""))
    if not path.startswith("/run/secrets/") or path.rsplit("/", 1)[-1] not in secrets:
        bad.append(f"{k}={path!r} is not a secret of the service")
for b in bad:
    print(f"FAIL: {node}: compose.yaml: {b}", file=sys.stderr)
sys.exit(1 if bad else 0)
PY

  if [ "$kind" = gpu ]; then
    # The node's tuning table parses like ParseTuningTable does.
    lineno=0
    while IFS= read -r line; do
      lineno=$((lineno + 1))
      case "$line" in '' | \#*) continue ;; esac
      IFS=$'\t' read -r -a fields <<<"$line"
      if [ ${#fields[@]} -lt 2 ] || [ ${#fields[@]} -gt 3 ] || [ -z "${fields[0]}" ] || [ -z "${fields[1]}" ]; then
        echo "FAIL: deploy/$node/tuning.tsv:$lineno: want <device> TAB <candidate> [TAB <note>]" >&2
        problems=$((problems + 1))
      fi
    done <"$root/deploy/$node/tuning.tsv"
  fi
  unset p
  if [ "$kind" = gpu ]; then
    echo "node: $node: build, start, upgrade and compose agree with node.env"
  else
    echo "node: $node: compose agrees with node.env (CPU backend, no GPU reservation)"
  fi
done
[ ${#nodes[@]} -ge 3 ] || { echo "FAIL: expected the a100, rtx3090 and cpu profiles" >&2; problems=$((problems + 1)); }
echo "node: ${#nodes[@]} node profiles (${nodes[*]}), $problems problem(s)"
[ "$problems" -eq 0 ]
