//go:build !unit

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowOrigin serves /a/index.html and /b/index.html, pages of n images
// each, on 127.0.0.3; each image takes d. It keeps the most requests in
// flight at once for each page's files and for all of them.
type slowOrigin struct {
	mu             sync.Mutex
	now, most      map[string]int
	nowAll, allMax int
}

func newSlowOrigin(t *testing.T, n int, d time.Duration) (base string, o *slowOrigin) {
	t.Helper()
	o = &slowOrigin{now: map[string]int{}, most: map[string]int{}}
	page := `<!doctype html><body>`
	for i := range n {
		page += fmt.Sprintf(`<img src="img%d.gif">`, i)
	}
	gif := []byte("GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")
	ln, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		which, file, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if file == "index.html" {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte(page))
			return
		}
		o.mu.Lock()
		o.now[which]++
		o.most[which] = max(o.most[which], o.now[which])
		o.nowAll++
		o.allMax = max(o.allMax, o.nowAll)
		o.mu.Unlock()
		time.Sleep(d)
		o.mu.Lock()
		o.now[which]--
		o.nowAll--
		o.mu.Unlock()
		w.Header().Set("Content-Type", "image/gif")
		_, _ = w.Write(gif)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String(), o
}

// A worker's broker holds one key's URL pages to -remote-max-per-key
// fetches in flight across its jobs, and another key's page is fetched
// for meanwhile: two jobs of key A, pages of 6 slow images each, have at
// most 2 at the origin at once; key B's page, running beside them, has
// its own.
func TestURLPagesOfOneKeyShareItsFetchBound(t *testing.T) {
	base, o := newSlowOrigin(t, 6, 400*time.Millisecond)
	s := newStack(t, stackOpts{apiArgs: []string{"-remote-content"},
		workerArgs: []string{"-concurrency", "3", "-remote-content", "-remote-allow", "127.0.0.3/32", "-remote-max-per-key", "2"}})
	c, a, b := s.client, s.key("a"), s.key("b")
	submit := func(key, page string) string {
		body, _ := json.Marshal(map[string]any{"renderer": "html-png", "url": base + page, "options": map[string]any{"width": 100, "height": 100}})
		r := c.do("POST", "/v1/jobs", key, "application/json", body, nil)
		var j jobJSON
		r.json(t, &j)
		if r.Status != 202 {
			t.Fatalf("submit: %d %s", r.Status, r.Body)
		}
		return j.ID
	}
	jobs := map[string]string{submit(a, "/a/index.html"): a, submit(a, "/a/index.html"): a, submit(b, "/b/index.html"): b}
	for id, key := range jobs {
		if j := waitEnded(t, c, key, id, 2*time.Minute); j.State != "succeeded" {
			t.Errorf("job %s: %s %+v", id, j.State, j.Error)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	t.Logf("most images in flight: key A's pages %d, key B's %d, all %d", o.most["a"], o.most["b"], o.allMax)
	if o.most["a"] != 2 {
		t.Errorf("key A's two pages had at most %d images at the origin at once, want 2 (its bound)", o.most["a"])
	}
	if o.most["b"] < 1 || o.allMax < 3 {
		t.Errorf("key B's page had %d images in flight and all pages %d, want B fetched for beside A's 2", o.most["b"], o.allMax)
	}
}
