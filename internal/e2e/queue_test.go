//go:build !unit

package e2e

// The queue is shared by every tenant and lives in one Redis: these tests
// check that no key can take it from the others (per-key caps, fair
// dequeueing), that Redis is never filled to the point of refusing the
// writes that finish accepted jobs, and that what a job leaves in Redis is
// deleted at the retention time.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/testenv"
)

// paddedSVG is a valid SVG of about n bytes.
func paddedSVG(n, seed int) []byte {
	svg := samples.SVG(10, 10, seed%10, 0, 2)
	pad := max(0, n-len(svg)-10)
	return append(svg, []byte("<!--"+strings.Repeat("x", pad)+"-->\n")...)
}

// Redis is bounded (maxmemory, noeviction): the API must refuse new jobs
// with 503 queue_full before Redis reaches its bound, never let a write
// fail with OOM (which would fail accepted jobs), and hold no more memory
// itself while it refuses.
func TestRedisHighWaterRefusesBeforeFull(t *testing.T) {
	s := newStack(t, stackOpts{noWorker: true, maxmemory: "24mb",
		apiArgs: []string{"-rate", "1000", "-burst", "1000", "-max-queued-bytes-per-key", "1000000000", "-max-queued-per-key", "10000"}})
	c := s.client
	key := s.key("hugo")
	rdb := redis.NewClient(&redis.Options{Addr: s.redis})
	defer rdb.Close()
	ctx := context.Background()
	rss0, err := vmRSS(s.api.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}

	// Past the first refusal, go on for a few seconds: the API samples
	// Redis's memory once a second, and no sample may let Redis fill.
	accepted, refused := 0, 0
	var peakRSS int64
	var firstRefusal time.Time
	for i := 0; i < 200 && (refused == 0 || time.Since(firstRefusal) < 3*time.Second); i++ {
		if refused > 0 {
			time.Sleep(50 * time.Millisecond)
		}
		r, _ := submitJSON(t, c, key, "svg-png", paddedSVG(1<<20, i), nil, "", nil)
		switch {
		case r.Status == 202:
			accepted++
		case r.Status == 503 && r.problemCode(t) == "queue_full" && r.Header.Get("Retry-After") != "":
			if refused++; refused == 1 {
				firstRefusal = time.Now()
			}
		default:
			t.Fatalf("job %d: %d %s, want 202 or 503 queue_full with Retry-After", i, r.Status, tail(r.Body))
		}
		if rss, err := vmRSS(s.api.cmd.Process.Pid); err == nil {
			peakRSS = max(peakRSS, rss)
		}
	}
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	used := infoField(t, info, "used_memory")
	t.Logf("accepted %d jobs of 1 MiB, refused %d; Redis uses %s of 24 MiB; API RSS %s → peak %s",
		accepted, refused, mib(used), mib(rss0), mib(peakRSS))
	if refused == 0 {
		t.Fatalf("200 jobs of 1 MiB into a 24 MiB Redis were all accepted")
	}
	if accepted < 10 {
		t.Errorf("only %d jobs of 1 MiB were accepted into a 24 MiB Redis, want the space up to the high-water mark used", accepted)
	}
	if used >= 24<<20*9/10 {
		t.Errorf("Redis uses %s, over 90%% of its 24 MiB: the high-water mark (80%%) did not hold", mib(used))
	}
	if growth := peakRSS - rss0; growth >= 64<<20 {
		t.Errorf("the API's RSS grew by %s, want under 64 MiB", mib(growth))
	}
	// Redis still takes writes: the jobs it holds can still end.
	if err := rdb.Set(ctx, "renderbox:test:probe", "x", time.Minute).Err(); err != nil {
		t.Errorf("Redis refuses writes after the API stopped taking jobs: %v", err)
	}
	var list struct {
		Jobs []jobJSON `json:"jobs"`
	}
	c.do("GET", "/v1/jobs?state=queued&limit=100", key, "", nil, nil).json(t, &list)
	if len(list.Jobs) != accepted {
		t.Errorf("%d jobs are queued, want the %d accepted (none failed by a full Redis)", len(list.Jobs), accepted)
	}
}

func infoField(t *testing.T, info, field string) int64 {
	t.Helper()
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			var n int64
			if _, err := fmt.Sscan(v, &n); err != nil {
				t.Fatalf("INFO %s: %q", field, v)
			}
			return n
		}
	}
	t.Fatalf("INFO has no %s", field)
	return 0
}

