package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/worker"
)

const renderHelp = `usage: worker render -renderer NAME [flags] INPUT -o OUTDIR

Render a local file through a real sandbox, as a job would be (each stage
of a chain in a fresh one), write its outputs into OUTDIR and print a JSON
summary: outcome, sandbox, outputs, the phases' timings in seconds. It
needs runsc, cgroups and the rootfs, not Redis or the API.
`

// renderArgs are render's flags that name its job, not a setting: they
// have no variable.
var renderArgs = []string{"renderer", "o", "options", "limits", "input-type"}

// renderSummary is what `worker render` prints on stdout.
type renderSummary struct {
	Renderer  string          `json:"renderer"`
	Outcome   sandbox.Outcome `json:"outcome"`
	Error     string          `json:"error,omitempty"`
	SandboxID string          `json:"sandbox_id"`
	Outputs   []string        `json:"outputs,omitempty"`
	// Timings are the sandbox's phases in seconds, as the logs and the
	// metrics give durations.
	Timings map[string]float64 `json:"timings_seconds"`
}

func cmdRender(ctx context.Context, args []string, stdout io.Writer) error {
	var c worker.Config
	var name, outDir, options, limits, inputType string
	fs := flags("render", renderHelp, &c)
	fs.StringVar(&inputType, "input-type", "", "the input's media type when its bytes are text that could be several (text/html, text/markdown, text/csv, …)")
	fs.StringVar(&name, "renderer", "", "renderer name (see GET /v1/renderers), e.g. pdf-png, svg-png, html-pdf")
	fs.StringVar(&outDir, "o", "", "output directory")
	fs.StringVar(&options, "options", "", `renderer options as a JSON object, e.g. '{"dpi": 72}'`)
	fs.StringVar(&limits, "limits", "", `lower limits as a JSON object, e.g. '{"timeout_seconds": 10}'`)
	rest, err := parse(fs, args, 1)
	if err != nil {
		return err
	}
	if err := c.Settle(fs, renderArgs...); err != nil {
		return err
	}
	if name == "" || outDir == "" || len(rest) != 1 {
		return errors.New("render: usage: worker render -renderer NAME INPUT -o OUTDIR")
	}
	r, err := render.LookupWithDiagnostics(name)
	if err != nil {
		return err
	}
	input, err := os.ReadFile(rest[0])
	if err != nil {
		return fmt.Errorf("render: %w", err)
	}
	plan, err := r.PrepareTyped(input, inputType, json.RawMessage(options), json.RawMessage(limits))
	if err != nil {
		return fmt.Errorf("render: %w", err)
	}
	m, err := c.Runnable(ctx, c.Logger())
	if err != nil {
		return err
	}
	defer plan.Close()
	plan.Job.Input = bytes.NewReader(input)
	log := c.Logger()
	// As a worker runs a job (each stage of a chain in a fresh sandbox,
	// the outputs checked), without the pool.
	ran := (&worker.Runner{Manager: m, Logger: log}).Run(ctx, log, r, plan, input)
	ran.Teardown()
	res, runErr := ran.Result, ran.Err
	sum := renderSummary{Renderer: name, Outcome: sandbox.OutcomeOf(runErr), SandboxID: res.SandboxID,
		Timings: map[string]float64{
			"create": res.Timings.Create.Seconds(), "start": res.Timings.Start.Seconds(),
			"render": res.Timings.Render.Seconds(), "teardown": res.Timings.Teardown.Seconds(),
		}}
	if runErr == nil {
		if err := os.MkdirAll(outDir, 0o755); err != nil {
			return err
		}
		for _, o := range ran.Outputs {
			p := filepath.Join(outDir, o.Name)
			if err := os.WriteFile(p, o.Data, 0o644); err != nil {
				return err
			}
			sum.Outputs = append(sum.Outputs, p)
		}
	} else {
		sum.Error = runErr.Error()
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(sum)
	if runErr != nil {
		return fmt.Errorf("render: %w", runErr)
	}
	return nil
}
