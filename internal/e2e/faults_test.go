//go:build !unit

package e2e

// Redis is the queue, the blob store and the road results take back to the
// API. These tests take it away in the middle of a run and check that the
// API says so honestly (503, not 500, not a hang), that everything comes
// back by itself once Redis does, and that no job the API accepted is lost
// or run twice.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/testenv"
)

// asynq leases a running task for 30s and extends the lease every 5s; the
// worker cannot extend it while Redis is away. An outage shorter than this
// leaves a few seconds, after Redis is back, for the worker to report and
// complete the task while its lease is valid, so a job that was running
// must not run again. (A longer one hands the task to asynq's recoverer,
// and the job rightly runs a second time.)
const leaseSafeOutage = 20 * time.Second

func TestRedisRestartLosesNoAcceptedJob(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fsync string
		stop  func(*testenv.RedisServer)
	}{
		// A planned restart: Redis flushes its append-only file and exits.
		{"clean shutdown", "always", (*testenv.RedisServer).Stop},
		// A crash, with production's appendfsync everysec (deploy/redis.conf).
		// Redis hands each write to the kernel before acknowledging it (unless
		// a slow fsync makes it postpone writes, for up to 2s), so a killed
		// process loses nothing acknowledged; only a host crash loses the
		// last second or two, which no test here can stage.
		{"kill -9 with fsync everysec", "everysec", (*testenv.RedisServer).Kill},
	} {
		t.Run(tc.name, func(t *testing.T) { redisOutage(t, tc.fsync, tc.stop) })
	}
}

func redisOutage(t *testing.T, fsync string, stop func(*testenv.RedisServer)) {
	// One worker slot: a slow job holds it while fast ones queue. The slow
	// job is ten pages of PDF at 300 dpi (~5s here) rather than html-pdf,
	// which takes ~15s on two busy cores and would stretch the outage
	// toward asynq's lease (see leaseSafeOutage).
	s := newStack(t, stackOpts{persist: true, fsync: fsync, workerArgs: []string{"-concurrency", "1"}})
	c := s.client
	key := s.key("olivia")

	r, slow := submitJSON(t, c, key, "pdf-png", samples.PDF("outage", 10), map[string]any{"dpi": 300}, "", nil)
	if r.Status != 202 {
		t.Fatalf("submitting the slow job: %d %s, want 202", r.Status, tail(r.Body))
	}
	ids := []string{slow.ID}
	waitFor(t, "the slow job to run in a sandbox", 60*time.Second, func() bool {
		return getJob(t, c, key, slow.ID, "").State == "running" && runscList(t, s.workerSB) == 1
	})
	var queued []string
	for i := 0; i < 2; i++ {
		queued = append(queued,
			submitOK(t, c, key, "svg-png", samples.SVG(40, 40, i, i, 10)),
			submitOK(t, c, key, "dot-svg", samples.DOT("queued", fmt.Sprint(i))))
	}
	for _, id := range queued {
		if st := getJob(t, c, key, id, "").State; st != "queued" {
			t.Fatalf("job %s is %s before the outage, want queued behind the slow job", id, st)
		}
	}
	ids = append(ids, queued...)

	// A client long-polls the slow job across the whole outage.
	waited := make(chan string, 1)
	go func() {
		r, err := c.try(nil, "GET", "/v1/jobs/"+slow.ID+"?wait=60", key, "", nil, nil)
		switch {
		case err != nil:
			waited <- err.Error()
		case r.Status != 200:
			waited <- fmt.Sprintf("status %d: %s", r.Status, tail(r.Body))
		default:
			var j jobJSON
			if err := json.Unmarshal(r.Body, &j); err != nil {
				waited <- err.Error()
				return
			}
			waited <- j.State
		}
	}()
	time.Sleep(200 * time.Millisecond) // let the long poll reach the API

	down := time.Now()
	stop(s.redisSrv)
	checkRedisDown(t, s, key, ids)
	// The slow job finishes rendering while Redis is away: its result has
	// nowhere to go until Redis is back.
	waitFor(t, "the slow job's sandbox to end while Redis is down", leaseSafeOutage-2*time.Second, func() bool {
		return runscList(t, s.workerSB) == 0
	})
	// Stay down until the worker has tried to store the result and failed,
	// so the result must wait for Redis rather than slip through after.
	waitFor(t, "the worker to fail to store the slow job's outputs", 10*time.Second, func() bool {
		return strings.Contains(s.worker.output(), `"doing":"storing the outputs"`)
	})
	outage := time.Since(down)
	if outage > leaseSafeOutage {
		t.Fatalf("the outage lasted %v, past the %v that keeps asynq's leases valid; this test cannot tell a lost job from a re-run one", outage, leaseSafeOutage)
	}
	s.redisSrv.Start()
	up := time.Now()

	waitFor(t, "/readyz to answer 200 again by itself", 15*time.Second, func() bool {
		return c.do("GET", "/readyz", "", "", nil, nil).Status == 200
	})
	t.Logf("Redis was down %v; /readyz was 200 again %v after it came back", outage.Round(time.Millisecond), time.Since(up).Round(time.Millisecond))
	r, fresh := submitJSON(t, c, key, "svg-png", samples.SVG(30, 30, 5, 5, 10), nil, "?wait=30", nil)
	if r.Status != 200 || fresh.State != "succeeded" {
		t.Errorf("a job submitted after the outage: %d %s %+v, want 200 succeeded", r.Status, fresh.State, fresh.Error)
	}

	for _, id := range ids {
		j := waitEnded(t, c, key, id, 90*time.Second)
		checkSucceededOnce(t, c, key, j)
	}
	if st := <-waited; st != "succeeded" {
		t.Errorf("a ?wait=60 request across the outage ended with %q, want the succeeded job", st)
	}
	checkRanOnce(t, s, ids)
	waitSandboxesGone(t, s)
}

