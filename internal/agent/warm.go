package agent

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/renderbox/renderbox/internal/wire"
)

// boot starts what w asks for before the request is read, and says so with
// a Ready frame on out. A boot that fails is reported and the request is
// then served cold: a pre-booted sandbox is never worse than a fresh one.
// The error is the Ready frame's own.
func (a *Agent) boot(arg string, out *bufio.Writer) error {
	start := time.Now()
	var w wire.Warm
	err := json.Unmarshal([]byte(arg), &w)
	if err == nil {
		err = makeDirs()
	}
	if err == nil {
		err = a.bootKind(&w, io.Discard)
	}
	rd := wire.Ready{Kind: w.Kind, BootMS: time.Since(start).Milliseconds()}
	if err != nil {
		rd.Error = err.Error()
	}
	if err := wire.WriteJSON(out, wire.TypeReady, rd); err != nil {
		return fmt.Errorf("writing ready: %w", err)
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("flushing ready: %w", err)
	}
	return nil
}

func (a *Agent) bootKind(w *wire.Warm, log io.Writer) error {
	switch w.Kind {
	case wire.WarmNone:
		return nil
	case wire.WarmBrowser:
		if len(w.Argv) == 0 {
			return fmt.Errorf("warm browser: no argv")
		}
		b, err := a.launchBrowser(w.Argv, w.Env, log)
		if err != nil {
			return fmt.Errorf("booting chromium: %w", err)
		}
		if err := b.warmUp(); err != nil {
			b.kill()
			return fmt.Errorf("warming chromium up: %w", err)
		}
		a.browser = b
		return nil
	case wire.WarmExec:
		p, err := a.startPrimed(w.Argv, w.Env)
		if err != nil {
			return err
		}
		a.primed = p
		return nil
	case wire.WarmOffice:
		o, err := a.bootOffice(w.Env, log, true /* warmUp */)
		if err != nil {
			return err
		}
		a.office = o
		return nil
	}
	return fmt.Errorf("unknown warm kind %q", w.Kind)
}
