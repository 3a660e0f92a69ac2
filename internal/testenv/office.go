//go:build !unit

package testenv

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/wire"
)

// OfficeSave is a document for OfficeFiles to make: Input (a file name
// with the extension LibreOffice reads it by, and its bytes) stored with
// LibreOffice's export filter Filter, encrypted with Password when set.
type OfficeSave struct {
	Input    string
	Data     []byte
	Filter   string // e.g. "MS Word 97", "MS Excel 97", "MS PowerPoint 97", "MS Word 2007 XML"
	Password string
}

// officeSaver is run by python3 inside the sandbox: it boots soffice on a
// UNO pipe, loads each input and stores it with its filter, then kills
// soffice and leaves at once: tearing down the UNO bridge to a killed
// soffice at interpreter exit can end python in SIGSEGV after every file
// was stored. OOXML is encrypted through EncryptionData (what LibreOffice's
// save dialog passes), other formats through Password.
const officeSaver = `
import json, os, subprocess, sys, time, uno
from com.sun.star.beans import NamedValue, PropertyValue
def prop(n, v):
    p = PropertyValue(); p.Name, p.Value = n, v; return p
def named(n, v):
    p = NamedValue(); p.Name, p.Value = n, v; return p
so = subprocess.Popen(["/usr/lib/libreoffice/program/soffice", "-env:UserInstallation=file:///tmp/work/lo",
    "--headless", "--invisible", "--norestore", "--nologo", "--nodefault", "--nolockcheck",
    "--accept=pipe,name=testenv;urp;"], start_new_session=True)
local = uno.getComponentContext()
resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
for _ in range(3000):
    try:
        ctx = resolver.resolve("uno:pipe,name=testenv;urp;StarOffice.ComponentContext")
        break
    except Exception:
        time.sleep(0.1)
desktop = ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)
for i, job in enumerate(json.load(open("/tmp/in/jobs.json"))):
    src = "/tmp/work/" + job["input"]
    with open(src, "wb") as f:
        f.write(bytes.fromhex(job["data"]))
    doc = desktop.loadComponentFromURL(uno.systemPathToFileUrl(src), "_blank", 0, (prop("Hidden", True),))
    props = [prop("FilterName", job["filter"])]
    if job["password"] and "2007" in job["filter"]:
        data = (named("OOXPassword", job["password"]), named("CryptoType", "Standard"))
        props.append(prop("EncryptionData", uno.Any("[]com.sun.star.beans.NamedValue", data)))
    elif job["password"]:
        props.append(prop("Password", job["password"]))
    doc.storeToURL(uno.systemPathToFileUrl("/tmp/out/%d" % i), tuple(props))
    doc.close(True)
os.killpg(so.pid, 9)
os._exit(0)
`

// OfficeFiles has LibreOffice, in one sandbox, store each document with its
// export filter, and returns the results in order: the binary Office
// formats and encrypted OOXML made from the documents internal/samples
// writes, so that no test needs a checked-in binary.
func OfficeFiles(t testing.TB, m *sandbox.Manager, saves ...OfficeSave) [][]byte {
	t.Helper()
	type job struct {
		Input    string `json:"input"`
		Data     string `json:"data"`
		Filter   string `json:"filter"`
		Password string `json:"password"`
	}
	var jobs []job
	for _, s := range saves {
		jobs = append(jobs, job{s.Input, hex.EncodeToString(s.Data), s.Filter, s.Password})
	}
	in, _ := json.Marshal(jobs)
	res, err := m.Run(context.Background(), sandbox.Job{
		Request: wire.Request{
			Mode: wire.ModeRender, InputName: "jobs.json", InputSize: int64(len(in)),
			Steps: []wire.Step{{Argv: []string{"/usr/bin/python3", "-I", "-c", officeSaver}}},
			Env:   []string{"PATH=/usr/bin:/bin", "HOME=" + wire.WorkDir, "LANG=C.UTF-8", "SAL_USE_VCLPLUGIN=svp"},
		},
		Input:  bytes.NewReader(in),
		Limits: sandbox.Limits{Timeout: 3 * time.Minute, MemoryBytes: 2 << 30, CPUs: 2, Pids: 1024, TmpBytes: 512 << 20},
	})
	if err != nil {
		t.Fatalf("making office documents with LibreOffice: %v", err)
	}
	out := make([][]byte, len(saves))
	for _, f := range res.Response.Files {
		i, err := strconv.Atoi(f.Name)
		if err != nil || i < 0 || i >= len(out) {
			t.Fatalf("unexpected output %q", f.Name)
		}
		out[i] = f.Data
	}
	for i, o := range out {
		if len(o) == 0 {
			t.Fatalf("LibreOffice made no %s from %s: %s", saves[i].Filter, saves[i].Input, res.Response.Result.StderrTail)
		}
	}
	return out
}
