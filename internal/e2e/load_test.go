//go:build !unit

package e2e

// A mixed load through the real API, queue and worker: many clients, API
// limits that bite, and then the books are checked — every job ended as
// it should, exactly once, nothing was left behind on the worker host, and
// the worker's memory did not grow with the number of jobs.
//
//	go test ./internal/e2e -run TestLoadMixedJobs                                # reduced, ~2 min
//	go test ./internal/e2e -run TestLoadMixedJobs -load.jobs 1000 -timeout 60m   # full size

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
)

var (
	loadJobs    = flag.Int("load.jobs", 100, "jobs TestLoadMixedJobs submits (the full-size run is 1000; give it -timeout 60m)")
	loadClients = flag.Int("load.clients", 20, "concurrent clients in TestLoadMixedJobs")
)

// API limits for the load: small enough that admission control bites and
// the clients' handling of 429 and 503 is exercised, not just present.
const (
	loadKeys       = 4    // API keys; the clients share them, as a tenant's processes share theirs
	loadQueueDepth = 12   // jobs waiting or running before 503 queue_full (20 clients > 12)
	loadRate       = "2"  // submissions per second per key before 429 …
	loadBurst      = "2"  // … after a burst this small (five clients per key start at once)
	loadPoll       = "30" // ?wait= seconds per status long poll
	workerSlots    = 2    // the harness starts the worker with -concurrency 2
)

// loadJob is one job of the mix and what became of it.
type loadJob struct {
	n         int
	renderer  string
	options   map[string]any
	input     []byte
	wantState string // succeeded, or failed with wantCode
	wantCode  string

	key, idem string
	// via and await are the replicas the job is submitted to and waited
	// on (nil: runClients's client); callback is its callback_url.
	via, await *client
	callback   string
	id         string
	submitted  time.Time   // first attempt to submit
	accepted   time.Time   // when the API took it
	final      jobJSON     // as last seen, terminal
	refused    map[int]int // 429s and 503s before it was accepted, by status
}

// mixedJob returns job n of the mix: mostly fast renderers, one in 25 a
// corrupt PDF that must fail render_failed, one in 40 an html-pdf. Every
// input is unique, so a job created twice for one Idempotency-Key would
// show as two jobs with the same input digest.
func mixedJob(t *testing.T, n int) *loadJob {
	j := &loadJob{n: n, wantState: "succeeded"}
	w, h := 40+n%100, 40+n/100 // unique per n
	switch {
	case n%25 == 7:
		j.renderer, j.wantState, j.wantCode = "pdf-png", "failed", "render_failed"
		j.input = append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte{0xde, 0xad, byte(n), byte(n >> 8)}, 64)...)
	case n%40 == 19:
		j.renderer, j.input = "html-pdf", samples.HTML("Load", fmt.Sprint("job ", n))
	default:
		switch n % 5 {
		case 0:
			j.renderer, j.input = "svg-png", samples.SVG(w, h, 2, 2, 10)
		case 1:
			j.renderer, j.input = "dot-svg", samples.DOT("load", fmt.Sprint(n))
		case 2:
			j.renderer, j.input = "markdown-html", samples.Markdown(fmt.Sprint("Load job ", n))
		case 3:
			j.renderer, j.input = "pdf-png", samples.PDF(fmt.Sprint("load job ", n), 1)
			j.options = map[string]any{"dpi": 50}
		case 4:
			var b bytes.Buffer
			if err := pngEncode(&b, samples.Image(w, h, 1, 1, 8)); err != nil {
				t.Fatal(err)
			}
			j.renderer, j.input = "image-thumbnail", b.Bytes()
			j.options = map[string]any{"width": 32, "height": 32}
		}
	}
	return j
}

