//go:build !unit

package e2e

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"

	"github.com/renderbox/renderbox"
	"github.com/renderbox/renderbox/internal/samples"
)

// seen records every property of a contract schema that a live answer
// carried, as "Schema.property" ("Job.input.type" for an object inside
// one), across every test of the run: what validate checked.
var seen = struct {
	sync.Mutex
	props map[string]bool
}{props: map[string]bool{}}

// coveredSchemas are the objects whose every property some live answer
// must carry (TestContractCoverage): a property no server answer sends
// would be one a client codes against in vain.
var coveredSchemas = []string{"Job", "WebhookStatus", "WebhookEvent", "JobList", "RendererList", "Renderer", "Option", "Limits",
	"Problem", "Version", "Ready", "Health", "WorkerList", "Worker"}

// conditional are the properties of coveredSchemas a test stack cannot be
// expected to send, each optional in the contract whose description says
// when it is absent.
var conditional = map[string]string{
	"Version.revision":           "absent for a build without VCS stamping (the tests build with go build, which stamps nothing under -buildvcs=false)",
	"Version.time":               "absent as revision is",
	"Ready.reason":               "only with 503 unavailable, which a ready stack does not answer",
	"Ready.checks.blobs":         "only with -blobs s3://…, which the contract-checked stacks do not run",
	"Worker.unsafe_native_bench": "only from a worker started with -unsafe-native-bench, the benchmark's floor; no test stack runs one",
	// TestDeliverToClientStorage checks these against a real store; its
	// stack is not a contract-checked one.
	"Job.diagnostics.deliveries": "only for a job that names a deliver destination",
	"DeliveryRecord.output":      "a delivery record's, as Job.diagnostics.deliveries",
	"DeliveryRecord.destination": "a delivery record's, as Job.diagnostics.deliveries",
	"DeliveryRecord.status":      "a delivery record's, as Job.diagnostics.deliveries",
	"DeliveryRecord.bytes":       "a delivery record's, as Job.diagnostics.deliveries",
	"DeliveryRecord.etag":        "a delivery record's, as Job.diagnostics.deliveries",
	"DeliveryRecord.attempts":    "a delivery record's, as Job.diagnostics.deliveries",
	"DeliveryRecord.error":       "a delivery record's, as Job.diagnostics.deliveries, and only for a failed upload",
}

// recordSeen walks data (a decoded JSON answer) with its schema s, named
// name, and records each property present.
func recordSeen(s *openapi3.SchemaRef, name string, data any) {
	seen.Lock()
	defer seen.Unlock()
	walkSchema(s, name, data, false, func(prop string) { seen.props[prop] = true })
}

// walkSchema calls visit with "name.property" for each property of the
// object schema s that data holds (every property, with all), and goes on
// into arrays' items and into properties' objects: a $ref starts a new
// name, an inline object extends the path.
func walkSchema(s *openapi3.SchemaRef, name string, data any, all bool, visit func(string)) {
	if s == nil || s.Value == nil {
		return
	}
	if s.Value.Items != nil {
		items, _ := data.([]any)
		if all && items == nil {
			items = []any{nil}
		}
		for _, it := range items {
			walkSchema(s.Value.Items, childName(s.Value.Items, name), it, all, visit)
		}
		return
	}
	obj, _ := data.(map[string]any)
	for prop, ps := range s.Value.Properties {
		v, ok := obj[prop]
		if !ok && !all {
			continue
		}
		path := name + "." + prop
		visit(path)
		if ps.Ref == "" {
			walkSchema(ps, path, v, all, visit)
		} else if all {
			// A component is walked from its own name, if at all.
			continue
		} else {
			walkSchema(ps, childName(ps, path), v, all, visit)
		}
	}
}

func childName(s *openapi3.SchemaRef, path string) string {
	if s.Ref != "" {
		return strings.TrimPrefix(s.Ref, "#/components/schemas/")
	}
	return path
}

// recordAnswer records what a JSON answer the contract validated carried.
func recordAnswer(route *routers.Route, resp *http.Response, body []byte) {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "application/json" && mt != "application/problem+json" {
		return
	}
	rs := route.Operation.Responses
	r := rs.Status(resp.StatusCode)
	if r == nil {
		r = rs.Value(strconv.Itoa(resp.StatusCode/100) + "XX")
	}
	if r == nil || r.Value == nil {
		return
	}
	media := r.Value.Content.Get(mt)
	if media == nil || media.Schema == nil {
		return
	}
	var data any
	if json.Unmarshal(body, &data) != nil {
		return
	}
	name := childName(media.Schema, route.Operation.OperationID)
	recordSeen(media.Schema, name, data)
}

