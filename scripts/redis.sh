#!/usr/bin/env bash
# Starts a local redis-server for development and tests if none answers on
# $RENDERBOX_REDIS (default 127.0.0.1:6379): noeviction, a maxmemory
# ($RENDERBOX_REDIS_MAXMEMORY, default 1gb) that the API keeps under with
# 503 queue_full, and append-only persistence without RDB snapshots, as
# deploy/redis.conf asks of production. Its directory is 0700 and its
# files 0600 (umask 077): the queue holds every tenant's inputs, outputs
# and job options. Idempotent.
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
umask 077
mkdir -p "$dir"
chmod 0700 "$dir"
redis-server --bind "$host" --port "$port" --dir "$dir" --daemonize yes \
  --appendonly yes --appendfsync everysec --save "" \
  --maxmemory "${RENDERBOX_REDIS_MAXMEMORY:-1gb}" --maxmemory-policy noeviction \
  --logfile "$dir/redis.log" --pidfile "$dir/redis.pid"
for _ in $(seq 50); do
  redis-cli -h "$host" -p "$port" ping >/dev/null 2>&1 && { echo "redis: started on $addr"; exit 0; }
  sleep 0.1
done
echo "redis: did not start; see $dir/redis.log" >&2
exit 1
