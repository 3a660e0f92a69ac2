# shellcheck shell=bash
# Sourced by run.sh and bench.sh: starts Redis (if none answers), a worker
# (after its start-up checks and self-test) and the API, creates an API key,
# and when the calling script exits stops the worker and API, revokes the
# key (its secret was only ever in this shell) and says where the logs are.
# Redis is left running, as scripts/redis.sh leaves it.
# Takes (all optional): WORKER_ARGS and API_ARGS, extra flags for each;
# WORKER_METRICS, the worker's -metrics-addr (off unless set); LOGS;
# KEY_NAME, the key's name before its timestamp (default: the script's).
# Sets: addr, key, key_id, logs, worker_pid. Needs bin/ (make build).
# stack_restart_worker LOGFILE FLAGS… drains the worker and starts another
# with other flags (bench.sh: pool off, then on); stack_restart_api FLAGS…
# does the same for the API (bench.sh: documents in an object store).
addr=${RENDERBOX_ADDR:-127.0.0.1:8080}
export RENDERBOX_REDIS=${RENDERBOX_REDIS:-127.0.0.1:6379}
db=${RENDERBOX_DB:-/var/lib/renderbox/api/ledger.db}
logs=${LOGS:-out/logs}
mkdir -p "$logs"
logs=$(cd "$logs" && pwd) # absolute: it is printed for whoever reads it from elsewhere
# -m applies to the deepest directory only, the one that must be the owner's.
# shellcheck disable=SC2174
mkdir -p -m 0700 "$(dirname "$db")"  # the ledger and webhook.key: owner only

bash scripts/redis.sh

# Kept: `VAR=… source stack.sh` sets VAR only while this file runs.
worker_metrics=${WORKER_METRICS:-}
stack_pids=()
worker_pid=
key_id=
stack_stop() {
  for p in "${stack_pids[@]}" $worker_pid; do kill -TERM "$p" 2>/dev/null || true; done
  # shellcheck disable=SC2086 # worker_pid: one pid or none
  wait "${stack_pids[@]}" $worker_pid 2>/dev/null || true
  if [ -n "$key_id" ]; then
    if bin/api keys revoke -db "$db" "$key_id" >/dev/null; then
      echo "revoked this run's API key $key_id"
    else
      echo "could not revoke this run's API key: bin/api keys revoke -db $db $key_id" >&2
    fi
  fi
  echo "logs: $logs/worker.log, $logs/api.log"
}
trap stack_stop EXIT

stack_start_worker() { # LOGFILE FLAGS…: start a worker, return once it is ready
  local log=$1
  shift
  bin/worker serve -redis "$RENDERBOX_REDIS" -metrics-addr "$worker_metrics" "$@" > "$log" 2>&1 &
  worker_pid=$!
  echo "waiting for the worker's start-up checks and self-test…"
  for _ in $(seq 240); do
    grep -q '"worker ready"' "$log" && break
    if ! kill -0 "$worker_pid" 2>/dev/null; then cat "$log"; echo "the worker refused to start" >&2; exit 1; fi
    sleep 0.5
  done
  grep -q '"worker ready"' "$log" || { cat "$log"; echo "the worker did not become ready" >&2; exit 1; }
  # The start-up checks, from the worker's JSON log.
  grep '"msg":"start-up check"' "$log" | sed -n 's/.*"check":"\([^"]*\)","verdict":"\([^"]*\)","detail":"\([^"]*\)".*/\2  \1  \3/p' || true
}

stack_restart_worker() { # LOGFILE FLAGS…: drain the worker, then start another
  kill -TERM "$worker_pid" 2>/dev/null || true
  wait "$worker_pid" 2>/dev/null || true
  stack_start_worker "$@"
}

stack_start_api() { # FLAGS…: start the API, return once /readyz answers
  bin/api serve -addr "$addr" -redis "$RENDERBOX_REDIS" -db "$db" "$@" >> "$logs/api.log" 2>&1 &
  stack_pids=($!)
  for _ in $(seq 150); do curl -fsS "http://$addr/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
  curl -fsS "http://$addr/readyz" >/dev/null || { cat "$logs/api.log"; echo "the API is not ready" >&2; exit 1; }
}

stack_restart_api() { # FLAGS…: stop the API, then start another
  kill -TERM "${stack_pids[@]}" 2>/dev/null || true
  wait "${stack_pids[@]}" 2>/dev/null || true
  stack_start_api "$@"
}

# shellcheck disable=SC2086 # WORKER_ARGS and API_ARGS are lists of flags
stack_start_worker "$logs/worker.log" ${WORKER_ARGS:-}
: > "$logs/api.log"
# shellcheck disable=SC2086
stack_start_api ${API_ARGS:-}

# shellcheck disable=SC2034 # key is for the script that sources this one
key=$(bin/api keys create -db "$db" "${KEY_NAME:-$(basename "$0" .sh)}-$(date +%s)" 2>"$logs/key.txt")
# "created key ID (NAME); the secret below is shown once:" on stderr.
key_id=$(sed -n 's/^created key \([^ ]*\) .*/\1/p' "$logs/key.txt")
rm -f "$logs/key.txt"
[ -n "$key_id" ] || echo "the key's id was not printed; it stays active: bin/api keys list -db $db" >&2
