# Sourced by the CI checks that talk to the service from outside (.ci/schemathesis,
# .ci/clients/run): `serve_embedded` builds `ops`, starts `ops serve` on the embedded default in a
# fresh working directory on a free port with rate limits off, waits until it answers, and sets
# BASE (its URL), KEY (the demo test key it printed) and SERVE_DIR; the server is stopped and the
# directory removed when the calling script exits.

serve_embedded() {
  cargo build -q -p ops
  local ops="$PWD/target/debug/ops" port
  SERVE_DIR=$(mktemp -d)
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # Rate limits off: the checks send thousands of requests a minute with one key.
  (cd "$SERVE_DIR" && PAYGATE_LISTEN="127.0.0.1:$port" PAYGATE_RATE_LIMITS__ENABLED=false RUST_LOG=warn \
    exec "$ops" serve >serve.log 2>&1) &
  SERVE_PID=$!
  trap 'kill "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null; rm -rf "$SERVE_DIR"' EXIT
  BASE="http://127.0.0.1:$port"
  KEY=""
  for _ in $(seq 1 120); do
    KEY=$(grep -o 'sk_test_[A-Za-z0-9_]*' "$SERVE_DIR/serve.log" | head -n1 || true)
    [ -n "$KEY" ] && curl -sf "$BASE/health" >/dev/null && return 0
    kill -0 "$SERVE_PID" 2>/dev/null || { cat "$SERVE_DIR/serve.log"; die "ops serve exited"; }
    sleep 0.5
  done
  cat "$SERVE_DIR/serve.log"
  die "ops serve printed no test key or never answered /health"
}
