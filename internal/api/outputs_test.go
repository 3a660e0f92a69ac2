//go:build !unit

package api_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"strings"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/ledger"
	"github.com/renderbox/renderbox/internal/queue"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/jobstate"
)

// forgeOutput records a succeeded job of k's key with one output, its
// bytes in Redis as a worker leaves them, and returns the job's id.
func (k *keyed) forgeOutput(name, mediaType string, data []byte) string {
	k.t.Helper()
	ctx := context.Background()
	j, _, err := k.ledger.CreateJob(ctx, ledger.Job{Owner: k.owner, Renderer: "dot-svg", Options: []byte("{}"), Limits: []byte("{}"),
		InputSHA256: strings.Repeat("0", 64), InputSize: 1})
	if err != nil {
		k.t.Fatal(err)
	}
	if err := k.queue.PutBlob(ctx, queue.OutputKey(j.ID, name), data); err != nil {
		k.t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if _, err := k.ledger.Finish(ctx, j.ID, ledger.FinishOptions{State: jobstate.Succeeded, At: time.Now(),
		Outputs: []ledger.Output{{Name: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), MediaType: mediaType}}}); err != nil {
		k.t.Fatal(err)
	}
	return j.ID
}

// redisSent is what k's private Redis sent while f ran.
func (k *keyed) redisSent(f func()) int64 {
	k.t.Helper()
	return testenv.RedisSent(k.t, k.queue.Redis(), f)
}

// part is one range of a 206 answer.
type part struct {
	start, end int64 // end inclusive, as in Content-Range
	body       []byte
}

// parts reads a 206 answer's ranges: one from Content-Range, or those of
// a multipart/byteranges body.
func parts(t *testing.T, a answer) []part {
	t.Helper()
	mt, params, _ := mime.ParseMediaType(a.header.Get("Content-Type"))
	if mt != "multipart/byteranges" {
		var p part
		var size int64
		if _, err := fmt.Sscanf(a.header.Get("Content-Range"), "bytes %d-%d/%d", &p.start, &p.end, &size); err != nil {
			t.Fatalf("206 with Content-Range %q: %v", a.header.Get("Content-Range"), err)
		}
		p.body = a.body
		return []part{p}
	}
	var ps []part
	mr := multipart.NewReader(bytes.NewReader(a.body), params["boundary"])
	for {
		mp, err := mr.NextPart()
		if err == io.EOF {
			return ps
		}
		if err != nil {
			t.Fatalf("reading the multipart/byteranges answer: %v", err)
		}
		var p part
		var size int64
		if _, err := fmt.Sscanf(mp.Header.Get("Content-Range"), "bytes %d-%d/%d", &p.start, &p.end, &size); err != nil {
			t.Fatalf("a part with Content-Range %q: %v", mp.Header.Get("Content-Range"), err)
		}
		p.body, _ = io.ReadAll(mp)
		ps = append(ps, p)
	}
}

// repeat is spec n times, comma-separated.
func repeat(spec string, n int) string { return strings.TrimSuffix(strings.Repeat(spec+",", n), ",") }

