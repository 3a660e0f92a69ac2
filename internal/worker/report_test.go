package worker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
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
)

// A sandbox that "succeeded" but returned what its renderer does not make
// (here a page named evil.html instead of its PDF) fails its job as
// render_failed, is not retried, and nothing it sent is stored in Redis.
func TestRefusedOutputsAreNotStored(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(t, false)})
	defer rdb.Close()
	ctx := context.Background()
	h := &Handler{Queue: queue.New(rdb, time.Hour), Logger: slog.New(slog.DiscardHandler), Name: "test"}
	r, err := render.Lookup("html-pdf")
	if err != nil {
		t.Fatal(err)
	}
	res := &sandbox.Result{Response: &wire.Response{Files: []wire.File{
		{Name: "evil.html", Data: []byte("<script>steal()</script>")},
	}}}
	p := queue.Payload{JobID: "job-refused", Renderer: "html-pdf", Retention: time.Hour}
	err = h.report(ctx, h.Logger, p, r, res, sandbox.ModeCold, nil, time.Now())
	if !errors.Is(err, asynq.SkipRetry) {
		t.Errorf("report = %v, want a failure that is not retried", err)
	}
	if keys, _ := rdb.Keys(ctx, "*job-refused*").Result(); len(keys) != 0 {
		t.Errorf("stored for the refused job: %v", keys)
	}
	msgs, err := rdb.XRange(ctx, queue.EventStream, "-", "+").Result()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("events = %v, %v; want one", msgs, err)
	}
	var ev queue.Event
	_ = json.Unmarshal([]byte(msgs[0].Values["event"].(string)), &ev)
	if ev.JobID != p.JobID || ev.State != "failed" || ev.ErrorCode != "render_failed" || len(ev.Outputs) != 0 ||
		!strings.Contains(ev.ErrorMessage, "evil.html") {
		t.Errorf("event = %+v, want failed render_failed naming evil.html, no outputs", ev)
	}
}
