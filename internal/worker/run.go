package worker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/tracing"
	"github.com/renderbox/renderbox/internal/wire"
)

// Runner runs a job's plan: each stage in a sandbox from the pool when its
// family has one ready, else in a cold one, the next stage built by the
// host from what the last returned, and the last stage's files checked as
// the renderer's outputs. The worker's jobs, `worker render` and the bench
// all run through it (docs/design.md, "A job's path").
type Runner struct {
	Manager *sandbox.Manager
	// Pool, if set, hands out pre-booted sandboxes.
	Pool *sandbox.Pool
	// Metrics, if set, observes the pool's takes and the teardowns.
	Metrics *Metrics
	Logger  *slog.Logger
	// Took, if set, is told the mode of each sandbox a stage takes (cold
	// when none was ready, or when a pooled one failed), before the stage
	// runs in it: the worker reports it so the job shows it while running.
	Took func(mode string)
	// Tracer, if set, records the stages' phases as spans under the
	// context Run is given (tracing.go).
	Tracer trace.Tracer
}

// Ran is a plan that ran. Its last sandbox is still being destroyed: call
// Teardown once the result is reported.
type Ran struct {
	// Result is the last stage's that ran; Mode how its sandbox was made.
	Result *sandbox.Result
	Mode   string
	// Err is nil when every stage succeeded and the outputs passed their
	// checks; else an *sandbox.Error whose Outcome is the job's.
	Err error
	// Outputs are the accepted outputs, in the renderer's names.
	Outputs []render.Output
	// Steps lists the stages that ran; nil for a renderer of one stage.
	Steps []queue.Step
	// Size is the change in size of the last stage whose renderer
	// reports one (render.Renderer.ReportsSize), nil when none ran.
	Size *queue.SizeChange

	teardown func()
}

// Teardown waits for the last sandbox to be destroyed.
func (ran *Ran) Teardown() {
	if ran.teardown != nil {
		ran.teardown()
		ran.teardown = nil
	}
}

// Run runs plan, whose first stage reads input, and checks what the last
// stage made. A stage that failed, or whose files the host refused, ends
// the run (render_failed; nothing of them is kept).
func (x *Runner) Run(ctx context.Context, log *slog.Logger, r *render.Renderer, plan *render.Plan, input []byte) *Ran {
	names := plan.Stages()
	st := render.Stage{Name: names[0], Family: plan.FirstFamily(), Job: plan.Job, Input: bytes.NewReader(input)}
	var steps []queue.Step
	var size *queue.SizeChange
	for i := 0; ; i++ {
		t0 := time.Now()
		ran := x.stage(ctx, r.Name, st)
		if ran.Err == nil && reportsSize(st.Name) {
			size = queue.NewSizeChange(st.Job.Request.InputSize, filesSize(ran.Result.Response.Files))
		}
		ran.Size = size
		if len(names) > 1 {
			steps = append(steps, queue.Step{Name: st.Name, Outcome: string(sandbox.OutcomeOf(ran.Err)), SandboxMode: ran.Mode, Seconds: time.Since(t0).Seconds()})
			ran.Steps, ran.Err = steps, stageErr(st.Name, ran.Err)
		}
		if ran.Err != nil {
			return ran
		}
		if i == len(names)-1 {
			t := time.Now()
			ran.check(log, r)
			x.span(ctx, tracing.SpanCheck, t, tracing.Outputs.Int(len(ran.Outputs)), tracing.Outcome.String(string(sandbox.OutcomeOf(ran.Err))))
			return ran
		}
		// The files outlive the sandbox: they are the host's copy
		// (safe-pdf's frames: their names, the bytes in its spool). The
		// next stage starts once this one's sandbox is gone.
		ran.Teardown()
		next, err := plan.Next(i, ran.Result.Response.Files)
		if err != nil {
			// Refused files fail the job; the host's own trouble in
			// keeping them (a full disk) is worth another attempt.
			outcome := sandbox.RenderFailed
			if !errors.Is(err, render.ErrBadOutput) {
				outcome = sandbox.SandboxFailure
			}
			steps[len(steps)-1].Outcome = string(outcome)
			ran.Err = &sandbox.Error{Outcome: outcome, Msg: "stage " + st.Name + ": " + err.Error()}
			return ran
		}
		st = next
	}
}

