// Package cli is renderbox, the API's command-line client, built on
// package client:
//
//	renderbox render -r html-pdf report.html -o out/
//	renderbox jobs ls | get ID | cancel ID
//	renderbox renderers
//
// The server and key come from flags (-server, -key-file), the
// environment (RENDERBOX_SERVER, RENDERBOX_KEY, RENDERBOX_KEY_FILE) or a
// config file (RENDERBOX_CONFIG, default ~/.config/renderbox/config.json:
// {"server": "...", "key_file": "..."}), in that order.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/renderbox/renderbox/client"
	"github.com/renderbox/renderbox/internal/buildinfo"
	"github.com/renderbox/renderbox/jobstate"
)

const usage = `usage: renderbox COMMAND [flags] [args]

commands:
  render -r RENDERER [-o DIR] [-opt NAME=VALUE]... FILE...   submit, wait with a progress line, download the outputs
  jobs ls [-state S] [-limit N]                              the key's jobs, newest first
  jobs get ID                                                one job, as JSON
  jobs cancel ID                                             cancel a queued or running job
  renderers                                                  the renderers and what they take
  -version                                                   print the build and exit

every command takes -server URL and -key-file FILE (or RENDERBOX_SERVER,
RENDERBOX_KEY or RENDERBOX_KEY_FILE, or a config file: RENDERBOX_CONFIG,
default ~/.config/renderbox/config.json, {"server": "...", "key_file": "..."})
`

// errUsage is a mistake in the command line: exit 2 with the usage.
var errUsage = errors.New("usage")

// Main carries out one command line (without the program's name) and
// returns the exit status: 0, 1 for a command that failed, 2 with the
// usage for a command line not understood.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := run(ctx, args, stdout, stderr)
	switch {
	case errors.Is(err, errUsage):
		fmt.Fprint(stderr, usage)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "renderbox: %v\n", err)
		return 1
	}
	return 0
}

// settings are where the server is and the key.
type settings struct {
	server, keyFile string
}

func (s *settings) bind(fs *flag.FlagSet) {
	fs.StringVar(&s.server, "server", "", "the API's base URL (RENDERBOX_SERVER)")
	fs.StringVar(&s.keyFile, "key-file", "", "a file holding the API key (RENDERBOX_KEY_FILE; or the key itself in RENDERBOX_KEY)")
}

