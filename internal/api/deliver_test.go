package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/renderbox/renderbox"
	"github.com/renderbox/renderbox/internal/api"
	"github.com/renderbox/renderbox/internal/deliver"
	"github.com/renderbox/renderbox/internal/ledger"
)

// A destination the operator does not allow, or one that is malformed, is
// a 400 at intake, in JSON and multipart alike, before anything is
// queued; the refusal never quotes a presigned URL's signature.
func TestDeliverRefusedAtIntake(t *testing.T) {
	store, secret, key := keyedLedger(t)
	buckets, _ := deliver.ParseBuckets("reports-*,acme-out")
	srv := httptest.NewServer((&api.Server{OpenAPI: renderbox.OpenAPI, Ledger: store, Deliver: deliver.Policy{Buckets: buckets}}).Handler())
	defer srv.Close()
	send := func(ct string, body []byte) (int, string, string) {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/jobs", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p struct{ Code, Detail string }
		_ = json.NewDecoder(resp.Body).Decode(&p)
		return resp.StatusCode, p.Code, p.Detail
	}
	for _, c := range []struct{ name, deliver, code string }{
		{"private address", `{"put_urls": {"output.png": "https://10.1.2.3/b/o.png?X-Amz-Signature=s3cr3t"}}`, "delivery_refused"},
		{"loopback", `{"put_urls": {"output.png": "http://127.0.0.1:9000/b/o.png?X-Amz-Signature=s3cr3t"}}`, "delivery_refused"},
		{"metadata address", `{"put_urls": {"output.png": "http://169.254.169.254/latest/?sig=s3cr3t"}}`, "delivery_refused"},
		{"bucket not allowed", `{"s3": {"bucket": "payroll"}}`, "delivery_refused"},
		{"both", `{"put_urls": {"output.png": "https://example.com/o"}, "s3": {"bucket": "acme-out"}}`, "invalid_deliver"},
		{"unknown field", `{"gcs": {"bucket": "acme-out"}}`, "invalid_deliver"},
		{"not an object", `"https://example.com/o"`, "invalid_deliver"},
	} {
		body := `{"renderer":"svg-png","input_base64":"PHN2Zy8+","deliver":` + c.deliver + `}`
		if st, code, detail := send("application/json", []byte(body)); st != 400 || code != c.code || strings.Contains(detail, "s3cr3t") {
			t.Errorf("JSON, %s: %d %s (%s), want 400 %s without the signature", c.name, st, code, detail, c.code)
		}
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		_ = mw.WriteField("renderer", "svg-png")
		_ = mw.WriteField("deliver", c.deliver)
		fw, _ := mw.CreateFormFile("file", "a.svg")
		_, _ = fw.Write([]byte("<svg/>"))
		_ = mw.Close()
		if st, code, _ := send(mw.FormDataContentType(), b.Bytes()); st != 400 || code != c.code {
			t.Errorf("multipart, %s: %d %s, want 400 %s", c.name, st, code, c.code)
		}
	}
	jobs, _, err := store.ListJobs(context.Background(), key.ID, ledger.ListOptions{Limit: 10})
	if err == nil && len(jobs) != 0 {
		t.Errorf("%d jobs recorded, want none", len(jobs))
	}
}
