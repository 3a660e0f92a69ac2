package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox"
	"github.com/renderbox/renderbox/internal/api"
	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/jobstate"
)

// msgServer is an API on a ledger alone: every refusal here is answered
// before the queue is asked anything.
type msgServer struct {
	t      *testing.T
	srv    *httptest.Server
	store  ledger.Store
	secret string
	owner  string
}

// keyedLedger opens a SQLite ledger for the test and makes a key in it.
func keyedLedger(t testing.TB) (*ledger.SQLite, string, ledger.Key) {
	t.Helper()
	store, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	secret, k, err := store.CreateKey(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	return store, secret, k
}

func newMsgServer(t *testing.T) *msgServer {
	t.Helper()
	store, secret, k := keyedLedger(t)
	srv := httptest.NewServer((&api.Server{OpenAPI: renderbox.OpenAPI, Ledger: store}).Handler())
	t.Cleanup(srv.Close)
	return &msgServer{t: t, srv: srv, store: store, secret: secret, owner: k.ID}
}

// problemOf sends a request and returns its status, problem code and
// detail.
func (m *msgServer) problemOf(method, path, contentType string, body []byte) (int, string, string) {
	m.t.Helper()
	req, _ := http.NewRequest(method, m.srv.URL+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+m.secret)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		m.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var p struct{ Code, Detail string }
	_ = json.Unmarshal(raw, &p)
	return resp.StatusCode, p.Code, p.Detail
}

// multipartBody is a submission with the given fields and files, in order.
func multipartBody(t *testing.T, fields map[string]string, files ...[2]string) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	for _, f := range files {
		w, err := mw.CreateFormFile("file", f[0])
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(f[1]))
	}
	_ = mw.Close()
	return b.Bytes(), mw.FormDataContentType()
}

// says checks that detail holds each of want and none of not.
func says(t *testing.T, name, detail string, want, not []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(detail, w) {
			t.Errorf("%s: %q, want it to say %q", name, detail, w)
		}
	}
	for _, n := range not {
		if strings.Contains(detail, n) {
			t.Errorf("%s: %q, want no %q in it", name, detail, n)
		}
	}
}

// The refusals a newcomer meets first say what is wrong in their terms:
// a missing renderer is required (not an unknown ""), an empty file is
// empty (not application/x-empty), two files to a renderer of one say so
// (not "look like application/zip", the packing the client never sees),
// and sizes are in KiB/MiB. The codes stay the contract's.
func TestRefusalsSpeakTheClientsTerms(t *testing.T) {
	m := newMsgServer(t)
	pdf := string(samples.PDF("a", 1))
	noRenderer, ct := multipartBody(t, nil, [2]string{"a.pdf", pdf})
	twoPDFs, ct2 := multipartBody(t, map[string]string{"renderer": "pdf-png"}, [2]string{"a.pdf", pdf}, [2]string{"b.pdf", pdf})
	emptyFile, ct3 := multipartBody(t, map[string]string{"renderer": "pdf-png"}, [2]string{"a.pdf", ""})
	for _, tc := range []struct {
		name, contentType string
		body              []byte
		status            int
		code              string
		want              []string
		not               []string
	}{
		{"no renderer (multipart)", ct, noRenderer, 400, "unknown_renderer", []string{"renderer is required", "html-pdf", "pdf-png"}, []string{`""`}},
		{"no renderer (JSON)", "application/json", []byte(`{"input_base64":"JVBERi0="}`), 400, "unknown_renderer", []string{"renderer is required"}, []string{`""`}},
		{"an empty renderer", "application/json", []byte(`{"renderer":"","input_base64":"JVBERi0="}`), 400, "unknown_renderer", []string{"renderer is required"}, []string{`""`}},
		{"an empty file", ct3, emptyFile, 400, "unsupported_input", []string{"the file is empty"}, []string{"x-empty", "begin"}},
		{"an empty input (JSON)", "application/json", []byte(`{"renderer":"svg-png","input_base64":""}`), 400, "unsupported_input", []string{"the file is empty"}, []string{"x-empty"}},
		{"two PDFs to pdf-png", ct2, twoPDFs, 400, "unsupported_input", []string{"pdf-png takes one file", "2 file parts"}, []string{"zip", "ZIP"}},
		{"an input over the renderer's limit", "application/json",
			[]byte(fmt.Sprintf(`{"renderer":"dot-svg","options":{},"input_base64":"%s"}`, strings.Repeat("A", 3<<20))), 413, "input_too_large", []string{" MiB"}, []string{"bytes"}},
		{"options over their size", "application/json",
			[]byte(fmt.Sprintf(`{"renderer":"dot-svg","options":{"x":"%s"},"input_base64":"ZGlncmFwaHt9"}`, strings.Repeat("a", 9<<10))), 413, "field_too_large", []string{"over 8 KiB"}, []string{"8192"}},
		{"a limit above the renderer's", "application/json",
			[]byte(`{"renderer":"dot-svg","limits":{"memory_bytes":1000000000000},"input_base64":"ZGlncmFwaHt9"}`), 400, "invalid_options", []string{"1000000000000 (931.3 GiB)", " MiB)"}, []string{"e+"}},
	} {
		status, code, detail := m.problemOf("POST", "/v1/jobs", tc.contentType, tc.body)
		t.Logf("%s: %d %s %s", tc.name, status, code, detail)
		if status != tc.status || code != tc.code {
			t.Errorf("%s: %d %s %q, want %d %s", tc.name, status, code, detail, tc.status, tc.code)
			continue
		}
		says(t, tc.name, detail, tc.want, tc.not)
	}
}

