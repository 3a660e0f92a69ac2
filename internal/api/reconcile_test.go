//go:build !unit

package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/renderbox/renderbox"
	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/jobstate"
)

// cutLedger records the jobs it is told to and then, while cut is set,
// answers an error: an API that stopped between recording a job and
// queueing it, as its client sees it (no answer), and as the ledger and
// the queue are left (the job recorded, nothing queued). A fake only to
// force that window, over a real store.
type cutLedger struct {
	ledger.Store
	cut atomic.Bool
}

func (l *cutLedger) CreateJob(ctx context.Context, j ledger.Job) (ledger.Job, bool, error) {
	job, created, err := l.Store.CreateJob(ctx, j)
	if err == nil && l.cut.Load() {
		return job, created, errors.New("the API stopped here")
	}
	return job, created, err
}

const lostJob = `{"renderer":"svg-png","input_base64":"PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHdpZHRoPSIxMCIgaGVpZ2h0PSIxMCIvPg=="}`

type lostFixture struct {
	t      *testing.T
	s      *Server
	store  *cutLedger
	srv    *httptest.Server
	secret string
	owner  string
}

func newLostFixture(t *testing.T, lostAfter time.Duration) *lostFixture {
	store := &cutLedger{Store: openLedger(t)}
	secret, key := newKey(t, store)
	s := &Server{OpenAPI: renderbox.OpenAPI, Ledger: store, Queue: newQueue(t), LostAfter: lostAfter}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &lostFixture{t: t, s: s, store: store, srv: srv, secret: secret, owner: key.ID}
}

// post submits lostJob with idem as its Idempotency-Key and returns the
// status and the job's id, if any.
func (f *lostFixture) post(idem string) (int, string) {
	f.t.Helper()
	req, _ := http.NewRequest("POST", f.srv.URL+"/v1/jobs", strings.NewReader(lostJob))
	req.Header.Set("Authorization", "Bearer "+f.secret)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idem)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var j struct {
		ID string `json:"id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&j)
	return resp.StatusCode, j.ID
}

// recordedOnly submits a job through an API that stops after recording
// it, and returns its id from the ledger.
func (f *lostFixture) recordedOnly(idem string) ledger.Job {
	f.t.Helper()
	f.store.cut.Store(true)
	status, _ := f.post(idem)
	f.store.cut.Store(false)
	if status != 500 {
		f.t.Fatalf("the cut submission answered %d, want 500", status)
	}
	jobs, _, err := f.store.ListJobs(context.Background(), f.owner, ledger.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, j := range jobs {
		if j.IdempotencyKey == idem {
			return j
		}
	}
	f.t.Fatalf("the cut submission left no job in the ledger")
	return ledger.Job{}
}

func (f *lostFixture) where(id string) string {
	f.t.Helper()
	w, err := f.s.Queue.Whereabouts(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return w.Where
}

// A client that retries a submission the API stopped in the middle of
// gets its job queued by the retry, once, and not a second job.
func TestRetryQueuesAJobItsFirstRequestOnlyRecorded(t *testing.T) {
	f := newLostFixture(t, time.Hour)
	job := f.recordedOnly("retry-1")
	if got := f.where(job.ID); got != "" {
		t.Fatalf("the cut job is %q in the queue, want nowhere", got)
	}
	status, id := f.post("retry-1")
	if status != 202 || id != job.ID {
		t.Fatalf("the retry answered %d for %q, want 202 for the recorded job %s", status, id, job.ID)
	}
	if got := f.where(job.ID); got != "waiting" {
		t.Fatalf("after the retry the job is %q in the queue, want waiting", got)
	}
	// A further retry finds it queued and changes nothing.
	if status, id := f.post("retry-1"); status != 200 || id != job.ID {
		t.Fatalf("a second retry answered %d for %q, want 200 for %s", status, id, job.ID)
	}
	if n, _, err := f.s.Queue.Waiting(context.Background(), f.owner); err != nil || n != 1 {
		t.Fatalf("%d jobs wait for the key (%v), want the one", n, err)
	}
}

// Jobs no retry comes for end: one recorded and never queued, and one
// whose task asynq archived with no result (its worker died on the last
// attempt), each failed with a message that says what happened, counted,
// and announced; a job the queue holds is left alone however old.
func TestReconcilerEndsJobsTheQueueLost(t *testing.T) {
	f := newLostFixture(t, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.s.RunQueue(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// One job into asynq (the dispatcher keeps one pending with no
	// worker), running by the ledger; then its task archived.
	status, archived := f.post("archived")
	if status != 202 {
		t.Fatalf("submitting: %d", status)
	}
	testenv.Poll(t, "the job to reach asynq", 10*time.Second, func() bool { return f.where(archived) == "pending" })
	if _, err := f.store.MarkRunning(ctx, archived, time.Now()); err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspectorFromRedisClient(f.s.Queue.Redis())
	if err := insp.ArchiveTask(queue.QueueName, archived); err != nil {
		t.Fatal(err)
	}
	status, held := f.post("held") // waits in its key's list behind the pending one
	if status != 202 {
		t.Fatalf("submitting: %d", status)
	}
	lost := f.recordedOnly("lost")

	// A waiter on the lost job wakes when the reconciler ends it.
	woke := make(chan time.Duration, 1)
	go func() {
		t0 := time.Now()
		req, _ := http.NewRequest("GET", f.srv.URL+"/v1/jobs/"+lost.ID+"?wait=30", nil)
		req.Header.Set("Authorization", "Bearer "+f.secret)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		woke <- time.Since(t0)
	}()

	get := func(id string) ledger.Job {
		j, err := f.store.GetJob(ctx, f.owner, id)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	testenv.Poll(t, "the reconciler to end the lost jobs", 15*time.Second, func() bool {
		return get(lost.ID).State.Terminal() && get(archived).State.Terminal()
	})
	for id, want := range map[string]string{lost.ID: "submit it again", archived: "ended without a result"} {
		j := get(id)
		if j.State != jobstate.Failed || j.ErrorCode != "internal" || !strings.Contains(j.ErrorMessage, want) {
			t.Errorf("job %s: %s %s %q, want failed internal saying %q", id, j.State, j.ErrorCode, j.ErrorMessage, want)
		}
	}
	select {
	case d := <-woke:
		if d > 10*time.Second {
			t.Errorf("the waiter on the lost job woke after %v", d)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("the waiter on the lost job did not wake")
	}
	// Several passes later the held job is still queued and held.
	time.Sleep(2 * time.Second)
	if j, w := get(held), f.where(held); j.State != jobstate.Queued || (w != "waiting" && w != "pending") {
		t.Errorf("the held job is %s in the ledger and %q in the queue, want queued and held", j.State, w)
	}
	for where, want := range map[string]float64{"none": 1, "archived": 1} {
		if got := counterValue(f.s.metrics.lost.WithLabelValues(where)); got != want {
			t.Errorf("renderbox_jobs_lost_total{queue=%q} = %v, want %v", where, got, want)
		}
	}
}
