//go:build !unit

package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/renderbox/renderbox"
	"github.com/renderbox/renderbox/internal/api"
	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/jobstate"
)

// keyed is an API on a real ledger and a private Redis, and a key for it.
type keyed struct {
	t      *testing.T
	srv    *httptest.Server
	ledger ledger.Store
	queue  *queue.Queue
	key    string
	owner  string
}

func newKeyed(t *testing.T) *keyed { t.Helper(); return newKeyedWith(t, nil) }

// newKeyedWith is newKeyed with the server's settings changed by set.
func newKeyedWith(t *testing.T, set func(*api.Server)) *keyed {
	t.Helper()
	store, secret, k := keyedLedger(t)
	rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(t, false)})
	t.Cleanup(func() { rdb.Close() })
	q := queue.New(rdb, 0)
	as := &api.Server{OpenAPI: renderbox.OpenAPI, Ledger: store, Queue: q}
	if set != nil {
		set(as)
	}
	srv := httptest.NewServer(as.Handler())
	t.Cleanup(srv.Close)
	return &keyed{t: t, srv: srv, ledger: store, queue: q, key: secret, owner: k.ID}
}

// answer is a response read whole, with its problem code if it is one.
type answer struct {
	status int
	header http.Header
	body   []byte
	code   string
	detail string
}

func (k *keyed) call(method, path, contentType, body string) answer {
	k.t.Helper()
	return k.do(method, path, map[string]string{"Content-Type": contentType}, body)
}