// checkRedisDown checks what the API says while Redis is away: it refuses
// new work with a retryable 503 and still answers from the ledger.
func checkRedisDown(t *testing.T, s *stack, key string, ids []string) {
	t.Helper()
	c := s.client
	t0 := time.Now()
	r, _ := submitJSON(t, c, key, "svg-png", samples.SVG(20, 20, 0, 0, 5), nil, "", nil)
	took := time.Since(t0)
	if r.Status != 503 || r.problemCode(t) != "unavailable" || r.Header.Get("Retry-After") == "" {
		t.Errorf("POST /v1/jobs with Redis down: %d %s (Retry-After %q), want 503 unavailable with Retry-After",
			r.Status, tail(r.Body), r.Header.Get("Retry-After"))
	}
	// The API's Redis client redials once, not go-redis's default five
	// times (~3.4 s here): a client hears 503 at once, not after a hang.
	if took > 2*time.Second {
		t.Errorf("POST /v1/jobs with Redis down took %v to answer, want under 2s", took)
	}
	t.Logf("POST /v1/jobs with Redis down answered %d in %v", r.Status, took.Round(time.Millisecond))
	if r := c.do("GET", "/readyz", "", "", nil, nil); r.Status != 503 {
		t.Errorf("/readyz with Redis down: %d, want 503", r.Status)
	}
	if r := c.do("GET", "/healthz", "", "", nil, nil); r.Status != 200 {
		t.Errorf("/healthz with Redis down: %d, want 200 (the process is alive; only readiness depends on Redis)", r.Status)
	}
	for _, id := range ids {
		if j := getJob(t, c, key, id, ""); j.ID != id || j.terminal() {
			t.Errorf("GET job %s with Redis down: %+v, want it from the ledger, not yet ended", id, j)
		}
	}
	var list struct {
		Jobs []jobJSON `json:"jobs"`
	}
	if r := c.do("GET", "/v1/jobs?limit=100", key, "", nil, nil); r.Status != 200 {
		t.Errorf("GET /v1/jobs with Redis down: %d, want 200 from the ledger", r.Status)
	} else if r.json(t, &list); len(list.Jobs) != len(ids) {
		t.Errorf("GET /v1/jobs with Redis down lists %d jobs, want %d", len(list.Jobs), len(ids))
	}
}

