//go:build !unit

package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/api"
)

// The intake reuses its read buffers from one request to the next: jobs
// submitted at once, JSON and multipart, each records the digest of its
// own input, whatever the others sent. The inputs are of sizes that fill
// the 32 KiB buffers a different number of times, and arrive in pieces.
func TestConcurrentIntakesKeepTheirOwnInput(t *testing.T) {
	t.Parallel()
	k := newKeyedWith(t, func(s *api.Server) {
		s.Limits = api.Limits{RatePerSecond: 1e9, Burst: 1e9, MaxQueueDepth: 1e9, MaxQueuedPerKey: 1e9}
	})
	const clients, each = 8, 12
	errs := make(chan error, clients*each)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := c*each + i
				input := fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="10"><!-- %s --></svg>`,
					n+1, strings.Repeat(string(rune('a'+n%26)), n*1531%90_000))
				if err := submitOwn(k, []byte(input), n%2 == 1); err != nil {
					errs <- fmt.Errorf("submission %d (%d bytes): %w", n, len(input), err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// trickle hands out at most 4 KiB a read, a moment after it is asked.
type trickle struct{ r io.Reader }

func (t *trickle) Read(p []byte) (int, error) {
	time.Sleep(200 * time.Microsecond)
	return t.r.Read(p[:min(len(p), 4<<10)])
}

// submitOwn submits input to svg-png, as a file part or as JSON, and
// checks that the job records input's digest and size.
func submitOwn(k *keyed, input []byte, asFile bool) error {
	var body bytes.Buffer
	contentType := "application/json"
	if asFile {
		mw := multipart.NewWriter(&body)
		_ = mw.WriteField("renderer", "svg-png")
		fw, _ := mw.CreateFormFile("file", "in.svg")
		_, _ = fw.Write(input)
		_ = mw.Close()
		contentType = mw.FormDataContentType()
	} else {
		b, _ := json.Marshal(map[string]string{"renderer": "svg-png", "input_base64": base64.StdEncoding.EncodeToString(input)})
		body.Write(b)
	}
	// In pieces, so that every handler waits for its body part-way
	// through, while the others read theirs.
	req, _ := http.NewRequest("POST", k.srv.URL+"/v1/jobs", &trickle{r: &body})
	req.Header.Set("Authorization", "Bearer "+k.key)
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var j struct {
		Input struct {
			SHA256 string `json:"sha256"`
			Size   int    `json:"size"`
		} `json:"input"`
	}
	if err := json.Unmarshal(b, &j); err != nil || resp.StatusCode != 202 {
		return fmt.Errorf("answered %d: %s", resp.StatusCode, b)
	}
	sum := sha256.Sum256(input)
	if j.Input.SHA256 != hex.EncodeToString(sum[:]) || j.Input.Size != len(input) {
		return fmt.Errorf("recorded %s (%d bytes), want its own %x (%d bytes)", j.Input.SHA256, j.Input.Size, sum, len(input))
	}
	return nil
}
