package main

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/renderbox/renderbox/internal/wire"
)

// soffice and the flags every run of it gets: a throw-away profile on the
// job's tmpfs, no window, no recovery, no lock files.
const soffice = "/usr/lib/libreoffice/program/soffice"

var sofficeFlags = []string{
	"-env:UserInstallation=file://" + wire.WorkDir + "/libreoffice",
	"--headless", "--invisible", "--norestore", "--nologo", "--nodefault", "--nolockcheck",
}

// runOffice converts the document o describes with soffice --convert-to.
// The output is OutDir/<input's stem>.<format>, and a run that leaves none
// is a failure.
func runOffice(o *wire.Office, env []string, tail *tail, res *wire.Result) error {
	if o.Format != wire.OfficePDF {
		return fmt.Errorf("office format %q is not supported", o.Format)
	}
	base := path.Base(o.Input)
	out := path.Join(o.OutDir, strings.TrimSuffix(base, path.Ext(base))+"."+o.Format)
	if err := os.MkdirAll(o.OutDir, 0o700); err != nil {
		return err
	}
	argv := append(append([]string{soffice}, sofficeFlags...), "--convert-to", o.Format, "--outdir", o.OutDir, o.Input)
	if !runStep(wire.Step{Argv: argv}, env, tail, res) {
		if res.Error != "" {
			return errors.New(res.Error)
		}
		return errors.New("soffice failed")
	}
	// soffice --convert-to exits 0 when it could not load the document.
	if st, err := os.Lstat(out); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("LibreOffice wrote no %s", path.Base(out))
	}
	return nil
}
