package agent

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/renderbox/renderbox/internal/agent/cdp"
	"github.com/renderbox/renderbox/internal/wire"
)

// browser is a Chromium driven over the DevTools pipe, with one page
// target attached.
type browser struct {
	argv, env []string
	cmd       *exec.Cmd
	cmdW      *os.File
	exited    chan struct{}
	c         *cdp.Client
	session   string
	log       *switchWriter
	// mark logs a step's time to whoever reads Chromium's output, counted
	// from the boot or the job's start; set before the client sees events.
	mark func(string)
	// prepared: the page's session already has the domains every job
	// needs (prepare), enabled before the job.
	prepared bool
}

// switchWriter sends Chromium's output to whoever needs it now: the boot's
// log, then the job's stderr tail.
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return len(p), nil
	}
	return s.w.Write(p)
}

func (s *switchWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

// launchBrowser starts Chromium on the DevTools pipe and opens a blank page
// target.
func (a *Agent) launchBrowser(argv0, env []string, log io.Writer) (*browser, error) {
	// Chromium reads commands on fd 3 and writes replies on fd 4.
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	replyR, replyW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	argv := append(append([]string{}, argv0...), "--remote-debugging-pipe")
	b := &browser{argv: argv0, env: env, cmdW: cmdW, exited: make(chan struct{}), log: &switchWriter{w: log}}
	b.cmd = exec.Command(argv[0], argv[1:]...)
	b.cmd.Env, b.cmd.Dir = env, wire.WorkDir
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	b.cmd.ExtraFiles = []*os.File{cmdR, replyW}
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = a.start(b.cmd)
	cmdR.Close()
	replyW.Close()
	if err != nil {
		cmdW.Close()
		replyR.Close()
		return nil, fmt.Errorf("starting chromium: %w", err)
	}
	go func() { _ = b.cmd.Wait(); close(b.exited) }()
	b.mark = func(what string) {
		fmt.Fprintf(b.log, "renderbox-agent: %s at %dms\n", what, time.Since(t0).Milliseconds())
	}
	b.c = cdp.New(cmdW, replyR)
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.c.Call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		b.kill()
		return nil, err
	}
	b.mark("browser up")
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.c.Call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att); err != nil {
		b.kill()
		return nil, err
	}
	b.session = att.SessionID
	return b, nil
}

// warmUp prints the blank page once, so that the first job does not pay
// for starting the print path, then prepares the page's session.
func (b *browser) warmUp() error {
	if _, err := printPDF(b.c, b.session, &wire.PDFOptions{}); err != nil {
		return err
	}
	return b.prepare()
}

// prepare enables on the blank page what every job needs, whatever it asks:
// interception of every request (which stays paused, and so never leaves,
// until a job's handler answers it), page and crash events, console
// errors, a Math.random drawn after any restore in every document
// (freshMathRandom; one process, so every frame is the page's target's),
// and paused attachment of every target the page starts. A
// pre-booted browser does this before the job, which it would otherwise
// slow (docs/agent.md, "Measurements").
func (b *browser) prepare() error {
	err := b.c.CallEach(b.session, []cdp.Command{
		{Method: "Fetch.enable", Params: interceptEverything},
		{Method: "Page.enable"},
		{Method: "Inspector.enable"}, // for targetCrashed
		{Method: "Runtime.enable"},   // for console errors and exceptions
		{Method: "Page.addScriptToEvaluateOnNewDocument", Params: map[string]any{"source": freshMathRandom}},
	})
	if err != nil {
		return err
	}
	// Every target the page starts, intercepted too.
	if err := interceptAll(b.c, b.session); err != nil {
		return err
	}
	b.prepared = true
	return nil
}

// kill ends Chromium and everything it started. The sandbox is single-use,
// and a graceful shutdown is slow under gVisor (docs/agent.md).
func (b *browser) kill() {
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	<-b.exited
	b.cmdW.Close()
}

// matches reports whether the booted browser is the one bw asks for.
func (b *browser) matches(bw *wire.Browser, env []string) bool {
	return slices.Equal(b.argv, bw.Argv) && slices.Equal(b.env, env)
}

