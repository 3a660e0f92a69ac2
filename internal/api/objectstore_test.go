//go:build !unit

package api_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/api"
	"github.com/renderbox/renderbox/internal/blobs"
	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/testenv"
)

// Outputs in an object store, downloaded both ways: proxied by the API
// as from Redis, and redirected (302) to a presigned URL the client then
// reads from the store itself. ETag, Range, HEAD, If-None-Match and
// outputs.zip answer alike in both, Redis sends no output's bytes, and
// an output deleted past its retention is 410 either way.
func TestOutputsFromAnObjectStore(t *testing.T) {
	s3 := testenv.StartS3(t)
	data := make([]byte, 1<<20+3)
	_, _ = rand.NewChaCha8([32]byte{9}).Read(data)
	sum := sha256.Sum256(data)
	etag := `"` + hex.EncodeToString(sum[:]) + `"`
	for _, mode := range []string{blobs.Proxy, blobs.Redirect} {
		t.Run(mode, func(t *testing.T) {
			k := newKeyedWith(t, func(s *api.Server) {
				s.Queue.UseBlobs(s3.Store("api-" + mode))
				s.BlobDownloads = api.BlobDownloads{Mode: mode, Expiry: time.Minute}
			})
			if a := k.do("GET", "/readyz", nil, ""); !bytes.Contains(a.body, []byte(`"blobs":"ok"`)) {
				t.Errorf("/readyz with an object store: %s, want its check ok", a.body)
			}
			id := k.forgeOutput("output.svg", "image/svg+xml", data)
			path := "/v1/jobs/" + id + "/outputs/output.svg"
			// What a client sees before following: the redirect itself.
			if mode == blobs.Redirect {
				req, _ := http.NewRequest("GET", k.srv.URL+path, nil)
				req.Header.Set("Authorization", "Bearer "+k.key)
				resp, err := http.DefaultTransport.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				loc, _ := url.Parse(resp.Header.Get("Location"))
				if resp.StatusCode != 302 || loc == nil || loc.Host != s3.Endpoint || loc.Query().Get("X-Amz-Expires") != "60" ||
					resp.Header.Get("ETag") != etag || resp.Header.Get("Cache-Control") != "no-store" {
					t.Errorf("GET: %d Location %q ETag %q Cache-Control %q; want a 302 to the store valid 60s, the output's ETag, no-store",
						resp.StatusCode, resp.Header.Get("Location"), resp.Header.Get("ETag"), resp.Header.Get("Cache-Control"))
				}
			}
			for _, c := range []struct {
				name   string
				method string
				header map[string]string
				status int
				start  int64 // the body is data[start:start+len]
				n      int64
			}{
				{name: "whole", status: 200, n: int64(len(data))},
				{name: "one range", header: map[string]string{"Range": "bytes=1000-1999"}, status: 206, start: 1000, n: 1000},
				{name: "a suffix", header: map[string]string{"Range": "bytes=-10"}, status: 206, start: int64(len(data)) - 10, n: 10},
				{name: "HEAD", method: "HEAD", status: 200},
				{name: "If-None-Match", header: map[string]string{"If-None-Match": etag}, status: 304},
			} {
				var a answer
				sent := k.redisSent(func() { a = k.do(cmp.Or(c.method, "GET"), path, c.header, "") })
				if a.status != c.status || !bytes.Equal(a.body, data[c.start:c.start+c.n]) {
					t.Errorf("%s: %d with %d bytes (equal %v), want %d with %d", c.name, a.status, len(a.body), bytes.Equal(a.body, data[c.start:c.start+c.n]), c.status, c.n)
				}
				if sent > 64<<10 {
					t.Errorf("%s: Redis sent %d bytes; the output is not there", c.name, sent)
				}
				if c.status == 200 && c.method == "" && (a.header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(a.header.Get("Content-Disposition"), "output.svg")) {
					t.Errorf("%s: Content-Type %q, Content-Disposition %q", c.name, a.header.Get("Content-Type"), a.header.Get("Content-Disposition"))
				}
				if c.method == "HEAD" && a.header.Get("ETag") != etag {
					t.Errorf("HEAD: ETag %q, want %s", a.header.Get("ETag"), etag)
				}
			}
			if a := k.do("GET", "/v1/jobs/"+id+"/outputs.zip", nil, ""); a.status != 200 || !bytes.Contains(a.body, data[:4096]) {
				t.Errorf("outputs.zip: %d, %d bytes", a.status, len(a.body))
			}
			if err := k.queue.Blobs.Delete(context.Background(), queue.OutputKey(id, "output.svg")); err != nil {
				t.Fatal(err)
			}
			if a := k.do("GET", path, nil, ""); a.status != 410 || a.code != "output_expired" {
				t.Errorf("an output deleted: %d %s, want 410 output_expired", a.status, a.body)
			}
		})
	}
}
