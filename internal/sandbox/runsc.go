package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Runsc wraps the runsc command line. It holds the global flags; each call
// takes an options struct whose args() unit tests can check without running
// anything.
type Runsc struct {
	// Path is the absolute path of the runsc binary.
	Path string
	// Root is runsc's private state directory (--root); mode 0700.
	Root string
	// Platform is the --platform value: "systrap" unless a probe has shown
	// another one works.
	Platform string
	// SystrapFastPath lets systrap's adaptive fast path run: stub threads
	// and the Sentry spin, rather than sleep, while they wait for each
	// other. Off (--systrap-disable-fast-path) unless asked: each sandbox
	// decides to spin from its own latencies, blind to the others on the
	// host, and on 2 cores with several sandboxes at once the spinning is
	// CPU taken from the renderers (Config.SystrapFastPath).
	SystrapFastPath bool
	// LogDir, if set, receives runsc's own debug logs (--debug-log).
	LogDir string
}

// globalArgs are the flags every call carries. They are the hardening that
// docs/security.md's threat model fixes: no network, an explicit platform, a private root, and
// no direct host file access from the Sentry (--directfs=false: every file
// of the rootfs is opened by the gofer, or read from the rootfs image the
// Sentry was handed read-only, so a compromised Sentry holds no host file
// descriptors beyond its own and that image). Never
// --rootless or --ignore-cgroups (both silently drop resource limits), never
// a --TESTONLY-* flag.
func (r *Runsc) globalArgs() []string {
	args := []string{
		"--root=" + r.Root,
		"--network=none",
		"--platform=" + r.Platform,
		"--directfs=false",
	}
	if r.Platform == "systrap" && !r.SystrapFastPath {
		args = append(args, "--systrap-disable-fast-path")
	}
	if r.LogDir != "" {
		args = append(args, "--debug", "--debug-log="+r.LogDir+"/")
	}
	return args
}

// ExitError is a runsc invocation that failed; Stderr keeps what it said.
type ExitError struct {
	Args   []string
	Code   int
	Stderr string
}

func (e *ExitError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if len(msg) > 2048 {
		msg = "…" + msg[len(msg)-2048:]
	}
	return fmt.Sprintf("runsc %s: exit status %d: %s", strings.Join(e.Args, " "), e.Code, msg)
}

// run runs runsc with the global flags and args, returning stdout.
func (r *Runsc) run(ctx context.Context, args []string, cfg func(*exec.Cmd)) ([]byte, error) {
	full := append(r.globalArgs(), args...)
	cmd := exec.CommandContext(ctx, r.Path, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if cfg != nil {
		cfg(cmd)
	}
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return stdout.Bytes(), &ExitError{Args: args, Code: ee.ExitCode(), Stderr: stderr.String()}
		}
		return stdout.Bytes(), fmt.Errorf("running runsc %s: %w", strings.Join(args, " "), err)
	}
	return stdout.Bytes(), nil
}

// CreateOpts are the options of `runsc create`.
type CreateOpts struct {
	Bundle  string
	PidFile string
	// Stdin, Stdout and Stderr become the container process's stdio. They
	// must be *os.File so that runsc hands the descriptors to the sandbox
	// rather than Go copying through goroutines that outlive the call.
	Stdin, Stdout, Stderr *os.File
}

func (o CreateOpts) args(id string) []string {
	args := []string{"create", "--bundle=" + o.Bundle}
	if o.PidFile != "" {
		args = append(args, "--pid-file="+o.PidFile)
	}
	return append(args, id)
}

// Create creates container id from a bundle without starting its process.
func (r *Runsc) Create(ctx context.Context, id string, o CreateOpts) error {
	_, err := r.run(ctx, o.args(id), func(c *exec.Cmd) { stdio(c, o.Stdin, o.Stdout, o.Stderr) })
	return err
}

// stdio hands the container's stdio to the runsc command that makes it.
func stdio(c *exec.Cmd, in, out, errw *os.File) {
	c.Stdin = in
	if out != nil {
		c.Stdout = out
	}
	if errw != nil {
		c.Stderr = errw
	}
}

// Start starts the created container's process.
func (r *Runsc) Start(ctx context.Context, id string) error {
	_, err := r.run(ctx, []string{"start", id}, nil)
	return err
}

// KillOpts are the options of `runsc kill`.
type KillOpts struct {
	Signal int
	All    bool // every process in the container, not just its init
}

func (o KillOpts) args(id string) []string {
	args := []string{"kill"}
	if o.All {
		args = append(args, "--all")
	}
	sig := o.Signal
	if sig == 0 {
		sig = 9
	}
	return append(args, id, strconv.Itoa(sig))
}

// Kill signals the container.
func (r *Runsc) Kill(ctx context.Context, id string, o KillOpts) error {
	_, err := r.run(ctx, o.args(id), nil)
	return err
}

// DeleteOpts are the options of `runsc delete`.
type DeleteOpts struct {
	Force bool // delete even if it is running (kills it first)
}

func (o DeleteOpts) args(id string) []string {
	args := []string{"delete"}
	if o.Force {
		args = append(args, "--force")
	}
	return append(args, id)
}

// Delete deletes the container and releases its resources, cgroups
// included.
func (r *Runsc) Delete(ctx context.Context, id string, o DeleteOpts) error {
	_, err := r.run(ctx, o.args(id), nil)
	return err
}

