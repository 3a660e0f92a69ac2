//go:build !unit

package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// fileServer serves files on host (a loopback address the API is told to
// allow: every address a test can listen on is non-public), and redirects
// the paths of redirects to their URLs, recording the Authorization each
// request for a file carried.
func fileServer(t *testing.T, host string, files map[string][]byte, redirects map[string]string) (base string, auth chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("listening on %s: %v", host, err)
	}
	auth = make(chan string, 16)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to, ok := redirects[r.URL.Path]; ok {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		select {
		case auth <- r.Header.Get("Authorization"):
		default:
		}
		_, _ = w.Write(b)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String(), auth
}

// downloadSubmit posts a JSON job whose input is download_from.
func downloadSubmit(t *testing.T, c *client, key, renderer, query string, specs ...map[string]any) (*response, jobJSON) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"renderer": renderer, "download_from": specs})
	r := c.do("POST", "/v1/jobs"+query, key, "application/json", b, nil)
	var j jobJSON
	if r.Status < 300 {
		r.json(t, &j)
	}
	return r, j
}

// A DOCX fetched by the API from a server of the test's own, whose address
// the operator allowed, renders end to end as an uploaded one does; the
// job records the fetch and not the header sent with it. A server without
// -remote-content refuses the same job naming the setting.
func TestDownloadFromEndToEnd(t *testing.T) {
	m := testenv.Manager(t, sandbox.Config{})
	big := make([]byte, 60_000_000) // over office-pdf's 50 MiB input limit
	copy(big, samples.DOCX("too large"))
	base, auth := fileServer(t, "127.0.0.3", map[string][]byte{"/reports/harvest.docx": samples.DOCX("Harvest fetched on the host"), "/big.docx": big}, nil)
	s := newStack(t, stackOpts{apiArgs: []string{"-remote-content", "-remote-allow", "127.0.0.3/32"}})
	c, key := s.client, s.key("download")
	r, j := downloadSubmit(t, c, key, "office-pdf", "?wait=60",
		map[string]any{"url": base + "/reports/harvest.docx?token=QUERYSECRET", "headers": map[string]string{"Authorization": "Bearer HEADERSECRET"}})
	if r.Status >= 300 {
		t.Fatalf("download_from: %d %s", r.Status, r.Body)
	}
	if got := <-auth; got != "Bearer HEADERSECRET" {
		t.Errorf("the origin got Authorization %q", got)
	}
	j = getJob(t, c, key, j.ID, "?wait=60")
	if j.State != "succeeded" || len(j.Outputs) != 1 {
		t.Fatalf("the downloaded DOCX's job: %s %+v", j.State, j.Error)
	}
	if text := testenv.PDFText(t, m, c.do("GET", j.Outputs[0].URL, key, "", nil, nil).Body); !strings.Contains(text, "Harvest fetched on the host") {
		t.Errorf("the PDF says %q, want the fetched document's text", text)
	}
	view := c.do("GET", "/v1/jobs/"+j.ID, key, "", nil, nil)
	var d struct {
		Diagnostics struct {
			Fetched []struct {
				URL    string `json:"url"`
				Status int    `json:"status"`
				Bytes  int64  `json:"bytes"`
			} `json:"fetched"`
		} `json:"diagnostics"`
	}
	view.json(t, &d)
	if f := d.Diagnostics.Fetched; len(f) != 1 || f[0].Status != 200 || f[0].Bytes == 0 || !strings.HasPrefix(f[0].URL, base+"/reports/harvest.docx") {
		t.Errorf("diagnostics.fetched %+v, want the one fetch", f)
	}
	for _, secret := range []string{"QUERYSECRET", "HEADERSECRET"} {
		if strings.Contains(string(view.Body), secret) || strings.Contains(s.api.output(), secret) {
			t.Errorf("the job or the API's log shows %q", secret)
		}
	}
	// Loopback is not among the allowed: refused, the fetch listed.
	r, _ = downloadSubmit(t, c, key, "office-pdf", "", map[string]any{"url": s.base + "/healthz"})
	if r.Status != 400 || r.problemCode(t) != "download_refused" || !strings.Contains(string(r.Body), `"refused":"address"`) {
		t.Errorf("a loopback URL: %d %s, want 400 download_refused", r.Status, r.Body)
	}

	// The CLI: -download-from renders the DOCX; the 60 MB file is refused
	// at the bound, exit 4 with the server's reason.
	cli := func(args ...string) (stdout, stderr string, code int) {
		return runCLI(t, []string{"RENDERBOX_CONFIG=" + filepath.Join(t.TempDir(), "none.json"), "RENDERBOX_SERVER=" + s.base, "RENDERBOX_KEY=" + key}, args...)
	}
	out := t.TempDir()
	stdout, stderr, code := cli("render", "-r", "office-pdf", "-o", out, "-download-from", base+"/reports/harvest.docx")
	if code != 0 {
		t.Fatalf("renderbox render -download-from: exit %d\n%s%s", code, stdout, stderr)
	}
	pdf, err := os.ReadFile(strings.TrimSpace(stdout))
	if err != nil || !strings.Contains(testenv.PDFText(t, m, pdf), "Harvest fetched on the host") {
		t.Errorf("the CLI's PDF (%v) lacks the fetched document's text", err)
	}
	<-auth
	if _, stderr, code := cli("render", "-r", "office-pdf", "-o", out, "-download-from", base+"/big.docx"); code != 4 || !strings.Contains(stderr, "input_too_large") {
		t.Errorf("renderbox render -download-from a 60 MB file: exit %d, %q; want 4 and input_too_large", code, stderr)
	}

	off := newStack(t, stackOpts{noWorker: true})
	r, _ = downloadSubmit(t, off.client, off.key("off"), "office-pdf", "", map[string]any{"url": base + "/reports/harvest.docx"})
	if r.Status != 400 || r.problemCode(t) != "remote_content_disabled" || !strings.Contains(string(r.Body), "-remote-content") {
		t.Errorf("a server without -remote-content: %d %s, want 400 remote_content_disabled naming it", r.Status, r.Body)
	}
}