// unseen lists the properties of coveredSchemas no answer has carried so
// far, but the conditional ones.
func unseen(doc *openapi3.T) []string {
	seen.Lock()
	defer seen.Unlock()
	var out []string
	for _, name := range coveredSchemas {
		s := doc.Components.Schemas[name]
		if s == nil {
			out = append(out, name+" (not in openapi.yaml)")
			continue
		}
		walkSchema(s, name, nil, true, func(prop string) {
			if !seen.props[prop] && conditional[prop] == "" {
				out = append(out, prop)
			}
		})
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// TestContractCoverage: every property of the contract's main objects is
// carried by some live answer (validated against openapi.yaml, where an
// unknown property fails), or is one of the few documented as
// conditional. The stack answers a job that succeeds with everything a
// job can show (its page's refused request, missing file and console
// error, an output_name, a webhook refused once then delivered), one that
// fails, a page of a list, a problem, the catalogue, the version, the
// workers; the webhook's own body is checked against WebhookEvent.
func TestContractCoverage(t *testing.T) {
	rcv := newHookReceiver(t)
	// A redirect to a loopback address is refused before it is dialed.
	loopback := freeAddr(t)
	files, _ := fileServer(t, "127.0.0.3", map[string][]byte{"/shape.svg": samples.SVG(40, 30, 0, 0, 5)},
		map[string]string{"/to-loopback": "http://" + loopback + "/healthz"})
	s := newStack(t, stackOpts{apiArgs: []string{"-webhook-allow", "127.0.0.2/32", "-webhook-retry", "3s,3s",
		"-remote-content", "-remote-allow", "127.0.0.3/32"}})
	c := s.client
	key, admin := s.key("coverage"), s.adminKey("coverage-admin")
	for _, path := range []string{"/v1/renderers", "/version", "/healthz", "/readyz"} {
		if r := c.do("GET", path, "", "", nil, nil); r.Status != 200 {
			t.Errorf("GET %s: %d %s", path, r.Status, r.Body)
		}
	}
	if r := c.do("GET", "/v1/workers", admin, "", nil, nil); r.Status != 200 {
		t.Errorf("GET /v1/workers: %d %s", r.Status, r.Body)
	}
	if r := c.do("GET", "/v1/jobs/job_nonesuch", key, "", nil, nil); r.Status != 404 {
		t.Errorf("GET an unknown job: %d %s, want a 404 problem", r.Status, r.Body)
	}

	page := []byte(`<!doctype html><html><head><link rel="stylesheet" href="missing.css"></head><body><h1>Coverage</h1>` +
		`<img src="http://127.0.0.1:9/beacon.png"><script>console.error("coverage: a logged error")</script></body></html>`)
	hook := rcv.answer("/coverage", 500, 204)
	r, j := submitFields(t, c, key, "html-pdf", page, map[string]any{"options": map[string]any{"javascript": true},
		"output_name": "coverage", "callback_url": hook}, "?wait=60", nil)
	if r.Status != 200 || j.State != "succeeded" {
		t.Fatalf("the page: %d %s, want it succeeded within the wait", r.Status, r.Body)
	}
	// The first delivery is answered 500: the job shows the failure and
	// the next attempt, then the delivery.
	waitFor(t, "the webhook's first attempt to be refused", time.Minute, func() bool {
		var w struct {
			Webhook webhookJSON `json:"webhook"`
		}
		c.do("GET", "/v1/jobs/"+j.ID, key, "", nil, nil).json(t, &w)
		return w.Webhook.LastStatus == 500
	})
	if w := webhookOf(t, c, key, j.ID); w.State != "delivered" {
		t.Errorf("the webhook: %+v, want delivered on its second attempt", w)
	}
	// A job of stages (safe-pdf: pixels, then a rebuilt PDF) lists them.
	if r, j := submitFields(t, c, key, "safe-pdf", samples.SVG(40, 30, 0, 0, 5), nil, "", nil); r.Status != 202 {
		t.Errorf("a safe-pdf job: %d %s, want it accepted", r.Status, r.Body)
	} else if j = getJob(t, c, key, j.ID, "?wait=60"); j.State != "succeeded" {
		t.Errorf("the safe-pdf job is %s %+v, want succeeded", j.State, j.Error)
	}
	doc, err := openapi3.NewLoader().LoadFromData(renderbox.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	event := doc.Components.Schemas["WebhookEvent"]
	for _, d := range rcv.deliveries("/coverage") {
		var v any
		if err := json.Unmarshal(d.body, &v); err != nil {
			t.Fatalf("a webhook body: %v", err)
		}
		if err := event.Value.VisitJSON(v); err != nil {
			t.Errorf("the webhook's body does not match WebhookEvent: %v\n%s", err, d.body)
		}
		recordSeen(event, "WebhookEvent", v)
	}

	// A job whose input was fetched records the fetch; a refused fetch's
	// problem lists it with its reason.
	if r, j := downloadSubmit(t, c, key, "svg-png", "", map[string]any{"url": files + "/shape.svg"}); r.Status != 202 {
		t.Errorf("a download_from job: %d %s, want it accepted", r.Status, r.Body)
	} else if j = getJob(t, c, key, j.ID, "?wait=60"); j.State != "succeeded" {
		t.Errorf("the download_from job is %s %+v, want succeeded", j.State, j.Error)
	}
	if r, _ := downloadSubmit(t, c, key, "svg-png", "", map[string]any{"url": files + "/to-loopback"}); r.Status != 400 || !strings.Contains(string(r.Body), `"redirects":["http://`+loopback) {
		t.Errorf("a download_from redirected to loopback: %d %s, want a 400 problem listing the redirect", r.Status, r.Body)
	}

	bad := append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte("not a PDF "), 20)...)
	if r, j := submitJSON(t, c, key, "pdf-png", bad, nil, "?wait=60", nil); r.Status != 200 || j.State != "failed" {
		t.Errorf("a broken PDF: %d %s, want it failed within the wait", r.Status, r.Body)
	}
	if r := c.do("GET", "/v1/jobs?limit=1", key, "", nil, nil); r.Status != 200 {
		t.Errorf("a page of one job: %d %s", r.Status, r.Body)
	}

	if missing := unseen(doc); len(missing) > 0 {
		t.Errorf("no live answer carried these properties of openapi.yaml (send them, drop them, or say when they are absent and list them in conditional):\n%s",
			strings.Join(missing, "\n"))
	}
	for prop := range conditional {
		if _, ok := doc.Components.Schemas[strings.Split(prop, ".")[0]]; !ok {
			t.Errorf("conditional names %s, which is not in openapi.yaml", prop)
		}
	}
}