// ContainerState is one entry of `runsc list --format=json` / `runsc state`.
type ContainerState struct {
	ID     string `json:"id"`
	Pid    int    `json:"pid"`
	Status string `json:"status"`
	Bundle string `json:"bundle"`
}

// List lists the containers under Root.
func (r *Runsc) List(ctx context.Context) ([]ContainerState, error) {
	if _, err := os.Stat(r.Root); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	out, err := r.run(ctx, []string{"list", "--format=json"}, nil)
	if err != nil {
		return nil, err
	}
	var cs []ContainerState
	if s := bytes.TrimSpace(out); len(s) > 0 && !bytes.Equal(s, []byte("null")) {
		if err := json.Unmarshal(s, &cs); err != nil {
			return nil, fmt.Errorf("runsc list: decoding %q: %w", out, err)
		}
	}
	return cs, nil
}

// Strays lists the files runsc left under Root for containers it no longer
// knows: a lock file or a control socket with no state file beside it.
// `runsc delete` of a container that is already gone (a template sandbox
// ends with its checkpoint) makes the container's lock file to look for
// it, and of one whose create was cut short leaves its socket; Destroy
// removes both (removeState). Only meaningful while no runsc command is
// making a container under Root.
func (r *Runsc) Strays() []string {
	var strays []string
	locks, _ := filepath.Glob(filepath.Join(r.Root, "*.lock"))
	for _, l := range locks {
		if _, err := os.Stat(strings.TrimSuffix(l, ".lock") + ".state"); errors.Is(err, os.ErrNotExist) {
			strays = append(strays, l)
		}
	}
	socks, _ := filepath.Glob(filepath.Join(r.Root, socketName("*")))
	for _, s := range socks {
		id := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(s), "runsc-"), ".sock")
		if _, err := os.Stat(r.stateBase(id) + ".state"); errors.Is(err, os.ErrNotExist) {
			strays = append(strays, s)
		}
	}
	return strays
}

// removeState removes what runsc keeps of sandbox id once its process
// has ended or runsc no longer knows it: the control socket and the
// container's state and lock files, as `runsc delete` does, and what
// `runsc delete` leaves (Strays). runsc makes the socket in the first of
// Root, /var/run, /run and /tmp whose path fits a socket address, so
// each is tried until one held it. A read-only one (a worker run as its
// unit runs it sees /run so) cannot hold one runsc made.
func (r *Runsc) removeState(id string) error {
	var errs []error
	for _, d := range []string{r.Root, "/var/run", "/run", "/tmp"} {
		err := os.Remove(filepath.Join(d, socketName(id)))
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.EROFS) {
			errs = append(errs, fmt.Errorf("removing runsc's control socket: %w", err))
		}
	}
	base := r.stateBase(id)
	for _, ext := range []string{".state", ".lock"} {
		if err := os.Remove(base + ext); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing runsc's %s file: %w", ext[1:], err))
		}
	}
	return errors.Join(errs...)
}

// stateBase is the path, less its extension, of sandbox id's state and
// lock files: runsc/container names them <container>_sandbox:<sandbox>,
// and a sandbox here holds one container of the same id.
func (r *Runsc) stateBase(id string) string { return filepath.Join(r.Root, id+"_sandbox:"+id) }

// socketName is the name of sandbox id's control socket (runsc/sandbox).
func socketName(id string) string { return "runsc-" + id + ".sock" }

// CheckpointOpts are the options of `runsc checkpoint`.
type CheckpointOpts struct {
	// ImagePath is the directory the image is written to; it must exist.
	ImagePath string
	// ExcludeZeroPages leaves committed zero pages out of the image.
	ExcludeZeroPages bool
}

func (o CheckpointOpts) args(id string) []string {
	args := []string{"checkpoint", "--image-path=" + o.ImagePath}
	if o.ExcludeZeroPages {
		args = append(args, "--exclude-committed-zero-pages")
	}
	return append(args, id)
}

// Checkpoint saves the running container's state to an image and stops it.
func (r *Runsc) Checkpoint(ctx context.Context, id string, o CheckpointOpts) error {
	_, err := r.run(ctx, o.args(id), nil)
	return err
}

// RestoreOpts are the options of `runsc restore`.
type RestoreOpts struct {
	Bundle    string
	ImagePath string
	PidFile   string
	// Stdin, Stdout and Stderr become the restored container's stdio when
	// restore creates it (no `runsc create` before), as in CreateOpts.
	Stdin, Stdout, Stderr *os.File
}

func (o RestoreOpts) args(id string) []string {
	args := []string{"restore", "--detach", "--bundle=" + o.Bundle, "--image-path=" + o.ImagePath}
	if o.PidFile != "" {
		args = append(args, "--pid-file="+o.PidFile)
	}
	return append(args, id)
}

// Restore creates container id from the bundle and runs the checkpointed
// process in it instead of the spec's, attached to the new container's
// stdio.
func (r *Runsc) Restore(ctx context.Context, id string, o RestoreOpts) error {
	_, err := r.run(ctx, o.args(id), func(c *exec.Cmd) { stdio(c, o.Stdin, o.Stdout, o.Stderr) })
	return err
}
