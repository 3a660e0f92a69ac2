# Sourced by run.sh and bench.sh: starts Redis (if none answers), a worker
# (after its start-up checks and self-test) and the API, creates an API key,
# and stops the worker and API when the calling script exits.
# Sets: addr, key, logs. Needs bin/ (make build).
addr=${RENDERBOX_ADDR:-127.0.0.1:8080}
export RENDERBOX_REDIS=${RENDERBOX_REDIS:-127.0.0.1:6379}
db=${RENDERBOX_DB:-/var/lib/renderbox/api/ledger.db}
logs=${LOGS:-out/logs}
mkdir -p "$logs"
mkdir -p -m 0700 "$(dirname "$db")"  # the ledger and webhook.key: owner only

bash scripts/redis.sh

stack_pids=()
stack_stop() {
  for p in "${stack_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stack_stop EXIT

bin/worker serve -redis "$RENDERBOX_REDIS" -metrics-addr "" > "$logs/worker.log" 2>&1 &
stack_pids+=($!)
bin/api serve -addr "$addr" -redis "$RENDERBOX_REDIS" -db "$db" ${API_ARGS:-} > "$logs/api.log" 2>&1 &
stack_pids+=($!)

echo "waiting for the worker's start-up checks and self-test…"
for _ in $(seq 120); do
  grep -q '"worker ready"' "$logs/worker.log" && break
  if ! kill -0 "${stack_pids[0]}" 2>/dev/null; then cat "$logs/worker.log"; echo "the worker refused to start" >&2; exit 1; fi
  sleep 0.5
done
grep -q '"worker ready"' "$logs/worker.log" || { cat "$logs/worker.log"; echo "the worker did not become ready" >&2; exit 1; }
grep -E '^(PASS|FAIL)' "$logs/worker.log" || true
for _ in $(seq 50); do curl -fsS "http://$addr/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
curl -fsS "http://$addr/readyz" >/dev/null || { cat "$logs/api.log"; echo "the API is not ready" >&2; exit 1; }

key=$(bin/api keys create -db "$db" "$(basename "$0" .sh)-$(date +%s)" 2>/dev/null)
