//go:build !unit

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/testenv"
)

// awaitOn waits (?wait=60) on c for each job, in parallel, and returns
// what c answered. A transport error or a status other than 200 fails
// the test.
func awaitOn(t *testing.T, c *client, key string, ids []string) map[string]jobJSON {
	t.Helper()
	var (
		mu   sync.Mutex
		got  = map[string]jobJSON{}
		wg   sync.WaitGroup
		errs = make(chan error, len(ids))
	)
	for _, id := range ids {
		wg.Go(func() {
			r, err := c.try(nil, "GET", "/v1/jobs/"+id+"?wait=60", key, "", nil, nil)
			if err != nil {
				errs <- err
				return
			}
			var j jobJSON
			if err := json.Unmarshal(r.Body, &j); r.Status != 200 || err != nil {
				errs <- fmt.Errorf("GET %s?wait=60: %d %s", id, r.Status, r.Body)
				return
			}
			mu.Lock()
			got[id] = j
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	return got
}

// submitMany submits n small svg-png jobs to c without waiting.
func submitMany(t *testing.T, c *client, key string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		r, j := submitJSON(t, c, key, "svg-png", samples.SVG(40, 40, i%30, 5, 10), nil, "", nil)
		if r.Status != 202 && r.Status != 200 {
			t.Fatalf("submitting job %d: %d %s", i, r.Status, r.Body)
		}
		ids = append(ids, j.ID)
	}
	return ids
}

// listed is the first page of GET /v1/jobs with query.
func listed(t *testing.T, c *client, key, query string) []jobJSON {
	t.Helper()
	var l struct {
		Jobs []jobJSON `json:"jobs"`
	}
	c.do("GET", "/v1/jobs"+query, key, "", nil, nil).json(t, &l)
	return l.Jobs
}

// eventsSettled waits until no result event is pending in Redis and
// checks that none was given up.
func eventsSettled(t *testing.T, s *stack) {
	t.Helper()
	eventsSettledIn(t, s.redisSrv)
}

func eventsSettledIn(t *testing.T, rs *testenv.RedisServer) {
	t.Helper()
	rdb := redis.NewClient(rs.Options())
	defer rdb.Close()
	q := queue.New(rdb, 0)
	ctx := context.Background()
	waitFor(t, "every result event acknowledged", 30*time.Second, func() bool {
		n, err := q.EventsPending(ctx, "api")
		return err == nil && n == 0
	})
	if n, err := q.DeadLetters(ctx); err != nil || n != 0 {
		t.Errorf("dead-lettered events: %d (%v), want none", n, err)
	}
}

// Two API replicas on one Redis and one PostgreSQL ledger (the URL, with
// its password, in RENDERBOX_DB): a job submitted to one is waited for
// (GET ?wait=60) on the other, which answers when it ends — whichever
// replica applied its result — and serves its output.
func TestReplicasShareResults(t *testing.T) {
	s := newStack(t, stackOpts{postgres: true})
	b := s.startReplica()
	key := s.key("tenant")
	for _, c := range []struct {
		name         string
		submit, wait *client
	}{{"submitted to A, waited on B", s.client, b.client}, {"submitted to B, waited on A", b.client, s.client}} {
		ids := submitMany(t, c.submit, key, 4)
		got := awaitOn(t, c.wait, key, ids)
		for _, id := range ids {
			j := got[id]
			if j.State != "succeeded" || len(j.Outputs) != 1 {
				t.Errorf("%s: job %s: %s with %d outputs, want succeeded with 1", c.name, id, j.State, len(j.Outputs))
				continue
			}
			if out := c.wait.do("GET", j.Outputs[0].URL, key, "", nil, nil); out.Status != 200 || len(out.Body) == 0 {
				t.Errorf("%s: job %s's output: %d, %d bytes, want 200 with the PNG", c.name, id, out.Status, len(out.Body))
			}
		}
	}
	eventsSettled(t, s)
}

// One of two replicas is killed with kill -9 while jobs run and started
// again: every job still ends, exactly once — one attempt counted even
// where an event was applied by the killed replica and again by the other
// — none stays running, and no event is left pending or given up.
func TestReplicaKilledMidRun(t *testing.T) {
	retry := []string{"-event-retry-after", "1s"}
	s := newStack(t, stackOpts{postgres: true, apiArgs: retry})
	b := s.startReplica(retry...)
	key := s.key("tenant")
	ids := append(submitMany(t, s.client, key, 6), submitMany(t, b.client, key, 6)...)
	waitFor(t, "a first job to end", 60*time.Second, func() bool {
		return len(listed(t, b.client, key, "?state=succeeded&limit=1")) > 0
	})
	if err := s.api.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = s.api.cmd.Wait()
	t.Logf("replica A killed")
	s.startAPI(retry...)
	s.waitReadyBut("replica A to be back", "")

	got := awaitOn(t, b.client, key, ids)
	for _, id := range ids {
		j := got[id]
		if j.State != "succeeded" || j.Attempts != 1 {
			t.Errorf("job %s: %s after %d attempts, want succeeded after 1", id, j.State, j.Attempts)
		}
		// Both replicas read the same record.
		a := getJob(t, s.client, key, id, "")
		if a.State != j.State || a.Attempts != j.Attempts || (a.FinishedAt == nil) != (j.FinishedAt == nil) ||
			a.FinishedAt != nil && !a.FinishedAt.Equal(*j.FinishedAt) {
			t.Errorf("job %s: A says %s/%d/%v, B %s/%d/%v", id, a.State, a.Attempts, a.FinishedAt, j.State, j.Attempts, j.FinishedAt)
		}
	}
	for _, st := range []string{"queued", "running"} {
		if l := listed(t, b.client, key, "?state="+st); len(l) != 0 {
			t.Errorf("%d jobs still %s, want none", len(l), st)
		}
	}
	eventsSettled(t, s)
	for _, m := range []string{s.metrics, b.metrics} {
		t.Logf("%s: %s", m, metricLines(t, m, "renderbox_events_total"))
	}
}

// metricLines are the lines of the /metrics at url that start with name.
func metricLines(t *testing.T, url, name string) []string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name) {
			lines = append(lines, l)
		}
	}
	return lines
}