func TestLoadMixedJobs(t *testing.T) {
	n, clients := *loadJobs, *loadClients
	if n < 1 || clients < 1 {
		t.Fatalf("-load.jobs %d and -load.clients %d must be at least 1", n, clients)
	}
	// Two worker slots finish about a job a second here; allow twice that
	// and fail now, rather than have go test's timeout panic mid-run.
	if deadline, ok := t.Deadline(); ok && time.Until(deadline) < time.Minute+time.Duration(n)*2*time.Second {
		t.Fatalf("%d jobs need up to %v and the test has %v; raise -timeout", n, time.Minute+time.Duration(n)*2*time.Second, time.Until(deadline).Round(time.Second))
	}
	s := newStack(t, stackOpts{apiArgs: []string{"-max-queue-depth", strconv.Itoa(loadQueueDepth),
		"-rate", loadRate, "-burst", loadBurst}})
	keys := make([]string, loadKeys)
	for i := range keys {
		keys[i] = s.key(fmt.Sprint("load-", i))
	}
	jobs := make([]*loadJob, n)
	for i := range jobs {
		jobs[i] = mixedJob(t, i)
		jobs[i].key = keys[(i%clients)%loadKeys] // a client always uses the same key
		jobs[i].idem = fmt.Sprintf("load-%d-%d", time.Now().UnixNano(), i)
	}

	mem := startRSSSampler(t, s.worker.cmd.Process.Pid, 500*time.Millisecond)
	t0 := time.Now()
	runClients(t, s.client, jobs, clients)
	wall := time.Since(t0)
	rss := mem.stop()
	if t.Failed() {
		t.FailNow() // the books below would only repeat the clients' errors
	}

	checkOutcomes(t, jobs, 0)
	checkRefusals(t, jobs)
	checkListings(t, s.client, keys, jobs)
	checkNothingLeft(t, s)
	checkQueueBooks(t, s, jobs)
	checkFinishedOnce(t, s, jobs)
	early, late, peak := checkMemoryFlat(t, rss)
	reportLoad(t, jobs, clients, wall, early, late, peak)
	t.Logf("worker RSS by tenth of the run: %s", rssByTenth(rss))
}

