// Package hostcheck holds the checks a worker runs on its host before it
// takes a job, in one place: runsc's version, the cgroup controllers,
// swap, huge pages, the rootfs's digest, image and age, the state dir's
// lock and reap, and the isolation self-test in real sandboxes (the
// escape attempts among its probes), with the renderers' fresh entropy on
// demand. Any failure means the worker must not start; each verdict goes
// to a Report, as text for a person or as log records for worker serve.
package hostcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/renderbox/renderbox/internal/rootfs"
	"github.com/renderbox/renderbox/internal/sandbox"
)

// Report is where the checks' verdicts (PASS, FAIL, WARN, SKIP) go: lines
// of text for a person (worker check, selftest), or JSON log records for
// worker serve, whose log is JSON from its first line. width aligns the
// text's names.
type Report func(verdict, name, detail string, width int)

// Text writes "PASS  name  detail" lines to out.
func Text(out io.Writer) Report {
	return func(verdict, name, detail string, width int) {
		fmt.Fprintf(out, "%s  %-*s %s\n", verdict, width, name, detail)
	}
}

// Log logs each verdict as a "start-up check" record: a FAIL at error
// level, a WARN at warn, the rest at info.
func Log(log *slog.Logger) Report {
	return func(verdict, name, detail string, _ int) {
		level := slog.LevelInfo
		switch verdict {
		case "FAIL":
			level = slog.LevelError
		case "WARN":
			level = slog.LevelWarn
		}
		log.Log(context.Background(), level, "start-up check", "check", name, "verdict", strings.ToLower(verdict), "detail", detail)
	}
}

// Host is what Preflight checks and how it gets its sandbox managers.
type Host struct {
	// Manager builds the manager of the worker's settings; its error is
	// the first check's.
	Manager func() (*sandbox.Manager, error)
	// Private builds a manager on a state dir and cgroup parent of its
	// own beside m's, holding its lock, and what reaps and removes them:
	// for checks beside a running worker that holds m's.
	Private func(m *sandbox.Manager) (*sandbox.Manager, func(), error)
	// Tree is the built rootfs tree (rootfs/ + manifest.json); Image its
	// EROFS image, "" for none; NoImage says the operator chose none.
	Tree, Image string
	NoImage     bool
	// Native says the worker runs its jobs in the tree natively (the
	// unsafe benchmark floor), so the tree is read even with an image.
	Native bool
	// MaxAge refuses a rootfs whose packages are older; 0 only warns
	// past RootfsWarnAge.
	MaxAge time.Duration
}

// Facts are what Preflight verified that the worker reports of itself
// (its heartbeat, GET /v1/workers).
type Facts struct {
	Runsc  string // runsc's version
	Rootfs string // the rootfs tree's digest, recomputed from what the sandboxes read
}

// width aligns the names of the start-up checks; checkWidth the
// self-test's.
const width, checkWidth = 16, 26

