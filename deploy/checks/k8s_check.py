#!/usr/bin/python3
"""Renders attnserve's Kustomize overlays offline and checks what they produce.

Rendering: a small Kustomize implementation for the features deploy/k8s uses
(resources, namePrefix/nameSuffix, labels, images, strategic-merge patches);
any other Kustomization field is an error, so it cannot silently render
something else than `kubectl kustomize` would. When a real kustomize is on
PATH (`kustomize` or a `kubectl` that has `kustomize`), its output must match.

Checks, per overlay (exit status 1 on any failure):
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
import copy
import json
import os
import re
import shutil
import subprocess
import sys

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
K8S = os.path.join(ROOT, "deploy", "k8s")

KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "resources", "namePrefix",
                        "nameSuffix", "labels", "images", "patches", "namespace"}
# Strategic-merge keys of the lists the patches touch.
MERGE_KEYS = {"containers": "name", "initContainers": "name", "env": "name",
              "ports": "containerPort", "volumes": "name",
              "volumeMounts": "mountPath"}

# Server settings that a pool's Deployment and its single-node profile
# (deploy/<pool>/node.env) must set alike.
SERVER_SETTINGS = ("ATTN_BACKEND", "ATTN_MAX_MESSAGE_BYTES", "ATTN_MAX_TOKENS_PER_REQUEST",
                   "ATTN_QUEUE_CAPACITY", "ATTN_DRAIN_DELAY_S", "ATTN_DRAIN_TIMEOUT_S",
                   "ATTN_LOG_LEVEL")

errors = []


def error(msg):
    errors.append(msg)


# ---------------------------------------------------------------- rendering

def load_yaml_docs(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def strategic_merge(base, patch):
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            if value is None:
                out.pop(key, None)
            elif key in out and key in MERGE_KEYS and isinstance(value, list):
                out[key] = merge_list(out[key], value, MERGE_KEYS[key])
            elif key in out:
                out[key] = strategic_merge(out[key], value)
            else:
                out[key] = copy.deepcopy(value)
        return out
    return copy.deepcopy(patch)


def merge_list(base, patch, key):
    out = [copy.deepcopy(item) for item in base]
    for item in patch:
        for i, existing in enumerate(out):
            if existing.get(key) == item.get(key):
                out[i] = strategic_merge(existing, item)
                break
        else:
            out.append(copy.deepcopy(item))
    return out


def label_paths(obj, include_selectors, include_templates):
    """The (path, create) pairs Kustomize's labels transformer writes."""
    paths = [(("metadata", "labels"), True)]
    kind = obj.get("kind")
    if include_selectors:
        if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"):
            paths.append((("spec", "selector", "matchLabels"), True))
        elif kind == "Service":
            paths.append((("spec", "selector"), True))
        elif kind == "PodDisruptionBudget":
            paths.append((("spec", "selector", "matchLabels"), False))
    if (include_selectors or include_templates) and kind in (
            "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        paths.append((("spec", "template", "metadata", "labels"), True))
    return paths


def set_labels(obj, pairs, include_selectors, include_templates):
    for path, create in label_paths(obj, include_selectors, include_templates):
        node = obj
        for part in path[:-1]:
            if part not in node:
                if not create:
                    break
                node[part] = {}
            node = node[part]
        else:
            if path[-1] not in node:
                if not create:
                    continue
                node[path[-1]] = {}
            if node[path[-1]] is None:
                node[path[-1]] = {}
            node[path[-1]].update({k: str(v) for k, v in pairs.items()})


def pod_containers(obj):
    spec = obj.get("spec", {}).get("template", {}).get("spec", {})
    return spec.get("containers", []) + spec.get("initContainers", [])


def set_images(obj, images):
    for container in pod_containers(obj):
        image = container.get("image", "")
        name = re.split(r"[@:]", image.split("/")[-1])[0]
        name = "/".join(image.split("/")[:-1] + [name])
        for rule in images:
            if rule["name"] == name:
                new = rule.get("newName", name)
                if "digest" in rule:
                    new += "@" + rule["digest"]
                elif "newTag" in rule:
                    new += ":" + str(rule["newTag"])
                container["image"] = new


def render(directory):
    path = os.path.join(directory, "kustomization.yaml")
    if not os.path.exists(path):
        raise SystemExit(f"{directory}: no kustomization.yaml")
    (kust,) = load_yaml_docs(path)
    unknown = set(kust) - KUSTOMIZATION_FIELDS
    if unknown:
        raise SystemExit(f"{path}: fields this renderer does not implement: "
                         f"{sorted(unknown)} (extend deploy/checks/k8s_check.py)")
    if kust.get("kind") != "Kustomization":
        raise SystemExit(f"{path}: kind must be Kustomization")
    objects = []
    for res in kust.get("resources", []):
        res_path = os.path.normpath(os.path.join(directory, res))
        if os.path.isdir(res_path):
            objects += render(res_path)
        else:
            objects += load_yaml_docs(res_path)
    for patch in kust.get("patches", []):
        (body,) = load_yaml_docs(os.path.join(directory, patch["path"]))
        target = patch.get("target", {"kind": body["kind"],
                                      "name": body["metadata"]["name"]})
        hits = [o for o in objects
                if o["kind"] == target.get("kind", o["kind"])
                and o["metadata"]["name"] == target.get("name", o["metadata"]["name"])]
        if not hits:
            raise SystemExit(f"{directory}: patch {patch['path']} matches nothing")
        for obj in hits:
            merged = strategic_merge(obj, {k: v for k, v in body.items()
                                           if k not in ("apiVersion", "kind", "metadata")})
            obj.clear()
            obj.update(merged)
    for obj in objects:
        meta = obj.setdefault("metadata", {})
        meta["name"] = kust.get("namePrefix", "") + meta["name"] + kust.get("nameSuffix", "")
        if "namespace" in kust:
            meta["namespace"] = kust["namespace"]
        for rule in kust.get("labels", []):
            set_labels(obj, rule["pairs"], rule.get("includeSelectors", False),
                       rule.get("includeTemplates", False))
        set_images(obj, kust.get("images", []))
    return objects


def canonical(value):
    """Orders lists of named maps so two renderers' outputs compare equal."""
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        items = [canonical(v) for v in value]
        if all(isinstance(v, dict) and "name" in v for v in items):
            items.sort(key=lambda v: str(v["name"]))
        return items
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return value


def real_kustomize(directory):
    if shutil.which("kustomize"):
        cmd = ["kustomize", "build", directory]
    elif shutil.which("kubectl"):
        cmd = ["kubectl", "kustomize", directory]
    else:
        return None
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        error(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")
        return None
    return [d for d in yaml.safe_load_all(proc.stdout) if d is not None], " ".join(cmd[:2])


def key_of(obj):
    return (obj["apiVersion"], obj["kind"], obj["metadata"]["name"])


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
        directory = os.path.join(overlays_dir, pool)
        objects = render(directory)
        real = real_kustomize(directory)
        if real is not None:
            real_objects, tool = real
            mine = {key_of(o): canonical(o) for o in objects}
            theirs = {key_of(o): canonical(o) for o in real_objects}
            if mine != theirs:
                for k in sorted(set(mine) | set(theirs)):
                    if mine.get(k) != theirs.get(k):
                        error(f"overlay {pool}: {tool} renders {k} differently:\n"
                              f"  {tool}: {json.dumps(theirs.get(k), sort_keys=True)}\n"
                              f"  k8s_check.py: {json.dumps(mine.get(k), sort_keys=True)}")
            else:
                print(f"k8s_check: {pool}: matches {tool}")
        selectors[pool] = check_overlay(pool, objects)
        all_objects += objects
        print(f"k8s_check: {pool}: {len(objects)} objects: "
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
