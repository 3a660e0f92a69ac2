package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/renderbox/renderbox/internal/wire"
)

// warmBrowser is the Chromium booted before the request, if any; browse
// takes it.
var warmBrowser *browser

// boot starts what w asks for before the request is read, and says so with
// a Ready frame on out. A boot that fails is reported and the request is
// then served cold: a pre-booted sandbox is never worse than a fresh one.
func boot(arg string, out *bufio.Writer) {
	start := time.Now()
	var w wire.Warm
	err := json.Unmarshal([]byte(arg), &w)
	if err == nil {
		err = makeDirs()
	}
	if err == nil {
		err = bootKind(&w, io.Discard)
	}
	rd := wire.Ready{Kind: w.Kind, BootMS: time.Since(start).Milliseconds()}
	if err != nil {
		rd.Error = err.Error()
	}
	if werr := wire.WriteJSON(out, wire.TypeReady, rd); werr != nil {
		fatal("writing ready: %v", werr)
	}
	if ferr := out.Flush(); ferr != nil {
		fatal("flushing ready: %v", ferr)
	}
}

func bootKind(w *wire.Warm, log io.Writer) error {
	switch w.Kind {
	case wire.WarmNone:
		return nil
	case wire.WarmBrowser:
		if len(w.Argv) == 0 {
			return fmt.Errorf("warm browser: no argv")
		}
		b, err := launchBrowser(w.Argv, w.Env, log)
		if err != nil {
			return fmt.Errorf("booting chromium: %w", err)
		}
		if err := b.warmUp(); err != nil {
			b.kill()
			return fmt.Errorf("warming chromium up: %w", err)
		}
		warmBrowser = b
		return nil
	case wire.WarmExec:
		p, err := startPrimed(w.Argv, w.Env)
		if err != nil {
			return err
		}
		warmPrimed = p
		return nil
	case wire.WarmOffice:
		o, err := bootOffice(w.Env, log, true /* warmUp */)
		if err != nil {
			return err
		}
		warmOffice = o
		return nil
	}
	return fmt.Errorf("unknown warm kind %q", w.Kind)
}
