//go:build !unit

package e2e

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/internal/tracing"
)

// otlpReceiver is an OTLP/HTTP collector of the test's own: it keeps
// every request's raw body and the spans decoded from it.
type otlpReceiver struct {
	url   string
	mu    sync.Mutex
	raw   [][]byte
	spans []gotSpan
}

// gotSpan is a received span with its process's service.name.
type gotSpan struct {
	service, name  string
	trace, id, par string
	attrs          map[string]string
	start, end     uint64 // Unix nanoseconds
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	o := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &req)
		}
		if r.URL.Path != "/v1/traces" || err != nil {
			t.Errorf("OTLP receiver: %s %s: %v", r.Method, r.URL.Path, err)
			http.Error(w, "bad request", 400)
			return
		}
		o.add(b, &req)
		resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	}))
	t.Cleanup(srv.Close)
	o.url = srv.URL
	return o
}

func (o *otlpReceiver) add(raw []byte, req *coltracepb.ExportTraceServiceRequest) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.raw = append(o.raw, raw)
	for _, rs := range req.ResourceSpans {
		service := anyString(rs.GetResource().GetAttributes(), "service.name")
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				g := gotSpan{service: service, name: sp.Name, trace: hex.EncodeToString(sp.TraceId), id: hex.EncodeToString(sp.SpanId),
					par: hex.EncodeToString(sp.ParentSpanId), attrs: map[string]string{}, start: sp.StartTimeUnixNano, end: sp.EndTimeUnixNano}
				for _, kv := range sp.Attributes {
					g.attrs[kv.Key] = valueString(kv.Value)
				}
				o.spans = append(o.spans, g)
			}
		}
	}
}

func anyString(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			return valueString(kv.Value)
		}
	}
	return ""
}

func valueString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	}
	return v.String()
}

// trace is every span of the trace whose spans name job, from either
// process; "" and nil while none does.
func (o *otlpReceiver) trace(job string) (string, []gotSpan) {
	o.mu.Lock()
	defer o.mu.Unlock()
	id := ""
	for _, s := range o.spans {
		if s.attrs[string(tracing.JobID)] == job {
			id = s.trace
			break
		}
	}
	var out []gotSpan
	for _, s := range o.spans {
		if id != "" && s.trace == id {
			out = append(out, s)
		}
	}
	return id, out
}

func (o *otlpReceiver) jobTraces(job string) map[string]bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	ids := map[string]bool{}
	for _, s := range o.spans {
		if s.attrs[string(tracing.JobID)] == job {
			ids[s.trace] = true
		}
	}
	return ids
}

func (o *otlpReceiver) rawBodies() []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return bytes.Join(o.raw, nil)
}

