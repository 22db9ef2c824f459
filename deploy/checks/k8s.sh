#!/usr/bin/env bash
# Renders the Kustomize overlays (deploy/k8s/overlays/*) with a real
# kustomize (kubectl kustomize; Debian's kubernetes-client or newer), checks
# the project's policies on what they produce (k8s_check.py: selectors, GPU
# limits, node selection, probes, drain budget, agreement with the node
# profiles) and validates every object against the Kubernetes OpenAPI
# schemas (js/k8s_schema.mjs, kubernetes-models). No cluster is needed.
set -euo pipefail
# shellcheck source=deploy/checks/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tool /usr/bin/python3

rendered="$work_dir/k8s-rendered.json"
/usr/bin/python3 "$root/deploy/checks/k8s_check.py" --json-out "$rendered"
js="$(js_dir)"
(cd "$js" && node k8s_schema.mjs "$rendered")
