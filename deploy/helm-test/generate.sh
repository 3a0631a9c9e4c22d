#!/usr/bin/env bash
# Regenerate deploy/helm-test/pods.json: the chart's `helm test` hook pods
# (helm/templates/tests/*.yaml) as `helm template` renders them with the JetStream cluster values
# (helm/ci/jetstream-cluster.yaml; release "natsd", namespace "default"), converted to JSON, and
# the nats.conf of that render's ConfigMap ("config"). tests/k8s_sim/helm_test.rs runs the pods'
# commands with their env inside the simulated cluster, whose JetStream pods run that config, so
# `cargo test` needs neither helm nor the network; deploy/validate.sh checks the file equals the
# render. Never edit pods.json by hand: change helm/ and run `bash deploy/helm-test/generate.sh`.
# `generate.sh --check FILE` renders into FILE and fails if deploy/helm-test/pods.json differs.
set -euo pipefail
cd "$(dirname "$0")/../.."
TOOLS=${NATSD_K8S_TOOLS:-/tmp/natsd-k8s-tools}
[ -x "$TOOLS/helm/helm" ] && [ -x "$TOOLS/kv/bin/python" ] || bash deploy/validate.sh --install-only >/dev/null

dest=deploy/helm-test/pods.json
if [ "${1:-}" = "--check" ]; then
  dest=${2:?usage: generate.sh --check FILE}
fi
render=$(mktemp)
trap 'rm -f "$render"' EXIT
"$TOOLS/helm/helm" template natsd helm --namespace default --kube-version 1.30.0 \
  -f helm/ci/jetstream-cluster.yaml \
  --show-only templates/tests/request-reply.yaml --show-only templates/tests/jetstream.yaml \
  --show-only templates/configmap.yaml >"$render"
# pyyaml lives in the kubernetes-validate venv deploy/validate.sh installs
"$TOOLS/kv/bin/python" - "$render" "$dest" <<'PY'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
pods = [d for d in docs if d["kind"] == "Pod"]
maps = [d for d in docs if d["kind"] == "ConfigMap"]
assert len(pods) == 2 and len(maps) == 1, [d.get("kind") for d in docs]
doc = {
    "generated": "by deploy/helm-test/generate.sh: helm template natsd helm --namespace default "
                 "-f helm/ci/jetstream-cluster.yaml, the helm test hook pods and the server "
                 "config. Do not edit.",
    "pods": pods,
    "config": maps[0]["data"]["nats.conf"],
}
with open(sys.argv[2], "w") as f:
    json.dump(doc, f, indent=2, sort_keys=True)
    f.write("\n")
PY

if [ "${1:-}" = "--check" ]; then
  diff -u deploy/helm-test/pods.json "$dest"
fi
