// Command worker runs render jobs in fresh gVisor sandboxes. Its commands
// (usage, below) are a file each here, with their own flags and help;
// what they run is internal/worker's (settings, serve), internal/hostcheck's
// (the start-up checks) and internal/rootfs's.
//
// There is no unsandboxed fallback: every command that renders refuses to
// run without a working runsc, cgroups and a rootfs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/renderbox/renderbox/internal/buildinfo"
	"github.com/renderbox/renderbox/internal/worker"
)

const usage = `usage: worker <command> [flags]

commands:
  serve      run the start-up checks, then take render jobs from Redis until SIGTERM
  check      run the start-up checks (runsc, cgroups, rootfs digest, reap, self-test)
  selftest   run the isolation probe in a real sandbox and print PASS/FAIL per property
  render     render a local file: worker render -renderer pdf-png in.pdf -o outdir/
  reap       delete sandboxes, bundles and cgroups a crashed worker left behind
  rootfs     seal, image or verify a rootfs tree: worker rootfs seal|image|verify DIR
             flatten a tree's fontconfig configuration (build.sh): worker rootfs fontconfig DIR
             pack it for other hosts: worker rootfs export -o OUTDIR [TREE]
             install a packed one: worker rootfs import [-sha256 HEX] [-dir DIR] ARCHIVE

Run "worker <command> -h" for its help and flags; "worker -version" prints the build.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run carries out one command line and returns the exit status: 0, 1 for
// a command that failed, 2 for a command line not understood — which
// touches nothing.
func run(ctx context.Context, argv []string, stdout, stderr io.Writer) int {
	if len(argv) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	args := argv[1:]
	switch argv[0] {
	case "serve":
		err = cmdServe(ctx, args)
	case "check":
		err = cmdCheck(ctx, args, stdout)
	case "selftest":
		err = cmdSelftest(ctx, args, stdout)
	case "render":
		err = cmdRender(ctx, args, stdout)
	case "reap":
		err = cmdReap(ctx, args, stdout)
	case "rootfs":
		err = cmdRootfs(args, stdout)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "-version", "--version":
		buildinfo.Read().Print(stdout, "worker")
		return 0
	default:
		fmt.Fprintf(stderr, "worker: unknown command %q\n\n%s", argv[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0 // the flags are printed
	}
	if errors.As(err, new(usageError)) {
		fmt.Fprintf(stderr, "worker: %v\n\n%s", err, usage)
		return 2
	}
	if err != nil && argv[0] == "serve" {
		// serve's log is JSON from its first line to its last, the
		// reason it stopped included; a command line it did not
		// understand is the only text (with the usage, above).
		slog.New(slog.NewJSONHandler(stderr, nil)).Error("worker serve failed", "err", err.Error())
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return 1
	}
	return 0
}

// usageError is a command line that is not understood: run prints the
// usage with it and exits 2.
type usageError string

func (e usageError) Error() string { return string(e) }

// flags is the flag set of the command name with the worker's settings
// (worker.Config) bound to c; its -h prints help, then the flags.
func flags(name, help string, c *worker.Config) *flag.FlagSet {
	fs := flag.NewFlagSet("worker "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), help)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprint(fs.Output(), "\nflags:\n")
			fs.PrintDefaults()
		}
	}
	if c != nil {
		c.Bind(fs)
	}
	return fs
}

// parse parses args into fs and returns the positional arguments; flags
// may come before or after them ("render -renderer x in.pdf -o out/").
// A command that takes none (nargs 0) refuses a stray word ("worker serve
// now") before anything is looked at, as an unknown command is.
func parse(fs *flag.FlagSet, args []string, nargs int) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError(err.Error())
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if nargs == 0 && len(rest) > 0 {
		return rest, usageError(fmt.Sprintf("%s takes no arguments, got %q", fs.Name(), rest[0]))
	}
	return rest, nil
}

// settings parses a command line that takes no arguments into c, whose
// flags fs holds, and settles c.
func settings(fs *flag.FlagSet, c *worker.Config, args []string) error {
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	return c.Settle(fs)
}
