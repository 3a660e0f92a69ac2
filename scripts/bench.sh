#!/usr/bin/env bash
# make bench: the sandbox lifecycle and every renderer against native runs,
# then, with Redis, a worker and the API started here: the served lines
# (every family's renderers through the API) with the worker's pool
# off, the url line (a page of 20 images by url against the same as a ZIP)
# and pdf-png end to end against the direct sandbox run; then, with the
# worker stopped, API intake (the API's work alone, not the cores left over
# by a worker rendering the jobs as they come); then a worker with its pool
# on and the served lines measured again (warm); then once more with its
# pool on and no gVisor (native-warm: worker serve -unsafe-native-bench,
# the floor; this stack serves only the benchmark's own documents), with a
# summary: warm over cold and over native-warm. JSON lines on stdout;
# also saved to out/bench.jsonl. Extra arguments go to every bin/bench run.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p out
metrics=${WORKER_METRICS:-127.0.0.1:19091}

# Cold: the worker's pool off. A worker without a pool has no -pool-size
# flag; then it runs both modes as it is, and the warm lines are cold too.
cold_args=()
if [[ $(bin/worker serve -h 2>&1 || true) == *-pool-size* ]]; then
  cold_args=(-pool-size none)
else
  echo "bench: this worker has no -pool-size (no pool yet): the warm lines will be cold too" >&2
fi

# Intake measures the API, not the per-key rate limit or the queue bound.
# The url line's page is served by bin/bench on 127.0.0.3, which the
# worker's broker is allowed to reach (every address here is private).
# shellcheck source=scripts/stack.sh
API_ARGS="-rate 1000000 -burst 1000000 -max-queue-depth 1000000 -max-queued-per-key 1000000 -remote-content" \
  WORKER_ARGS="${cold_args[*]} -remote-content -remote-allow 127.0.0.3/32" \
  WORKER_METRICS=$metrics LOGS=out/bench-logs source scripts/stack.sh
bin/bench -api "http://$addr" -key "$key" -worker-metrics "http://$metrics/metrics" -mode cold -intake 0 "$@" | tee out/bench.jsonl

# Intake with no worker: the jobs wait, and are canceled afterwards.
echo "stopping the worker to measure intake…"
kill -TERM "$worker_pid" 2>/dev/null || true
wait "$worker_pid" 2>/dev/null || true
bin/bench -api "http://$addr" -key "$key" "$@" -only intake | tee -a out/bench.jsonl  # -only last: it wins

# Warm: the worker's default pool. Before each phase bin/bench polls the
# worker's /metrics until every family's pool is full (renderbox_pool_idle
# against renderbox_pool_size).
echo "starting the worker with its pool on…"
stack_start_worker "$logs/worker-warm.log"
bin/bench -api "http://$addr" -key "$key" -worker-metrics "http://$metrics/metrics" "$@" \
  -only served -mode warm | tee -a out/bench.jsonl

# The floor: the same agents and renderers booted ahead by the same pool,
# as native processes (docs/security.md, "The unsafe native benchmark
# floor"). Only this benchmark's jobs reach this worker. Ten of each
# family, so that each of the ten serial jobs finds its renderer booted:
# natively every sandbox is a boot (no checkpoint to restore), and with
# the default sizes serial office-pdf jobs waited 1.2 s each for one.
echo "restarting the worker natively, WITHOUT gVisor (the native-warm floor)…"
stack_restart_worker "$logs/worker-native.log" -unsafe-native-bench \
  -pool-size chromium=10,office=10,pdf=10,light=10 -pool-memory chromium=4G,office=4G,pdf=1G,light=1G
bin/bench -api "http://$addr" -key "$key" -worker-metrics "http://$metrics/metrics" "$@" \
  -only served -mode native-warm -cold out/bench.jsonl | tee -a out/bench.jsonl
