package fetch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/renderbox/renderbox/internal/egress"
)

// origin serves on 127.0.0.1, which the fetchers of these tests allow
// explicitly: every address a test can listen on is non-public.
func origin(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/doc", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Auth-Seen", r.Header.Get("Authorization"))
		_, _ = io.WriteString(w, "0123456789")
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		// Chunked: no Content-Length to refuse it by.
		for i := 0; i < 64; i++ {
			_, _ = w.Write(bytes.Repeat([]byte("x"), 1024))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/declared-big", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(1<<20))
		_, _ = io.WriteString(w, "short")
	})
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/hop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/doc?sig=SECRET", http.StatusFound)
	})
	mux.HandleFunc("/to-metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	mux.HandleFunc("/trickle", func(w http.ResponseWriter, r *http.Request) {
		for {
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Second):
			}
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func loopbackFetcher(t *testing.T, l Limits, reg prometheus.Registerer) *Fetcher {
	t.Helper()
	allow, err := egress.ParseCIDRs("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	var m *Metrics
	if reg != nil {
		m = NewMetrics(reg)
	}
	return New(&egress.Dialer{Policy: egress.Policy{Allow: allow}}, l, m)
}

func TestFetchRecordsWithoutSecrets(t *testing.T) {
	srv := origin(t)
	reg := prometheus.NewRegistry()
	s := loopbackFetcher(t, Limits{}, reg).Session()
	var b bytes.Buffer
	u := strings.Replace(srv.URL, "http://", "http://user:pw@", 1) + "/doc?sig=SECRET&x=1#frag"
	resp, err := s.Fetch(context.Background(), Request{URL: u, Header: http.Header{"Authorization": {"Bearer tok"}}}, &b)
	if err != nil || b.String() != "0123456789" || resp.Status != 200 || resp.Header.Get("X-Auth-Seen") != "Bearer tok" {
		t.Fatalf("Fetch: %+v %v %q", resp, err, b.String())
	}
	recs := s.Records()
	if len(recs) != 1 || recs[0].Status != 200 || recs[0].Bytes != 10 || recs[0].Refused != "" {
		t.Fatalf("records %+v", recs)
	}
	for _, secret := range []string{"user", "pw", "SECRET", "tok", "frag"} {
		if strings.Contains(recs[0].URL, secret) {
			t.Errorf("the record's URL %q holds %q", recs[0].URL, secret)
		}
	}
	if got := value(s.f.metrics.fetches.WithLabelValues("ok")); got != 1 {
		t.Errorf("renderbox_fetches_total{outcome=ok} = %v", got)
	}
	if got := value(s.f.metrics.bytes); got != 10 {
		t.Errorf("renderbox_fetch_bytes_total = %v", got)
	}
}

func TestFetchBounds(t *testing.T) {
	srv := origin(t)
	reg := prometheus.NewRegistry()
	f := loopbackFetcher(t, Limits{MaxRequests: 4, MaxBytes: 40 << 10, MaxResponseBytes: 16 << 10}, reg)
	s := f.Session()
	var b bytes.Buffer
	// Over the per-response bound while arriving: cut there.
	_, err := s.Fetch(context.Background(), Request{URL: srv.URL + "/big"}, &b)
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, egress.ErrRefused) || ReasonOf(err) != ReasonTooLarge || b.Len() != 16<<10 {
		t.Errorf("/big: %v after %d bytes, want cut at %d", err, b.Len(), 16<<10)
	}
	// A request's own bound, below the fetcher's.
	b.Reset()
	if _, err := s.Fetch(context.Background(), Request{URL: srv.URL + "/doc", Max: 4}, &b); !errors.Is(err, ErrTooLarge) || b.Len() != 0 {
		t.Errorf("/doc with Max 4: %v after %d bytes", err, b.Len())
	}
	// A declared length over the bound is refused before the body.
	b.Reset()
	if _, err := s.Fetch(context.Background(), Request{URL: srv.URL + "/declared-big"}, &b); !errors.Is(err, ErrTooLarge) || b.Len() != 0 || !strings.Contains(err.Error(), "Content-Length") {
		t.Errorf("/declared-big: %v after %d bytes", err, b.Len())
	}
	// The job's byte budget: 40 KiB less the 16 KiB read.
	b.Reset()
	f.limits.MaxResponseBytes = 64 << 10
	if _, err := s.Fetch(context.Background(), Request{URL: srv.URL + "/big"}, &b); ReasonOf(err) != ReasonBytes || b.Len() != 40<<10-16<<10 || !strings.Contains(err.Error(), "the job's") {
		t.Errorf("budget: %v after %d bytes", err, b.Len())
	}
	// The fifth request is over the job's four.
	if _, err := s.Fetch(context.Background(), Request{URL: srv.URL + "/doc"}, io.Discard); ReasonOf(err) != ReasonRequests {
		t.Errorf("fifth request: %v, want refused (requests)", err)
	}
	recs := s.Records()
	if len(recs) != 5 || recs[0].Refused != ReasonTooLarge || recs[4].Refused != ReasonRequests {
		t.Errorf("records %+v", recs)
	}
	if got := value(f.metrics.refusals.WithLabelValues(ReasonTooLarge)); got != 3 {
		t.Errorf("renderbox_fetch_refusals_total{reason=too_large} = %v, want 3", got)
	}
}

