//go:build !unit

package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/renderbox/renderbox/internal/queue"
)

// GET /v1/fonts lists the families the live workers' rootfs trees
// published, each once across trees; with none published it is 503.
func TestFontsOfTheLiveWorkers(t *testing.T) {
	q := newQueue(t)
	s := &Server{Ledger: openLedger(t), Queue: q}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	get := func() (int, map[string][]string) {
		resp, err := http.Get(srv.URL + "/v1/fonts")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string][]string
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	ctx := context.Background()
	if status, _ := get(); status != 503 {
		t.Errorf("no worker: %d, want 503", status)
	}
	for _, w := range []queue.WorkerInfo{{ID: "w1", RootfsDigest: "tree-a"}, {ID: "w2", RootfsDigest: "tree-b"}, {ID: "w3", RootfsDigest: "tree-a"}} {
		if err := q.Heartbeat(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	if status, _ := get(); status != 503 {
		t.Errorf("workers that published no fonts: %d, want 503", status)
	}
	if err := q.PublishFonts(ctx, "tree-a", []string{"Carlito", "DejaVu Sans"}); err != nil {
		t.Fatal(err)
	}
	if err := q.PublishFonts(ctx, "tree-b", []string{"Operator Sans", "Carlito"}); err != nil {
		t.Fatal(err)
	}
	status, body := get()
	if status != 200 || !slices.Equal(body["families"], []string{"Carlito", "DejaVu Sans", "Operator Sans"}) || len(body["rootfs_digests"]) != 2 {
		t.Errorf("GET /v1/fonts: %d %v, want the three families once and both trees", status, body)
	}
}