// An output cannot be used to amplify reads: whatever the Range, what
// Redis sends for a request stays within a small multiple of the body
// answered (it was 256 KiB a range: "0-0,-1" 40,000 times over a 1 MiB
// output had Redis send 5.2 GB). Many ranges are merged, and more than 16
// after merging are answered 200 with the whole output; single and
// suffix ranges, HEAD, If-Range and If-None-Match answer as before.
func TestRangesCannotAmplifyRedisReads(t *testing.T) {
	k := newKeyed(t)
	const size = 1 << 20
	data := make([]byte, size)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(data)
	sum := sha256.Sum256(data)
	etag := `"` + hex.EncodeToString(sum[:]) + `"`
	id := k.forgeOutput("output.svg", "image/svg+xml", data)
	path := "/v1/jobs/" + id + "/outputs/output.svg"

	many := make([]string, 17)
	for i := range many {
		many[i] = fmt.Sprintf("%d-%d", i*1000, i*1000+9) // 17 disjoint ranges
	}
	for _, c := range []struct {
		name   string
		method string
		header map[string]string
		status int
		want   []part // for a 206, its ranges in order
		whole  bool   // a 200 with every byte
	}{
		{name: "many small ranges", header: map[string]string{"Range": "bytes=" + repeat("0-0,-1", 20000)}, status: 200, whole: true},
		{name: "17 disjoint ranges", header: map[string]string{"Range": "bytes=" + strings.Join(many, ",")}, status: 200, whole: true},
		{name: "16 disjoint ranges, in the order asked", header: map[string]string{"Range": "bytes=" + strings.Join(many[1:16], ",") + ",-5"}, status: 206,
			want: func() []part {
				var ps []part
				for i := 1; i < 17; i++ {
					ps = append(ps, part{start: int64(i * 1000), end: int64(i*1000 + 9)})
				}
				return append(ps[:15], part{start: size - 5, end: size - 1})
			}()},
		{name: "overlapping and adjacent ranges merged", header: map[string]string{"Range": "bytes=500-599, 0-99,50-149,150-199,-100,-50"}, status: 206,
			want: []part{{start: 500, end: 599}, {start: 0, end: 199}, {start: size - 100, end: size - 1}}},
		{name: "one range asked 200 times", header: map[string]string{"Range": "bytes=" + repeat("7-7", 200)}, status: 206, want: []part{{start: 7, end: 7}}},
		{name: "over 256 ranges as written", header: map[string]string{"Range": "bytes=" + repeat("7-7", 257)}, status: 200, whole: true},
		{name: "one range", header: map[string]string{"Range": "bytes=1000-1999"}, status: 206, want: []part{{start: 1000, end: 1999}}},
		{name: "a suffix", header: map[string]string{"Range": "bytes=-10"}, status: 206, want: []part{{start: size - 10, end: size - 1}}},
		{name: "open-ended", header: map[string]string{"Range": "bytes=1048000-"}, status: 206, want: []part{{start: 1048000, end: size - 1}}},
		{name: "past the end", header: map[string]string{"Range": fmt.Sprintf("bytes=%d-,%d-5", size, size+9)}, status: 416},
		{name: "malformed", header: map[string]string{"Range": "bytes=5-1"}, status: 416},
		{name: "another unit", header: map[string]string{"Range": "items=0-1"}, status: 416},
		{name: "no Range", status: 200, whole: true},
		{name: "HEAD", method: "HEAD", status: 200},
		{name: "HEAD with ranges", method: "HEAD", header: map[string]string{"Range": "bytes=0-0,-1,100-200"}, status: 206},
		{name: "If-Range with the ETag", header: map[string]string{"Range": "bytes=0-9", "If-Range": etag}, status: 206, want: []part{{start: 0, end: 9}}},
		{name: "If-Range with another ETag", header: map[string]string{"Range": "bytes=0-9", "If-Range": `"other"`}, status: 200, whole: true},
		{name: "If-Range with another ETag and many ranges", header: map[string]string{"Range": "bytes=" + repeat("0-0,-1", 200), "If-Range": `"other"`}, status: 200, whole: true},
		{name: "If-None-Match", header: map[string]string{"If-None-Match": etag, "Range": "bytes=" + repeat("0-0,-1", 200)}, status: 304},
	} {
		t.Run(c.name, func(t *testing.T) {
			method := cmp.Or(c.method, "GET")
			var a answer
			redis := k.redisSent(func() { a = k.do(method, path, c.header, "") })
			t.Logf("%s: %d, %d bytes of body; Redis sent %d bytes", c.name, a.status, len(a.body), redis)
			if a.status != c.status {
				t.Fatalf("got %d %s, want %d", a.status, tail(a.body), c.status)
			}
			// Three times the body, and what opening the output costs.
			if bound := 3*int64(len(a.body)) + 512; redis > bound {
				t.Errorf("Redis sent %d bytes for a body of %d, want at most %d", redis, len(a.body), bound)
			}
			switch {
			case c.status == 416:
				if a.header.Get("Content-Type") != "application/problem+json" || !bytes.Contains(a.body, []byte(`"code":"range_not_satisfiable"`)) {
					t.Errorf("416 %s, want a range_not_satisfiable problem", a.body)
				}
				if c.name == "past the end" && a.header.Get("Content-Range") != fmt.Sprintf("bytes */%d", size) {
					t.Errorf("416 with Content-Range %q, want bytes */%d", a.header.Get("Content-Range"), size)
				}
			case c.whole:
				if !bytes.Equal(a.body, data) || a.header.Get("ETag") != etag {
					t.Errorf("200 of %d bytes (equal: %v), ETag %q; want the whole output and %s", len(a.body), bytes.Equal(a.body, data), a.header.Get("ETag"), etag)
				}
			case method == "HEAD":
				if len(a.body) != 0 || a.header.Get("ETag") != etag {
					t.Errorf("HEAD: %d bytes of body, ETag %q; want none and %s", len(a.body), a.header.Get("ETag"), etag)
				}
			case c.status == 206:
				got := parts(t, a)
				if len(got) != len(c.want) {
					t.Fatalf("206 with %d ranges, want %d", len(got), len(c.want))
				}
				for i, p := range got {
					w := c.want[i]
					if p.start != w.start || p.end != w.end || !bytes.Equal(p.body, data[w.start:w.end+1]) {
						t.Errorf("range %d: bytes %d-%d (%d bytes, equal: %v), want %d-%d", i, p.start, p.end, len(p.body), bytes.Equal(p.body, data[w.start:w.end+1]), w.start, w.end)
					}
				}
			}
		})
	}
}

// outputs.zip reads each output once, in order, and stores it: what Redis
// sends stays within what the ZIP answers even for an output that would
// deflate to almost nothing (4 MiB of one SVG line).
func TestOutputsZipCannotAmplifyRedisReads(t *testing.T) {
	k := newKeyed(t)
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg">` + strings.Repeat(`<rect width="1" height="1"/>`, 4<<20/28) + `</svg>`)
	id := k.forgeOutput("output.svg", "image/svg+xml", svg)
	var a answer
	redis := k.redisSent(func() { a = k.do("GET", "/v1/jobs/"+id+"/outputs.zip", nil, "") })
	t.Logf("outputs.zip of a %d-byte SVG: %d, %d bytes; Redis sent %d bytes", len(svg), a.status, len(a.body), redis)
	if a.status != 200 {
		t.Fatalf("GET outputs.zip: %d %s", a.status, tail(a.body))
	}
	if bound := 3*int64(len(a.body)) + 512; redis > bound {
		t.Errorf("Redis sent %d bytes for a ZIP of %d, want at most %d", redis, len(a.body), bound)
	}
}

// tail is the end of b, for a message.
func tail(b []byte) string {
	if len(b) > 300 {
		b = b[len(b)-300:]
	}
	return string(b)
}
