#!/usr/bin/env bash
# make bench: the sandbox lifecycle and every renderer against native runs,
# then (with Redis, a worker and the API started here) pdf-png end to end
# through the API against the direct sandbox run, and API intake. JSON lines
# on stdout; also saved to out/bench.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p out
# Intake measures the API, not the per-key rate limit or the queue bound.
API_ARGS="-rate 1000000 -burst 1000000 -max-queue-depth 1000000" LOGS=out/bench-logs source scripts/stack.sh
bin/bench -api "http://$addr" -key "$key" "$@" | tee out/bench.jsonl
