package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/renderbox/renderbox/client"
)

// listFlag collects a repeated flag's values in order.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func renderFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	renderer := fs.String("r", "", "the `renderer` (renderbox renderers lists them)")
	dir := fs.String("o", ".", "the `directory` to write the outputs into")
	var opts, limits, then, downloads listFlag
	fs.Var(&opts, "opt", "a renderer option `NAME=VALUE`, typed as the renderer's options are (repeat for several;\n"+
		"RENDERER.NAME=VALUE for a -then step's)")
	optionsJSON := fs.String("options", "", "the renderer's options as one JSON `object` (-opt wins)")
	inputType := fs.String("input-type", "", "the input's media `type` where its bytes do not tell (text/csv, text/markdown, …)")
	fs.Var(&then, "then", "chain `RENDERER[:JSON]` after the renderer, on its output, with options as a JSON object (repeat, in order)")
	fs.Var(&limits, "limit", "lower a limit, `NAME=VALUE` (timeout_seconds=10, memory_bytes=268435456, …; repeat)")
	fs.Var(&downloads, "download-from", "an input the server fetches from `URL` (repeat)")
	pageURL := fs.String("url", "", "render the page at `URL` (html-pdf, html-png): the server fetches it and all it loads")
	callback := fs.String("callback", "", "a `URL` to send the job's webhook to")
	outputName := fs.String("output-name", "", "name the outputs `NAME`.pdf, NAME-1.png, …")
	idem := fs.String("idempotency-key", "", "resubmitting with the same `key` returns the first job (one is made when empty)")
	noWait := fs.Bool("no-wait", false, "print the job's id once it is accepted and return")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up waiting after this long (the job goes on)")
	retry := fs.Duration("retry", 30*time.Second, "keep trying a server that does not answer (or answers 5xx, 408, 429) this long")
	strict := fs.Bool("strict", false, "exit 6 when the page missed files or had requests refused (else warnings)")
	return func(ctx context.Context, s *env, args []string) error {
		if *renderer == "" {
			return usageError("want -r RENDERER")
		}
		if len(args) == 0 && len(downloads) == 0 && *pageURL == "" {
			return usageError("want at least one file or directory (or -download-from URL, or -url URL)")
		}
		req := client.Request{Renderer: *renderer, InputType: *inputType, CallbackURL: *callback, OutputName: *outputName, IdempotencyKey: *idem, URL: *pageURL}
		for _, p := range args {
			fi, err := os.Stat(p)
			if err != nil {
				return err
			}
			if !fi.IsDir() {
				req.Files = append(req.Files, client.FromPath(p))
				continue
			}
			if len(args) > 1 {
				return usageError(fmt.Sprintf("%s is a directory: a directory is sent alone, as its tree", p))
			}
			if req.Files, err = client.FromDir(p); err != nil {
				return err
			}
		}
		for _, u := range downloads {
			req.DownloadFrom = append(req.DownloadFrom, client.Download{URL: u})
		}
		for _, t := range then {
			name, raw, _ := strings.Cut(t, ":")
			step := client.Step{Renderer: name}
			if raw != "" {
				if err := json.Unmarshal([]byte(raw), &step.Options); err != nil {
					return usageError(fmt.Sprintf("-then %s: the options after the colon are not a JSON object: %v", name, err))
				}
			}
			req.Then = append(req.Then, step)
		}
		for _, l := range limits {
			name, val, ok := strings.Cut(l, "=")
			f, err := strconv.ParseFloat(val, 64)
			if !ok || name == "" || err != nil {
				return usageError(fmt.Sprintf("-limit %s: want NAME=NUMBER", l))
			}
			if req.Limits == nil {
				req.Limits = map[string]any{}
			}
			req.Limits[name] = jsonNumber(f)
		}
		if *optionsJSON != "" {
			if err := json.Unmarshal([]byte(*optionsJSON), &req.Options); err != nil {
				return usageError(fmt.Sprintf("-options: not a JSON object: %v", err))
			}
		}
		c, err := s.client()
		if err != nil {
			return err
		}
		if len(opts) > 0 {
			rs, err := c.Renderers(ctx)
			if err != nil {
				return err
			}
			if err := applyOptions(rs, &req, opts); err != nil {
				return err
			}
		}
		c.MaxRetryTime = *retry
		if *retry <= 0 {
			c.MaxRetryTime = -1
		}
		c.OnRetry = func(a client.Attempt) {
			if a.Next > 0 {
				fmt.Fprintf(s.stderr, "renderbox: %s attempt %d failed (%v); again in %.1fs\n", a.Op, a.N, a.Err, a.Next.Seconds())
			}
		}
		j, err := c.Submit(ctx, req)
		if err != nil {
			return err
		}
		if *noWait {
			fmt.Fprintln(s.stdout, j.ID)
			return nil
		}
		wctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		p := newProgress(s.stderr, j.ID)
		p.show(j)
		j, err = c.Wait(wctx, j.ID, p.show)
		p.done()
		if err != nil {
			var jobErr *client.JobError
			if errors.As(err, &jobErr) {
				warn(s.stderr, jobErr.Job)
				return err
			}
			if wctx.Err() != nil && ctx.Err() == nil {
				return fmt.Errorf("gave up waiting for %s after %s (-timeout); it goes on: renderbox jobs get %s", p.id, *timeout, p.id)
			}
			return fmt.Errorf("waiting for %s: %w", p.id, err)
		}
		warned := warn(s.stderr, j)
		paths, err := c.DownloadAll(ctx, j, *dir)
		for _, p := range paths {
			fmt.Fprintln(s.stdout, p)
		}
		if err == nil && warned && *strict {
			return errStrict
		}
		return err
	}
}

