//go:build !unit

package worker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/internal/wire"
	"github.com/renderbox/renderbox/jobstate"
)

// reportHandler is a Handler on the test's Redis, without sandboxes: what
// report needs, with the renderer named.
func reportHandler(t *testing.T, renderer string) (*Handler, *redis.Client, *render.Renderer) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(t, false)})
	t.Cleanup(func() { rdb.Close() })
	r, err := render.Lookup(renderer)
	if err != nil {
		t.Fatal(err)
	}
	return &Handler{Queue: queue.New(rdb, time.Hour), Logger: slog.New(slog.DiscardHandler), Name: "test",
		RootfsDigest: strings.Repeat("9f", 32)}, rdb, r
}

// A sandbox that "succeeded" but returned what its renderer does not make
// (here a page named evil.html instead of its PDF) fails its job as
// render_failed, is not retried, and nothing it sent is stored in Redis.
func TestRefusedOutputsAreNotStored(t *testing.T) {
	h, rdb, r := reportHandler(t, "html-pdf")
	ctx := context.Background()
	res := &sandbox.Result{Response: &wire.Response{Files: []wire.File{
		{Name: "evil.html", Data: []byte("<script>steal()</script>")},
	}}}
	p := attempt{Payload: queue.Payload{JobID: "job-refused", Renderer: "html-pdf", Retention: time.Hour}, started: time.Now().Add(-time.Second).Round(0)}
	ran := &Ran{Result: res, Mode: sandbox.ModeCold}
	ran.check(h.Logger, r)
	err := h.report(ctx, h.Logger, p, r, ran, time.Now(), nil)
	if !errors.Is(err, asynq.SkipRetry) {
		t.Errorf("report = %v, want a failure that is not retried", err)
	}
	if keys := jobKeys(t, rdb, "job-refused"); len(keys) != 0 {
		t.Errorf("stored for the refused job: %v", keys)
	}
	msgs, err := rdb.XRange(ctx, queue.EventStream, "-", "+").Result()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("events = %v, %v; want one", msgs, err)
	}
	var ev queue.Event
	_ = json.Unmarshal([]byte(msgs[0].Values["event"].(string)), &ev)
	if ev.JobID != p.JobID || ev.State != "failed" || ev.ErrorCode != "render_failed" || len(ev.Outputs) != 0 ||
		!strings.Contains(ev.ErrorMessage, "evil.html") || ev.Worker != h.Name || ev.RootfsDigest != h.RootfsDigest || !ev.StartedAt.Equal(p.started) {
		t.Errorf("event = %+v, want failed render_failed naming evil.html, no outputs, by %s on rootfs %s, started at %v", ev, h.Name, h.RootfsDigest, p.started)
	}
}

// The client's output_name renames the accepted pages on the host; a name
// the API would have refused (the task was altered in Redis) fails the job
// and nothing is stored.
func TestOutputNameRenamesAcceptedOutputs(t *testing.T) {
	h, rdb, r := reportHandler(t, "pdf-png")
	ctx := context.Background()
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00")
	res := &sandbox.Result{Response: &wire.Response{Files: []wire.File{{Name: "page-01.png", Data: png}, {Name: "page-02.png", Data: png}}}}
	for _, tc := range []struct {
		name  string
		state jobstate.State
		want  []string // the stored outputs
	}{
		{"scan", "succeeded", []string{"scan-1.png", "scan-2.png"}},
		{"", "succeeded", []string{"page-1.png", "page-2.png"}},
		{"../../x", "failed", nil},
	} {
		if err := rdb.FlushDB(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		p := attempt{Payload: queue.Payload{JobID: "job-named", Renderer: "pdf-png", Retention: time.Hour, OutputName: tc.name}}
		ran := &Ran{Result: res, Mode: sandbox.ModeCold}
		ran.check(h.Logger, r)
		err := h.report(ctx, h.Logger, p, r, ran, time.Now(), nil)
		if tc.state == "failed" != errors.Is(err, asynq.SkipRetry) {
			t.Errorf("output_name %q: report = %v", tc.name, err)
		}
		var keys []string
		for _, o := range tc.want {
			keys = append(keys, queue.OutputKey(p.JobID, o))
		}
		if got := jobKeys(t, rdb, "job-named"); len(got) != len(keys) || len(keys) > 0 && !reflect.DeepEqual(sorted(got), keys) {
			t.Errorf("output_name %q: stored %v, want %v", tc.name, got, keys)
		}
		msgs, _ := rdb.XRange(ctx, queue.EventStream, "-", "+").Result()
		var ev queue.Event
		if len(msgs) == 1 {
			_ = json.Unmarshal([]byte(msgs[0].Values["event"].(string)), &ev)
		}
		var names []string
		for _, o := range ev.Outputs {
			names = append(names, o.Name)
		}
		if ev.State != tc.state || !reflect.DeepEqual(names, tc.want) || tc.state == "failed" && ev.ErrorCode != "internal" {
			t.Errorf("output_name %q: event %s %s with outputs %v, want %s with %v", tc.name, ev.State, ev.ErrorCode, names, tc.state, tc.want)
		}
	}
}

// jobKeys are the Redis keys of job but its done marker, which every
// terminal event sets.
func jobKeys(t *testing.T, rdb *redis.Client, job string) []string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*"+job+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if state, err := queue.New(rdb, 0).Ended(ctx, job); err != nil || state == "" {
		t.Errorf("job %s has no done marker after its terminal event (%v)", job, err)
	}
	return slices.DeleteFunc(keys, func(k string) bool { return strings.HasPrefix(k, "renderbox:done:") })
}

// A task handed out again after its job ended (the worker that ended it
// died before asynq heard) is acknowledged without running: no running
// event, no sandbox, the first result stands.
func TestEndedJobIsNotRunAgain(t *testing.T) {
	h, rdb, _ := reportHandler(t, "svg-png")
	ctx := context.Background()
	p := attempt{Payload: queue.Payload{JobID: "job-ended", Renderer: "svg-png", Retention: time.Hour}}
	if err := h.Queue.PublishEnd(ctx, queue.Event{JobID: p.JobID, State: "succeeded"}, p.Retention); err != nil {
		t.Fatal(err)
	}
	if ttl, err := rdb.TTL(ctx, "renderbox:done:job-ended").Result(); err != nil || ttl <= 0 || ttl > time.Hour {
		t.Errorf("done marker TTL %v (%v), want the job's retention", ttl, err)
	}
	b, _ := json.Marshal(p)
	// No sandbox manager: running the job would panic.
	if err := h.ProcessTask(ctx, asynq.NewTask(queue.TypeRender, b)); err != nil {
		t.Fatalf("ProcessTask = %v, want the task acknowledged", err)
	}
	if msgs, _ := rdb.XRange(ctx, queue.EventStream, "-", "+").Result(); len(msgs) != 1 {
		t.Errorf("%d events, want the first result only", len(msgs))
	}
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	slices.Sort(s)
	return s
}