// runClients has clients goroutines work through jobs (client c takes jobs
// c, c+clients, …) and returns when all are done. Each client submits its
// jobs one after another as fast as the API lets it, then waits for them
// to end. (Clients that instead wait for each job before submitting the
// next starve one another at a full queue: whoever's job just ended takes
// the slot it freed at once, while the refused sleep out Retry-After. The
// API has no fairness between clients beyond the per-key rate limit.)
func runClients(t *testing.T, c *client, jobs []*loadJob, clients int) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * clients}, Timeout: 2 * time.Minute}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for cl := 0; cl < clients; cl++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start // all clients begin at once: the first burst meets the rate limit
			var mine []*loadJob
			for i := cl; i < len(jobs); i += clients {
				mine = append(mine, jobs[i])
			}
			for _, j := range mine {
				if err := submitLoad(c, hc, j); err != nil {
					t.Errorf("client %d, job %d (%s): %v", cl, j.n, j.renderer, err)
					return
				}
			}
			for _, j := range mine {
				if err := awaitLoad(c, hc, j); err != nil {
					t.Errorf("client %d, job %d (%s): %v", cl, j.n, j.renderer, err)
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
}

// Bounds on a client's wait for one job to be accepted, and then, once it
// has submitted all of its jobs, to see it end: far above what a healthy
// run needs, there so that a lost job fails the test rather than hangs it.
const (
	acceptBound = 15 * time.Minute
	endBound    = 10 * time.Minute
)

// submitLoad submits j, honouring 429 and 503 by sending the same request
// with the same Idempotency-Key again after Retry-After (plus up to a
// second of jitter, so that refused clients do not retry in lockstep).
func submitLoad(c *client, hc *http.Client, j *loadJob) error {
	body := map[string]any{"renderer": j.renderer, "input_base64": j.input}
	if j.options != nil {
		body["options"] = j.options
	}
	if j.callback != "" {
		body["callback_url"] = j.callback
	}
	c = cmp.Or(j.via, c)
	b, err := json.Marshal(body) // []byte marshals as base64
	if err != nil {
		return err
	}
	j.submitted = time.Now()
	j.refused = map[int]int{}
	for j.id == "" {
		if time.Since(j.submitted) > acceptBound {
			return fmt.Errorf("not accepted within %v (%v refusals)", acceptBound, j.refused)
		}
		r, err := c.try(hc, "POST", "/v1/jobs", j.key, "application/json", b, map[string]string{"Idempotency-Key": j.idem})
		if err != nil {
			// The request may have created the job; the key makes the
			// retry return it rather than make another.
			time.Sleep(time.Second)
			continue
		}
		switch r.Status {
		case 200, 202:
			var d jobJSON
			if err := json.Unmarshal(r.Body, &d); err != nil || d.ID == "" {
				return fmt.Errorf("accepted with an unreadable job: %v %s", err, tail(r.Body))
			}
			j.id, j.accepted = d.ID, time.Now()
		case 429, 503:
			j.refused[r.Status]++
			secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
			if err != nil || secs < 1 {
				return fmt.Errorf("%d without a usable Retry-After (%q): %s", r.Status, r.Header.Get("Retry-After"), tail(r.Body))
			}
			time.Sleep(time.Duration(secs)*time.Second + rand.N(time.Second))
		default:
			return fmt.Errorf("submitting: %d %s", r.Status, tail(r.Body))
		}
	}
	return nil
}

// awaitLoad long-polls j until it ends.
func awaitLoad(c *client, hc *http.Client, j *loadJob) error {
	c = cmp.Or(j.await, c)
	deadline := time.Now().Add(endBound)
	for {
		if time.Now().After(deadline) {
			return fmt.Errorf("job %s still %q after %v of waiting", j.id, j.final.State, endBound)
		}
		r, err := c.try(hc, "GET", "/v1/jobs/"+j.id+"?wait="+loadPoll, j.key, "", nil, nil)
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		if r.Status != 200 {
			return fmt.Errorf("polling job %s: %d %s", j.id, r.Status, tail(r.Body))
		}
		if err := json.Unmarshal(r.Body, &j.final); err != nil {
			return fmt.Errorf("polling job %s: %v", j.id, err)
		}
		if j.final.terminal() {
			return nil
		}
	}
}

// checkOutcomes checks that every job ended as its input deserves, after
// one attempt — but for at most retries jobs that may have taken two (a
// killed worker's) — and returns how many took two.
func checkOutcomes(t *testing.T, jobs []*loadJob, retries int) int {
	t.Helper()
	retried := 0
	for _, j := range jobs {
		f := j.final
		code := ""
		if f.Error != nil {
			code = f.Error.Code
		}
		if f.State != j.wantState || code != j.wantCode {
			t.Errorf("job %d (%s, %s) = %s %q, want %s %q", j.n, j.renderer, j.id, f.State, code, j.wantState, j.wantCode)
			continue
		}
		if f.Attempts == 2 && retries > 0 {
			retried++
		} else if f.Attempts != 1 {
			t.Errorf("job %d (%s, %s) took %d attempts, want 1", j.n, j.renderer, j.id, f.Attempts)
		}
		if f.State == "succeeded" && len(f.Outputs) == 0 {
			t.Errorf("job %d (%s, %s) succeeded without outputs", j.n, j.renderer, j.id)
		}
	}
	if retried > retries {
		t.Errorf("%d jobs took two attempts, want at most %d", retried, retries)
	}
	return retried
}

// checkListings lists every key's jobs page by page: exactly the accepted
// jobs, each once, and no input twice (every input is unique, so two jobs
// with one digest would mean an Idempotency-Key made two jobs).
func checkListings(t *testing.T, c *client, keys []string, jobs []*loadJob) {
	t.Helper()
	want := map[string]*loadJob{}
	for _, j := range jobs {
		want[j.id] = j
	}
	seen, digests := map[string]bool{}, map[string]string{}
	for _, key := range keys {
		for _, j := range listAll(t, c, key) {
			if seen[j.ID] {
				t.Errorf("job %s listed twice", j.ID)
			}
			seen[j.ID] = true
			if lj := want[j.ID]; lj == nil {
				t.Errorf("job %s (%s) is listed but no client was given it: a duplicate", j.ID, j.Renderer)
			} else if lj.key != key {
				t.Errorf("job %s is listed under another key", j.ID)
			}
			if other, dup := digests[j.Input.SHA256]; dup {
				t.Errorf("jobs %s and %s have the same input: one request made two jobs", other, j.ID)
			}
			digests[j.Input.SHA256] = j.ID
			if !j.terminal() {
				t.Errorf("job %s is listed as %s after its client saw it end", j.ID, j.State)
			}
		}
	}
	if len(seen) != len(jobs) {
		t.Errorf("the listings hold %d jobs, want the %d accepted", len(seen), len(jobs))
	}
}

// listAll follows a key's job list through every page.
func listAll(t *testing.T, c *client, key string) []jobJSON {
	t.Helper()
	var all []jobJSON
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("the job list did not end after 1000 pages")
		}
		q := "/v1/jobs?limit=100"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r := c.do("GET", q, key, "", nil, nil)
		if r.Status != 200 {
			t.Fatalf("GET %s: %d %s", q, r.Status, tail(r.Body))
		}
		var page struct {
			Jobs []jobJSON `json:"jobs"`
			Next string    `json:"next_cursor"`
		}
		r.json(t, &page)
		all = append(all, page.Jobs...)
		if page.Next == "" {
			return all
		}
		cursor = page.Next
	}
}