func TestFetchRefusalsAndFailures(t *testing.T) {
	srv := origin(t)
	s := New(&egress.Dialer{}, Limits{}, NewMetrics(prometheus.NewRegistry())).Session()
	for u, reason := range map[string]string{
		srv.URL + "/doc":                  egress.ReasonAddress, // loopback, not allowed here
		"http://169.254.169.254/latest/":  egress.ReasonAddress,
		"file:///etc/passwd":              egress.ReasonScheme,
		"http://[::ffff:127.0.0.1]:1/doc": egress.ReasonAddress,
	} {
		if _, err := s.Fetch(context.Background(), Request{URL: u}, io.Discard); ReasonOf(err) != reason {
			t.Errorf("%s: %v, want refused (%s)", u, err, reason)
		}
	}
	_, err := s.Fetch(context.Background(), Request{URL: "http://user:SECRET@[::1"}, io.Discard)
	if recs := s.Records(); err == nil || strings.Contains(err.Error(), "SECRET") || strings.Contains(recs[len(recs)-1].URL, "SECRET") {
		t.Errorf("an unparsable URL: %v, recorded as %q; want refused, its text not repeated", err, recs[len(recs)-1].URL)
	}
	s = loopbackFetcher(t, Limits{}, nil).Session()
	resp, err := s.Fetch(context.Background(), Request{URL: srv.URL + "/missing"}, io.Discard)
	if err == nil || resp == nil || resp.Status != 404 || ReasonOf(err) != "" || !strings.Contains(err.Error(), "404") {
		t.Errorf("/missing: %+v %v, want the origin's 404", resp, err)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	if _, err := s.Fetch(context.Background(), Request{URL: closed.URL}, io.Discard); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("closed port: %v, want connection refused", err)
	}
}

// A server that trickles a byte a second holds the fetch only until the
// context's deadline.
func TestTrickleEndsAtTheDeadline(t *testing.T) {
	srv := origin(t)
	s := loopbackFetcher(t, Limits{}, nil).Session()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Fetch(ctx, Request{URL: srv.URL + "/trickle"}, io.Discard)
	if took := time.Since(start); err == nil || took > 3*time.Second || !strings.Contains(err.Error(), "ran out") {
		t.Errorf("trickle: %v after %s, want the deadline after 1.5s", err, took)
	}
}

func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// A fetch records where it was redirected, and the redirect refused.
func TestFetchRecordsRedirects(t *testing.T) {
	srv := origin(t)
	s := loopbackFetcher(t, Limits{}, nil).Session()
	if _, err := s.Fetch(context.Background(), Request{URL: srv.URL + "/hop"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	_, err := s.Fetch(context.Background(), Request{URL: srv.URL + "/to-metadata"}, io.Discard)
	recs := s.Records()
	if ReasonOf(err) != egress.ReasonAddress || len(recs) != 2 {
		t.Fatalf("a redirect to the metadata address: %v, records %+v", err, recs)
	}
	if r := recs[0].Redirects; len(r) != 1 || r[0] != srv.URL+"/doc?sig=redacted" || recs[0].Status != 200 {
		t.Errorf("followed redirect recorded as %+v", recs[0])
	}
	if r := recs[1].Redirects; len(r) != 1 || r[0] != "http://169.254.169.254/latest/meta-data/" || recs[1].Refused != egress.ReasonAddress {
		t.Errorf("refused redirect recorded as %+v", recs[1])
	}
}

// Each redirect is a request of the job's budget.
func TestRedirectsSpendTheRequestBudget(t *testing.T) {
	srv := origin(t)
	s := loopbackFetcher(t, Limits{MaxRequests: 2}, nil).Session()
	if _, err := s.Fetch(context.Background(), Request{URL: srv.URL + "/hop"}, io.Discard); err != nil {
		t.Fatalf("one redirect within two requests: %v", err)
	}
	if _, err := s.Fetch(context.Background(), Request{URL: srv.URL + "/doc"}, io.Discard); ReasonOf(err) != ReasonRequests {
		t.Errorf("a third request: %v, want refused (requests)", err)
	}
	s = loopbackFetcher(t, Limits{MaxRequests: 1}, nil).Session()
	if _, err := s.Fetch(context.Background(), Request{URL: srv.URL + "/hop"}, io.Discard); ReasonOf(err) != ReasonRequests {
		t.Errorf("a redirect past the budget: %v, want refused (requests)", err)
	}
}
