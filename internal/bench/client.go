package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// apiClient is the benchmark's side of the HTTP API: it submits jobs as
// JSON with base64 input and downloads their outputs, as a user would.
type apiClient struct {
	hc        *http.Client
	base, key string
}

func newAPIClient(base, key string) *apiClient {
	return &apiClient{hc: &http.Client{Timeout: 2 * time.Minute}, base: base, key: key}
}

// jobBody is the JSON request of one job of renderer on input.
func jobBody(renderer string, input []byte) []byte {
	b, _ := json.Marshal(map[string]any{"renderer": renderer, "input_base64": base64.StdEncoding.EncodeToString(input)})
	return b
}

// call sends one authenticated request and decodes a JSON answer, if any.
func (c *apiClient) call(ctx context.Context, method, path string, body []byte) (map[string]any, int, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	var j map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&j)
	return j, resp.StatusCode, nil
}

// render submits one job with ?wait=60, keeps waiting (GET ?wait=60) if it
// has not ended by then, and downloads every output. It fails unless the
// job succeeded with at least one non-empty output.
func (c *apiClient) render(ctx context.Context, renderer string, body []byte) error {
	j, status, err := c.call(ctx, "POST", "/v1/jobs?wait=60", body)
	if err != nil {
		return err
	}
	if status != 200 && status != 202 {
		return fmt.Errorf("%s through the API: submit answered %d: %v", renderer, status, j)
	}
	for deadline := time.Now().Add(5 * time.Minute); j["state"] == "queued" || j["state"] == "running"; {
		id, _ := j["id"].(string)
		if time.Now().After(deadline) || id == "" {
			return fmt.Errorf("%s through the API: job %v has not ended after 5 minutes", renderer, j["id"])
		}
		if j, status, err = c.call(ctx, "GET", "/v1/jobs/"+id+"?wait=60", nil); err != nil {
			return err
		} else if status != 200 {
			return fmt.Errorf("%s through the API: GET job answered %d: %v", renderer, status, j)
		}
	}
	if j["state"] != "succeeded" {
		return fmt.Errorf("%s through the API: job %v ended %v: %v", renderer, j["id"], j["state"], j["error"])
	}
	outs, _ := j["outputs"].([]any)
	if len(outs) == 0 {
		return fmt.Errorf("%s through the API: job %v succeeded without outputs", renderer, j["id"])
	}
	for _, o := range outs {
		url, _ := o.(map[string]any)["url"].(string)
		if err := c.download(ctx, url); err != nil {
			return fmt.Errorf("%s through the API: %w", renderer, err)
		}
	}
	return nil
}

// download reads one output to the end; it must be non-empty.
func (c *apiClient) download(ctx context.Context, path string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return fmt.Errorf("downloading %s: %w", path, err)
	}
	if resp.StatusCode != 200 || n == 0 {
		return fmt.Errorf("downloading %s: status %d, %d bytes", path, resp.StatusCode, n)
	}
	return nil
}
