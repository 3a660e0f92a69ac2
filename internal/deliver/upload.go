package deliver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/renderbox/renderbox/internal/egress"
)

// Statuses of a Record.
const (
	Delivered = "delivered"
	Failed    = "failed"
)

// Output is one rendered output to deliver.
type Output struct {
	Name      string
	MediaType string
	Data      []byte
}

// Record is one upload as a job shows it: where (no query string), how
// it ended, the bytes sent and the ETag the destination answered.
type Record struct {
	Output      string `json:"output"`
	Destination string `json:"destination"`
	Status      string `json:"status"`
	Bytes       int64  `json:"bytes"`
	ETag        string `json:"etag,omitempty"`
	Attempts    int    `json:"attempts"`
	Error       string `json:"error,omitempty"`
}

// Uploader sends outputs to their destinations, each up to Attempts
// times with a doubling wait between tries. Only failures another try may
// cure are retried: connection errors, 408, 429 and 5xx answers; a
// refusal by the address policy or another 4xx (an expired signature's
// 403) ends the upload at once.
type Uploader struct {
	// HTTP makes the PUTs to presigned URLs; build it with
	// egress.NewClient so that every connection follows the policy.
	HTTP *http.Client
	// S3 puts into allowed buckets; nil when the operator set none.
	S3 *minio.Client
	// Buckets are the patterns a bucket must match (the API checked them
	// at intake; the worker checks again with its own).
	Buckets []string
	// Attempts per output; 3 when 0.
	Attempts int
	// Backoff is the first wait between attempts, doubled after each;
	// 1s when 0.
	Backoff time.Duration
}

// ErrFailed marks a delivery that did not complete: the job fails with
// the code delivery_failed.
var ErrFailed = errors.New("delivery failed")

// Deliver uploads outs as s says and returns a record per upload, in the
// order of outs. The error, wrapping ErrFailed, names the first upload
// that failed after its attempts; every other upload was still tried.
func (u *Uploader) Deliver(ctx context.Context, s Spec, outs []Output) ([]Record, error) {
	var recs []Record
	var first error
	fail := func(err error) {
		if first == nil {
			first = err
		}
	}
	have := map[string]bool{}
	for _, o := range outs {
		have[o.Name] = true
		var r Record
		switch {
		case s.S3 != nil:
			r = u.putS3(ctx, *s.S3, o)
		case s.PutURLs[o.Name] != "":
			r = u.putURL(ctx, s.PutURLs[o.Name], o)
		default:
			continue // not asked for: downloadable only
		}
		if r.Status != Delivered {
			fail(fmt.Errorf("%w: %s to %s: %s", ErrFailed, r.Output, r.Destination, r.Error))
		}
		recs = append(recs, r)
	}
	for name, raw := range s.PutURLs {
		if !have[name] {
			recs = append(recs, Record{Output: name, Destination: Redact(raw), Status: Failed, Error: "the job has no output of this name"})
			fail(fmt.Errorf("%w: put_urls names %q, which the job did not produce", ErrFailed, name))
		}
	}
	return recs, first
}

func (u *Uploader) attempts() int {
	if u.Attempts <= 0 {
		return 3
	}
	return u.Attempts
}

// retry runs try until it succeeds, says not to retry, attempts run out
// or ctx ends; it returns the number of attempts made and the last error.
func (u *Uploader) retry(ctx context.Context, try func() (again bool, err error)) (int, error) {
	wait := u.Backoff
	if wait == 0 {
		wait = time.Second
	}
	var err error
	for n := 1; ; n++ {
		var again bool
		if again, err = try(); err == nil || !again || n == u.attempts() {
			return n, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return n, fmt.Errorf("%w (after: %v)", context.Cause(ctx), err)
		case <-t.C:
		}
		wait *= 2
	}
}

func (u *Uploader) putURL(ctx context.Context, raw string, o Output) Record {
	r := Record{Output: o.Name, Destination: Redact(raw), Status: Failed}
	n, err := u.retry(ctx, func() (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, raw, bytes.NewReader(o.Data))
		if err != nil {
			return false, errors.New("not a URL")
		}
		req.ContentLength = int64(len(o.Data))
		resp, err := u.HTTP.Do(req)
		if err != nil {
			if errors.Is(err, egress.ErrRefused) {
				return false, errors.New("the address is not allowed")
			}
			return true, errors.New(egress.ConnectFailure(err))
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			again := resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout
			return again, fmt.Errorf("the destination answered %s", resp.Status)
		}
		r.ETag = strings.Trim(resp.Header.Get("ETag"), `"`)
		return false, nil
	})
	return finish(r, n, int64(len(o.Data)), err)
}

func (u *Uploader) putS3(ctx context.Context, d S3Dest, o Output) Record {
	key := d.Prefix + o.Name
	r := Record{Output: o.Name, Destination: d.Bucket + "/" + key, Status: Failed}
	if u.S3 == nil {
		return finish(r, 0, 0, errors.New("this worker has no S3 store to deliver to (-deliver-s3)"))
	}
	if err := (Policy{Buckets: u.Buckets}).checkS3(d); err != nil {
		return finish(r, 0, 0, err)
	}
	n, err := u.retry(ctx, func() (bool, error) {
		info, err := u.S3.PutObject(ctx, d.Bucket, key, bytes.NewReader(o.Data), int64(len(o.Data)), minio.PutObjectOptions{ContentType: o.MediaType})
		if err != nil {
			st := minio.ToErrorResponse(err).StatusCode
			again := st == 0 || st >= 500 || st == http.StatusTooManyRequests
			if st != 0 {
				return again, fmt.Errorf("the store answered %d %s", st, minio.ToErrorResponse(err).Code)
			}
			return again, errors.New("connection failed")
		}
		r.ETag = strings.Trim(info.ETag, `"`)
		return false, nil
	})
	return finish(r, n, int64(len(o.Data)), err)
}

func finish(r Record, attempts int, size int64, err error) Record {
	r.Attempts = attempts
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Status, r.Bytes = Delivered, size
	return r
}