// One key's waiting jobs are capped, by count and by input bytes, so it
// cannot fill the queue that every key shares; other keys are unaffected,
// and a cancel of a waiting job gives its place back.
func TestPerKeyQueueCaps(t *testing.T) {
	s := newStack(t, stackOpts{noWorker: true,
		apiArgs: []string{"-rate", "1000", "-burst", "1000", "-max-queued-per-key", "5", "-max-queued-bytes-per-key", "3000000"}})
	c := s.client
	ivan, judy, kate := s.key("ivan"), s.key("judy"), s.key("kate")
	in := samples.DOT("capped")

	// With no worker, the dispatcher hands asynq one job (its floor of one
	// slot); the rest wait in ivan's list, five at most.
	var ids []string
	var r *response
	for i := 0; i < 20; i++ {
		var j jobJSON
		if r, j = submitJSON(t, c, ivan, "dot-svg", in, nil, "", nil); r.Status != 202 {
			break
		}
		ids = append(ids, j.ID)
		time.Sleep(20 * time.Millisecond) // let the dispatcher run
	}
	if r.Status != 429 || r.problemCode(t) != "key_queue_full" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("job %d of a key capped at 5 waiting: %d %s (Retry-After %q), want 429 key_queue_full", len(ids)+1, r.Status, tail(r.Body), r.Header.Get("Retry-After"))
	}
	if len(ids) < 5 || len(ids) > 6 {
		t.Errorf("a key capped at 5 waiting jobs had %d accepted, want 5 (+1 handed to asynq)", len(ids))
	}
	if r, _ := submitJSON(t, c, judy, "dot-svg", in, nil, "", nil); r.Status != 202 {
		t.Errorf("another key's job while ivan is capped: %d %s, want 202", r.Status, tail(r.Body))
	}
	// Canceling a waiting job ends it and frees its place.
	last := ids[len(ids)-1]
	if r := c.do("DELETE", "/v1/jobs/"+last, ivan, "", nil, nil); r.Status != 200 {
		t.Fatalf("cancel: %d %s", r.Status, tail(r.Body))
	}
	if j := getJob(t, c, ivan, last, ""); j.State != "canceled" {
		t.Errorf("a canceled waiting job is %s, want canceled", j.State)
	}
	if r, _ := submitJSON(t, c, ivan, "dot-svg", in, nil, "", nil); r.Status != 202 {
		t.Errorf("after a cancel freed a place: %d %s, want 202", r.Status, tail(r.Body))
	}

	// Bytes: 1 MB inputs against a 3 MB cap.
	n := 0
	for i := 0; i < 10; i++ {
		if r, _ = submitJSON(t, c, kate, "svg-png", paddedSVG(1_000_000, i), nil, "", nil); r.Status != 202 {
			break
		}
		n++
		time.Sleep(20 * time.Millisecond)
	}
	if r.Status != 429 || r.problemCode(t) != "key_queue_full" {
		t.Errorf("a 1 MB job past a 3 MB cap on waiting bytes: %d %s, want 429 key_queue_full", r.Status, tail(r.Body))
	}
	if n < 2 || n > 4 {
		t.Errorf("%d jobs of 1 MB were accepted under a 3 MB cap, want 2 or 3 (+1 handed to asynq)", n)
	}
}

// Key A queues 200 jobs, then key B submits one: B's job starts before A's
// backlog has drained by more than the worker's concurrency (2), where one
// FIFO would make it wait for all 200.
func TestFairDequeueAcrossKeys(t *testing.T) {
	const concurrency = 2 // the stack's worker
	s := newStack(t, stackOpts{apiArgs: []string{"-rate", "1000", "-burst", "1000"}})
	c := s.client
	a, b := s.key("alice-backlog"), s.key("bob-first")
	var aIDs []string
	for i := 0; i < 200; i++ {
		aIDs = append(aIDs, submitOK(t, c, a, "dot-svg", samples.DOT("a", fmt.Sprint(i))))
	}
	bID := submitOK(t, c, b, "dot-svg", samples.DOT("b", "first"))
	bj := waitEnded(t, c, b, bID, 120*time.Second)
	if bj.State != "succeeded" || bj.StartedAt == nil {
		t.Fatalf("B's job ended %s %+v, want succeeded", bj.State, bj.Error)
	}
	// Cancel what is left of A's backlog; every job must still end.
	for _, id := range aIDs {
		c.do("DELETE", "/v1/jobs/"+id, a, "", nil, nil) // 409 for the ones that ended
	}
	ahead, started := 0, 0
	for _, id := range aIDs {
		j := waitEnded(t, c, a, id, 60*time.Second)
		if j.StartedAt != nil {
			started++
			if j.StartedAt.After(bj.CreatedAt) && j.StartedAt.Before(*bj.StartedAt) {
				ahead++
			}
		}
	}
	t.Logf("B's job waited %v; %d of A's jobs started meanwhile; %d of A's 200 ran at all",
		bj.StartedAt.Sub(bj.CreatedAt).Round(time.Millisecond), ahead, started)
	if ahead > concurrency {
		t.Errorf("%d of A's jobs started between B's submission and B's start, want at most %d (one per worker slot)", ahead, concurrency)
	}
	qi, err := asynqInfo(s.redisSrv)
	if err != nil {
		t.Fatal(err)
	}
	if qi.Pending+qi.Active+qi.Scheduled+qi.Retry != 0 {
		t.Errorf("asynq still holds %d pending, %d active, %d scheduled, %d retry tasks after every job ended", qi.Pending, qi.Active, qi.Scheduled, qi.Retry)
	}
}

