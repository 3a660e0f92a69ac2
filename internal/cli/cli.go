// Package cli is renderbox, the API's command-line client, built on
// package client (docs/cli.md is its reference):
//
//	renderbox render -r html-pdf report.html -o out/
//	renderbox render -r html-pdf site/ -then pdf-protect:'{"user_password": "x"}'
//	renderbox jobs ls | get ID | cancel ID
//	renderbox renderers [NAME]
//
// Flags go before or after the arguments. The server and key come from
// flags (-server, -key-file), the environment (RENDERBOX_SERVER,
// RENDERBOX_KEY, RENDERBOX_KEY_FILE) or a config file (RENDERBOX_CONFIG,
// default ~/.config/renderbox/config.json: {"server": "...", "key_file":
// "..."}), in that order.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/renderbox/renderbox/client"
	"github.com/renderbox/renderbox/internal/buildinfo"
	"github.com/renderbox/renderbox/internal/flagargs"
	"github.com/renderbox/renderbox/jobstate"
)

// Exit statuses: each kind of failure its own, so that a script can tell
// a job that failed from a request the server refused and from a server
// it could not reach.
const (
	ExitOK          = 0
	ExitError       = 1 // anything else: a local file, the settings, a download
	ExitUsage       = 2 // the command line is not understood
	ExitJobFailed   = 3 // the job ended failed or canceled
	ExitRefused     = 4 // the server refused the request (4xx)
	ExitUnreachable = 5 // no answer, or 5xx, after the client's retries
	ExitWarnings    = 6 // -strict: the job succeeded with missing files or refused requests
)

const exitCodes = `exit status: 0 done; 1 another error (a local file, the settings, a download);
2 command line not understood; 3 the job failed or was canceled; 4 the server
refused the request (4xx); 5 the server could not be reached or failed (5xx)
after retries; 6 -strict and the page missed files or had requests refused`

const usage = `usage: renderbox COMMAND [flags] [args]   (flags before or after the args)

commands:
  render -r RENDERER [flags] FILE...|DIR   submit, show progress, download the outputs
  jobs ls [-state S] [-limit N]            the key's jobs, newest first
  jobs get ID                              one job, as JSON
  jobs cancel ID                           cancel a queued or running job
  renderers [NAME]                         the renderers; with NAME, its options
  help [COMMAND]                           this, or a command's flags (or COMMAND -h)
  -version                                 print the build and exit

every command takes -server URL and -key-file FILE (or RENDERBOX_SERVER,
RENDERBOX_KEY or RENDERBOX_KEY_FILE, or a config file: RENDERBOX_CONFIG,
default ~/.config/renderbox/config.json, {"server": "...", "key_file": "..."})

` + exitCodes + "\n"

// errUsage is a mistake in the command line: exit 2 with the usage.
var errUsage = errors.New("usage")

// errShown is a command-line mistake already explained with its
// command's usage: exit 2, nothing more printed.
var errShown = errors.New("shown")

// errStrict is -strict meeting a warning.
var errStrict = errors.New("-strict: the job succeeded with warnings")

// Main carries out one command line (without the program's name) and
// returns the exit status (the Exit constants).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := run(ctx, args, stdout, stderr)
	code := ExitCode(err)
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		fmt.Fprint(stderr, usage)
	case errors.Is(err, errShown):
	default:
		fmt.Fprintf(stderr, "renderbox: %s\n", strings.TrimPrefix(err.Error(), "renderbox: "))
	}
	return code
}

// ExitCode is the exit status for what a command returned.
func ExitCode(err error) int {
	var jobErr *client.JobError
	var apiErr *client.Error
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, errUsage), errors.Is(err, errShown):
		return ExitUsage
	case errors.Is(err, errStrict):
		return ExitWarnings
	case errors.As(err, &jobErr):
		return ExitJobFailed
	case errors.As(err, &apiErr) && apiErr.Status >= 400 && apiErr.Status < 500 && !client.Transient(err):
		return ExitRefused
	case client.Transient(err), errors.As(err, new(*url.Error)):
		// No answer, or 5xx after retries; or a host that does not
		// resolve, a certificate not trusted (not retried).
		return ExitUnreachable
	}
	return ExitError
}

// settings are where the server is and the key.
type settings struct {
	server, keyFile string
}

