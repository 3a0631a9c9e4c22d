#!/usr/bin/env bash
# Runs the nats-py client's own upstream test suite (nats.py repository, nats/tests/) against
# natsd or against the reference nats-server 2.9.10, on loopback. NOT part of .ci/run.
#
#   scripts/client-suites/nats-py.sh [natsd|go] [pytest args...]
#
# Needs NATS_PY_TESTS: a directory holding the upstream test files (utils.py, test_js.py,
# test_client.py, test_micro_service.py, ...), e.g. `nats/tests` of a nats.py checkout at the
# tag matching tests/python/requirements.txt (v2.16.0). They are not vendored here (upstream
# code), and this machine cannot download them. Everything else is laid out by this script
# under $WORK (default /tmp/natspy-suite): a venv with the pinned nats-py and pytest, fresh test
# certificates (CA, server cert for 127.0.0.1/localhost, client cert), the config files the
# helpers name (conf/js-limits.conf, conf/no_auth_user.conf, conf/tls_handshake_first.conf),
# and a PATH directory whose `nats-server` is natsd's release build (or /usr/sbin/nats-server).
#
# The helpers start servers on fixed ports (4222-4225, 8222-8225, 6223-6225, 4555): run one
# suite at a time, nothing else on those ports. Default pytest args: test_js.py test_client.py.
set -euo pipefail

target="${1:-natsd}"
shift || true
repo="$(cd "$(dirname "$0")/../.." && pwd)"
work="${WORK:-/tmp/natspy-suite}"
tests_src="${NATS_PY_TESTS:?set NATS_PY_TESTS to the upstream nats/tests directory}"

mkdir -p "$work"
if [ ! -x "$work/venv/bin/python" ]; then
  python3 -m venv "$work/venv"
  "$work/venv/bin/pip" install -q -r "$repo/tests/python/requirements.txt"
fi
# test_client_nkeys.py skips everything without the Python nkeys package.
"$work/venv/bin/python" -c 'import nkeys' 2>/dev/null || "$work/venv/bin/pip" install -q nkeys==0.2.1

# Layout: $work/nats/tests is the `tests` package the upstream files import (`from tests.utils
# import *`); the suite runs from $work/nats, where some tests open pyproject.toml/README.md.
# tls_handshake_first.conf names certs as ./nats/tests/certs/..., hence the nats -> . link.
root="$work/nats"
mkdir -p "$root/tests/conf" "$root/tests/certs"
cp "$tests_src"/*.py "$root/tests/"
# The nkeys/JWT fixtures (nkeys_server.conf, resolver_preload.conf, *.creds, *.nk).
[ -d "$tests_src/nkeys" ] && cp -r "$tests_src/nkeys" "$root/tests/"
touch "$root/tests/__init__.py"
[ -e "$root/nats" ] || ln -s . "$root/nats"
printf '[project]\nname = "placeholder"\n' > "$root/pyproject.toml"
printf 'placeholder read by test_object_multi_files\n' > "$root/README.md"

certs="$root/tests/certs"
if [ ! -f "$certs/client-key.pem" ]; then
  (
    cd "$certs"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=natspy-test-ca \
      -keyout ca-key.pem -out ca.pem 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout server-key.pem -out server.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 3650 \
      -extfile server.ext -out server-cert.pem 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj /CN=natspy-client -keyout client-key.pem -out client.csr 2>/dev/null
    # Extensions make it an X.509 v3 certificate: rustls (natsd) refuses v1 ones, Go accepts them.
    printf 'extendedKeyUsage=clientAuth\n' > client.ext
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 3650 \
      -extfile client.ext -out client-cert.pem 2>/dev/null
  )
fi

cat > "$root/tests/conf/js-limits.conf" <<'CONF'
# Account A with JetStream limits; unauthenticated clients are user foo of A.
jetstream: { domain: "test-domain" }
no_auth_user: "foo"
accounts: {
  A {
    users: [{ user: "foo" }]
    jetstream: {
      max_mem: 64MB
      max_file: 32MB
      max_streams: 10
      max_consumers: 20
      max_ack_pending: 100
      memory_max_stream_bytes: 2048
      store_max_stream_bytes: 4096
      max_stream_bytes: true
    }
  }
}
CONF

cat > "$root/tests/conf/no_auth_user.conf" <<'CONF'
# Two accounts; anonymous clients are foo (account a), bar may only use "bar".
port: 4555
accounts {
  a { users = [ { user: foo, pass: foo, permissions: {
        subscribe: { allow: ["foo", "_INBOX.>"], deny: ["bar"] }
        publish:   { allow: ["foo", "_INBOX.>"], deny: ["bar"] } } } ] }
  b { users = [ { user: bar, pass: bar, permissions: {
        subscribe: { allow: ["bar"], deny: [">"] }
        publish:   { allow: ["bar"], deny: [">"] } } } ] }
}
no_auth_user = "foo"
CONF

cat > "$root/tests/conf/tls_handshake_first.conf" <<'CONF'
port: 4224
tls {
  cert_file: "./nats/tests/certs/server-cert.pem"
  key_file: "./nats/tests/certs/server-key.pem"
  ca_file: "./nats/tests/certs/ca.pem"
  verify: true
}
CONF

bin="$work/bin-$target"
mkdir -p "$bin"
case "$target" in
  natsd)
    # NATSD_BIN: an already built natsd (e.g. target/debug/natsd) instead of a release build.
    if [ -n "${NATSD_BIN:-}" ]; then
      ln -sf "$NATSD_BIN" "$bin/nats-server"
    else
      (cd "$repo" && cargo build --release -q)
      ln -sf "$repo/target/release/natsd" "$bin/nats-server"
    fi
    ;;
  go) ln -sf /usr/sbin/nats-server "$bin/nats-server" ;;
  *) echo "usage: $0 [natsd|go] [pytest args...]" >&2; exit 2 ;;
esac

cd "$root"
if [ "$#" -eq 0 ]; then set -- tests/test_js.py tests/test_client.py; fi
PATH="$bin:$PATH" exec "$work/venv/bin/python" -m pytest -p no:cacheprovider -q -rA "$@"
