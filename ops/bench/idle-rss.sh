#!/usr/bin/env bash
# Idle memory of the production shape: starts the release `api` and each worker binary against
# PostgreSQL + Redis (a scratch database, a fresh queue prefix), waits until each answers
# /health, lets it idle for IDLE_SECS (default 10, so periodic tasks have run), and prints each
# process's resident set (VmRSS) and peak (VmHWM). Targets (issue 18): api < 50 MB, each worker
# < 30 MB at idle. Build first: cargo build --release -p api --bin api -p workers --bins
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
REDIS=${REDIS:-redis://127.0.0.1:6379}
IDLE_SECS=${IDLE_SECS:-10}
DB=paygate_idle_rss
psql "$PG/postgres" -v ON_ERROR_STOP=1 -q -o /dev/null -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $DB" -qc "CREATE DATABASE $DB" >/dev/null
export PAYGATE_DATABASE_URL="$PG/$DB" PAYGATE_REDIS_URL="$REDIS"
export PAYGATE_QUEUE__PREFIX="idle-rss-$$" RUST_LOG=warn
export PAYGATE_WEBHOOKS__SECRET_KEY=${PAYGATE_WEBHOOKS__SECRET_KEY:-$("$BIN/ops" webhooks keygen)}
"$BIN/ops" migrate >/dev/null
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
port=18700
start() { # name, listen variable
  local name=$1 var=$2
  port=$((port + 1))
  env "$var=127.0.0.1:$port" "$BIN/$name" >/dev/null 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do
    curl -fs "http://127.0.0.1:$port/health" >/dev/null && return
    sleep 0.1
  done
  echo "$name did not answer /health on $port" >&2; exit 1
}
start api PAYGATE_LISTEN
names=(api)
for w in deposit-scanner confirmation-tracker settlement-converter payout-executor webhook-deliverer; do
  start "$w" PAYGATE_WORKER__LISTEN
  names+=("$w")
done
sleep "$IDLE_SECS"
printf '%-22s %10s %10s\n' binary "RSS MB" "peak MB"
for i in "${!pids[@]}"; do
  rss=$(awk '/VmRSS/ {print $2}' "/proc/${pids[$i]}/status")
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/${pids[$i]}/status")
  printf '%-22s %10.1f %10.1f\n' "${names[$i]}" "$(echo "$rss/1024" | bc -l)" "$(echo "$hwm/1024" | bc -l)"
done