// do sends a request with k's key and the given headers (those set to ""
// left out) and reads the answer whole.
func (k *keyed) do(method, path string, header map[string]string, body string) answer {
	k.t.Helper()
	req, _ := http.NewRequest(method, k.srv.URL+path, strings.NewReader(body))
	// Whatever Host a client writes, no URL the API answers comes from it.
	req.Host = "attacker.example"
	req.Header.Set("Authorization", "Bearer "+k.key)
	for h, v := range header {
		if v != "" {
			req.Header.Set(h, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		k.t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	a.body, _ = io.ReadAll(resp.Body)
	var p struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
	}
	if resp.Header.Get("Content-Type") == "application/problem+json" {
		_ = json.Unmarshal(a.body, &p)
	}
	a.code, a.detail = p.Code, p.Detail
	return a
}

const svgJob = `{"renderer":"svg-png","input_base64":"PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHdpZHRoPSIxMCIgaGVpZ2h0PSIxMCIvPg=="}`

// A body in neither of the two encodings a submission takes is 415, not
// 400, with Accept naming them; a malformed body of the right type stays
// 400.
func TestUnsupportedContentTypeIs415(t *testing.T) {
	k := newKeyed(t)
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/xml", "", "not a media type;;"} {
		a := k.call("POST", "/v1/jobs", ct, svgJob)
		if a.status != 415 || a.code != "unsupported_media_type" || a.header.Get("Accept") != "multipart/form-data, application/json" {
			t.Errorf("Content-Type %q: %d %s (Accept %q), want 415 unsupported_media_type with Accept", ct, a.status, a.body, a.header.Get("Accept"))
		}
	}
	if a := k.call("POST", "/v1/jobs", "multipart/form-data", "x"); a.status != 400 || a.code != "invalid_request" {
		t.Errorf("multipart without a boundary: %d %s, want 400 invalid_request", a.status, a.body)
	}
	if a := k.call("POST", "/v1/jobs", "application/json; charset=utf-8", svgJob); a.status != 202 {
		t.Errorf("application/json with a charset: %d %s, want 202", a.status, a.body)
	}
}

// submit posts svgJob and returns the new job's id.
func (k *keyed) submit() string {
	k.t.Helper()
	a := k.call("POST", "/v1/jobs", "application/json", svgJob)
	var j struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(a.body, &j); a.status != 202 || err != nil {
		k.t.Fatalf("submitting: %d %s", a.status, a.body)
	}
	return j.ID
}

// DELETE is idempotent: cancelling a canceled job answers as the cancel
// did; a job that ended otherwise is still 409.
func TestCancelIsIdempotent(t *testing.T) {
	k := newKeyed(t)
	id := k.submit()
	first := k.call("DELETE", "/v1/jobs/"+id, "", "")
	if first.status != 200 || !strings.Contains(string(first.body), `"state":"canceled"`) {
		t.Fatalf("cancel: %d %s, want 200 and the canceled job", first.status, first.body)
	}
	for range 2 {
		again := k.call("DELETE", "/v1/jobs/"+id, "", "")
		if again.status != 200 || string(again.body) != string(first.body) {
			t.Errorf("cancel again: %d %s, want the first cancel's 200 %s", again.status, again.body, first.body)
		}
	}

	done := k.submit()
	if _, err := k.ledger.Finish(context.Background(), done, ledger.FinishOptions{State: jobstate.Succeeded, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if a := k.call("DELETE", "/v1/jobs/"+done, "", ""); a.status != 409 || a.code != "already_finished" {
		t.Errorf("cancel of a succeeded job: %d %s, want 409 already_finished", a.status, a.body)
	}
	if a := k.call("DELETE", "/v1/jobs/job_nope", "", ""); a.status != 404 {
		t.Errorf("cancel of no job: %d %s, want 404", a.status, a.body)
	}
}

// A query parameter a route does not take is refused by name, as an
// unknown form field is, rather than dropped: ?limt=5 would otherwise
// answer a page of 20.
func TestUnknownQueryParameterIsRefused(t *testing.T) {
	k := newKeyed(t)
	id := k.submit()
	for _, c := range []struct{ method, path, names string }{
		{"GET", "/v1/jobs?limt=5", `unknown query parameter "limt" (this route takes: state, cursor, limit)`},
		{"GET", "/v1/jobs/" + id + "?wiat=1", `unknown query parameter "wiat" (this route takes: wait)`},
		{"POST", "/v1/jobs?wait=1&callback=x", `unknown query parameter "callback" (this route takes: wait)`},
		{"DELETE", "/v1/jobs/" + id + "?force=1", `unknown query parameter "force" (this route takes: none)`},
		{"GET", "/healthz?verbose", `unknown query parameter "verbose" (this route takes: none)`},
		{"HEAD", "/v1/renderers?x=1", ""},
		{"GET", "/v1/jobs?limit=5&limit=6", `query parameter limit is given 2 times`},
		{"GET", "/v1/jobs?state=queued;limit=5", "the query string is malformed"},
	} {
		a := k.call(c.method, c.path, "application/json", svgJob)
		if a.status != 400 || (c.method != "HEAD" && (a.code != "invalid_request" || !strings.Contains(a.detail, c.names))) {
			t.Errorf("%s %s: %d %s, want 400 invalid_request saying %s", c.method, c.path, a.status, a.body, c.names)
		}
	}
	for _, path := range []string{"/v1/jobs?state=queued&limit=5", "/v1/jobs/" + id + "?wait=0", "/v1/jobs?cursor="} {
		if a := k.call("GET", path, "", ""); a.status != 200 {
			t.Errorf("GET %s: %d %s, want 200", path, a.status, a.body)
		}
	}
}

// A listed job is the job GET /v1/jobs/{id} shows, its webhook included.
func TestListShowsWhatGetShows(t *testing.T) {
	k := newKeyed(t)
	ctx := context.Background()
	hooked, _, err := k.ledger.CreateJob(ctx, ledger.Job{Owner: k.owner, Renderer: "svg-png", Options: []byte("{}"), Limits: []byte("{}"),
		InputSHA256: strings.Repeat("0", 64), InputSize: 1, CallbackURL: "https://hooks.example.com/renderbox"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.ledger.Finish(ctx, hooked.ID, ledger.FinishOptions{State: jobstate.Failed, ErrorCode: "render_failed", ErrorMessage: "x", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	plain := k.submit()
	var list struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	if a := k.call("GET", "/v1/jobs", "", ""); a.status != 200 || json.Unmarshal(a.body, &list) != nil || len(list.Jobs) != 2 {
		t.Fatalf("GET /v1/jobs: %d %s, want two jobs", a.status, a.body)
	}
	for i, id := range []string{plain, hooked.ID} { // newest first
		got := k.call("GET", "/v1/jobs/"+id, "", "")
		if strings.TrimSpace(string(got.body)) != string(list.Jobs[i]) {
			t.Errorf("job %s\nlisted as %s\nGET shows %s", id, list.Jobs[i], got.body)
		}
	}
	if !strings.Contains(string(list.Jobs[1]), `"webhook":{"url":"https://hooks.example.com/renderbox"`) {
		t.Errorf("the listed job with a callback_url has no webhook: %s", list.Jobs[1])
	}
}
