package render

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/renderbox/renderbox/internal/jobspec"
	"github.com/renderbox/renderbox/internal/wire"
)

// Chains: a job may name several catalogue renderers joined by
// "|", e.g. "office-pdf|pdf-protect". Each step runs in a fresh sandbox;
// the host checks a step's files as that renderer's outputs (one file, of
// a type the next step takes) and hands the file to the next step as its
// input, sniffed and validated again like a client's. A step's options are
// given as "<renderer>.<option>"; the chain's limits apply to each step.

const (
	// ChainSeparator joins the steps of a chain in a job's renderer.
	ChainSeparator = "|"
	// MaxChainSteps bounds a chain.
	MaxChainSteps = 4
)

// lookupChain makes the renderer of a chain: the first step's inputs and
// checks, the last step's outputs, every step's options under its name.
func lookupChain(name string) (*Renderer, error) {
	names := strings.Split(name, ChainSeparator)
	if len(names) > MaxChainSteps {
		return nil, fmt.Errorf("%w: a chain has at most %d steps, %s has %d", ErrUnknownRenderer, MaxChainSteps, quoteName(name), len(names))
	}
	var steps []*Renderer
	for i, n := range names {
		r, ok := catalogue[n]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w %s in the chain %s (known: %s)", ErrUnknownRenderer, quoteName(n), quoteName(name), strings.Join(Names(), ", "))
		case r.plan != nil:
			return nil, fmt.Errorf("%w: %s runs in several sandboxes itself and cannot be a step of a chain", ErrUnknownRenderer, n)
		case slices.Contains(names[:i], n):
			return nil, fmt.Errorf("%w: the chain %s names %s twice (its options could not be told apart)", ErrUnknownRenderer, quoteName(name), n)
		case i > 0 && !slices.Contains(r.Inputs, steps[i-1].Output):
			return nil, fmt.Errorf("%w: in the chain %s, %s makes %s, which %s does not take", ErrUnknownRenderer, quoteName(name), steps[i-1].Name, steps[i-1].Output, n)
		}
		steps = append(steps, r)
	}
	first, last := steps[0], steps[len(steps)-1]
	c := &Renderer{
		Name:          name,
		Description:   "A chain: " + strings.Join(names, ", then ") + ", each in a fresh sandbox.",
		Inputs:        first.Inputs,
		Output:        last.Output,
		MaxInputBytes: first.MaxInputBytes,
		Limits:        first.Limits,
		MaxPages:      first.MaxPages,
		MaxPixels:     first.MaxPixels,
		check:         first.check,
		site:          first.site,
		parts:         first.parts,
		partsOf:       first.partsOf,
		typedParts:    first.typedParts,
		rules:         last.Name,
	}
	for _, s := range steps {
		for _, o := range s.Options {
			if o.Name == "entry" || o.Name == "stylesheet" {
				continue // a page's files are read by their names: the first step's defaults
			}
			o.Name = s.Name + "." + o.Name
			c.Options = append(c.Options, o)
		}
	}
	c.build = func(in inputFile, v Values, l jobspec.Limits) (wire.Request, error) {
		vals, err := validate(first.Name, first.Options, stepOptions(v, first))
		if err != nil {
			return wire.Request{}, err
		}
		return first.build(in, vals, l)
	}
	c.plan = func(p *Plan) {
		p.firstStage, p.firstFamily = first.Name, first.Family()
		for i := 1; i < len(steps); i++ {
			prev, next := steps[i-1], steps[i]
			p.stages = append(p.stages, stage{name: next.Name, family: next.Family(), next: func(p *Plan, files []wire.File) (Stage, error) {
				return chainStep(p, prev, next, files)
			}})
		}
	}
	return c, nil
}

// stepOptions are the chain's options of one step, by their own names.
func stepOptions(v Values, step *Renderer) map[string]any {
	opts := map[string]any{}
	for k, x := range v {
		if name, ok := strings.CutPrefix(k, step.Name+"."); ok {
			opts[name] = x
		}
	}
	return opts
}

// chainStep checks what prev returned as its outputs, one file, and
// prepares next with it as the input.
func chainStep(p *Plan, prev, next *Renderer, files []wire.File) (Stage, error) {
	outs, err := prev.AcceptOutputs(files)
	if err != nil {
		return Stage{}, err
	}
	if len(outs) != 1 {
		return Stage{}, fmt.Errorf("%w: %s made %d files; a step before another must make one", ErrBadOutput, prev.Name, len(outs))
	}
	data := outs[0].Data
	np, err := next.prepare(data, "", stepOptions(p.Options, next), stepLimits(p.Request, next), "")
	if err != nil {
		return Stage{}, fmt.Errorf("%w: %s does not take what %s made: %v", ErrBadOutput, next.Name, prev.Name, err)
	}
	np.Job.Input = bytes.NewReader(data)
	return Stage{Job: np.Job, Input: bytes.NewReader(data)}, nil
}

// stepLimits is the job's limit request as a later step takes it: each
// lowered limit at most that renderer's own, and the ones it has not
// (max_pages, max_pixels) left out.
func stepLimits(req LimitRequest, r *Renderer) LimitRequest {
	lim := r.Limits
	lower := func(got, own float64) float64 {
		if got == 0 || own == 0 {
			return 0
		}
		return min(got, own)
	}
	req.TimeoutSeconds = lower(req.TimeoutSeconds, lim.Timeout.Seconds())
	req.MemoryBytes = int64(lower(float64(req.MemoryBytes), float64(lim.MemoryBytes)))
	req.MaxOutputBytes = int64(lower(float64(req.MaxOutputBytes), float64(lim.MaxOutputBytes)))
	req.MaxPages = int(lower(float64(req.MaxPages), float64(r.MaxPages)))
	req.MaxPixels = int64(lower(float64(req.MaxPixels), float64(r.MaxPixels)))
	return req
}
