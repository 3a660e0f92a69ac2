package agent

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/renderbox/renderbox/internal/wire"
)

// soffice and the flags every run of it gets: a throw-away profile on the
// job's tmpfs, no window, no recovery, no lock files.
const soffice = "/usr/lib/libreoffice/program/soffice"

var sofficeFlags = []string{
	"-env:UserInstallation=file://" + wire.WorkDir + "/libreoffice",
	"--headless", "--invisible", "--norestore", "--nologo", "--nodefault", "--nolockcheck",
}

// officeBridge is the Python UNO bridge rootfs/build.sh installs from
// rootfs/files: it drives a booted soffice over its UNO pipe.
const officeBridge = "/usr/local/lib/renderbox/office-bridge.py"

// office is a LibreOffice running headless in this sandbox with a UNO
// bridge attached, waiting for a conversion.
type office struct {
	env             []string
	soffice, bridge *exec.Cmd
	sofficeDone     chan struct{} // closed when soffice has exited
	bridgeIn        io.WriteCloser
	bridgeOut       *bufio.Reader
	log             *switchWriter
	mu              sync.Mutex // one conversion at a time
}

// officeReply is one line from the bridge.
type officeReply struct {
	Ready     bool   `json:"ready"`
	OK        bool   `json:"ok"`
	Error     string `json:"error"`
	ConnectMS int64  `json:"connect_ms"`
	WarmupMS  int64  `json:"warmup_ms"`
}

// bootOffice starts soffice listening on a private UNO pipe and the bridge
// that drives it, and returns once the bridge is connected and, with
// warmUp, has converted its warm-up document. What both print goes to log
// until a conversion redirects it.
func (a *Agent) bootOffice(env []string, log io.Writer, warmUp bool) (*office, error) {
	if err := makeDirs(); err != nil {
		return nil, fmt.Errorf("creating the job's directories: %w", err)
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, err
	}
	// The pipe is a socket under /tmp; only this sandbox can see it.
	pipe := "renderbox-office-" + hex.EncodeToString(nonce[:])
	o := &office{env: env, log: &switchWriter{w: log}, sofficeDone: make(chan struct{})}

	argv := append(append([]string{}, sofficeFlags...), "--accept=pipe,name="+pipe+";urp;StarOffice.ComponentContext")
	o.soffice = officeCmd(soffice, argv, env, o.log)
	if err := a.start(o.soffice); err != nil {
		return nil, fmt.Errorf("starting soffice: %w", err)
	}
	go func() {
		_ = o.soffice.Wait()
		close(o.sofficeDone)
	}()

	bridgeArgs := []string{"-I", officeBridge, pipe, wire.WorkDir}
	if !warmUp {
		bridgeArgs = append(bridgeArgs, "--no-warm-up")
	}
	o.bridge = officeCmd("/usr/bin/python3", bridgeArgs, env, o.log)
	o.bridge.Stdout = nil // its stdout is the protocol
	in, err := o.bridge.StdinPipe()
	if err == nil {
		var out io.ReadCloser
		out, err = o.bridge.StdoutPipe()
		o.bridgeOut = bufio.NewReader(out)
	}
	if err == nil {
		err = a.start(o.bridge)
	}
	if err != nil {
		o.close()
		return nil, fmt.Errorf("starting the office bridge: %w", err)
	}
	o.bridgeIn = in

	ready := make(chan error, 1)
	go func() {
		r, err := o.reply()
		switch {
		case err != nil:
		case r.Error != "":
			err = errors.New(r.Error)
		case !r.Ready:
			err = errors.New("office bridge answered without being ready")
		}
		ready <- err
	}()
	select {
	case err = <-ready:
	case <-o.sofficeDone:
		err = fmt.Errorf("soffice exited while booting: %v", o.soffice.ProcessState)
	}
	if err != nil {
		o.close()
		return nil, fmt.Errorf("booting LibreOffice: %w", err)
	}
	return o, nil
}

// officeCmd is one of the office processes, in its own process group and
// killed if the agent dies.
func officeCmd(prog string, args, env []string, log io.Writer) *exec.Cmd {
	cmd := exec.Command(prog, args...)
	cmd.Env = env
	if cmd.Env == nil {
		cmd.Env = []string{} // never inherit ours
	}
	cmd.Dir = wire.WorkDir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// reply reads one line from the bridge.
func (o *office) reply() (officeReply, error) {
	var r officeReply
	line, err := o.bridgeOut.ReadBytes('\n')
	if err != nil {
		if err == io.EOF {
			err = errors.New("office bridge exited")
		}
		return r, err
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return r, fmt.Errorf("office bridge: %v", err)
	}
	return r, nil
}

// bridgeRequest is one conversion as the bridge reads it.
type bridgeRequest struct {
	Input   string              `json:"input"`
	Output  string              `json:"output"`
	Format  string              `json:"format"`
	Options *wire.OfficeOptions `json:"options,omitempty"`
}

// convert has the booted LibreOffice convert in (a file under /tmp) to PDF
// at outPath with opts. It has no deadline of its own: the host kills the
// sandbox when the job's time is up. The request holds the document's
// password, if any: it goes to the bridge's stdin and nowhere else.
func (o *office) convert(in, outPath string, opts *wire.OfficeOptions) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, err := json.Marshal(bridgeRequest{Input: in, Output: outPath, Format: wire.OfficePDF, Options: opts})
	if err != nil {
		return err
	}
	if _, err := o.bridgeIn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("sending to the office bridge: %w", err)
	}
	r, err := o.reply()
	if err == nil && !r.OK {
		err = errors.New(r.Error)
	}
	if err != nil {
		return fmt.Errorf("converting with LibreOffice: %w", err)
	}
	return nil
}

