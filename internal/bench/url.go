package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/renderbox/renderbox/internal/samples"
)

// urlSubresources is how many images the url line's page pulls.
const urlSubresources = 20

// urlLine is what a page costs by url, through the host's broker, against
// the same files uploaded as a ZIP (docs/benchmarks.md, "Pages by URL").
type urlLine struct {
	Bench        string  `json:"bench"`
	Renderer     string  `json:"renderer"`
	Subresources int     `json:"subresources"`
	P50URL       float64 `json:"p50_url_ms"`
	P50ZIP       float64 `json:"p50_zip_ms"`
	// PerRequest is (P50URL − P50ZIP) over the page's requests (the page
	// and its subresources): the broker's added cost of each, the
	// requests of a page overlapping as Chromium makes them.
	PerRequest float64 `json:"broker_ms_per_request"`
	Serial     int     `json:"serial_n"`
	Failed     int     `json:"failed"`
	Origin     string  `json:"origin"`
	Time       string  `json:"time"`
}

// benchURL serves samples.ImagePage on origin (an address the worker's
// -remote-allow admits; make bench gives 127.0.0.3) and renders it with
// html-png serial times by url and as a ZIP, alternating, after one
// warm-up of each; it prints one urlLine. The stack's API and worker
// must have -remote-content on.
func benchURL(ctx context.Context, out *json.Encoder, stamp string, api *apiClient, origin string, serial int) error {
	site := samples.ImagePage(urlSubresources)
	ln, err := net.Listen("tcp", origin)
	if err != nil {
		return fmt.Errorf("url: serving the page on %s: %w", origin, err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := site.Files[r.URL.Path[1:]]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	page := "http://" + ln.Addr().String() + "/index.html"
	byURL, _ := json.Marshal(map[string]any{"renderer": "html-png", "url": page})
	byZIP := jobBody("html-png", site.Zip())
	failed := 0
	var firstErr error
	timed := func(body []byte, into *[]time.Duration) {
		t0 := time.Now()
		if err := api.render(ctx, "html-png", body); err != nil {
			if failed++; firstErr == nil {
				firstErr = err
				fmt.Fprintf(os.Stderr, "bench: url: %v\n", err)
			}
			return
		}
		if into != nil {
			*into = append(*into, time.Since(t0))
		}
	}
	timed(byURL, nil) // warm-up
	timed(byZIP, nil)
	var u, z []time.Duration
	for range serial {
		timed(byURL, &u)
		timed(byZIP, &z)
	}
	l := urlLine{Bench: "url", Renderer: "html-png", Subresources: urlSubresources, Serial: serial, Failed: failed, Origin: origin, Time: stamp}
	if len(u) > 0 && len(z) > 0 {
		l.P50URL, l.P50ZIP = ms(pct(u, 50)), ms(pct(z, 50))
		l.PerRequest = round2((l.P50URL - l.P50ZIP) / (urlSubresources + 1))
	}
	if err := out.Encode(l); err != nil {
		return err
	}
	if firstErr != nil {
		host, _, _ := net.SplitHostPort(origin)
		return fmt.Errorf("url: %d of %d jobs failed (the stack needs -remote-content on the API and on the worker, and the worker -remote-allow %s/32): %w", failed, 2*serial+2, host, firstErr)
	}
	return nil
}
