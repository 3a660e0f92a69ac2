package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/internal/wire"
)

// A safe-pdf pixel stage whose sandbox sends malformed frames (a subverted
// renderer: here printf writes them in a real sandbox) fails the job
// render_failed: no rebuild runs, nothing is stored, and the job's record
// lists the stage that ended it.
func TestSafePDFMalformedFramesFailTheJob(t *testing.T) {
	h, rdb, r := reportHandler(t, "safe-pdf")
	h.Manager = testenv.Manager(t, sandbox.Config{})
	ctx := context.Background()
	frame := func(n int, header string, pixels int) wire.Step {
		return wire.Step{Argv: []string{"/usr/bin/printf", header + strings.Repeat("x", pixels)}, Stdout: fmt.Sprintf("%s/page-%d.ppm", wire.OutputDir, n)}
	}
	for i, tc := range []struct {
		name   string
		limits json.RawMessage
		steps  []wire.Step
		msg    string
	}{
		{"wrong size", nil, []wire.Step{frame(1, `P6\n4 3\n255\n`, 35)}, "holds 35"},
		{"too many pages", json.RawMessage(`{"max_pages": 2}`), []wire.Step{frame(1, `P6\n4 3\n255\n`, 36), frame(2, `P6\n4 3\n255\n`, 36), frame(3, `P6\n4 3\n255\n`, 36)}, "more pages than max_pages, 2"},
		{"too large", json.RawMessage(`{"max_pixels": 10}`), []wire.Step{frame(1, `P6\n4 3\n255\n`, 36)}, "over the limit of 10 pixels"},
	} {
		input := samples.PDF("pages", 1)
		plan, err := r.PrepareJSON(input, nil, tc.limits)
		if err != nil {
			t.Fatal(err)
		}
		// The renderer, subverted, answers with these frames.
		plan.Job.Request.Steps, plan.Job.Input = tc.steps, bytes.NewReader(input)
		p := attempt{Payload: queue.Payload{JobID: fmt.Sprintf("job-frames-%d", i), Renderer: "safe-pdf", Retention: time.Hour}}
		var ret error
		h.runStages(ctx, r, plan, input, func(res *sandbox.Result, mode string, runErr error, steps []queue.Step) {
			ret = h.report(ctx, h.Logger, p, r, res, mode, runErr, time.Now(), steps)
		})
		if !errors.Is(ret, asynq.SkipRetry) {
			t.Errorf("%s: report = %v, want a failure that is not retried", tc.name, ret)
		}
		if keys := jobKeys(t, rdb, p.JobID); len(keys) != 0 {
			t.Errorf("%s: stored for the job: %v", tc.name, keys)
		}
		ev := lastEvent(t, rdb, p.JobID)
		if ev.State != "failed" || ev.ErrorCode != "render_failed" || len(ev.Outputs) != 0 || !strings.Contains(ev.ErrorMessage, tc.msg) {
			t.Errorf("%s: event %+v, want failed render_failed saying %q, no outputs", tc.name, ev, tc.msg)
		}
		if ev.Diagnostics == nil || len(ev.Diagnostics.Steps) != 1 || ev.Diagnostics.Steps[0].Name != render.StageRasterize ||
			ev.Diagnostics.Steps[0].Outcome != "render_failed" || ev.Diagnostics.Steps[0].SandboxMode != sandbox.ModeCold {
			t.Errorf("%s: the record's steps %+v, want the rasterize stage alone, render_failed, cold", tc.name, ev.Diagnostics)
		}
	}
}

// lastEvent is the last event published for job.
func lastEvent(t *testing.T, rdb *redis.Client, job string) queue.Event {
	t.Helper()
	msgs, err := rdb.XRange(context.Background(), queue.EventStream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var last queue.Event
	for _, m := range msgs {
		var ev queue.Event
		if s, ok := m.Values["event"].(string); ok && json.Unmarshal([]byte(s), &ev) == nil && ev.JobID == job {
			last = ev
		}
	}
	return last
}
