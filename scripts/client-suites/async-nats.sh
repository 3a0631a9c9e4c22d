#!/usr/bin/env bash
# Runs async-nats 0.51.0's own test suites against natsd (or nats-server, for comparison).
# Not part of .ci/run. See docs/client-suites.md ("async-nats 0.51.0").
#
#   scripts/client-suites/async-nats.sh [natsd|go] [SUITE...] [-- TEST-ARGS...]
#
# SUITE: jetstream_tests kv_tests object_store client_tests service_tests (default: all five).
# TEST-ARGS go to the libtest binaries (e.g. a name filter, --exact, --skip NAME).
# Env: WORK (default /tmp/asuite) holds the crate copy, the shim and the build; NATSD (default
# target/release/natsd of this repo, built if missing); GO_SERVER (default /usr/sbin/nats-server);
# THREADS (default 2); OUT (default $WORK/results) gets one log per suite and server.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
WORK=${WORK:-/tmp/asuite}
THREADS=${THREADS:-2}
OUT=${OUT:-$WORK/results}
GO_SERVER=${GO_SERVER:-/usr/sbin/nats-server}
NATSD=${NATSD:-$repo/target/release/natsd}

which=${1:-natsd}
shift || true
suites=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do suites+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#suites[@]} -eq 0 ] && suites=(jetstream_tests kv_tests object_store client_tests service_tests)

# 1. The crate with its tests, and the shim beside it as ../nats-server.
src=$(ls -d "$HOME"/.cargo/registry/src/index.crates.io-*/async-nats-0.51.0 2>/dev/null | head -1)
if [ -z "$src" ]; then
  # Not unpacked yet: let cargo fetch it through a throwaway crate.
  tmp=$(mktemp -d)
  (cd "$tmp" && cargo init -q --name fetch && cargo add -q async-nats@=0.51.0 && cargo fetch -q)
  rm -rf "$tmp"
  src=$(ls -d "$HOME"/.cargo/registry/src/index.crates.io-*/async-nats-0.51.0 | head -1)
fi
mkdir -p "$WORK" "$OUT"
if [ ! -d "$WORK/async-nats" ]; then
  cp -r "$src" "$WORK/async-nats"
  # The published Cargo.toml drops the path-only dev-dependency; put it back.
  python3 - "$WORK/async-nats/Cargo.toml" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
if "dev-dependencies.nats-server" not in s:
    s = s.replace("[dev-dependencies.chrono]",
                  '[dev-dependencies.nats-server]\npath = "../nats-server"\n\n[dev-dependencies.chrono]', 1)
open(p, "w").write(s)
PY
  # `jetstream { strict: true }` is a 2.10 key: nats-server 2.9.10 refuses the file ("unknown
  # field"), so every JetStream test would fail on both servers. Drop it from the copies.
  sed -i -E 's/strict: *true,? *//' "$WORK"/async-nats/tests/configs/*.conf
fi
if ! diff -rq "$here/nats-server-shim/src" "$WORK/nats-server/src" >/dev/null 2>&1; then
  rm -rf "$WORK/nats-server"
  cp -r "$here/nats-server-shim" "$WORK/nats-server"
fi

# 2. `nats-server` on PATH: natsd or the Go server.
bin="$WORK/bin-$which"
mkdir -p "$bin"
case "$which" in
  natsd)
    [ -x "$NATSD" ] || (cd "$repo" && cargo build --release)
    ln -sf "$NATSD" "$bin/nats-server" ;;
  go) ln -sf "$GO_SERVER" "$bin/nats-server" ;;
  *) echo "usage: $0 [natsd|go] [SUITE...] [-- TEST-ARGS...]" >&2; exit 2 ;;
esac

# 3. Build the suites, then run each binary from the crate root (the tests' configs are relative).
cd "$WORK/async-nats"
args=(); for s in "${suites[@]}"; do args+=(--test "$s"); done
cargo test -q --no-run "${args[@]}" 2>&1 | tail -2
status=0
for s in "${suites[@]}"; do
  exe=$(ls -t target/debug/deps/"$s"-* | grep -v '\.d$' | head -1)
  log="$OUT/$which-$s.log"
  # Test traffic stays on loopback: client::connect_domain dials demo.nats.io and
  # service::schemas downloads JSON schemas from the internet, so neither is ever run.
  skip=()
  [ "$s" = client_tests ] && skip=(--skip client::connect_domain)
  [ "$s" = service_tests ] && skip=(--skip service::schemas)
  echo "== $s against $which ($log)"
  PATH="$bin:$PATH" "$exe" --test-threads "$THREADS" "${skip[@]}" "$@" >"$log" 2>&1 || status=1
  grep -E '^test result:' "$log" || tail -3 "$log"
done
exit $status
