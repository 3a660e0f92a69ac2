//go:build !unit

package worker

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/testenv"
)

// Heartbeat keeps the worker's record fresh while it runs, survives Redis
// going away, and deletes the record when its context ends (a drain).
func TestHeartbeatBeatsThenRemoves(t *testing.T) {
	rs := testenv.StartRedis(t, testenv.RedisConfig{})
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, MaxRetries: -1})
	defer rdb.Close()
	q := queue.New(rdb, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Heartbeat(ctx, q, queue.WorkerInfo{ID: "wrk_t", Name: "t"}, 100*time.Millisecond, slog.New(slog.DiscardHandler))
	}()
	alive := func() int {
		n, err := q.WorkersAlive(context.Background(), 300*time.Millisecond)
		if err != nil {
			return -1
		}
		return n
	}
	wait := func(what string, want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for alive() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d workers alive, want %d", what, alive(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wait("beating", 1)
	time.Sleep(500 * time.Millisecond) // past the 300ms bound: only fresh beats keep it alive
	wait("still beating", 1)
	// Redis restarts empty: the next beats bring the record back.
	rs.Stop()
	time.Sleep(300 * time.Millisecond)
	rs.Start()
	wait("beating after Redis came back", 1)
	cancel()
	<-done
	if ws, err := q.Workers(context.Background()); err != nil || len(ws) != 0 {
		t.Errorf("after the context ended: %+v, %v; want no record", ws, err)
	}
}
