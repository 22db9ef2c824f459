#!/usr/bin/python3
"""The project's policy checks over attnserve's rendered Kustomize overlays.

Rendering is a real kustomize's (`kustomize build`, else `kubectl kustomize`:
Debian's kubernetes-client or any newer kubectl); the objects' schemas are
validated by deploy/checks/js/k8s_schema.mjs (kubernetes-models). What stays
here is what no schema knows. Checks, per overlay (exit status 1 on any failure):
  * exactly one Deployment (apps/v1), headless Service (v1) and
    PodDisruptionBudget (policy/v1); no unknown top-level or pod fields;
  * selectors of all three match the pod template's labels, and the overlays'
    selectors are disjoint (one Deployment per GPU pool);
  * the server container asks for nvidia.com/gpu under limits only, has CPU
    and memory requests, and the pod selects nodes by nvidia.com/gpu.product;
  * readiness/liveness/startup probes run the entrypoint's health mode (it
    speaks TLS; the kubelet's native gRPC probes speak only plaintext);
  * the server serves TLS with a bearer token: ATTN_TLS_CERT, ATTN_TLS_KEY
    and ATTN_TOKEN_FILE name files in read-only Secret volumes, and
    ATTN_INSECURE is not set;
  * terminationGracePeriodSeconds >= drain delay + drain timeout + 5;
  * the pool agrees with its single-node profile deploy/<pool>/node.env: the
    image tag is <VERSION file>-sm<ATTN_CUDA_ARCH>, the server settings
    are the same, and the grace period is its ATTN_STOP_TIMEOUT_S;
  * the pod runs as the image's non-root UID, and every ATTN_* variable is one
    the container entrypoint reads.

Writes the rendered objects as JSON (--json-out) for the schema validation
of deploy/checks/js/k8s_schema.mjs.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
K8S = os.path.join(ROOT, "deploy", "k8s")

# Server settings that a pool's Deployment and its single-node profile
# (deploy/<pool>/node.env) must set alike.
SERVER_SETTINGS = ("ATTN_BACKEND", "ATTN_MAX_MESSAGE_BYTES", "ATTN_MAX_TOKENS_PER_REQUEST",
                   "ATTN_QUEUE_CAPACITY", "ATTN_DRAIN_DELAY_S", "ATTN_DRAIN_TIMEOUT_S",
                   "ATTN_LOG_LEVEL")

errors = []


def error(msg):
    errors.append(msg)


# ---------------------------------------------------------------- rendering

def kustomize_command():
    """A real kustomize: `kustomize build`, else `kubectl kustomize`."""
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    raise SystemExit("FAIL: neither kustomize nor kubectl found: run "
                     "deploy/scripts/install_deps.sh --with-checks (Debian's kubernetes-client)")


def render(directory):
    """The overlay's objects as the real kustomize renders them."""
    cmd = kustomize_command() + [directory]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} failed: {proc.stderr.strip()}")
    return [d for d in yaml.safe_load_all(proc.stdout) if d is not None], " ".join(cmd[:2])


# ---------------------------------------------------------------- checks

def read_env_file(path):
    values = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^\s*([A-Z_][A-Z0-9_]*)=\"?([^\"#]*?)\"?\s*(#.*)?$", line)
            if m:
                values[m.group(1)] = m.group(2)
    return values


def entrypoint_env_names():
    with open(os.path.join(ROOT, "deploy", "docker", "entrypoint.sh"), encoding="utf-8") as f:
        return set(re.findall(r"\bATTN_[A-Z0-9_]+", f.read()))


def read_version():
    with open(os.path.join(ROOT, "VERSION"), encoding="utf-8") as f:
        return f.readline().strip()


def dockerfile_uid():
    with open(os.path.join(ROOT, "deploy", "docker", "Dockerfile"), encoding="utf-8") as f:
        users = re.findall(r"^USER\s+(\S+)", f.read(), re.M)
    return users[-1].split(":")[0] if users else None


def subset(small, big):
    return bool(small) and all(big.get(k) == v for k, v in small.items())


