//go:build !unit

package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
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
		defer plan.Close()
		// The renderer, subverted, answers with these frames.
		plan.Job.Request.Steps, plan.Job.Input = tc.steps, bytes.NewReader(input)
		p := attempt{Payload: queue.Payload{JobID: fmt.Sprintf("job-frames-%d", i), Renderer: "safe-pdf", Retention: time.Hour}}
		var ret error
		ran := h.runner().Run(ctx, h.Logger, r, plan, input)
		ret = h.report(ctx, h.Logger, p, r, ran, time.Now(), nil)
		ran.Teardown()
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

// framesPDF is 8 pages of 612×740 pt: at 300 dpi each draws as a frame of
// 2550×3084 RGB pixels, 180 MiB of frames in all.
func framesPDF() []byte {
	return bytes.ReplaceAll(samples.PDF("Frames", 8), []byte("/MediaBox [0 0 612 792]"), []byte("/MediaBox [0 0 612 740]"))
}

// A safe-pdf job whose pixel stage draws 180 MiB of frames (a real PDF in
// real sandboxes) costs the worker's heap a few MiB, not the frames: they
// go from the pixel stage's response to a spill file as they arrive, and
// the rebuild's input is read from there. The bytes the process allocates
// during the job (runtime/metrics) bound its heap's growth from above,
// whatever the GC's timing and with or without -race.
func TestSafePDFFramesStayOffTheHeap(t *testing.T) {
	h, rdb, r := reportHandler(t, "safe-pdf")
	h.Manager = testenv.Manager(t, sandbox.Config{})
	ctx := context.Background()
	input := framesPDF()
	plan, err := r.PrepareJSON(input, json.RawMessage(`{"dpi": 300}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plan.Close()
	plan.Job.Input = bytes.NewReader(input)
	p := attempt{Payload: queue.Payload{JobID: "job-frames-heap", Renderer: "safe-pdf", Retention: time.Hour}}
	runtime.GC()
	// The resident set's high-water mark, from here (clear_refs "5"):
	// logged only, -race's shadow memory is in it.
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	hwm0 := vmHWM(t)
	allocs0, live0 := heapNow()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			if _, live := heapNow(); live > peak.Load() {
				peak.Store(live)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	start := time.Now()
	var ret error
	ran := h.runner().Run(ctx, h.Logger, r, plan, input)
	ret = h.report(ctx, h.Logger, p, r, ran, time.Now(), nil)
	ran.Teardown()
	close(stop)
	<-sampled
	allocs1, _ := heapNow()
	if ret != nil {
		t.Fatalf("the job: %v", ret)
	}
	ev := lastEvent(t, rdb, p.JobID)
	if ev.State != "succeeded" || len(ev.Outputs) != 1 {
		t.Fatalf("event %+v, want succeeded with output.pdf", ev)
	}
	out, err := h.Queue.GetBlob(ctx, queue.OutputKey(p.JobID, "output.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	// Each page was drawn at 300 dpi: the frames were 8 × 2550 × 3084 × 3 bytes.
	if n := bytes.Count(out, []byte("/Width 2550")); n != 8 {
		t.Fatalf("the output has %d images 2550 pixels wide, want 8 (the frames at 300 dpi)", n)
	}
	allocated, grew := allocs1-allocs0, peak.Load()-min(live0, peak.Load())
	t.Logf("180 MiB of frames in %v: %.1f MiB allocated, the live heap %.1f MiB above its start at its peak, VmHWM %.1f MiB above; output %d bytes",
		time.Since(start).Round(time.Millisecond), float64(allocated)/(1<<20), float64(grew)/(1<<20), float64(vmHWM(t)-hwm0)/(1<<20), len(out))
	if allocated > safePDFHeapBound {
		t.Errorf("the job allocated %.1f MiB of heap for 180 MiB of frames, over the bound of %d MiB", float64(allocated)/(1<<20), safePDFHeapBound>>20)
	}
}

// safePDFHeapBound is what a safe-pdf job may allocate besides its input
// and output, whatever the size of its frames.
const safePDFHeapBound = 16 << 20

// vmHWM is the process's peak resident set in bytes.
func vmHWM(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var kib int64
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, _ = strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return kib << 10
}

// heapNow reads the bytes allocated on the heap since the start and the
// bytes of heap objects now (live, or dead and not yet swept).
func heapNow() (allocs, live uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}