// checkNothingLeft checks the worker host while the worker still runs (it
// reaps on the way out, which would hide a leak): no sandbox, bundle or
// cgroup outlived its job.
func checkNothingLeft(t *testing.T, s *stack) {
	t.Helper()
	waitSandboxesGone(t, s)
	m, err := sandbox.NewManager(s.workerSB)
	if err != nil {
		t.Fatalf("a manager on the worker's state dir: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	left, err := m.Leftovers(ctx)
	if err != nil {
		t.Errorf("listing the worker's leftovers: %v", err)
	}
	if len(left) > 0 {
		t.Errorf("left on the worker host after every job ended: %v", left)
	}
}

// checkQueueBooks checks asynq's side: nothing waits or runs, every
// success completed once and every bad input was archived once.
func checkQueueBooks(t *testing.T, s *stack, jobs []*loadJob) {
	t.Helper()
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: s.redis})
	defer insp.Close()
	// The last handlers return once their sandboxes are torn down.
	var qi *asynq.QueueInfo
	var err error
	waitFor(t, "the queue's last tasks to finish", 30*time.Second, func() bool {
		qi, err = insp.GetQueueInfo(queue.QueueName)
		return err == nil && qi.Active == 0
	})
	ok, bad := 0, 0
	for _, j := range jobs {
		if j.wantState == "succeeded" {
			ok++
		} else {
			bad++
		}
	}
	if qi.Pending+qi.Active+qi.Scheduled+qi.Retry != 0 {
		t.Errorf("the queue still holds %d pending, %d active, %d scheduled and %d retry tasks, want none",
			qi.Pending, qi.Active, qi.Scheduled, qi.Retry)
	}
	if qi.Completed != ok || qi.Archived != bad {
		t.Errorf("the queue has %d completed and %d archived tasks, want %d and %d", qi.Completed, qi.Archived, ok, bad)
	}
}

// checkFinishedOnce checks that the worker reported each job's end once.
func checkFinishedOnce(t *testing.T, s *stack, jobs []*loadJob) {
	t.Helper()
	counts := finishedCounts(s.worker.output())
	for _, j := range jobs {
		if n := counts[j.id]; n != 1 {
			t.Errorf("the worker finished job %s %d times, want once", j.id, n)
		}
	}
	if len(counts) != len(jobs) {
		t.Errorf("the worker finished %d distinct jobs, want %d", len(counts), len(jobs))
	}
}

// finishedCounts counts the worker's "job finished" log lines by job.
func finishedCounts(workerLog string) map[string]int {
	counts := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(workerLog))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var l struct {
			Msg string `json:"msg"`
			Job string `json:"job_id"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "job finished" {
			counts[l.Job]++
		}
	}
	return counts
}

// rssSample is the worker's resident memory at a moment of the run.
type rssSample struct {
	at  time.Duration
	rss int64 // bytes
}

type rssSampler struct {
	stopc chan struct{}
	done  chan []rssSample
}