// browse loads bw.Page in Chromium and prints or captures it into
// OutputDir/bw.Output: in the browser booted ahead of the job when there is
// one and it matches, else in one launched now.
func (a *Agent) browse(bw *wire.Browser, env []string, tail *tail, res *wire.Result, out *bufio.Writer) error {
	policy := pagePolicy{url: bw.URL}
	if bw.URL != "" {
		// A URL page: the host fetches for it (brokerClient), until
		// the page is printed and the outputs take the stream.
		policy.broker = newBrokerClient(a.in, out)
		defer policy.broker.close()
	} else {
		st, err := loadSite(bw.Page, bw.Site, bw.PagePath)
		if err != nil {
			return err
		}
		policy.site = st
	}
	var err error
	t0 := time.Now()
	b := a.browser
	a.browser = nil
	if b != nil && !b.matches(bw, env) {
		fmt.Fprintf(tail, "renderbox-agent: the pre-booted browser does not match the request; launching another\n")
		b.kill()
		b = nil
	}
	if b != nil {
		b.log.set(tail)
	} else if b, err = a.launchBrowser(bw.Argv, env, tail); err != nil {
		return err
	}
	// The job's marks count from its start, for a pre-booted browser too.
	b.mark = func(what string) {
		fmt.Fprintf(tail, "renderbox-agent: %s at %dms\n", what, time.Since(t0).Milliseconds())
	}
	b.mark("browser ready")
	ic := newInterceptor(b.c, policy, b.mark)
	err = drive(b, bw, ic)
	if policy.broker != nil {
		policy.broker.close()
	}
	b.mark("done")
	res.Blocked, res.Missing, res.ConsoleErrors = ic.report()
	if err == nil {
		err = pageErrors(bw, res)
	}
	if err != nil {
		// How Chromium ended says why the job failed: if it died by
		// itself (gVisor's OOM killer, a crash), its status is the
		// outcome; if it is alive and said why (a page range beyond the
		// document), the SIGKILL is ours and says nothing: only its
		// resource use is kept, and the error is the job's.
		var ownKill bool
		select {
		case <-b.exited:
		default:
			ownKill = true
		}
		b.kill()
		if !ownKill {
			recordExit(b.cmd.ProcessState, res)
		} else if ru, ok := b.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			res.MaxRSSKiB = max(res.MaxRSSKiB, ru.Maxrss)
		}
		return err
	}
	// The output is written (by the agent, not by Chromium); the answer
	// need not wait for dozens of threads to die: the sandbox goes with
	// the agent.
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	return nil
}

// pageErrors fails a job whose page asked for what it could not have, or
// logged errors, when the request says to.
func pageErrors(bw *wire.Browser, res *wire.Result) error {
	if bw.FailOnResourceError && len(res.Blocked)+len(res.Missing) > 0 {
		return fmt.Errorf("the page asked for resources it cannot have (fail_on_resource_error): %s",
			strings.Join(append(append([]string{}, res.Missing...), res.Blocked...), ", "))
	}
	if bw.FailOnConsoleError && len(res.ConsoleErrors) > 0 {
		return fmt.Errorf("the page logged errors (fail_on_console_error): %s", strings.Join(res.ConsoleErrors, "; "))
	}
	return nil
}