// reportsSize says whether a stage's renderer reports the change in size
// it made (stages of safe-pdf are no renderers of the catalogue).
func reportsSize(stage string) bool {
	r, err := render.Lookup(stage)
	return err == nil && r.ReportsSize
}

func filesSize(fs []wire.File) int64 {
	var n int64
	for _, f := range fs {
		n += int64(len(f.Data))
	}
	return n
}

// check accepts the files of a run that succeeded as the renderer's
// outputs: only files the renderer makes, each what it claims to be. A
// sandbox that returns anything else was subverted or is broken, and
// nothing of it is kept.
func (ran *Ran) check(log *slog.Logger, r *render.Renderer) {
	outs, err := r.AcceptOutputs(ran.Result.Response.Files)
	if err != nil {
		log.Warn("outputs refused", "err", err)
		if len(ran.Steps) > 0 {
			ran.Steps[len(ran.Steps)-1].Outcome = string(sandbox.RenderFailed)
		}
		ran.Err = &sandbox.Error{Outcome: sandbox.RenderFailed, Msg: err.Error()}
		return
	}
	ran.Outputs = outs
}

// stage runs one stage in a sandbox from the pool when its family has one
// ready, else in a cold one. A pooled sandbox that broke (it died while
// idle, its restore went wrong) costs the job nothing: the stage runs
// again, cold, once that sandbox is gone.
func (x *Runner) stage(ctx context.Context, renderer string, st render.Stage) *Ran {
	t := time.Now()
	sb, mode := x.Pool.Take(ctx, st.Family, st.Job.Limits)
	if x.Pool.Serves(st.Family) {
		x.Metrics.took(renderer, time.Since(t))
		taken := mode
		if sb == nil {
			taken = "none"
		}
		x.span(ctx, tracing.SpanSandboxTake, t, tracing.Stage.String(st.Name), tracing.SandboxMode.String(taken))
	}
	job := st.Job
	if sb != nil {
		x.took(mode)
		t0 := time.Now()
		res, td, err := x.Manager.Exec(ctx, sb, job)
		x.traceExec(ctx, st.Name, mode, t0, res, err)
		if sandbox.OutcomeOf(err) != sandbox.SandboxFailure || ctx.Err() != nil {
			return x.ran(ctx, renderer, res, mode, td, err)
		}
		td.Wait()
		x.Metrics.teardown(renderer, res)
		x.Logger.Warn("a pooled sandbox failed; running the job cold", "sandbox_id", res.SandboxID, "sandbox_mode", mode, "err", err)
		job.Input = io.NewSectionReader(st.Input, 0, job.Request.InputSize)
	}
	mode = sandbox.ModeCold
	if x.Manager.Native() {
		mode = sandbox.ModeNativeCold
	}
	x.took(mode)
	t0 := time.Now()
	res, td, err := x.Manager.Exec(ctx, nil, job)
	x.traceExec(ctx, st.Name, mode, t0, res, err)
	return x.ran(ctx, renderer, res, mode, td, err)
}

func (x *Runner) took(mode string) {
	if x.Took != nil {
		x.Took(mode)
	}
}

func (x *Runner) ran(ctx context.Context, renderer string, res *sandbox.Result, mode string, td *sandbox.Teardown, err error) *Ran {
	began := time.Now() // the teardown began as Exec returned
	return &Ran{Result: res, Mode: mode, Err: err, teardown: func() {
		td.Wait()
		x.Metrics.teardown(renderer, res)
		if td != nil && res != nil && x.Tracer != nil {
			tracing.Record(ctx, x.Tracer, tracing.SpanTeardown, began, began.Add(res.Timings.Teardown), tracing.SandboxID.String(res.SandboxID))
		}
	}}
}

// stageErr names the stage in a failure's message.
func stageErr(stage string, err error) error {
	var se *sandbox.Error
	if !errors.As(err, &se) {
		return err
	}
	named := *se
	named.Msg = "stage " + stage + ": " + se.Msg
	return &named
}