// alive reports whether soffice is still running.
func (o *office) alive() bool {
	select {
	case <-o.sofficeDone:
		return false
	default:
		return true
	}
}

// maxRSSKiB is soffice's peak resident set (VmHWM), 0 if unknown. gVisor's
// /proc has no VmHWM; there the resident set right after the conversion
// (VmRSS) stands in for it.
func (o *office) maxRSSKiB() int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(o.soffice.Process.Pid) + "/status")
	if err != nil {
		return 0
	}
	var hwm, rss int64
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmHWM":
			hwm = n
		case "VmRSS":
			rss = n
		}
	}
	return max(hwm, rss)
}

// close kills both processes and their groups.
func (o *office) close() {
	for _, c := range []*exec.Cmd{o.bridge, o.soffice} {
		if c != nil && c.Process != nil {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
	}
	if o.bridge != nil && o.bridge.Process != nil {
		_ = o.bridge.Wait()
	}
	if o.soffice.Process != nil {
		<-o.sofficeDone
	}
}

// runOffice converts the document o describes: with the LibreOffice booted
// ahead (warm) when there is one, else with one booted now (cold). Either
// way the bridge converts it, so that every option (the password, page
// styles turned landscape) works the same in both; soffice --convert-to
// takes PDF export settings (LibreOffice 7.4: 'pdf:writer_pdf_Export:{…}')
// but neither a password nor a page style. The output is
// OutDir/<input's stem>.<format> (OutDir/part-n.<format> for several
// documents, one LibreOffice converting them in turn), and a run that
// leaves none is a failure.
func (a *Agent) runOffice(o *wire.Office, env []string, tail *tail, res *wire.Result) error {
	if o.Format != wire.OfficePDF {
		return fmt.Errorf("office format %q is not supported", o.Format)
	}
	// OutDir is under /tmp (OutputDir, or a work directory for several
	// documents); LibreOffice writes there as the renderer.
	if err := os.MkdirAll(o.OutDir, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(o.OutDir, 0o777); err != nil {
		return err
	}
	// Each document and where its PDF goes: the input's stem, or part-n
	// for several.
	type doc struct{ in, out string }
	base := path.Base(o.Input)
	docs := []doc{{o.Input, path.Join(o.OutDir, strings.TrimSuffix(base, path.Ext(base))+"."+o.Format)}}
	if len(o.Parts) > 0 {
		docs = nil
	}
	for i, p := range o.Parts {
		out := path.Join(o.OutDir, "part-"+strconv.Itoa(i+1)+"."+o.Format)
		if !p.Convert {
			// Already a PDF: the merge reads it where it is.
			if err := os.Symlink(p.Path, out); err != nil {
				return err
			}
			continue
		}
		docs = append(docs, doc{p.Path, out})
	}
	// A booted LibreOffice that has died, or whose environment is not the
	// request's (a pool older than the catalogue), is not used.
	warm := a.office
	a.office = nil
	switch {
	case warm == nil:
	case !warm.alive():
		fmt.Fprintf(tail, "renderbox-agent: the pre-booted LibreOffice has exited (%v); converting cold\n", warm.soffice.ProcessState)
		warm.close()
		warm = nil
	case !slices.Equal(warm.env, env):
		fmt.Fprintf(tail, "renderbox-agent: the pre-booted LibreOffice does not match the request; converting cold\n")
		warm.close()
		warm = nil
	}
	if len(docs) == 0 { // every part a PDF: nothing to convert
		if warm != nil {
			warm.close()
		}
		return nil
	}
	lo := warm
	if lo == nil {
		var err error
		if lo, err = a.bootOffice(env, tail, false /* warmUp */); err != nil {
			return err
		}
	}
	lo.log.set(tail)
	defer lo.close() // single-use: nothing to shut down gracefully for
	for _, d := range docs {
		err := lo.convert(d.in, d.out, o.Options)
		res.MaxRSSKiB = max(res.MaxRSSKiB, lo.maxRSSKiB())
		if err != nil {
			if len(o.Parts) > 0 {
				err = fmt.Errorf("%s: %w", path.Base(d.in), err)
			}
			return err
		}
		if err := checkOfficePDF(d.out, tail); err != nil {
			return err
		}
	}
	return nil
}

// checkOfficePDF checks LibreOffice wrote out and gives it a fresh /ID.
func checkOfficePDF(out string, tail *tail) error {
	if st, err := os.Lstat(out); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("LibreOffice wrote no %s", path.Base(out))
	}
	if found, err := freshPDFID(out); err != nil {
		return fmt.Errorf("giving the PDF a fresh /ID: %w", err)
	} else if !found {
		fmt.Fprintf(tail, "renderbox-agent: LibreOffice's PDF has no /ID in its trailer; left as written\n")
	}
	return nil
}