// client resolves the settings: flags, then the environment, then the
// config file. The key is never a flag value, which ps would show.
func (s *settings) client() (*client.Client, error) {
	var conf struct {
		Server  string `json:"server"`
		KeyFile string `json:"key_file"`
	}
	path := os.Getenv("RENDERBOX_CONFIG")
	if path == "" {
		if dir, err := os.UserConfigDir(); err == nil {
			path = filepath.Join(dir, "renderbox", "config.json")
		}
	}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &conf); err != nil {
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	server := first(s.server, os.Getenv("RENDERBOX_SERVER"), conf.Server)
	if server == "" {
		return nil, errors.New("no server: give -server URL, RENDERBOX_SERVER or a config file")
	}
	key := os.Getenv("RENDERBOX_KEY")
	if f := first(s.keyFile, os.Getenv("RENDERBOX_KEY_FILE"), conf.KeyFile); f != "" && (s.keyFile != "" || key == "") {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("the key file: %w", err)
		}
		key = strings.TrimSpace(string(b))
	}
	if key == "" {
		return nil, errors.New("no API key: give -key-file FILE, RENDERBOX_KEY or RENDERBOX_KEY_FILE")
	}
	return client.New(server, key)
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	cmd, args := args[0], args[1:]
	if cmd == "-version" || cmd == "--version" {
		if len(args) > 0 {
			return errUsage
		}
		buildinfo.Read().Print(stdout, "renderbox")
		return nil
	}
	if cmd == "jobs" {
		if len(args) == 0 {
			return errUsage
		}
		cmd, args = "jobs "+args[0], args[1:]
	}
	var s settings
	fs := flag.NewFlagSet("renderbox "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	s.bind(fs)
	switch cmd {
	case "render":
		return render(ctx, fs, &s, args, stdout, stderr)
	case "jobs ls":
		state := fs.String("state", "", "only jobs in this state (queued, running, succeeded, failed, canceled)")
		limit := fs.Int("limit", 50, "the most jobs to list")
		c, err := parse(fs, &s, args, 0)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATE\tRENDERER\tCREATED\tOUTPUTS")
		n := 0
		for j, err := range c.Jobs(ctx, client.ListOptions{State: jobstate.State(*state), Limit: min(*limit, 100)}) {
			if err != nil {
				return err
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", j.ID, j.State, j.Renderer, j.CreatedAt.Local().Format(time.DateTime), len(j.Outputs))
			if n++; n >= *limit {
				break
			}
		}
		return tw.Flush()
	case "jobs get", "jobs cancel":
		c, err := parse(fs, &s, args, 1)
		if err != nil {
			return err
		}
		get := c.Get
		if cmd == "jobs cancel" {
			get = c.Cancel
		}
		j, err := get(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		e := json.NewEncoder(stdout)
		e.SetIndent("", "  ")
		return e.Encode(j)
	case "renderers":
		c, err := parse(fs, &s, args, 0)
		if err != nil {
			return err
		}
		rs, err := c.Renderers(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tOUTPUT\tINPUTS\tOPTIONS")
		for _, r := range rs {
			var names []string
			for _, o := range r.Options {
				var opt struct {
					Name string `json:"name"`
				}
				_ = json.Unmarshal(o, &opt)
				names = append(names, opt.Name)
			}
			sort.Strings(names)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, r.Output, strings.Join(r.Inputs, ","), strings.Join(names, ","))
		}
		return tw.Flush()
	}
	fmt.Fprintf(stderr, "renderbox: unknown command %q\n", cmd)
	return errUsage
}

// parse parses the flags and wants exactly nargs arguments after them.
func parse(fs *flag.FlagSet, s *settings, args []string, nargs int) (*client.Client, error) {
	if err := fs.Parse(args); err != nil {
		return nil, errUsage
	}
	if fs.NArg() != nargs {
		fmt.Fprintf(fs.Output(), "renderbox %s: want %d argument(s), got %q\n", strings.TrimPrefix(fs.Name(), "renderbox "), nargs, fs.Args())
		return nil, errUsage
	}
	return s.client()
}

// optionFlags collect -opt NAME=VALUE: a VALUE that reads as JSON (150,
// true, "x") is that value, anything else a string.
type optionFlags map[string]any

func (o optionFlags) String() string { return "" }

func (o optionFlags) Set(v string) error {
	name, val, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", v)
	}
	var x any
	if json.Unmarshal([]byte(val), &x) != nil {
		x = val
	}
	o[name] = x
	return nil
}

func render(ctx context.Context, fs *flag.FlagSet, s *settings, args []string, stdout, stderr io.Writer) error {
	renderer := fs.String("r", "", "the renderer (renderbox renderers lists them)")
	dir := fs.String("o", ".", "where to write the outputs")
	opts := optionFlags{}
	fs.Var(opts, "opt", "a renderer option NAME=VALUE (repeat for several)")
	optionsJSON := fs.String("options", "", `the renderer's options as one JSON object (merged under -opt)`)
	callback := fs.String("callback", "", "a URL to send the job's webhook to")
	outputName := fs.String("output-name", "", "name the outputs NAME.pdf, NAME-1.png, …")
	idem := fs.String("idempotency-key", "", "resubmitting with the same key returns the first job (one is made when empty)")
	noWait := fs.Bool("no-wait", false, "print the job's id once it is accepted and return")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up waiting after this long (the job goes on)")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *renderer == "" || fs.NArg() == 0 {
		fmt.Fprintln(stderr, "renderbox render: want -r RENDERER and at least one file")
		return errUsage
	}
	c, err := s.client()
	if err != nil {
		return err
	}
	options := map[string]any{}
	if *optionsJSON != "" {
		if err := json.Unmarshal([]byte(*optionsJSON), &options); err != nil {
			return fmt.Errorf("-options: %w", err)
		}
	}
	for k, v := range opts {
		options[k] = v
	}
	req := client.Request{Renderer: *renderer, Options: options, CallbackURL: *callback, OutputName: *outputName, IdempotencyKey: *idem}
	for _, p := range fs.Args() {
		if _, err := os.Stat(p); err != nil {
			return err
		}
		req.Files = append(req.Files, client.FromPath(p))
	}
	j, err := c.Submit(ctx, req)
	if err != nil {
		return err
	}
	if *noWait {
		fmt.Fprintln(stdout, j.ID)
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	p := newProgress(stderr, j.ID)
	p.show(j)
	j, err = c.Wait(wctx, j.ID, p.show)
	p.done()
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", p.id, err)
	}
	if j.State != "succeeded" {
		if j.Error != nil {
			return fmt.Errorf("job %s %s: %s: %s", j.ID, j.State, j.Error.Code, j.Error.Message)
		}
		return fmt.Errorf("job %s %s", j.ID, j.State)
	}
	paths, err := c.DownloadAll(ctx, j, *dir)
	for _, p := range paths {
		fmt.Fprintln(stdout, p)
	}
	return err
}

// progress shows the job's state while it is waited for: one line
// rewritten in place on a terminal, a line per change otherwise.
type progress struct {
	w     io.Writer
	id    string
	tty   bool
	start time.Time
	last  string
}

func newProgress(w io.Writer, id string) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil {
			tty = fi.Mode()&os.ModeCharDevice != 0
		}
	}
	return &progress{w: w, id: id, tty: tty, start: time.Now()}
}

func (p *progress) show(j *client.Job) {
	line := fmt.Sprintf("%s: %s", p.id, j.State)
	if j.Attempts > 1 {
		line += fmt.Sprintf(" (attempt %d)", j.Attempts)
	}
	switch {
	case p.tty:
		fmt.Fprintf(p.w, "\r\033[K%s, %s", line, time.Since(p.start).Round(time.Second))
	case line != p.last:
		fmt.Fprintf(p.w, "%s after %.1fs\n", line, time.Since(p.start).Seconds())
	}
	p.last = line
}

func (p *progress) done() {
	if p.tty {
		fmt.Fprintln(p.w)
	}
}
