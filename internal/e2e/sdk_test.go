//go:build !unit

package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	rb "github.com/renderbox/renderbox/client"
)

// sdk returns the client package's client of the stack's API for key.
// Its requests and the answers go through contractTransport: checked
// against openapi.yaml and counted for TestContractCoverage, as the
// harness's own requests are.
func (s *stack) sdk(key string) *rb.Client {
	s.t.Helper()
	c, err := rb.New(s.base, key)
	if err != nil {
		s.t.Fatal(err)
	}
	c.HTTP = &http.Client{Transport: contractTransport{s.client}}
	return c
}

// contractTransport sends a request as http.DefaultTransport does, then
// checks the exchange against openapi.yaml (client.validate) and hands the
// answer on, its body read in full.
type contractTransport struct{ c *client }

func (ct contractTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	ct.c.validate(req, body, resp, data)
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp, nil
}

// renderSDK submits req through the client package, waits for the job to
// end and, when it succeeded, downloads every output (each checked against
// its SHA-256 by the client). It fails the test on any error on the way.
func renderSDK(t *testing.T, c *rb.Client, req rb.Request) (*rb.Job, map[string][]byte) {
	t.Helper()
	// Three sandboxes of Tesseract (safe-pdf with OCR) on a shared
	// machine may take minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	j, err := c.Submit(ctx, req)
	if err != nil {
		t.Fatalf("%s: submit: %v", req.Renderer, err)
	}
	// A job that ends failed or canceled comes back with a *JobError:
	// the callers check its state and error themselves.
	var failed *rb.JobError
	if j, err = c.Wait(ctx, j.ID, nil); errors.As(err, &failed) && j != nil {
		return j, nil
	} else if err != nil {
		t.Fatalf("%s: wait: %v", req.Renderer, err)
	}
	outs := map[string][]byte{}
	for _, o := range j.Outputs {
		var b bytes.Buffer
		if err := c.Download(ctx, o, &b); err != nil {
			t.Fatalf("%s: download %s: %v", req.Renderer, o.Name, err)
		}
		outs[o.Name] = b.Bytes()
	}
	return j, outs
}