// Preflight is what the worker does before it takes any job. It returns
// the ready manager, which holds the state dir's lock until the process
// exits: a worker whose state dir another worker holds refuses to start.
// pooled adds the self-test of pooled and restored sandboxes. A caller
// that is not going to serve (worker check) passes serving false: beside
// a running worker it then leaves that worker's state dir alone (no reap)
// and runs the self-test in a private state dir, removed afterwards.
func Preflight(ctx context.Context, h Host, rep Report, pooled, serving bool) (*sandbox.Manager, Facts, error) {
	var facts Facts
	step := func(name string, err error, detail string) error {
		if err != nil {
			rep("FAIL", name, err.Error(), width)
			return fmt.Errorf("refusing to start: %s: %w", name, err)
		}
		rep("PASS", name, detail, width)
		return nil
	}
	m, err := h.Manager()
	if err := step("runsc located", err, ""); err != nil {
		return nil, facts, err
	}
	v, err := sandbox.CheckVersion(ctx, m.Runsc().Path)
	if err := step("runsc version", err, m.Runsc().Path+" "+v.Raw); err != nil {
		return nil, facts, err
	}
	facts.Runsc = v.Raw
	if err := step("cgroups", sandbox.CheckCgroups(), "memory, cpu and pids controllers present"); err != nil {
		return nil, facts, err
	}
	// The self-test reads a real sandbox's swap limit; this says whether
	// the kernel can hold one.
	if limited, detail, err := sandbox.CheckSwap(); err != nil || limited {
		if err := step("swap", err, detail); err != nil {
			return nil, facts, err
		}
	} else {
		rep("WARN", "swap", detail, width)
	}
	// Not a refusal: without huge pages the sandboxes are slower, not
	// less isolated.
	if ok, detail := sandbox.HugePages(); ok {
		rep("PASS", "huge pages", detail, width)
	} else {
		rep("WARN", "huge pages", detail+" (sandboxes run without huge pages)", width)
	}
	man, err := checkRootfs(h, rep, step)
	if err != nil {
		return nil, facts, err
	}
	facts.Rootfs = man.TreeSHA256
	own, busy, cleanup, err := LockOrPrivate(m, serving, h.Private)
	if busy != nil {
		rep("SKIP", "reap", busy.Error()+": its sandboxes are left alone; the self-test runs in a state dir of its own", width)
		if err := step("private state", err, ""); err != nil {
			return nil, facts, err
		}
	} else {
		if err := step("state dir lock", err, m.Config().StateDir); err != nil {
			return nil, facts, err
		}
		n, err := m.Reap(ctx)
		if err := step("reap", err, fmt.Sprintf("%d leftover sandboxes deleted", n)); err != nil {
			return nil, facts, err
		}
	}
	defer cleanup()
	m = own
	checks, err := m.SelfTest(ctx, pooled)
	if err := step("self-test", err, ""); err != nil {
		return nil, facts, err
	}
	Print(rep, checks)
	if f := sandbox.Failed(checks); len(f) > 0 {
		return nil, facts, fmt.Errorf("refusing to start: self-test: %d isolation properties failed (first: %s: %s)", len(f), f[0].Name, f[0].Detail)
	}
	return m, facts, nil
}

// checkRootfs verifies what the sandboxes read against the tree's
// manifest, and judges its age (rootfsAge). With an image that is the
// image: its file and its contents (VerifyImage), the tree's digest
// recomputed from what the Sentry mounts; of the tree the sandboxes then
// open only the mask file (sandbox.CheckMaskFile; TestRootIsTheImage runs
// one over a decoy tree). The whole tree is digested only without an image
// (the gofer serves it) or when jobs run in it natively: its 1.9 s at
// every start checked files nothing read (worker rootfs verify checks it
// on demand).
func checkRootfs(h Host, rep Report, step func(string, error, string) error) (*rootfs.Manifest, error) {
	t := time.Now()
	var man *rootfs.Manifest
	var err error
	if h.Image != "" && !h.Native {
		man, err = rootfs.ReadManifest(h.Tree)
		if err == nil {
			err = sandbox.CheckMaskFile(rootfs.Dir(h.Tree))
		}
		detail := ""
		if man != nil {
			detail = fmt.Sprintf("%s tree %s… (%d files): the image is checked against it; of the tree, the sandboxes open only the mask file, checked (the rest: worker rootfs verify)", h.Tree, man.TreeSHA256[:12], man.Files)
		}
		if err := step("rootfs manifest", err, detail); err != nil {
			return nil, err
		}
	} else {
		man, err = rootfs.Verify(h.Tree)
		detail := ""
		if man != nil {
			detail = fmt.Sprintf("%s tree %s… (%d files, %.1fs)", h.Tree, man.TreeSHA256[:12], man.Files, time.Since(t).Seconds())
		}
		if err := step("rootfs digest", err, detail); err != nil {
			return nil, err
		}
	}
	if h.Image != "" {
		t = time.Now()
		_, rec, err := rootfs.VerifyImage(h.Tree, man)
		detail := ""
		if rec != nil {
			detail = fmt.Sprintf("%s %s… (%d MiB, %.1fs): the Sentry mounts it as the root, no gofer", h.Image, rec.SHA256[:12], rec.Bytes>>20, time.Since(t).Seconds())
		}
		if err := step("rootfs image", err, detail); err != nil {
			return nil, err
		}
	} else if !h.NoImage {
		rep("WARN", "rootfs image", "none beside "+h.Tree+": sandboxes mount the tree through the gofer, light jobs run slower (make it with: worker rootfs image "+h.Tree+")", width)
	}
	return man, rootfsAge(rep, man, h.MaxAge, time.Now())
}

