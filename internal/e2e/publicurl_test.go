//go:build !unit

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rb "github.com/renderbox/renderbox/client"
	"github.com/renderbox/renderbox/internal/samples"
)

// -public-url through a live stack behind a proxy that serves the API
// under /render: Location, the outputs' URLs, outputs_zip_url and the
// webhook's copies of them are absolute under the public URL (never the
// request's Host), each one downloads through the proxy, and the Go
// client and the CLI given the public URL render and download with them;
// a client on another origin refuses to send its key there.
func TestPublicURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := "http://" + ln.Addr().String() + "/render"
	var target atomic.Pointer[url.URL]
	proxy := &http.Server{Handler: &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target.Load())
		r.Out.URL.Path = strings.TrimPrefix(r.In.URL.Path, "/render")
		r.Out.URL.RawPath = ""
	}}}
	go proxy.Serve(ln)
	t.Cleanup(func() { proxy.Close() })

	rcv := newHookReceiver(t)
	s := newStack(t, stackOpts{apiArgs: []string{"-public-url", public + "/", "-webhook-allow", "127.0.0.2/32"}})
	api, _ := url.Parse(s.base)
	target.Store(api)
	key := s.key("public")

	hook := rcv.answer("/public")
	r, j := submitWithCallback(t, s.client, key, "pdf-png", samples.PDF("public", 2), hook)
	if r.Status != 202 && r.Status != 200 {
		t.Fatalf("submit: %d %s", r.Status, r.Body)
	}
	if got, want := r.Header.Get("Location"), public+"/v1/jobs/"+j.ID; got != want {
		t.Errorf("Location %q, want %q", got, want)
	}
	var job struct {
		State   string `json:"state"`
		Outputs []struct {
			Name string `json:"name"`
			URL  string `json:"url"`
		} `json:"outputs"`
		OutputsZipURL string `json:"outputs_zip_url"`
	}
	waitFor(t, "the job to end", 2*time.Minute, func() bool {
		s.client.do("GET", "/v1/jobs/"+j.ID+"?wait=10", key, "", nil, nil).json(t, &job)
		return job.State != "queued" && job.State != "running"
	})
	if job.State != "succeeded" || len(job.Outputs) != 2 {
		t.Fatalf("job %s: %+v", j.ID, job)
	}
	get := func(u string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	for _, o := range job.Outputs {
		if want := public + "/v1/jobs/" + j.ID + "/outputs/" + o.Name; o.URL != want {
			t.Errorf("output url %q, want %q", o.URL, want)
		}
		if st, b := get(o.URL); st != 200 || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("GET %s: %d, %d bytes; want 200 and a PNG", o.URL, st, len(b))
		}
	}
	if want := public + "/v1/jobs/" + j.ID + "/outputs.zip"; job.OutputsZipURL != want {
		t.Errorf("outputs_zip_url %q, want %q", job.OutputsZipURL, want)
	} else if st, b := get(job.OutputsZipURL); st != 200 || !bytes.HasPrefix(b, []byte("PK")) {
		t.Errorf("GET %s: %d, %d bytes; want 200 and a ZIP", job.OutputsZipURL, st, len(b))
	}

	// The webhook carries the same absolute URLs.
	if w := webhookOf(t, s.client, key, j.ID); w.State != "delivered" {
		t.Fatalf("webhook: %+v", w)
	}
	d := rcv.deliveries("/public")
	var ev struct {
		Data struct {
			Outputs []struct {
				URL string `json:"url"`
			} `json:"outputs"`
			OutputsZipURL string `json:"outputs_zip_url"`
		} `json:"data"`
	}
	if len(d) != 1 || json.Unmarshal(d[0].body, &ev) != nil || len(ev.Data.Outputs) != 2 {
		t.Fatalf("webhook deliveries: %d", len(d))
	}
	if ev.Data.Outputs[0].URL != job.Outputs[0].URL || ev.Data.OutputsZipURL != job.OutputsZipURL {
		t.Errorf("webhook URLs %q, %q; want %q, %q", ev.Data.Outputs[0].URL, ev.Data.OutputsZipURL, job.Outputs[0].URL, job.OutputsZipURL)
	}

	// The Go client and the CLI on the public URL (a path under a proxy).
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := rb.New(public, key)
	if err != nil {
		t.Fatal(err)
	}
	cj, err := c.Submit(ctx, rb.Request{Renderer: "svg-png", Files: []rb.File{rb.FromBytes("in.svg", samples.SVG(40, 20, 0, 0, 5))}})
	if err == nil {
		cj, err = c.Wait(ctx, cj.ID, nil)
	}
	if err != nil || cj.State != "succeeded" || !strings.HasPrefix(cj.Outputs[0].URL, public+"/") {
		t.Fatalf("client on %s: %+v %v", public, cj, err)
	}
	paths, err := c.DownloadAll(ctx, cj, t.TempDir())
	if err != nil || len(paths) != 1 {
		t.Errorf("client DownloadAll through the public URL: %v %v", paths, err)
	}
	// The same client on the API's own address: the absolute URLs point
	// elsewhere, and the key is not sent there.
	direct, _ := rb.New(s.base, key)
	if _, err := direct.DownloadAll(ctx, cj, t.TempDir()); err == nil || !strings.Contains(err.Error(), "public URL") {
		t.Errorf("a client on another origin than the public URL: %v, want a refusal naming the public URL", err)
	}
	dir := t.TempDir()
	svg := filepath.Join(dir, "in.svg")
	if err := os.WriteFile(svg, samples.SVG(40, 20, 0, 0, 5), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bins, "renderbox"), "render", "-r", "svg-png", "-o", filepath.Join(dir, "out"), svg)
	cmd.Env = append(os.Environ(), "RENDERBOX_CONFIG="+filepath.Join(dir, "none.json"), "RENDERBOX_SERVER="+public, "RENDERBOX_KEY="+key, "RENDERBOX_KEY_FILE=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("renderbox render -server %s: %v", public, err)
	}
	if b, err := os.ReadFile(strings.TrimSpace(string(out))); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("the CLI through the public URL printed %q: %v", out, err)
	}
}