// A 404 for an output names the outputs the job has (a bounded list), or
// says why it has none.
func TestMissingOutputListsTheJobsOutputs(t *testing.T) {
	m := newMsgServer(t)
	ctx := context.Background()
	job := func(state jobstate.State, outputs int) string {
		j, _, err := m.store.CreateJob(ctx, ledger.Job{Owner: m.owner, Renderer: "pdf-png", Options: []byte("{}"), Limits: []byte("{}"),
			InputSHA256: strings.Repeat("0", 64), InputSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		if state == jobstate.Queued {
			return j.ID
		}
		var outs []ledger.Output
		for i := 1; i <= outputs; i++ {
			outs = append(outs, ledger.Output{Name: fmt.Sprintf("page-%d.png", i), Size: 1, SHA256: strings.Repeat("a", 64), MediaType: "image/png"})
		}
		fo := ledger.FinishOptions{State: state, At: time.Now(), Outputs: outs}
		if state != jobstate.Succeeded {
			fo.ErrorCode, fo.ErrorMessage = "render_failed", "no"
		}
		if _, err := m.store.Finish(ctx, j.ID, fo); err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	two, many, failed, queued := job(jobstate.Succeeded, 2), job(jobstate.Succeeded, 25), job(jobstate.Failed, 0), job(jobstate.Queued, 0)
	for _, tc := range []struct {
		name, id string
		want     []string
		not      []string
	}{
		{"two pages", two, []string{`no output called "output.png"`, "its outputs are page-1.png, page-2.png", "GET /v1/jobs/" + two}, nil},
		{"25 pages", many, []string{"page-1.png, page-2.png", "page-20.png and 5 more"}, []string{"page-21.png"}},
		{"a failed job", failed, []string{"the job is failed", "only a succeeded job has outputs"}, nil},
		{"a queued job", queued, []string{"the job is queued"}, nil},
	} {
		status, code, detail := m.problemOf("GET", "/v1/jobs/"+tc.id+"/outputs/output.png", "", nil)
		t.Logf("%s: %d %s %s", tc.name, status, code, detail)
		if status != 404 || code != "not_found" {
			t.Errorf("%s: %d %s %q, want 404 not_found", tc.name, status, code, detail)
			continue
		}
		says(t, tc.name, detail, tc.want, tc.not)
	}
}