func drive(br *browser, b *wire.Browser, ic *interceptor) error {
	c, s := br.c, br.session
	ic.install()
	if !br.prepared {
		if err := br.prepare(); err != nil {
			return err
		}
	}
	var setup []cdp.Command
	if !b.JavaScript {
		setup = append(setup, cdp.Command{Method: "Emulation.setScriptExecutionDisabled", Params: map[string]any{"value": true}})
	}
	if b.Media != "" || len(b.MediaFeatures) > 0 {
		features := []map[string]string{}
		for _, f := range b.MediaFeatures {
			features = append(features, map[string]string{"name": f.Name, "value": f.Value})
		}
		setup = append(setup, cdp.Command{Method: "Emulation.setEmulatedMedia", Params: map[string]any{"media": b.Media, "features": features}})
	}
	if b.UserAgent != "" {
		setup = append(setup, cdp.Command{Method: "Emulation.setUserAgentOverride", Params: map[string]any{"userAgent": b.UserAgent}})
	}
	if sc := b.Screenshot; sc != nil {
		setup = append(setup, cdp.Command{Method: "Emulation.setDeviceMetricsOverride", Params: metrics(sc, sc.Height)})
	}
	if b.OmitBackground {
		setup = append(setup, cdp.Command{Method: "Emulation.setDefaultBackgroundColorOverride",
			Params: map[string]any{"color": map[string]any{"r": 0, "g": 0, "b": 0, "a": 0}}})
	}
	if err := c.CallEach(s, setup); err != nil {
		return err
	}
	loaded := c.Await(s, "Page.loadEventFired")
	// A page that exhausts its renderer's memory crashes it; say so now
	// rather than wait for the deadline.
	crashed := c.Await(s, "Inspector.targetCrashed")
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	target := b.URL
	if target == "" {
		target = pageURLFor(ic.policy.site.pagePath)
	}
	if err := c.Call(s, "Page.navigate", map[string]any{"url": target}, &nav); err != nil {
		return err
	}
	if err := ic.pageErr(); err != nil {
		return err
	}
	if nav.ErrorText != "" {
		return fmt.Errorf("loading the page: %s", nav.ErrorText)
	}
	select {
	case <-loaded:
	case <-crashed:
		return errors.New("the page crashed while loading (out of memory?)")
	case <-c.Done():
		return c.Err()
	}
	br.mark("page loaded")
	if err := ic.pageErr(); err != nil {
		return err
	}
	// Targets the page started (workers) run before it is printed.
	ic.awaitAttached(attachWait)
	if err := wait(c, br.mark, s, b.Wait); err != nil {
		return err
	}
	if b.JavaScript {
		// Web fonts and late layout settle before printing.
		_ = c.Call(s, "Runtime.evaluate", map[string]any{
			"expression": "document.fonts.ready.then(() => true)", "awaitPromise": true,
		}, nil)
	}
	var data []byte
	var err error
	switch {
	case b.PDF != nil && b.SinglePage:
		data, err = printSinglePage(c, s, *b.PDF)
	case b.PDF != nil:
		data, err = printPDF(c, s, b.PDF)
	default:
		data, err = capture(c, s, b.Screenshot)
	}
	if err != nil {
		return err
	}
	br.mark("printed")
	if err := ic.attachErr(); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(wire.OutputDir, b.Output), data, 0o600)
}

func printPDF(c *cdp.Client, s string, o *wire.PDFOptions) ([]byte, error) {
	var r struct {
		Data string `json:"data"`
	}
	if err := c.Call(s, "Page.printToPDF", o, &r); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(r.Data)
}

func metrics(sc *wire.Screenshot, height int) map[string]any {
	return map[string]any{
		"width": sc.Width, "height": height, "deviceScaleFactor": sc.DeviceScaleFactor, "mobile": false,
	}
}

func capture(c *cdp.Client, s string, sc *wire.Screenshot) ([]byte, error) {
	if sc.FullPage {
		ch, err := contentHeight(c, s)
		if err != nil {
			return nil, err
		}
		h := int(math.Ceil(ch))
		dsf := math.Max(sc.DeviceScaleFactor, 1)
		if maxH := int(float64(sc.MaxPixels) / (float64(sc.Width) * dsf * dsf)); h > maxH {
			return nil, fmt.Errorf("the full page is %d×%d CSS pixels at scale %g, over the limit of %d pixels", sc.Width, h, dsf, sc.MaxPixels)
		}
		if h > sc.Height {
			if err := c.Call(s, "Emulation.setDeviceMetricsOverride", metrics(sc, h), nil); err != nil {
				return nil, err
			}
		}
	}
	params := map[string]any{"format": sc.Format, "fromSurface": true}
	if sc.Format != "png" && sc.Quality > 0 {
		params["quality"] = sc.Quality
	}
	clip := sc.Clip
	if sc.Selector != "" {
		r, err := elementBox(c, s, sc.Selector)
		if err != nil {
			return nil, err
		}
		clip = &r
	}
	if clip != nil {
		dsf := math.Max(sc.DeviceScaleFactor, 1)
		if px := clip.Width * clip.Height * dsf * dsf; px > float64(sc.MaxPixels) {
			return nil, fmt.Errorf("the capture is %.0f×%.0f CSS pixels at scale %g, over the limit of %d pixels", clip.Width, clip.Height, dsf, sc.MaxPixels)
		}
		params["clip"] = map[string]any{"x": clip.X, "y": clip.Y, "width": clip.Width, "height": clip.Height, "scale": 1}
		params["captureBeyondViewport"] = true
	}
	var r struct {
		Data string `json:"data"`
	}
	if err := c.Call(s, "Page.captureScreenshot", params, &r); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(r.Data)
}
