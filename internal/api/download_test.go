//go:build !unit

package api_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/renderbox/renderbox"
	"github.com/renderbox/renderbox/internal/api"
	"github.com/renderbox/renderbox/internal/egress"
	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/testenv"
)

// fileOrigin is a web server of the test's own on a loopback address: the
// documents download_from fetches, and what it was sent.
type fileOrigin struct {
	srv  *httptest.Server
	docx []byte
	auth chan string
}

func newFileOrigin(t *testing.T, addr string) *fileOrigin {
	t.Helper()
	o := &fileOrigin{docx: samples.DOCX("Fetched on the host."), auth: make(chan string, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("/files/report.docx", func(w http.ResponseWriter, r *http.Request) {
		o.auth <- r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/vnd.openxmlformats-officedocument.wordprocessingml.document")
		_, _ = w.Write(o.docx)
	})
	mux.HandleFunc("/site/page", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Disposition", `attachment; filename="index.html"`)
		_, _ = io.WriteString(w, `<!doctype html><link rel=stylesheet href=style.css><p>hi</p>`)
	})
	mux.HandleFunc("/site/style.css", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `p { color: red }`)
	})
	big := func(declare bool) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			const size = 60_000_000
			if declare {
				w.Header().Set("Content-Length", strconv.Itoa(size))
			}
			chunk := bytes.Repeat([]byte{0}, 1<<20)
			for n := 0; n < size; n += len(chunk) {
				if _, err := w.Write(chunk[:min(len(chunk), size-n)]); err != nil {
					return
				}
			}
		}
	}
	mux.HandleFunc("/big-declared.docx", big(true))
	mux.HandleFunc("/big-chunked.docx", big(false))
	mux.HandleFunc("/missing.docx", http.NotFound)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	o.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: mux}}
	o.srv.Start()
	t.Cleanup(o.srv.Close)
	return o
}

// remoteAPI is an API that fetches, allowing allow (CIDRs) beside public
// addresses.
func remoteAPI(t *testing.T, allow string) *keyed {
	t.Helper()
	ps, err := egress.ParseCIDRs(allow)
	if err != nil {
		t.Fatal(err)
	}
	return newKeyedWith(t, func(s *api.Server) {
		s.Remote = api.RemoteContent{Enabled: true, Policy: egress.Policy{Allow: ps}}
	})
}

func downloadJob(renderer string, specs ...map[string]any) string {
	b, _ := json.Marshal(map[string]any{"renderer": renderer, "download_from": specs})
	return string(b)
}

