package deliver_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/renderbox/renderbox/internal/deliver"
	"github.com/renderbox/renderbox/internal/egress"
)

var loopback = egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}

func uploader(p egress.Policy, s3 *minio.Client) *deliver.Uploader {
	return &deliver.Uploader{
		HTTP: egress.NewClient(&egress.Dialer{Policy: p}, egress.TransportOptions{HeaderTimeout: 5 * time.Second}),
		S3:   s3, Attempts: 3, Backoff: 50 * time.Millisecond,
	}
}

// A destination that fails twice (500, then 503) and then takes the
// upload: the record shows the three attempts. The server is a fake, to
// force the failures.
func TestDeliverRetriesServerErrors(t *testing.T) {
	var n atomic.Int32
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch k := n.Add(1); {
		case k <= 1:
			w.WriteHeader(http.StatusInternalServerError)
		case k == 2:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			got = b
			w.Header().Set("ETag", `"e1"`)
		}
	}))
	defer srv.Close()
	data := []byte("%PDF-1.7 three tries")
	recs, err := uploader(loopback, nil).Deliver(context.Background(), deliver.Spec{PutURLs: map[string]string{"a.pdf": srv.URL + "/a?sig=1"}},
		[]deliver.Output{{Name: "a.pdf", Data: data}})
	if err != nil || recs[0].Attempts != 3 || recs[0].ETag != "e1" || !bytes.Equal(got, data) {
		t.Fatalf("got %+v, %v, %d bytes at the server; want delivered on the third attempt with ETag e1", recs, err, len(got))
	}

	n.Store(-10) // every attempt fails now
	recs, err = uploader(loopback, nil).Deliver(context.Background(), deliver.Spec{PutURLs: map[string]string{"a.pdf": srv.URL + "/a?sig=1"}},
		[]deliver.Output{{Name: "a.pdf", Data: data}})
	if err == nil || recs[0].Status != deliver.Failed || recs[0].Attempts != 3 || !strings.Contains(recs[0].Error, "500") {
		t.Fatalf("got %+v, %v; want failed after 3 attempts answered 500", recs, err)
	}
}

// The dialer refuses loopback unless the operator allows it, even when a
// name (here the literal checked at dial time) got past intake; a refusal
// is final, not retried.
func TestDeliverFollowsTheAddressPolicy(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	recs, err := uploader(egress.Policy{}, nil).Deliver(context.Background(), deliver.Spec{PutURLs: map[string]string{"a.pdf": srv.URL + "/a"}},
		[]deliver.Output{{Name: "a.pdf", Data: []byte("x")}, {Name: "b.pdf", Data: []byte("y")}})
	if err == nil || len(recs) != 1 || recs[0].Attempts != 1 || !strings.Contains(recs[0].Error, "not allowed") || hits.Load() != 0 {
		t.Fatalf("got %+v, %v, %d requests at the server; want one refused attempt and none", recs, err, hits.Load())
	}
	// A name in put_urls that the job did not produce fails delivery.
	_, err = uploader(loopback, nil).Deliver(context.Background(), deliver.Spec{PutURLs: map[string]string{"missing.pdf": srv.URL + "/m"}},
		[]deliver.Output{{Name: "a.pdf", Data: []byte("x")}})
	if err == nil || !strings.Contains(err.Error(), "missing.pdf") {
		t.Fatalf("got %v, want a failure naming missing.pdf", err)
	}
}