def check_overlay(pool, objects):
    where = f"overlay {pool}"
    by_kind = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
        extra = set(obj) - {"apiVersion", "kind", "metadata", "spec"}
        if extra:
            error(f"{where}: {obj['kind']} has unknown top-level fields {sorted(extra)}")
    expected = {"Deployment": "apps/v1", "Service": "v1", "PodDisruptionBudget": "policy/v1"}
    if set(by_kind) != set(expected) or any(len(v) != 1 for v in by_kind.values()):
        error(f"{where}: expected one each of {sorted(expected)}, got "
              f"{sorted((k, len(v)) for k, v in by_kind.items())}")
        return None
    for kind, api in expected.items():
        if by_kind[kind][0]["apiVersion"] != api:
            error(f"{where}: {kind} apiVersion {by_kind[kind][0]['apiVersion']} != {api}")
    dep, svc, pdb = (by_kind[k][0] for k in ("Deployment", "Service", "PodDisruptionBudget"))

    tmpl = dep["spec"]["template"]
    pod_labels = tmpl.get("metadata", {}).get("labels", {})
    pod = tmpl["spec"]
    known_pod_fields = {"terminationGracePeriodSeconds", "enableServiceLinks",
                        "securityContext", "tolerations", "containers", "affinity",
                        "nodeSelector", "volumes", "priorityClassName",
                        "topologySpreadConstraints", "serviceAccountName"}
    if set(pod) - known_pod_fields:
        error(f"{where}: unexpected pod spec fields {sorted(set(pod) - known_pod_fields)}")
    if not subset(dep["spec"]["selector"].get("matchLabels", {}), pod_labels):
        error(f"{where}: Deployment selector does not match its pod labels")
    if not subset(svc["spec"].get("selector", {}), pod_labels):
        error(f"{where}: Service selector does not match the pod labels")
    if not subset(pdb["spec"].get("selector", {}).get("matchLabels", {}), pod_labels):
        error(f"{where}: PodDisruptionBudget selector does not match the pod labels")

    # One server container with a GPU limit.
    servers = [c for c in pod["containers"] if c["name"] == "attn-server"]
    if len(servers) != 1:
        error(f"{where}: no container named attn-server")
        return None
    c = servers[0]
    res = c.get("resources", {})
    gpu = res.get("limits", {}).get("nvidia.com/gpu")
    if not isinstance(gpu, int) or gpu < 1:
        error(f"{where}: limits.nvidia.com/gpu must be a positive integer, got {gpu!r}")
    if "nvidia.com/gpu" in res.get("requests", {}) and res["requests"]["nvidia.com/gpu"] != gpu:
        error(f"{where}: requests.nvidia.com/gpu must equal the limit (or be left out)")
    for r in ("cpu", "memory"):
        if r not in res.get("requests", {}):
            error(f"{where}: no {r} request")

    # Node selection by GPU Feature Discovery's product label.
    selects_product = "nvidia.com/gpu.product" in pod.get("nodeSelector", {})
    for term in (pod.get("affinity", {}).get("nodeAffinity", {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution", {})
                 .get("nodeSelectorTerms", [])):
        for expr in term.get("matchExpressions", []):
            if expr["key"] == "nvidia.com/gpu.product" and expr["operator"] == "In" and expr["values"]:
                selects_product = True
    if not selects_product:
        error(f"{where}: pod does not select nodes by nvidia.com/gpu.product")

    # Ports, env and probes.
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    if "grpc" not in ports:
        error(f"{where}: container has no port named grpc")
        return None
    port = ports["grpc"]
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    if env.get("ATTN_PORT") != str(port):
        error(f"{where}: ATTN_PORT={env.get('ATTN_PORT')!r} but the grpc port is {port}")
    unknown_env = {n for n in env if n.startswith("ATTN_")} - entrypoint_env_names()
    if unknown_env:
        error(f"{where}: env {sorted(unknown_env)} not read by deploy/docker/entrypoint.sh")
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        command = c.get(probe, {}).get("exec", {}).get("command", [])
        if command[-1:] != ["health"] or not command[0].endswith("/entrypoint.sh"):
            error(f"{where}: {probe} must run the entrypoint's health mode "
                  f"(entrypoint.sh health), got {command!r}")

    # TLS and a token, from Secrets mounted read-only.
    secret_volumes = {v["name"] for v in pod.get("volumes", []) if "secret" in v}
    secret_dirs = [m["mountPath"].rstrip("/") + "/" for m in c.get("volumeMounts", [])
                   if m.get("name") in secret_volumes and m.get("readOnly")]
    for name in ("ATTN_TLS_CERT", "ATTN_TLS_KEY", "ATTN_TOKEN_FILE"):
        path = env.get(name) or ""
        if not any(path.startswith(d) for d in secret_dirs):
            error(f"{where}: {name}={path!r} is not a file of a read-only Secret volume")
    if env.get("ATTN_INSECURE"):
        error(f"{where}: ATTN_INSECURE is set: the fleet must serve TLS with a token")

    # Graceful termination covers the drain.
    delay = int(env.get("ATTN_DRAIN_DELAY_S") or 0)
    drain = int(env.get("ATTN_DRAIN_TIMEOUT_S") or 0)
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if drain <= 0:
        error(f"{where}: ATTN_DRAIN_TIMEOUT_S is not set")
    if grace < delay + drain + 5:
        error(f"{where}: terminationGracePeriodSeconds {grace} < drain delay {delay}"
              f" + drain timeout {drain} + 5")

    # Image and server settings agree with the node profile of the pool.
    profile_path = os.path.join(ROOT, "deploy", pool, "node.env")
    if os.path.exists(profile_path):
        profile = read_env_file(profile_path)
        arch = profile.get("ATTN_CUDA_ARCH")
        # Kustomize cannot read VERSION: the overlay spells the tag, checked here.
        tag = f"{read_version()}-sm{arch}"
        if c["image"].rpartition(":")[2] != tag:
            error(f"{where}: image {c['image']} is not tagged {tag} (the VERSION file and "
                  f"ATTN_CUDA_ARCH of deploy/{pool}/node.env): set the overlay's newTag")
        for name in SERVER_SETTINGS:
            if profile.get(name) != env.get(name):
                error(f"{where}: {name}={env.get(name)!r} but deploy/{pool}/node.env "
                      f"has {profile.get(name)!r}")
        if str(grace) != profile.get("ATTN_STOP_TIMEOUT_S"):
            error(f"{where}: terminationGracePeriodSeconds {grace} != ATTN_STOP_TIMEOUT_S "
                  f"of deploy/{pool}/node.env")
    else:
        error(f"{where}: no node profile deploy/{pool}/node.env")
    uid = dockerfile_uid()
    sc = pod.get("securityContext", {})
    if not sc.get("runAsNonRoot") or str(sc.get("runAsUser")) != str(uid):
        error(f"{where}: pod must run as non-root UID {uid} (the Dockerfile's USER)")

    # Service: headless, gRPC port.
    if svc["spec"].get("clusterIP") != "None":
        error(f"{where}: Service must be headless (clusterIP: None)")
    svc_ports = svc["spec"].get("ports", [])
    if not any(p.get("targetPort") in ("grpc", port) and p.get("port") == port for p in svc_ports):
        error(f"{where}: Service does not expose the grpc port {port}")

    # PDB leaves room for a drain.
    spec = pdb["spec"]
    if ("maxUnavailable" in spec) == ("minAvailable" in spec):
        error(f"{where}: PDB needs exactly one of maxUnavailable/minAvailable")
    if isinstance(spec.get("minAvailable"), int) and spec["minAvailable"] >= dep["spec"].get("replicas", 1):
        error(f"{where}: PDB minAvailable blocks every eviction")
    return dep["spec"]["selector"]["matchLabels"], pod_labels


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json-out", help="write the rendered objects here (JSON array)")
    args = parser.parse_args()

    overlays_dir = os.path.join(K8S, "overlays")
    pools = sorted(d for d in os.listdir(overlays_dir)
                   if os.path.isdir(os.path.join(overlays_dir, d)))
    if not pools:
        raise SystemExit("no overlays under deploy/k8s/overlays")
    all_objects, selectors = [], {}
    for pool in pools:
        objects, tool = render(os.path.join(overlays_dir, pool))
        selectors[pool] = check_overlay(pool, objects)
        all_objects += objects
        print(f"k8s_check: {pool}: {tool} renders {len(objects)} objects: "
              + ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in objects))
    for a in pools:
        for b in pools:
            if a != b and selectors[a] and selectors[b] and subset(selectors[a][0], selectors[b][1]):
                error(f"overlay {a}'s selector also selects the pods of overlay {b}")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(all_objects, f, indent=1)
    for e in errors:
        print(f"FAIL: {e}", file=sys.stderr)
    print(f"k8s_check: {len(pools)} overlays, {len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
