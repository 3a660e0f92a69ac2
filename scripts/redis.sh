#!/usr/bin/env bash
# Starts a local redis-server for development and tests if none answers on
# $RENDERBOX_REDIS (default 127.0.0.1:6379): noeviction and append-only
# persistence, as deploy/redis.conf asks of production. Idempotent.
set -euo pipefail
addr=${RENDERBOX_REDIS:-127.0.0.1:6379}
host=${addr%:*}
port=${addr##*:}
if redis-cli -h "$host" -p "$port" ping >/dev/null 2>&1; then
  echo "redis: already answering on $addr"
  exit 0
fi
command -v redis-server >/dev/null || { echo "redis: redis-server is missing (make setup)" >&2; exit 1; }
dir=${RENDERBOX_REDIS_DIR:-/var/lib/renderbox/redis}
mkdir -p "$dir"
redis-server --bind "$host" --port "$port" --dir "$dir" --daemonize yes \
  --appendonly yes --appendfsync everysec --maxmemory-policy noeviction \
  --logfile "$dir/redis.log" --pidfile "$dir/redis.pid"
for _ in $(seq 50); do
  redis-cli -h "$host" -p "$port" ping >/dev/null 2>&1 && { echo "redis: started on $addr"; exit 0; }
  sleep 0.1
done
echo "redis: did not start; see $dir/redis.log" >&2
exit 1
