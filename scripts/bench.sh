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
# the floor; this stack serves only the benchmark's own documents); then
# warm again with the documents in an object store (SeaweedFS started
# here, API and worker with -blobs s3://…: the "storage":"s3" lines), with
# a summary: warm over cold, over native-warm, and s3 over redis. JSON
# lines on stdout; also saved to out/bench.jsonl. Extra arguments go to
# every bin/bench run.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p out
metrics=${WORKER_METRICS:-127.0.0.1:19091}

# The s3 lines' store: the tests' SeaweedFS (make setup-tests builds it),
# checked now rather than after the other phases' minutes.
weed_pinned=$(sed -n 's/^const PinnedSeaweedFS = "\(.*\)"/\1/p' internal/testenv/s3.go)
weed=/var/cache/renderbox/bin/weed-$weed_pinned
[ -x "$weed" ] || { echo "bench: SeaweedFS is missing at $weed (the s3 lines' store); make setup-tests builds it" >&2; exit 1; }

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
bench_api_args="-rate 1000000 -burst 1000000 -max-queue-depth 1000000 -max-queued-per-key 1000000"
# shellcheck source=scripts/stack.sh
API_ARGS="$bench_api_args -remote-content" \
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
  -only served -mode native-warm | tee -a out/bench.jsonl

# Documents in an object store: SeaweedFS ("weed mini", as the tests run
# it) on loopback ports of its own, with a random identity, its data
# removed at exit; the API and a gVisor worker with its default pool
# restarted with -blobs, and the warm lines measured again.
echo "starting SeaweedFS and the API and worker with -blobs s3://…"
s3dir=$(mktemp -d /tmp/renderbox-bench-s3.XXXXXX)
weed_pid=
bench_stop() {
  [ -z "$weed_pid" ] || { kill -TERM "$weed_pid" 2>/dev/null; wait "$weed_pid" 2>/dev/null || true; }
  rm -rf "$s3dir"
  stack_stop
}
trap bench_stop EXIT
AWS_ACCESS_KEY_ID=rbx$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
AWS_SECRET_ACCESS_KEY=$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')
export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
printf '{"identities":[{"name":"renderbox","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","Write","List","Tagging"]}]}' \
  "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" > "$s3dir/s3.json"
mkdir -m 0700 "$s3dir/data"
s3=127.0.0.1:18333
(cd "$s3dir" && exec "$weed" mini -dir="$s3dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
  -s3.config="$s3dir/s3.json" -bucket=renderbox-bench -master.telemetry=false \
  -webdav=false -admin.ui=false -s3.port.iceberg=0 -s3.port.lance=0 \
  -s3.port=18333 -s3.port.grpc=18334 -master.port=18335 -master.port.grpc=18336 \
  -volume.port=18337 -volume.port.grpc=18338 -filer.port=18339 -filer.port.grpc=18340 \
  -filer.localSocket="$s3dir/filer.sock" -s3.localSocket="$s3dir/s3.sock") > "$logs/weed.log" 2>&1 &
weed_pid=$!
for _ in $(seq 300); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$s3/" || true)" != 000 ] && break
  kill -0 "$weed_pid" 2>/dev/null || { tail -20 "$logs/weed.log"; echo "bench: SeaweedFS exited at start" >&2; exit 1; }
  sleep 0.2
done
blobs="s3://renderbox-bench/bench?endpoint=$s3&region=us-east-1&secure=false"
# The API's /readyz checks the store: it answers once the bucket does.
# shellcheck disable=SC2086 # a list of flags
stack_restart_api -blobs "$blobs" $bench_api_args
stack_restart_worker "$logs/worker-s3.log" -blobs "$blobs"
bin/bench -api "http://$addr" -key "$key" -worker-metrics "http://$metrics/metrics" "$@" \
  -only served -mode warm -storage s3 -cold out/bench.jsonl | tee -a out/bench.jsonl
