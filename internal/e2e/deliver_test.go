//go:build !unit

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/renderbox/renderbox/internal/deliver"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/testenv"
)

// deliveredJob is a job with the uploads its worker made.
type deliveredJob struct {
	jobJSON
	Diagnostics struct {
		Deliveries []deliver.Record `json:"deliveries"`
	} `json:"diagnostics"`
}

// Delivery to a presigned PUT URL on the test's server and to an allowed
// bucket, and a refused destination a 400 at intake, through the real API
// and worker (docs/api.md, "Delivery to your storage"): each object read back from SeaweedFS is the
// job's output, byte for byte, with the ETag the job recorded; an expired
// URL fails the job with delivery_failed after one attempt; a destination
// answering 500 then 200 is delivered on the second.
func TestDeliverToClientStorage(t *testing.T) {
	s3 := testenv.StartS3(t)
	buckets := "renderbox-*"
	s := newStack(t, stackOpts{
		// The test's server is on loopback, which the operator allows.
		apiArgs:    []string{"-remote-allow", "127.0.0.1/32", "-deliver-buckets", buckets},
		workerArgs: []string{"-remote-allow", "127.0.0.1/32", "-deliver-buckets", buckets, "-deliver-s3", "http://" + s3.Endpoint + "?region=us-east-1"},
		access: func(rs *testenv.RedisServer, _ string) map[string]redisAccess {
			return map[string]redisAccess{"api": {args: []string{"-redis", rs.Addr}}, "worker": {args: []string{"-redis", rs.Addr}, env: s3.Env()}}
		},
	})
	key := s.key("acme")
	mc, err := minio.New(s3.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s3.AccessKey, s3.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	svg := samples.SVG(200, 100, 120, 20, 40)

	run := func(dest map[string]any) deliveredJob {
		t.Helper()
		r, j := submitFields(t, s.client, key, "svg-png", svg, map[string]any{"deliver": dest}, "", nil)
		if r.Status != 202 {
			t.Fatalf("submitting with deliver %v: %d %s", dest, r.Status, tail(r.Body))
		}
		waitEnded(t, s.client, key, j.ID, 120*time.Second)
		g := s.client.do("GET", "/v1/jobs/"+j.ID, key, "", nil, nil)
		if bytes.Contains(g.Body, []byte("X-Amz-Signature")) {
			t.Errorf("GET /v1/jobs/%s shows a presigned URL's signature: %s", j.ID, g.Body)
		}
		var d deliveredJob
		if err := json.Unmarshal(g.Body, &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	// check reads the object back and compares it with the job's output.
	check := func(d deliveredJob, bucketKey string) {
		t.Helper()
		if d.State != "succeeded" || len(d.Outputs) != 1 || len(d.Diagnostics.Deliveries) != 1 {
			t.Fatalf("job %+v, want succeeded with one output delivered", d)
		}
		out := s.client.do("GET", d.Outputs[0].URL, key, "", nil, nil).Body
		obj, err := mc.GetObject(ctx, s3.Bucket, bucketKey, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Close()
		got, err := io.ReadAll(obj)
		if err != nil {
			t.Fatalf("reading %s back: %v", bucketKey, err)
		}
		st, _ := obj.Stat()
		rec := d.Diagnostics.Deliveries[0]
		if !bytes.Equal(got, out) || rec.Status != deliver.Delivered || rec.Bytes != int64(len(out)) || rec.ETag != st.ETag || rec.Attempts != 1 {
			t.Errorf("%s: %d bytes in the store, %d downloaded; record %+v, store ETag %q", bucketKey, len(got), len(out), rec, st.ETag)
		}
	}

	t.Run("presigned PUT URL", func(t *testing.T) {
		u, err := mc.PresignedPutObject(ctx, s3.Bucket, "client/figure.png", 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		check(run(map[string]any{"put_urls": map[string]string{"output.png": u.String()}}), "client/figure.png")
	})
	t.Run("allowed bucket", func(t *testing.T) {
		d := run(map[string]any{"s3": map[string]string{"bucket": s3.Bucket, "prefix": "acme/"}})
		check(d, "acme/output.png")
		if want := s3.Bucket + "/acme/output.png"; d.Diagnostics.Deliveries[0].Destination != want {
			t.Errorf("destination %q, want %q", d.Diagnostics.Deliveries[0].Destination, want)
		}
	})
	t.Run("expired URL fails the job", func(t *testing.T) {
		u, err := mc.PresignedPutObject(ctx, s3.Bucket, "client/late.png", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
		d := run(map[string]any{"put_urls": map[string]string{"output.png": u.String()}})
		if d.State != "failed" || d.Error == nil || d.Error.Code != "delivery_failed" || len(d.Diagnostics.Deliveries) != 1 ||
			d.Diagnostics.Deliveries[0].Status != deliver.Failed || d.Diagnostics.Deliveries[0].Attempts != 1 {
			t.Fatalf("job %+v, deliveries %+v; want failed delivery_failed after one refused attempt", d.jobJSON, d.Diagnostics.Deliveries)
		}
	})
	t.Run("a destination failing then taking it", func(t *testing.T) {
		// A fake, to force the failure: 500 on the first PUT, then 200.
		var n atomic.Int32
		var got atomic.Value
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			if n.Add(1) == 1 {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			got.Store(b)
			w.Header().Set("ETag", `"v2"`)
		}))
		defer srv.Close()
		d := run(map[string]any{"put_urls": map[string]string{"output.png": srv.URL + "/up?sig=s3cr3t"}})
		rec := d.Diagnostics.Deliveries
		if d.State != "succeeded" || len(rec) != 1 || rec[0].Attempts != 2 || rec[0].ETag != "v2" || rec[0].Destination != srv.URL+"/up" {
			t.Fatalf("job %+v, deliveries %+v; want succeeded on the second attempt", d.jobJSON, rec)
		}
		out := s.client.do("GET", d.Outputs[0].URL, key, "", nil, nil).Body
		if b, _ := got.Load().([]byte); !bytes.Equal(b, out) {
			t.Errorf("the server got %d bytes, the job's output is %d", len(b), len(out))
		}
	})
	t.Run("refused at intake", func(t *testing.T) {
		for dest, code := range map[string]string{
			`{"put_urls": {"output.png": "http://10.0.0.7/o.png?X-Amz-Signature=x"}}`: "delivery_refused",
			`{"s3": {"bucket": "payroll"}}`:                                           "delivery_refused",
		} {
			var v any
			_ = json.Unmarshal([]byte(dest), &v)
			r, _ := submitFields(t, s.client, key, "svg-png", svg, map[string]any{"deliver": v}, "", nil)
			var p struct{ Code string }
			_ = json.Unmarshal(r.Body, &p)
			if r.Status != 400 || p.Code != code {
				t.Errorf("deliver %s: %d %s, want 400 %s", dest, r.Status, tail(r.Body), code)
			}
		}
	})
	// The presigned URLs' signatures are secrets: no process logs them.
	for name, p := range map[string]*proc{"api": s.api, "worker": s.worker} {
		for _, secret := range []string{"X-Amz-Signature", "s3cr3t"} {
			if p != nil && strings.Contains(p.output(), secret) {
				t.Errorf("the %s's log holds %q", name, secret)
			}
		}
	}
}