// jsonNumber is f as an integer when it is one (JSON has one number
// type, but the API's integer limits refuse 1e+07 spelt as a float).
func jsonNumber(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return f
}

// warn prints what the page asked for and did not get; it reports
// whether there was any.
func warn(w io.Writer, j *client.Job) bool {
	if j == nil || len(j.Diagnostics) == 0 {
		return false
	}
	var d struct {
		Missing []string `json:"missing_files"`
		Refused []string `json:"refused_requests"`
		Console []string `json:"console_errors"`
	}
	if json.Unmarshal(j.Diagnostics, &d) != nil {
		return false
	}
	for _, m := range d.Missing {
		fmt.Fprintf(w, "renderbox: warning: the page asked for %s, which the job does not have (send it under that path, or the directory)\n", m)
	}
	for _, r := range d.Refused {
		fmt.Fprintf(w, "renderbox: warning: the page's request for %s was refused (it leaves the page's origin)\n", r)
	}
	for _, c := range d.Console {
		fmt.Fprintf(w, "renderbox: note: the page logged an error: %s\n", c)
	}
	return len(d.Missing)+len(d.Refused) > 0
}

// applyOptions types each -opt NAME=VALUE as the renderer's option NAME
// is typed in the catalogue, checks it against the option's enum and
// bounds, and puts it in the request (RENDERER.NAME for a -then step).
func applyOptions(rs []client.Renderer, req *client.Request, opts []string) error {
	byName := map[string]*client.Renderer{}
	for i := range rs {
		byName[rs[i].Name] = &rs[i]
	}
	for _, kv := range opts {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return usageError(fmt.Sprintf("-opt %q: want NAME=VALUE", kv))
		}
		target, dest := req.Renderer, &req.Options
		if step, opt, ok := strings.Cut(name, "."); ok {
			i := slices.IndexFunc(req.Then, func(s client.Step) bool { return s.Renderer == step })
			if i < 0 {
				return usageError(fmt.Sprintf("-opt %s: %s is not a -then step", name, step))
			}
			target, dest, name = step, &req.Then[i].Options, opt
		}
		r := byName[target]
		if r == nil {
			return usageError(fmt.Sprintf("no renderer %q (renderbox renderers lists them)", target))
		}
		i := slices.IndexFunc(r.Options, func(o client.Option) bool { return o.Name == name })
		if i < 0 {
			var names []string
			for _, o := range r.Options {
				names = append(names, o.Name)
			}
			return usageError(fmt.Sprintf("%s has no option %q; it takes: %s", target, name, strings.Join(names, ", ")))
		}
		v, err := coerce(r.Options[i], val)
		if err != nil {
			return usageError(fmt.Sprintf("-opt %s: %v (renderbox renderers %s)", name, err, target))
		}
		if *dest == nil {
			*dest = map[string]any{}
		}
		(*dest)[name] = v
	}
	return nil
}