// matchesContract checks a POST /v1/jobs answer against openapi.yaml.
func matchesContract(t *testing.T, a answer) {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(renderbox.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	doc.Servers = openapi3.Servers{{URL: "http://api.test"}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/jobs", nil)
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Fatal(err)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 a.status, Header: a.header, Body: io.NopCloser(bytes.NewReader(a.body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("the answer %d %s does not match openapi.yaml: %v", a.status, a.body, err)
	}
}

func jobOf(t *testing.T, a answer) (id string, diag map[string][]map[string]any) {
	t.Helper()
	var j struct {
		ID          string                      `json:"id"`
		Diagnostics map[string][]map[string]any `json:"diagnostics"`
	}
	if err := json.Unmarshal(a.body, &j); err != nil {
		t.Fatalf("%s: %v", a.body, err)
	}
	return j.ID, j.Diagnostics
}

// A DOCX served by an origin whose address the operator allowed is
// fetched at intake, with the client's header, and queued as its bytes;
// the job records the fetch without the header or the URL's secrets.
func TestDownloadFromQueuesTheFetchedBytes(t *testing.T) {
	o := newFileOrigin(t, "127.0.0.1:0")
	k := remoteAPI(t, "127.0.0.0/8")
	u := strings.Replace(o.srv.URL, "http://", "http://user:hunter2@", 1) + "/files/report.docx?X-Amz-Signature=SIGSECRET"
	a := k.call("POST", "/v1/jobs", "application/json", downloadJob("office-pdf", map[string]any{"url": u, "headers": map[string]string{"Authorization": "Bearer TOKENSECRET"}}))
	if a.status != 202 {
		t.Fatalf("download_from: %d %s, want 202", a.status, a.body)
	}
	matchesContract(t, a)
	if got := <-o.auth; got != "Bearer TOKENSECRET" {
		t.Errorf("the origin got Authorization %q", got)
	}
	id, diag := jobOf(t, a)
	in, err := k.queue.GetBlob(context.Background(), queue.InputKey(id))
	if err != nil || !bytes.Equal(in, o.docx) {
		t.Fatalf("queued input: %d bytes (%v), want the %d fetched", len(in), err, len(o.docx))
	}
	if f := diag["fetched"]; len(f) != 1 || f[0]["status"] != float64(200) || f[0]["bytes"] != float64(len(o.docx)) {
		t.Errorf("diagnostics %v, want the fetch recorded", diag)
	}
	got := k.call("GET", "/v1/jobs/"+id, "", "")
	for _, secret := range []string{"hunter2", "SIGSECRET", "TOKENSECRET"} {
		if strings.Contains(string(a.body), secret) || strings.Contains(string(got.body), secret) {
			t.Errorf("the job shows %q: %s", secret, got.body)
		}
	}

	// The same in a multipart body, download_from a form field.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("renderer", "office-pdf")
	_ = mw.WriteField("download_from", fmt.Sprintf(`[{"url": %q}]`, o.srv.URL+"/files/report.docx"))
	mw.Close()
	if a := k.call("POST", "/v1/jobs", mw.FormDataContentType(), body.String()); a.status != 202 {
		t.Errorf("multipart download_from: %d %s, want 202", a.status, a.body)
	}
	<-o.auth

	// Several URLs are the job's files, named by name, Content-Disposition
	// or the URL's base name.
	a = k.call("POST", "/v1/jobs", "application/json", downloadJob("html-pdf",
		map[string]any{"url": o.srv.URL + "/site/page"}, map[string]any{"url": o.srv.URL + "/site/style.css"},
		map[string]any{"url": o.srv.URL + "/site/style.css", "name": "css/again.css"}))
	if a.status != 202 {
		t.Fatalf("several URLs: %d %s, want 202", a.status, a.body)
	}
	id, _ = jobOf(t, a)
	in, _ = k.queue.GetBlob(context.Background(), queue.InputKey(id))
	zr, err := zip.NewReader(bytes.NewReader(in), int64(len(in)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	if strings.Join(names, " ") != "index.html style.css css/again.css" {
		t.Errorf("the ZIP holds %v", names)
	}
}

func TestDownloadFromRefusals(t *testing.T) {
	o := newFileOrigin(t, "127.0.0.1:0")
	ps, _ := egress.ParseCIDRs("127.0.0.0/8")
	var as *api.Server
	k := newKeyedWith(t, func(s *api.Server) {
		s.Remote, as = api.RemoteContent{Enabled: true, Policy: egress.Policy{Allow: ps}}, s
	})
	for _, tc := range []struct {
		name, url       string
		status          int
		code, detailHas string
	}{
		{"declared 60 MB", o.srv.URL + "/big-declared.docx", 413, "input_too_large", "Content-Length"},
		{"60 MB as it arrives", o.srv.URL + "/big-chunked.docx", 413, "input_too_large", "longer than"},
		{"origin 404", o.srv.URL + "/missing.docx", 422, "download_failed", "404"},
		{"metadata address", "http://169.254.169.254/latest/meta-data/", 400, "download_refused", "169.254.169.254"},
		{"file URL", "file:///etc/passwd", 400, "download_refused", "scheme"},
	} {
		a := k.call("POST", "/v1/jobs", "application/json", downloadJob("office-pdf", map[string]any{"url": tc.url}))
		if a.status != tc.status || a.code != tc.code || !strings.Contains(a.detail, tc.detailHas) || !strings.Contains(a.detail, "download_from[0]") {
			t.Errorf("%s: %d %s %q, want %d %s naming the URL and %q", tc.name, a.status, a.code, a.detail, tc.status, tc.code, tc.detailHas)
		}
		matchesContract(t, a)
	}
	for name, body := range map[string]string{
		"both inputs":   `{"renderer":"office-pdf","input_base64":"AA==","download_from":[{"url":"http://x.test/"}]}`,
		"empty list":    `{"renderer":"office-pdf","download_from":[]}`,
		"unknown field": `{"renderer":"office-pdf","download_from":[{"url":"http://x.test/","method":"POST"}]}`,
		"Host header":   `{"renderer":"office-pdf","download_from":[{"url":"http://x.test/","headers":{"Host":"y"}}]}`,
	} {
		if a := k.call("POST", "/v1/jobs", "application/json", body); a.status != 400 || a.code != "invalid_request" {
			t.Errorf("%s: %d %s, want 400 invalid_request", name, a.status, a.body)
		}
	}
	// Several URLs to a renderer that takes one file: refused before any
	// fetch (the metrics below count none), in the client's terms.
	two := downloadJob("pdf-png", map[string]any{"url": o.srv.URL + "/a.pdf"}, map[string]any{"url": o.srv.URL + "/b.pdf"})
	if a := k.call("POST", "/v1/jobs", "application/json", two); a.status != 400 || a.code != "unsupported_input" ||
		!strings.Contains(a.detail, "pdf-png takes one file") || strings.Contains(strings.ToLower(a.detail), "zip") {
		t.Errorf("two URLs to pdf-png: %d %s %q, want 400 unsupported_input saying it takes one file", a.status, a.code, a.detail)
	}
	// The operator's metrics count them.
	msrv := httptest.NewServer(as.MetricsHandler())
	defer msrv.Close()
	resp, err := http.Get(msrv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`renderbox_fetches_total{outcome="refused"} 4`, `renderbox_fetches_total{outcome="status"} 1`,
		`renderbox_fetch_refusals_total{reason="too_large"} 2`, `renderbox_fetch_refusals_total{reason="address"} 1`,
		`renderbox_fetch_refusals_total{reason="scheme"} 1`, `renderbox_fetch_bytes_total 5.24288e+07`} {
		if !strings.Contains(string(m), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// Loopback, and a redirect from an allowed origin to a private address,
// are refused without a connection to them.
func TestDownloadFromReachesOnlyAllowedAddresses(t *testing.T) {
	canary := testenv.Canary(t, "127.0.0.1:0")
	redirector := httptest.NewUnstartedServer(http.RedirectHandler("http://"+canary.Addr()+"/x.docx", http.StatusFound))
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	redirector.Listener = ln
	redirector.Start()
	defer redirector.Close()

	k := remoteAPI(t, "127.0.0.2/32")
	for name, u := range map[string]string{
		"loopback":            "http://" + canary.Addr() + "/x.docx",
		"localhost":           "http://localhost:" + strings.Split(canary.Addr(), ":")[1] + "/x.docx",
		"redirect to private": redirector.URL + "/r",
	} {
		a := k.call("POST", "/v1/jobs", "application/json", downloadJob("office-pdf", map[string]any{"url": u}))
		var p struct {
			Fetched []map[string]any `json:"fetched"`
		}
		_ = json.Unmarshal(a.body, &p)
		if a.status != 400 || a.code != "download_refused" || len(p.Fetched) != 1 || p.Fetched[0]["refused"] != "address" {
			t.Errorf("%s: %d %s, want 400 download_refused, the fetch recorded as refused (address)", name, a.status, a.body)
		}
		if len(p.Fetched) != 1 {
			continue
		}
		if redirects, _ := p.Fetched[0]["redirects"].([]any); name == "redirect to private" && (len(redirects) != 1 || redirects[0] != "http://"+canary.Addr()+"/x.docx") {
			t.Errorf("%s: the fetch records redirects %v, want the refused one", name, p.Fetched[0]["redirects"])
		}
	}
	if n := canary.Hits(); n != 0 {
		t.Errorf("the canary saw %d connections", n)
	}
}

// A server that does not fetch says which setting would make it.
func TestDownloadFromOffByDefault(t *testing.T) {
	k := newKeyed(t)
	a := k.call("POST", "/v1/jobs", "application/json", downloadJob("office-pdf", map[string]any{"url": "https://files.example.com/a.docx"}))
	if a.status != 400 || a.code != "remote_content_disabled" || !strings.Contains(a.detail, "-remote-content") || !strings.Contains(a.detail, "RENDERBOX_REMOTE_CONTENT") {
		t.Errorf("download_from on a server without it: %d %s, want 400 remote_content_disabled naming the setting", a.status, a.body)
	}
	matchesContract(t, a)
}

// A key has at most -remote-max-per-key submissions fetching at once.
func TestDownloadFromFetchesPerKeyAreBounded(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 4)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		arrived <- struct{}{}
		<-release
		_, _ = w.Write(samples.DOCX("late"))
	}))
	defer slow.Close()
	ps, _ := egress.ParseCIDRs("127.0.0.0/8")
	k := newKeyedWith(t, func(s *api.Server) {
		s.Remote = api.RemoteContent{Enabled: true, Policy: egress.Policy{Allow: ps}, MaxPerKey: 1}
	})
	done := make(chan answer)
	go func() {
		done <- k.call("POST", "/v1/jobs", "application/json", downloadJob("office-pdf", map[string]any{"url": slow.URL + "/a.docx"}))
	}()
	<-arrived
	a := k.call("POST", "/v1/jobs", "application/json", downloadJob("office-pdf", map[string]any{"url": slow.URL + "/b.docx"}))
	if a.status != 429 || a.code != "too_many_requests" {
		t.Errorf("a second fetching submission: %d %s, want 429 too_many_requests", a.status, a.body)
	}
	matchesContract(t, a)
	close(release)
	if a := <-done; a.status != 202 {
		t.Errorf("the first: %d %s, want 202", a.status, a.body)
	}
	if a := k.call("POST", "/v1/jobs", "application/json", downloadJob("office-pdf", map[string]any{"url": slow.URL + "/c.docx"})); a.status != 202 {
		t.Errorf("after the first ended: %d %s, want 202", a.status, a.body)
	}
}