// asynqInfo is asynq's own account of the queue on rs.
func asynqInfo(rs *testenv.RedisServer) (*asynq.QueueInfo, error) {
	o := rs.Options()
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: o.Addr, Password: o.Password, TLSConfig: o.TLSConfig})
	defer insp.Close()
	return insp.GetQueueInfo(queue.QueueName)
}

// A finished job leaves nothing in Redis past the retention: its input,
// its outputs (stored for -retention, not a fixed day) and its queue
// record, completed or archived (a failure, with its owner, options and
// error) alike.
func TestRetentionDeletesFinishedJobs(t *testing.T) {
	t.Parallel() // mostly waiting (package doc)
	const retention = time.Minute
	s := newStack(t, stackOpts{apiArgs: []string{"-retention", retention.String()}})
	c := s.client
	key := s.key("liam")
	rdb := redis.NewClient(&redis.Options{Addr: s.redis})
	defer rdb.Close()
	ctx := context.Background()

	ok := waitEnded(t, c, key, submitOK(t, c, key, "dot-svg", samples.DOT("kept", "briefly")), 60*time.Second)
	bad := waitEnded(t, c, key, submitOK(t, c, key, "dot-svg", []byte("digraph G { a -> ; }\n")), 60*time.Second)
	if ok.State != "succeeded" || len(ok.Outputs) == 0 || bad.State != "failed" {
		t.Fatalf("jobs ended %s (%d outputs) and %s, want succeeded with outputs and failed", ok.State, len(ok.Outputs), bad.State)
	}
	ended := time.Now()
	keys := []string{queue.InputKey(ok.ID), queue.InputKey(bad.ID)}
	for _, o := range ok.Outputs {
		keys = append(keys, queue.OutputKey(ok.ID, o.Name))
	}
	for _, k := range keys {
		ttl, err := rdb.PTTL(ctx, k).Result()
		if err != nil || ttl <= 0 || ttl > retention {
			t.Errorf("%s: TTL %v (%v), want at most the retention %v", k, ttl, err, retention)
		}
	}
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: s.redis})
	defer insp.Close()
	// The result is reported while the sandbox is torn down; the task is
	// done in asynq's books once the handler returns, right after.
	for id, want := range map[string]asynq.TaskState{ok.ID: asynq.TaskStateCompleted, bad.ID: asynq.TaskStateArchived} {
		var ti *asynq.TaskInfo
		var err error
		waitFor(t, "task "+id+" to be "+want.String(), 30*time.Second, func() bool {
			ti, err = insp.GetTaskInfo(queue.QueueName, id)
			return err == nil && ti.State == want
		})
	}

	// Past the retention (plus the janitors' rounds), all of it is gone.
	waitFor(t, "every record of the finished jobs to be deleted", retention+30*time.Second, func() bool {
		for _, id := range []string{ok.ID, bad.ID} {
			if _, err := insp.GetTaskInfo(queue.QueueName, id); !errors.Is(err, asynq.ErrTaskNotFound) {
				return false
			}
		}
		n, err := rdb.Exists(ctx, keys...).Result()
		return err == nil && n == 0
	})
	t.Logf("deleted %v after the jobs ended (retention %v)", time.Since(ended).Round(time.Second), retention)
	if r := c.do("GET", ok.Outputs[0].URL, key, "", nil, nil); r.Status != 410 {
		t.Errorf("an output past the retention: %d, want 410", r.Status)
	}
}
