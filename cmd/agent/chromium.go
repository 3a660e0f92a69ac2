package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
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

	"github.com/renderbox/renderbox/internal/wire"
)

// pageURL is where the page appears to come from. Nothing resolves it: the
// agent answers the request itself, and refuses every other one, so the
// page can read only the job's own input.
const pageURL = "https://document.renderbox.invalid/"

// browser is a Chromium driven over the DevTools pipe, with one page
// target attached.
type browser struct {
	argv, env []string
	cmd       *exec.Cmd
	cmdW      *os.File
	exited    chan struct{}
	c         *cdp
	session   string
	log       *switchWriter
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
func launchBrowser(argv0, env []string, log io.Writer) (*browser, error) {
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
	err = startReserving(b.cmd)
	cmdR.Close()
	replyW.Close()
	if err != nil {
		cmdW.Close()
		replyR.Close()
		return nil, fmt.Errorf("starting chromium: %w", err)
	}
	go func() { _ = b.cmd.Wait(); close(b.exited) }()
	b.c = newCDP(cmdW, replyR)
	b.c.mark = func(what string) {
		fmt.Fprintf(b.log, "renderbox-agent: %s at %dms\n", what, time.Since(t0).Milliseconds())
	}
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.c.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		b.kill()
		return nil, err
	}
	b.c.mark("browser up")
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.c.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att); err != nil {
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
// pre-booted browser does this before the job; it is ≈ 35 ms of a job's
// time otherwise.
func (b *browser) prepare() error {
	err := b.c.callEach(b.session, []command{
		{"Fetch.enable", map[string]any{"patterns": []map[string]any{{"urlPattern": "*"}}}},
		{"Page.enable", nil},
		{"Inspector.enable", nil}, // for targetCrashed
		{"Runtime.enable", nil},   // for console errors and exceptions
		{"Page.addScriptToEvaluateOnNewDocument", map[string]any{"source": freshMathRandom}},
	})
	if err != nil {
		return err
	}
	// Every target the page starts, intercepted too.
	if err := b.c.interceptAll(b.session); err != nil {
		return err
	}
	b.prepared = true
	return nil
}

// kill ends Chromium and everything it started. The sandbox is single-use:
// no graceful shutdown, whose crash-reporter handshake alone costs seconds
// under gVisor.
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
func browse(bw *wire.Browser, env []string, tail *tail, res *wire.Result) error {
	st, err := loadSite(bw.Page, bw.Site, bw.PagePath)
	if err != nil {
		return err
	}
	t0 := time.Now()
	b := warmBrowser
	warmBrowser = nil
	if b != nil && !b.matches(bw, env) {
		fmt.Fprintf(tail, "renderbox-agent: the pre-booted browser does not match the request; launching another\n")
		b.kill()
		b = nil
	}
	if b != nil {
		b.log.set(tail)
	} else if b, err = launchBrowser(bw.Argv, env, tail); err != nil {
		return err
	}
	// The job's marks count from its start, for a pre-booted browser too.
	b.c.mark = func(what string) {
		fmt.Fprintf(tail, "renderbox-agent: %s at %dms\n", what, time.Since(t0).Milliseconds())
	}
	b.c.mark("browser ready")
	err = drive(b, bw, st)
	b.c.mark("done")
	res.Blocked, res.Missing, res.ConsoleErrors = b.c.report()
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

func drive(br *browser, b *wire.Browser, st *site) error {
	c, s := br.c, br.session
	c.intercept(s, st)
	if !br.prepared {
		if err := br.prepare(); err != nil {
			return err
		}
	}
	var setup []command
	if !b.JavaScript {
		setup = append(setup, command{"Emulation.setScriptExecutionDisabled", map[string]any{"value": true}})
	}
	if b.Media != "" {
		setup = append(setup, command{"Emulation.setEmulatedMedia", map[string]any{"media": b.Media}})
	}
	if sc := b.Screenshot; sc != nil {
		setup = append(setup, command{"Emulation.setDeviceMetricsOverride", metrics(sc, sc.Height)})
	}
	if b.OmitBackground {
		setup = append(setup, command{"Emulation.setDefaultBackgroundColorOverride",
			map[string]any{"color": map[string]any{"r": 0, "g": 0, "b": 0, "a": 0}}})
	}
	if err := c.callEach(s, setup); err != nil {
		return err
	}
	loaded := c.await(s, "Page.loadEventFired")
	// A page that exhausts its renderer's memory crashes it; say so now
	// rather than wait for the deadline.
	crashed := c.await(s, "Inspector.targetCrashed")
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := c.call(s, "Page.navigate", map[string]any{"url": pageURLFor(st.pagePath)}, &nav); err != nil {
		return err
	}
	if nav.ErrorText != "" {
		return fmt.Errorf("loading the page: %s", nav.ErrorText)
	}
	select {
	case <-loaded:
	case <-crashed:
		return errors.New("the page crashed while loading (out of memory?)")
	case <-c.done:
		return c.failure()
	}
	c.mark("page loaded")
	// Targets the page started (workers) run before it is printed.
	attached := make(chan struct{})
	go func() { c.attaching.Wait(); close(attached) }()
	select {
	case <-attached:
	case <-time.After(attachWait):
	}
	if err := wait(c, s, b.Wait); err != nil {
		return err
	}
	if b.JavaScript {
		// Web fonts and late layout settle before printing.
		_ = c.call(s, "Runtime.evaluate", map[string]any{
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
	c.mark("printed")
	c.mu.Lock()
	err = c.attachErr
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(wire.OutputDir, b.Output), data, 0o600)
}

func printPDF(c *cdp, s string, o *wire.PDFOptions) ([]byte, error) {
	var r struct {
		Data string `json:"data"`
	}
	if err := c.call(s, "Page.printToPDF", o, &r); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(r.Data)
}

func metrics(sc *wire.Screenshot, height int) map[string]any {
	return map[string]any{
		"width": sc.Width, "height": height, "deviceScaleFactor": sc.DeviceScaleFactor, "mobile": false,
	}
}

func capture(c *cdp, s string, sc *wire.Screenshot) ([]byte, error) {
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
			if err := c.call(s, "Emulation.setDeviceMetricsOverride", metrics(sc, h), nil); err != nil {
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
	if err := c.call(s, "Page.captureScreenshot", params, &r); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(r.Data)
}

// cdp is a minimal Chrome DevTools Protocol client over the pipe:
// NUL-terminated JSON messages, flat sessions.
type cdp struct {
	mu      sync.Mutex
	w       io.Writer
	next    int
	pending map[int]chan message
	waiters map[string]chan struct{}
	onPause func(message)
	// attachErr is a target that could not be intercepted (attached).
	attachErr error
	// attaching counts targets being attached; the page is printed once
	// they are running (or after attachWait).
	attaching sync.WaitGroup
	mark      func(string)
	// events handles other events by method, called in read's order.
	events map[string]func(message)
	// diagMu guards what the page did that the job reports.
	diagMu                    sync.Mutex
	blocked, missing, console []string
	done                      chan struct{}
	err                       error
}

type message struct {
	ID        int             `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

func newCDP(w io.Writer, r io.Reader) *cdp {
	c := &cdp{w: w, pending: map[int]chan message{}, waiters: map[string]chan struct{}{}, events: map[string]func(message){}, done: make(chan struct{})}
	go c.read(r)
	return c
}

func (c *cdp) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	var err error
	for {
		var b []byte
		b, err = br.ReadBytes(0)
		if err != nil {
			break
		}
		var m message
		if err = json.Unmarshal(b[:len(b)-1], &m); err != nil {
			err = fmt.Errorf("decoding a DevTools message: %w", err)
			break
		}
		c.mu.Lock()
		if m.ID != 0 {
			if ch, ok := c.pending[m.ID]; ok {
				delete(c.pending, m.ID)
				ch <- m
			}
		} else if m.Method == "Fetch.requestPaused" && c.onPause != nil {
			go c.onPause(m)
		} else if m.Method == "Target.attachedToTarget" && c.onPause != nil {
			c.attaching.Add(1)
			go func() {
				defer c.attaching.Done()
				c.attached(m)
			}()
		} else if ch, ok := c.waiters[m.SessionID+" "+m.Method]; ok {
			delete(c.waiters, m.SessionID+" "+m.Method)
			close(ch)
		} else if h := c.events[m.Method]; h != nil {
			h(m)
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	if errors.Is(err, io.EOF) {
		err = errors.New("chromium closed the DevTools pipe (it crashed or was killed)")
	}
	c.err = err
	c.mu.Unlock()
	close(c.done)
}

func (c *cdp) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// command is one DevTools call whose result is not needed.
type command struct {
	method string
	params any
}

// callEach sends the commands in order and stops at the first that fails.
func (c *cdp) callEach(session string, cmds []command) error {
	for _, cmd := range cmds {
		if err := c.call(session, cmd.method, cmd.params, nil); err != nil {
			return err
		}
	}
	return nil
}

// call sends method and decodes its result into out (if not nil).
func (c *cdp) call(session, method string, params, out any) error {
	c.mu.Lock()
	c.next++
	id := c.next
	ch := make(chan message, 1)
	c.pending[id] = ch
	b, err := json.Marshal(message{ID: id, SessionID: session, Method: method, Params: raw(params)})
	if err == nil {
		_, err = c.w.Write(append(b, 0))
	}
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, m.Error.Message, m.Error.Code)
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-c.done:
		return fmt.Errorf("%s: %w", method, c.failure())
	}
}

func raw(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, _ := json.Marshal(v)
	return b
}

// await returns a channel closed when the session sees event method.
func (c *cdp) await(session, method string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	c.waiters[session+" "+method] = ch
	return ch
}

// intercept answers the page's requests: the page and the job's files from
// the page's origin (a file the job does not have is a 404, and recorded),
// everything else fails and is recorded.
func (c *cdp) intercept(session string, st *site) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onPause = func(m message) {
		var p struct {
			RequestID string `json:"requestId"`
			Request   struct {
				URL    string `json:"url"`
				Method string `json:"method"`
			} `json:"request"`
		}
		if json.Unmarshal(m.Params, &p) != nil {
			return
		}
		if strings.HasPrefix(p.Request.URL, pageURL) && p.Request.Method == "GET" {
			body, ct, ok := st.lookup(p.Request.URL)
			code := 200
			if !ok {
				code, ct, body = 404, "text/plain; charset=utf-8", []byte("not in this job's files\n")
				c.record(&c.missing, p.Request.URL)
			}
			_ = c.call(m.SessionID, "Fetch.fulfillRequest", map[string]any{
				"requestId": p.RequestID, "responseCode": code, "body": base64.StdEncoding.EncodeToString(body),
				"responseHeaders": []map[string]string{
					{"name": "Content-Type", "value": ct},
					{"name": "Cache-Control", "value": "no-store"},
				},
			}, nil)
			return
		}
		c.record(&c.blocked, p.Request.URL)
		_ = c.call(m.SessionID, "Fetch.failRequest", map[string]any{"requestId": p.RequestID, "errorReason": "AccessDenied"}, nil)
	}
	c.events["Runtime.consoleAPICalled"] = func(m message) {
		var p struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		if json.Unmarshal(m.Params, &p) != nil || (p.Type != "error" && p.Type != "assert") {
			return
		}
		var words []string
		for _, a := range p.Args {
			if a.Value != nil {
				words = append(words, fmt.Sprint(a.Value))
			} else {
				words = append(words, a.Description)
			}
		}
		c.record(&c.console, "console."+p.Type+": "+strings.Join(words, " "))
	}
	c.events["Runtime.exceptionThrown"] = func(m message) {
		var p struct {
			Details struct {
				Text      string `json:"text"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		if json.Unmarshal(m.Params, &p) != nil {
			return
		}
		what := p.Details.Exception.Description
		if what == "" {
			what = p.Details.Text
		}
		what, _, _ = strings.Cut(what, "\n")
		c.record(&c.console, "uncaught: "+what)
	}
}

// record adds what to list as the host keeps it: the first
// wire.MaxDiagnostics, each a wire.Diagnostic.
func (c *cdp) record(list *[]string, what string) {
	c.diagMu.Lock()
	defer c.diagMu.Unlock()
	if len(*list) < wire.MaxDiagnostics {
		*list = append(*list, wire.Diagnostic(what))
	}
}

// attachWait bounds how long a page's print waits for the targets it
// started to be attached.
const attachWait = 2 * time.Second

// interceptAll makes every target the page starts (workers, out-of-process
// frames, service workers, and theirs in turn) attach paused, with its
// requests intercepted like the page's before it runs: without it they
// would fetch past the interception, held back only by the sandbox's empty
// network.
func (c *cdp) interceptAll(session string) error {
	return c.call(session, "Target.setAutoAttach", map[string]any{
		"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true,
	}, nil)
}

// attached intercepts a newly attached target's requests, then lets it run.
func (c *cdp) attached(m message) {
	var p struct {
		SessionID  string `json:"sessionId"`
		TargetInfo struct {
			Type string `json:"type"`
			URL  string `json:"url"`
		} `json:"targetInfo"`
	}
	if json.Unmarshal(m.Params, &p) != nil || p.SessionID == "" {
		return
	}
	err := c.call(p.SessionID, "Fetch.enable", map[string]any{"patterns": []map[string]any{{"urlPattern": "*"}}}, nil)
	how := "intercepting"
	if err != nil && p.TargetInfo.Type == "worker" && strings.Contains(err.Error(), "(-32601)") {
		// A dedicated worker has no Fetch domain of its own: its
		// requests are its page's, paused by the page's interception.
		err, how = nil, "the page intercepting"
	}
	if err == nil {
		err = c.interceptAll(p.SessionID)
	}
	if err != nil {
		// Not intercepted: it stays paused, never runs, and the job
		// fails (drive).
		c.mu.Lock()
		c.attachErr = fmt.Errorf("a %s the page started could not be intercepted: %w", p.TargetInfo.Type, err)
		c.mu.Unlock()
		return
	}
	c.mark(how + " a " + p.TargetInfo.Type + " target")
	_ = c.call(p.SessionID, "Runtime.runIfWaitingForDebugger", nil, nil)
}

// report returns the requests refused and missing, and the console
// errors, so far.
func (c *cdp) report() (blocked, missing, console []string) {
	c.diagMu.Lock()
	defer c.diagMu.Unlock()
	return slices.Clone(c.blocked), slices.Clone(c.missing), slices.Clone(c.console)
}
