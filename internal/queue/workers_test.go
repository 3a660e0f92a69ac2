//go:build !unit

package queue

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/testenv"
)

// Heartbeats are counted alive within the bound, listed with their age on
// Redis's clock, and gone once removed.
func TestWorkerHeartbeats(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(t, false)})
	defer rdb.Close()
	q := New(rdb, 0)
	ctx := context.Background()

	if n, err := q.WorkersAlive(ctx, time.Second); err != nil || n != 0 {
		t.Fatalf("WorkersAlive with none: got %d, %v; want 0", n, err)
	}
	a := WorkerInfo{ID: "wrk_a", Name: "a", Host: "h1", RootfsDigest: "d1", RunscVersion: "v1", Concurrency: 2,
		PoolFamilies: []string{"chromium"}, StartedAt: time.Now().UTC().Truncate(time.Second)}
	b := a
	b.ID, b.Name = "wrk_b", "b"
	for _, w := range []WorkerInfo{a, b} {
		if err := q.Heartbeat(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if err := q.Heartbeat(ctx, a); err != nil {
		t.Fatal(err)
	}
	if n, err := q.WorkersAlive(ctx, 200*time.Millisecond); err != nil || n != 1 {
		t.Errorf("WorkersAlive within 200ms: got %d, %v; want 1 (only a beat since)", n, err)
	}
	if n, err := q.WorkersAlive(ctx, 10*time.Second); err != nil || n != 2 {
		t.Errorf("WorkersAlive within 10s: got %d, %v; want 2", n, err)
	}
	ws, err := q.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || ws[0].ID != "wrk_a" || ws[1].ID != "wrk_b" {
		t.Fatalf("Workers: got %+v, want a then b (most recent first)", ws)
	}
	if ws[0].Age > 200*time.Millisecond || ws[1].Age < 300*time.Millisecond || ws[1].Age > 5*time.Second {
		t.Errorf("ages: got %v and %v, want a under 200ms and b about 300ms", ws[0].Age, ws[1].Age)
	}
	if got := ws[0].WorkerInfo; got.RootfsDigest != "d1" || got.RunscVersion != "v1" || got.Concurrency != 2 ||
		len(got.PoolFamilies) != 1 || !got.StartedAt.Equal(a.StartedAt) {
		t.Errorf("a's record: got %+v, want %+v", got, a)
	}
	if ttl := rdb.PTTL(ctx, workerKey("wrk_a")).Val(); ttl <= 0 || ttl > WorkerRecordTTL {
		t.Errorf("a's record expires in %v, want within %v", ttl, WorkerRecordTTL)
	}
	if err := q.RemoveWorker(ctx, "wrk_a"); err != nil {
		t.Fatal(err)
	}
	if ws, err := q.Workers(ctx); err != nil || len(ws) != 1 || ws[0].ID != "wrk_b" {
		t.Errorf("Workers after a drained: got %+v, %v; want b only", ws, err)
	}
	// A record that expired while its entry in the set did not is not
	// listed.
	rdb.Del(ctx, workerKey("wrk_b"))
	if ws, err := q.Workers(ctx); err != nil || len(ws) != 0 {
		t.Errorf("Workers after b's record expired: got %+v, %v; want none", ws, err)
	}
}