func (s *settings) bind(fs *flag.FlagSet) {
	fs.StringVar(&s.server, "server", "", "the API's base `URL` (RENDERBOX_SERVER)")
	fs.StringVar(&s.keyFile, "key-file", "", "a `file` holding the API key (RENDERBOX_KEY_FILE; or the key itself in RENDERBOX_KEY)")
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
	key := strings.TrimSpace(os.Getenv("RENDERBOX_KEY"))
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

// command is one command: its synopsis, its flags and what it does with
// the arguments left after them.
type command struct {
	synopsis string
	nargs    [2]int // fewest and most arguments; -1: no most
	flags    func(fs *flag.FlagSet) func(ctx context.Context, e *env, args []string) error
}

var commands = map[string]command{
	"render": {
		synopsis: "render -r RENDERER [flags] FILE...|DIR\n\n" +
			"Submits the files (a page first, then the files it loads, each under the\n" +
			"path given: css/style.css stays css/style.css) or a directory (its tree,\n" +
			"index.html the page), shows the job's progress on stderr, downloads the\n" +
			"outputs into -o and prints their paths. -opt values take the types of the\n" +
			"renderer's options (renderbox renderers NAME).",
		nargs: [2]int{0, -1},
		flags: renderFlags,
	},
	"jobs ls": {
		synopsis: "jobs ls [-state S] [-limit N]\n\nThe key's jobs, newest first.",
		flags:    lsFlags,
	},
	"jobs get":    {synopsis: "jobs get ID\n\nOne job, as JSON.", nargs: [2]int{1, 1}, flags: getFlags("get")},
	"jobs cancel": {synopsis: "jobs cancel ID\n\nCancel a queued or running job; prints it as JSON.", nargs: [2]int{1, 1}, flags: getFlags("cancel")},
	"renderers": {
		synopsis: "renderers [NAME]\n\nThe renderers, one a line; with NAME, its inputs, limits and options\n(type, default, bounds).",
		nargs:    [2]int{0, 1},
		flags:    renderersFlags,
	},
}

func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" || a == "help" }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	cmd, args := args[0], args[1:]
	switch {
	case cmd == "-version" || cmd == "--version":
		if len(args) > 0 {
			return errUsage
		}
		buildinfo.Read().Print(stdout, "renderbox")
		return nil
	case isHelp(cmd):
		if len(args) == 0 {
			fmt.Fprint(stdout, usage)
			return nil
		}
		name := strings.Join(args, " ")
		if _, ok := commands[name]; !ok {
			if name == "jobs" {
				fmt.Fprint(stdout, usage)
				return nil
			}
			fmt.Fprintf(stderr, "renderbox help: no command %q\n", name)
			return errUsage
		}
		return runCommand(ctx, name, []string{"-h"}, stdout, stderr)
	case cmd == "jobs":
		if len(args) == 0 {
			return errUsage
		}
		if isHelp(args[0]) {
			fmt.Fprint(stdout, usage)
			return nil
		}
		cmd, args = "jobs "+args[0], args[1:]
	}
	if _, ok := commands[cmd]; !ok {
		fmt.Fprintf(stderr, "renderbox: unknown command %q\n", cmd)
		return errUsage
	}
	return runCommand(ctx, cmd, args, stdout, stderr)
}

func runCommand(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	cmd := commands[name]
	s := &env{stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("renderbox "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // printed once, below
	s.bind(fs)
	do := cmd.flags(fs)
	printUsage := func(w io.Writer) {
		fmt.Fprintf(w, "usage: renderbox %s\n\nflags:\n", cmd.synopsis)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
		fmt.Fprintf(w, "\n%s\n", exitCodes)
	}
	pos, err := flagargs.Parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(stdout)
		return nil
	}
	if err == nil && (len(pos) < cmd.nargs[0] || cmd.nargs[1] >= 0 && len(pos) > cmd.nargs[1]) {
		err = fmt.Errorf("renderbox %s: want %s, got %q", name, argCount(cmd.nargs), pos)
		fmt.Fprintln(stderr, err)
	}
	if err != nil {
		// flag has said what was wrong.
		printUsage(stderr)
		return errShown
	}
	err = do(ctx, s, pos)
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "renderbox %s: %s\n(renderbox %s -h shows its flags)\n", name, ue, name)
		return errShown
	}
	return err
}

func argCount(n [2]int) string {
	switch {
	case n[0] == n[1]:
		return fmt.Sprintf("%d argument(s)", n[0])
	case n[1] < 0:
		return fmt.Sprintf("at least %d argument(s)", n[0])
	}
	return fmt.Sprintf("%d to %d arguments", n[0], n[1])
}

// usageError is a command-line mistake found after the flags parsed.
type usageError string

func (e usageError) Error() string { return string(e) }

func lsFlags(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	state := fs.String("state", "", "only jobs in this `state` (queued, running, succeeded, failed, canceled)")
	limit := fs.Int("limit", 50, "the most jobs to list")
	return func(ctx context.Context, s *env, _ []string) error {
		c, err := s.client()
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(s.stdout, 0, 4, 2, ' ', 0)
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
	}
}

// env is what a command runs with: the settings and where to write.
type env struct {
	settings
	stdout, stderr io.Writer
}

func getFlags(op string) func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
	return func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
		return func(ctx context.Context, s *env, args []string) error {
			c, err := s.client()
			if err != nil {
				return err
			}
			get := c.Get
			if op == "cancel" {
				get = c.Cancel
			}
			j, err := get(ctx, args[0])
			if err != nil {
				return err
			}
			enc := json.NewEncoder(s.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(j)
		}
	}
}
