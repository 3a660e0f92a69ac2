package worker

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/wire"
)

// runStages runs the plan's stages in order, each in a fresh sandbox (from
// the pool of its family when one is ready), the next built by the host
// from what the last returned (render.Plan.Next). It calls then once: with
// the first stage that failed, or whose files the host refused
// (render_failed; nothing of them is kept), else with the last stage,
// before that sandbox's teardown. steps lists the stages that ran; nil for
// a renderer of one stage.
func (h *Handler) runStages(ctx context.Context, r *render.Renderer, plan *render.Plan, input []byte, then func(*sandbox.Result, string, error, []queue.Step)) {
	names := plan.Stages()
	if len(names) == 1 {
		h.run(ctx, r.Name, plan.FirstFamily(), plan.Job, bytes.NewReader(input), func(res *sandbox.Result, mode string, err error) {
			then(res, mode, err, nil)
		})
		return
	}
	st := render.Stage{Name: names[0], Family: plan.FirstFamily(), Job: plan.Job, Input: bytes.NewReader(input)}
	var steps []queue.Step
	for i := 0; ; i++ {
		t0 := time.Now()
		var files []wire.File
		var last *sandbox.Result
		var lastMode string
		ended := false
		h.run(ctx, r.Name, st.Family, st.Job, st.Input, func(res *sandbox.Result, mode string, err error) {
			steps = append(steps, queue.Step{Name: st.Name, Outcome: string(sandbox.OutcomeOf(err)), SandboxMode: mode, Seconds: time.Since(t0).Seconds()})
			if err != nil || i == len(names)-1 {
				ended = true
				then(res, mode, stageErr(st.Name, err), steps)
				return
			}
			// The files outlive the sandbox: they are the host's copy
			// (safe-pdf's frames: their names, the bytes in its spool).
			files, last, lastMode = res.Response.Files, res, mode
		})
		if ended {
			return
		}
		next, err := plan.Next(i, files)
		if err != nil {
			// Refused files fail the job; the host's own trouble in
			// keeping them (a full disk) is worth another attempt.
			outcome := sandbox.RenderFailed
			if !errors.Is(err, render.ErrBadOutput) {
				outcome = sandbox.SandboxFailure
			}
			steps[len(steps)-1].Outcome = string(outcome)
			then(last, lastMode, &sandbox.Error{Outcome: outcome, Msg: "stage " + st.Name + ": " + err.Error()}, steps)
			return
		}
		st = next
	}
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
