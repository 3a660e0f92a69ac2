//go:build !unit

package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/testenv"
)

// The dispatcher serves keys in turn, a key with nothing waiting first,
// never fills asynq past its target, and a cancel takes a waiting job out
// of its key's list along with its bytes.
func TestDispatchIsFairAndBounded(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(t, false)})
	defer rdb.Close()
	q := New(rdb, time.Hour)
	ctx := context.Background()
	submit := func(owner, job string) {
		t.Helper()
		if err := q.Submit(ctx, Payload{JobID: job, Owner: owner, Renderer: "dot-svg"}, 100, time.Minute, 2); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 5; i++ {
		submit("key_a", fmt.Sprintf("job_a%d", i))
	}
	submit("key_b", "job_b1")
	if n, b, err := q.Waiting(ctx, "key_a"); n != 5 || b != 500 || err != nil {
		t.Fatalf("Waiting(key_a) = %d jobs, %d bytes, %v; want 5, 500", n, b, err)
	}
	if n, err := q.Dispatch(ctx, 2); n != 2 || err != nil {
		t.Fatalf("Dispatch(2) moved %d (%v), want 2", n, err)
	}
	if n, err := q.Dispatch(ctx, 2); n != 0 || err != nil {
		t.Fatalf("Dispatch(2) with 2 pending moved %d (%v), want 0", n, err)
	}
	pending, err := rdb.LRange(ctx, asynqPending, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	// asynq pushes on the left and pops on the right: the first moved is last.
	if fmt.Sprint(pending) != "[job_a1 job_b1]" {
		t.Errorf("asynq pending = %v, want B's first job served before A's backlog: [job_a1 job_b1]", pending)
	}
	if err := q.Cancel(ctx, "job_a3"); err != nil {
		t.Fatal(err)
	}
	if n, b, _ := q.Waiting(ctx, "key_a"); n != 3 || b != 300 {
		t.Errorf("after a cancel, key_a has %d jobs and %d bytes waiting, want 3 and 300", n, b)
	}
	if d, err := q.Depth(ctx); d != 5 || err != nil {
		t.Errorf("Depth = %d (%v), want 3 waiting + 2 pending", d, err)
	}
	// Drain: A's jobs come out in order, without the canceled one.
	rdb.Del(ctx, asynqPending)
	var order []string
	for i := 0; i < 5; i++ {
		if _, err := q.Dispatch(ctx, 1); err != nil {
			t.Fatal(err)
		}
		order = append(order, rdb.RPop(ctx, asynqPending).Val())
	}
	if fmt.Sprint(order) != "[job_a2 job_a4 job_a5  ]" {
		t.Errorf("drained %v, want [job_a2 job_a4 job_a5  ]", order)
	}
	if n, b, _ := q.Waiting(ctx, "key_a"); n != 0 || b != 0 {
		t.Errorf("key_a has %d jobs and %d bytes waiting after the drain, want none", n, b)
	}
	if n := rdb.LLen(ctx, ringKey).Val(); n != 0 {
		t.Errorf("the ring holds %d keys with nothing waiting", n)
	}
}

// A dispatcher that died between moving a job and enqueueing it leaves the
// job in "moving"; Reclaim enqueues it, once.
func TestReclaimEnqueuesHalfMovedJobs(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(t, false)})
	defer rdb.Close()
	q := New(rdb, time.Hour)
	ctx := context.Background()
	spec, _ := json.Marshal(waitingJob{Owner: "key_a", Size: 1, Payload: Payload{JobID: "job_lost", Owner: "key_a"}, Timeout: time.Minute})
	old := strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10)
	rdb.HSet(ctx, movingKey, "job_lost", old+" "+string(spec))
	for i := 0; i < 2; i++ {
		if err := q.Reclaim(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := rdb.LRange(ctx, asynqPending, 0, -1).Val(); fmt.Sprint(got) != "[job_lost]" {
		t.Errorf("asynq pending = %v, want [job_lost]", got)
	}
	if n := rdb.HLen(ctx, movingKey).Val(); n != 0 {
		t.Errorf("%d jobs still moving", n)
	}
}
