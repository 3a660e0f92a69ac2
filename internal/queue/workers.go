package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Worker heartbeats: each worker writes its record (workerKey, a JSON
// WorkerInfo with an expiry) and its last beat in workersKey, a sorted set
// scored by Redis's own clock, so that ages are measured on one clock
// whatever the hosts' clocks say.
const (
	workersKey = prefix + "workers"
	// WorkerRecordTTL is how long a worker's record outlives its last
	// heartbeat: a worker that died stays listed, with its age, that long.
	WorkerRecordTTL = 5 * time.Minute
)

func workerKey(id string) string { return prefix + "worker:" + id }

// WorkerInfo is what a worker says of itself in each heartbeat. Its JSON
// is also part of GET /v1/workers (openapi.yaml, Worker).
type WorkerInfo struct {
	// ID is unique per worker process.
	ID string `json:"id"`
	// Name is the worker's -name (its hostname by default).
	Name         string    `json:"name"`
	Host         string    `json:"host"`
	RootfsDigest string    `json:"rootfs_digest"`
	RunscVersion string    `json:"runsc_version"`
	Concurrency  int       `json:"concurrency"`
	PoolFamilies []string  `json:"pool_families"`
	StartedAt    time.Time `json:"started_at"`
	// UnsafeNativeBench says the worker runs its jobs natively, without
	// gVisor (worker serve -unsafe-native-bench): a benchmark floor that
	// must never take untrusted input. Absent otherwise.
	UnsafeNativeBench bool `json:"unsafe_native_bench,omitempty"`
}

// WorkerSeen is a worker's record as read back, with its last heartbeat.
type WorkerSeen struct {
	WorkerInfo
	LastHeartbeat time.Time
	// Age is how long ago the last heartbeat was, by Redis's clock.
	Age time.Duration
}

// redisNowMs is Lua that sets now to Redis's clock in milliseconds.
const redisNowMs = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

var heartbeatScript = redis.NewScript(redisNowMs + `
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
return now`)

// Heartbeat records that the worker described by info is alive now.
func (q *Queue) Heartbeat(ctx context.Context, info WorkerInfo) error {
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	err = heartbeatScript.Run(ctx, q.rdb, []string{workersKey, workerKey(info.ID)},
		b, WorkerRecordTTL.Milliseconds(), info.ID).Err()
	if err != nil {
		return fmt.Errorf("worker heartbeat: %w", err)
	}
	return nil
}

// RemoveWorker deletes worker id's heartbeat (a worker that drains).
func (q *Queue) RemoveWorker(ctx context.Context, id string) error {
	_, err := q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, workersKey, id)
		p.Del(ctx, workerKey(id))
		return nil
	})
	if err != nil {
		return fmt.Errorf("removing worker %s's heartbeat: %w", id, err)
	}
	return nil
}

var aliveScript = redis.NewScript(redisNowMs + `
return redis.call('ZCOUNT', KEYS[1], now - tonumber(ARGV[1]), '+inf')`)

// WorkersAlive counts the workers whose last heartbeat is no older than
// within.
func (q *Queue) WorkersAlive(ctx context.Context, within time.Duration) (int, error) {
	n, err := aliveScript.Run(ctx, q.rdb, []string{workersKey}, within.Milliseconds()).Int()
	if err != nil {
		return 0, fmt.Errorf("counting live workers: %w", err)
	}
	return n, nil
}

var workersScript = redis.NewScript(redisNowMs + `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]))
local ids = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local out = {tostring(now)}
for i = 1, #ids, 2 do
  local rec = redis.call('GET', ARGV[2] .. ids[i])
  if rec then
    table.insert(out, ids[i + 1])
    table.insert(out, rec)
  end
end
return out`)

// Workers lists the workers whose record has not expired, most recent
// heartbeat first.
func (q *Queue) Workers(ctx context.Context) ([]WorkerSeen, error) {
	fail := func(err error) ([]WorkerSeen, error) { return nil, fmt.Errorf("listing workers: %w", err) }
	res, err := workersScript.Run(ctx, q.rdb, []string{workersKey}, WorkerRecordTTL.Milliseconds(), workerKey("")).StringSlice()
	if err != nil {
		return fail(err)
	}
	now, err := strconv.ParseInt(res[0], 10, 64)
	if err != nil {
		return fail(err)
	}
	var ws []WorkerSeen
	for i := 1; i+1 < len(res); i += 2 {
		ms, err := strconv.ParseInt(res[i], 10, 64)
		if err != nil {
			return fail(err)
		}
		var w WorkerSeen
		if err := json.Unmarshal([]byte(res[i+1]), &w.WorkerInfo); err != nil {
			return fail(err)
		}
		w.LastHeartbeat = time.UnixMilli(ms).UTC()
		w.Age = time.Duration(now-ms) * time.Millisecond
		ws = append(ws, w)
	}
	sort.SliceStable(ws, func(i, j int) bool { return ws[i].Age < ws[j].Age })
	return ws, nil
}