// RootfsWarnAge is when a rootfs's packages are old enough to say so:
// Debian's security archive moves faster than that.
const RootfsWarnAge = 7 * 24 * time.Hour

// rootfsAge warns about a rootfs whose packages are over RootfsWarnAge
// old and refuses one over maxAge (when set): security updates to the
// renderers reach a host only with a new build (make rootfs).
func rootfsAge(rep Report, man *rootfs.Manifest, maxAge time.Duration, now time.Time) error {
	age := man.Age(now)
	days := fmt.Sprintf("packages fetched %.1f days ago", age.Hours()/24)
	switch {
	case maxAge > 0 && age > maxAge:
		rep("FAIL", "rootfs age", fmt.Sprintf("%s, over -rootfs-max-age %s: rebuild it (make rootfs) and restart", days, maxAge), width)
		return fmt.Errorf("refusing to start: rootfs age: %s, over -rootfs-max-age %s", days, maxAge)
	case age > RootfsWarnAge:
		rep("WARN", "rootfs age", days+": security updates since then are not in it (make rootfs)", width)
	default:
		rep("PASS", "rootfs age", days, width)
	}
	return nil
}

// LockOrPrivate takes the state dir's lock for m and returns m. Beside a
// running worker that holds it (busy) a caller that is not going to serve
// gets instead private(m), a manager on a private state dir, which cleanup
// removes; one that is going to serve gets the *BusyError.
func LockOrPrivate(m *sandbox.Manager, serving bool, private func(*sandbox.Manager) (*sandbox.Manager, func(), error)) (own *sandbox.Manager, busy *sandbox.BusyError, cleanup func(), err error) {
	cleanup = func() {}
	if _, err = m.Lock(); errors.As(err, &busy) && !serving {
		own, cleanup, err = private(m)
		if err != nil {
			cleanup = func() {}
		}
		return own, busy, cleanup, err
	}
	return m, nil, cleanup, err
}

// Runtime runs the cheap checks (runsc's version, cgroups, swap), for
// commands that run sandboxes without the full Preflight.
func Runtime(ctx context.Context, m *sandbox.Manager) error {
	if _, err := sandbox.CheckVersion(ctx, m.Runsc().Path); err != nil {
		return err
	}
	if err := sandbox.CheckCgroups(); err != nil {
		return err
	}
	_, _, err := sandbox.CheckSwap()
	return err
}

// SelfTest runs the isolation self-test of cold, pooled and restored
// sandboxes and, which serve's start-up leaves out for its cost (about
// 30 s of Chromium jobs), checks that the renderers' randomness is fresh
// in every job, restored ones included.
func SelfTest(ctx context.Context, m *sandbox.Manager) ([]sandbox.Check, error) {
	checks, err := m.SelfTest(ctx, true /* pooled */)
	if err != nil {
		return nil, err
	}
	fresh, err := selfTestEntropy(ctx, m)
	if err != nil {
		return nil, err
	}
	return append(checks, fresh...), nil
}

// Print reports each self-test check as PASS or FAIL.
func Print(rep Report, checks []sandbox.Check) {
	for _, ch := range checks {
		verdict := "PASS"
		if !ch.Pass {
			verdict = "FAIL"
		}
		rep(verdict, ch.Name, ch.Detail, checkWidth)
	}
}