// checkSucceededOnce checks an ended job: succeeded after exactly one
// attempt (no outage here outlived a lease, so nothing had to run again),
// with every output downloadable and matching its manifest.
func checkSucceededOnce(t *testing.T, c *client, key string, j jobJSON) {
	t.Helper()
	if j.State != "succeeded" || len(j.Outputs) == 0 {
		t.Errorf("job %s (%s) = %s %+v with %d outputs, want succeeded with outputs", j.ID, j.Renderer, j.State, j.Error, len(j.Outputs))
		return
	}
	if j.Attempts != 1 {
		t.Errorf("job %s (%s) took %d attempts, want 1", j.ID, j.Renderer, j.Attempts)
	}
	for _, o := range j.Outputs {
		r := c.do("GET", o.URL, key, "", nil, nil)
		sum := sha256.Sum256(r.Body)
		if r.Status != 200 || int64(len(r.Body)) != o.Size || hex.EncodeToString(sum[:]) != o.SHA256 {
			t.Errorf("job %s output %s: %d, %d bytes, want 200 with the %d bytes of sha256 %s", j.ID, o.Name, r.Status, len(r.Body), o.Size, o.SHA256)
		}
	}
}

// checkRanOnce checks the queue's side of exactly once: every task
// completed without a retry, nothing is left to run, and the worker
// finished each job once.
func checkRanOnce(t *testing.T, s *stack, ids []string) {
	t.Helper()
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: s.redis})
	defer insp.Close()
	// A job's result is stored while its sandbox is torn down; its task
	// stays active until the teardown ends (as in the load test): wait
	// for that before reading each task's state.
	var qi *asynq.QueueInfo
	var err error
	waitFor(t, "the queue's last tasks to finish", 15*time.Second, func() bool {
		qi, err = insp.GetQueueInfo(queue.QueueName)
		return err == nil && qi.Active == 0
	})
	for _, id := range ids {
		ti, err := insp.GetTaskInfo(queue.QueueName, id)
		if err != nil {
			t.Errorf("task %s: %v", id, err)
			continue
		}
		if ti.State != asynq.TaskStateCompleted || ti.Retried != 0 {
			t.Errorf("task %s is %v after %d retries (last error %q), want completed without a retry", id, ti.State, ti.Retried, ti.LastErr)
		}
	}
	if left := qi.Pending + qi.Active + qi.Scheduled + qi.Retry + qi.Archived; left != 0 {
		t.Errorf("queue holds %d pending, %d active, %d scheduled, %d retry, %d archived tasks, want none", qi.Pending, qi.Active, qi.Scheduled, qi.Retry, qi.Archived)
	}
	counts := finishedCounts(s.worker.output())
	for _, id := range ids {
		if n := counts[id]; n != 1 {
			t.Errorf("the worker finished job %s %d times, want once", id, n)
		}
	}
}

// submitOK submits a job and returns its id, failing the test unless the
// API accepted it.
func submitOK(t *testing.T, c *client, key, renderer string, input []byte) string {
	t.Helper()
	r, j := submitJSON(t, c, key, renderer, input, nil, "", nil)
	if r.Status != 202 || j.ID == "" {
		t.Fatalf("submitting %s: %d %s, want 202", renderer, r.Status, tail(r.Body))
	}
	return j.ID
}

// waitEnded long-polls job id until it ends or d passes.
func waitEnded(t *testing.T, c *client, key, id string, d time.Duration) jobJSON {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		wait := min(time.Until(deadline), 30*time.Second)
		r := c.do("GET", fmt.Sprintf("/v1/jobs/%s?wait=%d", id, max(1, int(wait.Seconds()))), key, "", nil, nil)
		var j jobJSON
		if r.Status == 200 {
			r.json(t, &j)
			if j.terminal() {
				return j
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is still %q (%d) after %v", id, j.State, r.Status, d)
		}
	}
}