// coerce reads val as o's type and checks its enum and bounds; the
// pattern is the server's to check. A secret's value is never repeated.
func coerce(o client.Option, val string) (any, error) {
	shown := strconv.Quote(val)
	if o.Secret {
		shown = "the value given"
	}
	var v any
	var f float64
	switch o.Type {
	case "integer":
		i, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("want an integer, got %s", shown)
		}
		v, f = i, float64(i)
	case "number":
		x, err := strconv.ParseFloat(val, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("want a number, got %s", shown)
		}
		v, f = x, x
	case "boolean":
		b, err := strconv.ParseBool(val)
		if err != nil {
			return nil, fmt.Errorf("want true or false, got %s", shown)
		}
		return b, nil
	default:
		if len(o.Enum) > 0 && !slices.ContainsFunc(o.Enum, func(e string) bool {
			return e == val || o.CaseInsensitive && strings.EqualFold(e, val)
		}) {
			return nil, fmt.Errorf("want one of %s, got %s", strings.Join(o.Enum, ", "), shown)
		}
		if o.MaxLength > 0 && len(val) > o.MaxLength {
			return nil, fmt.Errorf("want at most %d bytes, got %d", o.MaxLength, len(val))
		}
		return val, nil
	}
	if o.Minimum != nil && f < *o.Minimum || o.Maximum != nil && f > *o.Maximum {
		return nil, fmt.Errorf("want %s, got %s", bounds(o), shown)
	}
	return v, nil
}

// progress shows the job's state while it is waited for: one line
// rewritten in place each second on a terminal, a line per change
// otherwise.
type progress struct {
	w     io.Writer
	id    string
	start time.Time
	mu    sync.Mutex
	last  string
	tick  *time.Ticker // on a terminal
	quit  chan struct{}
}

func newProgress(w io.Writer, id string) *progress {
	p := &progress{w: w, id: id, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tick, p.quit = time.NewTicker(time.Second), make(chan struct{})
			go func() {
				for {
					select {
					case <-p.tick.C:
						p.mu.Lock()
						p.draw()
						p.mu.Unlock()
					case <-p.quit:
						return
					}
				}
			}()
		}
	}
	return p
}

func (p *progress) draw() {
	if p.last != "" {
		fmt.Fprintf(p.w, "\r\033[K%s, %.0fs", p.last, time.Since(p.start).Seconds())
	}
}

func (p *progress) show(j *client.Job) {
	line := p.id + ": " + progressLine(j)
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := line != p.last
	p.last = line
	switch {
	case p.tick != nil:
		p.draw()
	case changed:
		fmt.Fprintf(p.w, "%s after %.1fs\n", line, time.Since(p.start).Seconds())
	}
}

// progressLine is the job's state, its attempt after the first and, once
// the attempt took its sandbox, how that was made: "running (restored
// sandbox)", "succeeded (attempt 2, cold sandbox)".
func progressLine(j *client.Job) string {
	var notes []string
	if j.Attempts > 1 {
		notes = append(notes, fmt.Sprintf("attempt %d", j.Attempts))
	}
	if j.SandboxMode != "" {
		notes = append(notes, strings.Replace(j.SandboxMode, "prebooted", "pre-booted", 1)+" sandbox")
	}
	if len(notes) == 0 {
		return string(j.State)
	}
	return fmt.Sprintf("%s (%s)", j.State, strings.Join(notes, ", "))
}

func (p *progress) done() {
	if p.tick != nil {
		p.tick.Stop()
		close(p.quit)
		p.mu.Lock()
		defer p.mu.Unlock()
		fmt.Fprintf(p.w, "\r\033[K%s after %.1fs\n", p.last, time.Since(p.start).Seconds())
	}
}
