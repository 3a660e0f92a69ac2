//go:build !unit

package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/renderbox/renderbox"
	"github.com/renderbox/renderbox/internal/api"
	"github.com/renderbox/renderbox/internal/ledger"
)

// failingLedger fails to record a job.
type failingLedger struct{ ledger.Store }

func (failingLedger) CreateJob(context.Context, ledger.Job) (ledger.Job, bool, error) {
	return ledger.Job{}, false, errors.New("disk full")
}

// What a handler logs of a request's failure carries the request's id,
// so the access line, the error and the client's X-Request-Id meet.
func TestHandlerLogsCarryTheRequestID(t *testing.T) {
	k := newKeyed(t)
	var logs bytes.Buffer
	s := &api.Server{OpenAPI: renderbox.OpenAPI, Ledger: failingLedger{k.ledger}, Queue: k.queue, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	srv := httptest.NewServer(s.Handler())
	req, _ := http.NewRequest("POST", srv.URL+"/v1/jobs", strings.NewReader(svgJob))
	req.Header.Set("Authorization", "Bearer "+k.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	srv.Close()
	id := resp.Header.Get("X-Request-Id")
	found := false
	for _, l := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "recording a job" {
			found = m["request_id"] == id && id != ""
		}
	}
	if resp.StatusCode != 500 || !found {
		t.Errorf("a job the ledger fails to record: %d, and the log\n%s\nwant 500 and a \"recording a job\" line with request_id %q", resp.StatusCode, logs.String(), id)
	}
}