// With tracing on, each job is one trace across the two processes: the
// API's request and intake, the worker's wait, take, sandbox phases,
// checks, storage write and report, and the API's webhook, every span's
// parent in the trace; a traceparent from a trusted proxy is continued.
// No span, attribute or resource holds a document's bytes, an option's
// secret value, the key, the webhook secret or a callback URL's path or
// query.
func TestTracesFollowEachJob(t *testing.T) {
	rcv := newOTLPReceiver(t)
	hooks := newHookReceiver(t)
	otel := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.url, "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_TRACES_SAMPLER=always_on"}
	s := newStack(t, stackOpts{
		apiArgs: []string{"-webhook-allow", "127.0.0.2/32", "-trusted-proxies", "127.0.0.1"},
		// One restored sandbox for the light renderers: a job takes it,
		// or, while it is refilled, runs cold; the trace shows which.
		workerArgs: []string{"-pool-size", "light=1,chromium=0,office=0", "-pool-restore", "light"},
		access: func(rs *testenv.RedisServer, _ string) map[string]redisAccess {
			a := redisAccess{args: []string{"-redis", rs.Addr}, env: otel}
			return map[string]redisAccess{"api": a, "worker": a}
		},
	})
	for _, p := range []*proc{s.api, s.worker} {
		if !strings.Contains(p.output(), "tracing on") {
			t.Fatalf("%s does not say tracing is on:\n%s", p.cmd.Path, tailStr(p.output(), 3000))
		}
	}
	key := s.key("traces")
	var hookSecret struct {
		Secret string `json:"secret"`
	}
	s.client.do("GET", "/v1/webhook-secret", key, "", nil, nil).json(t, &hookSecret)
	const (
		docMarker   = "TRACE-DOC-MARKER-5d1e"
		userPW      = "user-pw-7c41aa90"
		ownerPW     = "owner-pw-0b9e3f12"
		hookToken   = "hook-path-token-81f3"
		hookQuery   = "hook-query-secret-44d2"
		parentTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		parentSpan  = "00f067aa0ba902b7"
	)
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="200" height="40"><text x="4" y="24">` + docMarker + `</text></svg>`)

	// 1: a PDF, announced to a callback URL whose path and query carry
	// tokens; 2: that PDF protected with passwords; 3: a job under a
	// trusted proxy's trace.
	_, j1 := submitWithCallback(t, s.client, key, "svg-pdf", svg, hooks.answer("/"+hookToken)+"?sig="+hookQuery)
	waitFor(t, "the svg-pdf job to end", 2*time.Minute, func() bool { j1 = getJob(t, s.client, key, j1.ID, ""); return j1.terminal() })
	if j1.State != "succeeded" {
		t.Fatalf("svg-pdf: %s %+v", j1.State, j1.Error)
	}
	if w := webhookOf(t, s.client, key, j1.ID); w.State != "delivered" {
		t.Fatalf("webhook of %s: %+v", j1.ID, w)
	}
	pdf := s.client.do("GET", j1.Outputs[0].URL, key, "", nil, nil).Body
	_, j2 := submitJSON(t, s.client, key, "pdf-protect", pdf, map[string]any{"user_password": userPW, "owner_password": ownerPW}, "?wait=60", nil)
	_, j3 := submitJSON(t, s.client, key, "svg-png", svg, nil, "?wait=60", map[string]string{"traceparent": "00-" + parentTrace + "-" + parentSpan + "-01"})
	for _, j := range []jobJSON{j2, j3} {
		if j.State != "succeeded" {
			t.Fatalf("%s: %s %+v", j.ID, j.State, j.Error)
		}
	}

	common := []string{"POST /v1/jobs", tracing.SpanIntake, tracing.SpanSubmit, tracing.SpanQueueWait, tracing.SpanAttempt, tracing.SpanTake,
		tracing.SpanSandboxTake, tracing.SpanRender, tracing.SpanCheck, tracing.SpanStore, tracing.SpanReport, tracing.SpanTeardown}
	want := map[string][]string{j1.ID: append(slices.Clone(common), tracing.SpanWebhook), j2.ID: common, j3.ID: common}
	for _, id := range []string{j1.ID, j2.ID, j3.ID} {
		var spans []gotSpan
		var trace string
		waitFor(t, "job "+id+"'s spans to reach the receiver", 30*time.Second, func() bool {
			trace, spans = rcv.trace(id)
			names := map[string]bool{}
			for _, s := range spans {
				names[s.name] = true
			}
			for _, n := range want[id] {
				if !names[n] {
					return false
				}
			}
			return true
		})
		if ids := rcv.jobTraces(id); len(ids) != 1 {
			t.Errorf("job %s: its spans are in %d traces, want one", id, len(ids))
		}
		byID := map[string]gotSpan{}
		services := map[string]bool{}
		for _, sp := range spans {
			byID[sp.id] = sp
			services[sp.service] = true
		}
		roots := 0
		for _, sp := range spans {
			switch {
			case sp.par == "" || sp.par == strings.Repeat("0", 16):
				roots++
			case id == j3.ID && sp.par == parentSpan:
				roots++ // the trusted proxy's span, which it exports itself
			case byID[sp.par].id == "":
				t.Errorf("job %s: span %s (%s) has parent %s, which is not in the trace", id, sp.name, sp.service, sp.par)
			}
		}
		if roots != 1 {
			t.Errorf("job %s: %d root spans, want 1 (the submitting request's)", id, roots)
		}
		if !services["renderbox-api"] || !services["renderbox-worker"] {
			t.Errorf("job %s: spans from services %v, want renderbox-api and renderbox-worker", id, services)
		}
		var names []string
		count := map[string]int{}
		mode := ""
		for _, sp := range spans {
			names = append(names, sp.service+":"+sp.name)
			count[sp.name]++
			if sp.name == tracing.SpanSandboxTake {
				mode = sp.attrs[string(tracing.SandboxMode)]
			}
		}
		// A cold sandbox is created and started on the job's path; a
		// pooled one was made before the job.
		cold := count[tracing.SpanSandboxCreate] == 1 && count[tracing.SpanSandboxStart] == 1
		if (mode == "none") != cold || (mode != "none" && count[tracing.SpanSandboxCreate] != 0) {
			t.Errorf("job %s: sandbox.take mode %q with %d sandbox.create and %d sandbox.start spans; want none with one of each, or a pool's mode with no create", id, mode, count[tracing.SpanSandboxCreate], count[tracing.SpanSandboxStart])
		}
		slices.Sort(names)
		t.Logf("job %s: trace %s, sandbox %s, %d spans: %s", id, trace, mode, len(spans), strings.Join(names, " "))
		pathInOrder(t, id, spans, id != j1.ID)
		if id == j3.ID && trace != parentTrace {
			t.Errorf("job %s under the trusted proxy's traceparent: trace %s, want %s", id, trace, parentTrace)
		}
		if id != j3.ID && trace == parentTrace {
			t.Errorf("job %s joined the proxy's trace of another request", id)
		}
	}

	// Nothing sensitive in any span, attribute, event or resource: the
	// raw export bodies are searched, so nothing decoded is missed.
	raw := rcv.rawBodies()
	for what, secret := range map[string]string{
		"the document's text": docMarker, "pdf-protect's user_password": userPW, "pdf-protect's owner_password": ownerPW,
		"the API key": key, "the webhook secret": hookSecret.Secret, "the callback URL's path": hookToken, "the callback URL's query": hookQuery,
	} {
		if secret == "" {
			t.Fatalf("%s is empty", what)
		}
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the exported spans contain %s (%q)", what, secret)
		}
	}
	// Nor the document's bytes: the input (base64 or raw) and a PDF output.
	for _, doc := range [][]byte{svg, pdf[:min(len(pdf), 64)]} {
		if bytes.Contains(raw, doc) {
			t.Errorf("the exported spans contain a document's bytes")
		}
	}
	t.Logf("%d export requests, %d bytes", len(rcv.raw), len(raw))
}

// pathInOrder checks that a job's spans follow its path (the API and the
// worker share the host's clock), and logs them as a timeline: where a
// served job's time goes beside its sandbox (docs/benchmarks.md). waited
// says the POST waited for the result (?wait=), which the report must
// then precede. A span that occurs more than once (a chain's stages) is
// left out of the checks.
func pathInOrder(t *testing.T, job string, spans []gotSpan, waited bool) {
	t.Helper()
	byName, count := map[string]gotSpan{}, map[string]int{}
	for _, sp := range spans {
		byName[sp.name] = sp
		count[sp.name]++
	}
	const post = "POST /v1/jobs"
	slack := uint64(time.Millisecond) // one span's end and the next's start, rounded
	before := func(a, b string) {
		sa, oka := byName[a]
		sb, okb := byName[b]
		if oka && okb && count[a] == 1 && count[b] == 1 && sa.end > sb.start+slack {
			t.Errorf("job %s: %s ends %.2f ms after %s starts", job, a, float64(sa.end-sb.start)/1e6, b)
		}
	}
	endsBefore := func(a, b string) {
		sa, oka := byName[a]
		sb, okb := byName[b]
		if oka && okb && count[a] == 1 && count[b] == 1 && sa.end > sb.end+slack {
			t.Errorf("job %s: %s ends %.2f ms after %s ends", job, a, float64(sa.end-sb.end)/1e6, b)
		}
	}
	within := func(inner, outer string) {
		si, oki := byName[inner]
		so, oko := byName[outer]
		if oki && oko && count[inner] == 1 && count[outer] == 1 && (si.start+slack < so.start || si.end > so.end+slack) {
			t.Errorf("job %s: %s is not within %s", job, inner, outer)
		}
	}
	within(tracing.SpanIntake, post)
	within(tracing.SpanSubmit, tracing.SpanIntake)
	before(tracing.SpanQueueWait, tracing.SpanTake)
	within(tracing.SpanTake, tracing.SpanAttempt)
	for _, next := range []string{tracing.SpanSandboxTake, tracing.SpanSandboxCreate, tracing.SpanSandboxStart, tracing.SpanRender} {
		before(tracing.SpanTake, next)
	}
	before(tracing.SpanSandboxCreate, tracing.SpanSandboxStart)
	before(tracing.SpanSandboxStart, tracing.SpanRender)
	before(tracing.SpanRender, tracing.SpanCheck)
	before(tracing.SpanRender, tracing.SpanTeardown)
	before(tracing.SpanCheck, tracing.SpanStore)
	before(tracing.SpanStore, tracing.SpanReport)
	if waited { // the POST that waited answers after the report
		endsBefore(tracing.SpanReport, post)
	}
	sorted := slices.Clone(spans)
	slices.SortFunc(sorted, func(a, b gotSpan) int { return cmp.Compare(a.start, b.start) })
	var b strings.Builder
	for _, sp := range sorted {
		at := func(ns uint64) float64 { return float64(int64(ns)-int64(sorted[0].start)) / 1e6 }
		fmt.Fprintf(&b, "\n  %-7s %-18s %8.2f → %8.2f ms", strings.TrimPrefix(sp.service, "renderbox-"), sp.name, at(sp.start), at(sp.end))
	}
	t.Logf("job %s's timeline:%s", job, b.String())
}
