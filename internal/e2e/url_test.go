//go:build !unit

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/samples"
)

// pageOrigin serves a page that pulls a stylesheet, a web font, an image,
// an iframe and, from its script, JSON with fetch(): each fills its own
// 100×100 square of a 400×100 strip with its own colour. It listens on
// host, which the test allows by CIDR (every address here is private).
func pageOrigin(t *testing.T, host, canary, third string) (base string, hits func(string) int) {
	t.Helper()
	font, err := os.ReadFile("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
	if err != nil {
		t.Skipf("no font to serve: %v", err)
	}
	var green bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 100, 100))
	for i := range img.Pix {
		img.Pix[i] = []byte{0, 200, 0, 255}[i%4]
	}
	_ = png.Encode(&green, img)
	page := func(imgSrc string) string {
		return `<!doctype html><html><head><link rel="stylesheet" href="/style.css"></head><body>
<div id="css"></div><img id="img" src="` + imgSrc + `"><iframe id="frame" src="/frame.html"></iframe><div id="js"></div>
<p id="font">Brokered</p>
<script>fetch('/data.json').then(r => r.json()).then(d => { document.getElementById('js').style.background = d.colour; document.body.dataset.fetched = '1'; });</script>
</body></html>`
	}
	files := map[string]struct{ ctype, body string }{
		"/index.html":   {"text/html; charset=utf-8", page("/green.png")},
		"/missing.html": {"text/html; charset=utf-8", page("/gone.png")},
		"/style.css": {"text/css", `@font-face { font-family: Brokered; src: url(/font.ttf); }
body { margin: 0; } div, img, iframe { position: absolute; top: 0; width: 100px; height: 100px; border: 0; }
#css { left: 0; background: rgb(255, 0, 0); } #img { left: 100px; } #frame { left: 200px; } #js { left: 300px; }
#font { position: absolute; top: 120px; font-family: Brokered; }`},
		"/green.png":  {"image/png", green.String()},
		"/frame.html": {"text/html", `<!doctype html><body style="margin:0;background:rgb(0,0,255)"></body>`},
		"/data.json":  {"application/json", `{"colour": "rgb(255, 255, 0)"}`},
		"/font.ttf":   {"font/ttf", string(font)},
		"/scheme.html": {"text/html", `<!doctype html><style>body { margin: 0; background: rgb(255, 255, 255); }
@media (prefers-color-scheme: dark) { body { background: rgb(0, 0, 0); } }</style><body></body>`},
		"/big.html": {"text/html", `<!doctype html><body><img src="/big.png"></body>`},
		"/twice.html": {"text/html", `<!doctype html><head><link rel="stylesheet" href="/style.css"><link rel="stylesheet" href="/style.css"></head>
<body><img src="/green.png"><img src="/green.png"><script>document.body.appendChild(Object.assign(new Image(), {src: "/green.png"}));</script>
<iframe src="/twice-frame.html"></iframe></body>`},
		"/twice-frame.html": {"text/html", `<!doctype html><link rel="stylesheet" href="/style.css"><body><img src="/green.png"></body>`},
		"/big.png":          {"image/png", strings.Repeat("x", 900_000)},
		"/trickle.html":     {"text/html", `<!doctype html><body><img src="/trickle.png"></body>`},
		"/cookies.html":     {"text/html", `<!doctype html><body><img src="` + third + `/pixel.png"></body>`},
		"/refusals.html": {"text/html", `<!doctype html><body style="background:rgb(0,200,0)">
<img src="file:///etc/passwd"><img src="` + canary + `/loopback.png"><img src="http://169.254.169.254/latest/meta-data/">
<img src="/redirect.png"></body>`},
	}
	var count pathCounter
	agents := make(chan string, 64)
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("listening on %s: %v", host, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		count.add(r.URL.Path)
		select {
		case agents <- r.URL.Path + " " + r.Header.Get("User-Agent") + secretsOf(r):
		default:
		}
		if r.URL.Path == "/trickle.png" {
			for {
				if _, err := w.Write([]byte("x")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(time.Second):
				}
			}
		}
		if r.URL.Path == "/redirect.png" {
			http.Redirect(w, r, canary+"/redirected.png", http.StatusFound)
			return
		}
		f, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", f.ctype)
		w.Header().Set("Set-Cookie", "session=NEVERSEEN")
		_, _ = w.Write([]byte(f.body))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	uaSeen = agents
	return "http://" + ln.Addr().String(), count.get
}

// secretsOf is what a request carried of a page's secrets.
func secretsOf(r *http.Request) string {
	var s []string
	for _, h := range []string{"Cookie", "X-Token", "Authorization"} {
		if v := r.Header.Get(h); v != "" {
			s = append(s, h+"="+v)
		}
	}
	if len(s) == 0 {
		return ""
	}
	return " " + strings.Join(s, " ")
}

// uaSeen has "PATH USER-AGENT" of each request pageOrigin served.
var uaSeen chan string

// pathCounter counts requests by path.
type pathCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *pathCounter) add(p string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[p]++
}

func (c *pathCounter) get(p string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[p]
}

// canaryServer counts every connection to it: nothing may reach it.
func canaryServer(t *testing.T) (base string, hits *atomic.Int64) {
	t.Helper()
	hits = &atomic.Int64{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				hits.Add(1)
			}
		}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String(), hits
}

type urlJobView struct {
	ID      string    `json:"id"`
	State   string    `json:"state"`
	Error   *jobError `json:"error"`
	Outputs []struct {
		URL string `json:"url"`
	} `json:"outputs"`
	Diagnostics struct {
		RefusedRequests []string `json:"refused_requests"`
		MissingFiles    []string `json:"missing_files"`
		Fetched         []struct {
			URL       string `json:"url"`
			Status    int    `json:"status"`
			Bytes     int64  `json:"bytes"`
			Ms        int64  `json:"ms"`
			Refused   string `json:"refused"`
			FromCache *bool  `json:"from_cache"`
		} `json:"fetched"`
	} `json:"diagnostics"`
}

func submitURL(t *testing.T, c *client, key, renderer, url string, options map[string]any) (*response, urlJobView) {
	t.Helper()
	return submitURLBody(t, c, key, map[string]any{"renderer": renderer, "url": url, "options": options})
}

func submitURLBody(t *testing.T, c *client, key string, body map[string]any) (*response, urlJobView) {
	t.Helper()
	b, _ := json.Marshal(body)
	r := c.do("POST", "/v1/jobs?wait=60", key, "application/json", b, nil)
	var j urlJobView
	if r.Status < 300 {
		r.json(t, &j)
		for j.State == "queued" || j.State == "running" {
			g := c.do("GET", "/v1/jobs/"+j.ID+"?wait=60", key, "", nil, nil)
			j = urlJobView{}
			g.json(t, &j)
		}
		g := c.do("GET", "/v1/jobs/"+j.ID, key, "", nil, nil)
		j = urlJobView{}
		g.json(t, &j)
	}
	return r, j
}

// A page given by its URL renders through the host's broker with all it
// pulls — stylesheet, web font, image, iframe, a script's fetch — while
// its sandbox has no network; with fail_on_resource_error a 404 among
// its assets fails the job naming it; what the policy refuses (file://,
// loopback, the metadata address, a redirect to a disallowed address)
// fails in the page with its reason and reaches nothing.
func TestURLPageEndToEnd(t *testing.T) {
	canary, canaryHits := canaryServer(t)
	thirdSeen := make(chan string, 4)
	third := recorder(t, "127.0.0.4", thirdSeen)
	base, hits := pageOrigin(t, "127.0.0.3", canary, third)
	remote := []string{"-remote-content", "-remote-allow", "127.0.0.3/32,127.0.0.4/32", "-remote-max-response-bytes", "800000"}
	s := newStack(t, stackOpts{apiArgs: []string{"-remote-content"}, workerArgs: remote})
	c, key := s.client, s.key("url")

	t.Run("everything the page pulls", func(t *testing.T) {
		t0 := time.Now()
		r, j := submitURL(t, c, key, "html-png", base+"/index.html", map[string]any{
			"width": 400, "height": 200, "javascript": true,
			"wait_for_expression": "document.body.dataset.fetched === '1' && document.fonts.check('16px Brokered')",
		})
		if r.Status >= 300 || j.State != "succeeded" {
			t.Fatalf("url job: %d %s; %s %+v", r.Status, r.Body, j.State, j.Error)
		}
		t.Logf("the job took %s", time.Since(t0))
		out := c.do("GET", j.Outputs[0].URL, key, "", nil, nil)
		img, err := png.Decode(bytes.NewReader(out.Body))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []struct {
			what string
			x    int
			want color.RGBA
		}{
			{"the stylesheet's red", 50, color.RGBA{255, 0, 0, 255}},
			{"the image's green", 150, color.RGBA{0, 200, 0, 255}},
			{"the iframe's blue", 250, color.RGBA{0, 0, 255, 255}},
			{"the fetched JSON's yellow", 350, color.RGBA{255, 255, 0, 255}},
		} {
			r, g, b, _ := img.At(p.x, 50).RGBA()
			if d := absDiff(r>>8, p.want.R) + absDiff(g>>8, p.want.G) + absDiff(b>>8, p.want.B); d > 24 {
				t.Errorf("pixel (%d,50) is %d,%d,%d; want %s", p.x, r>>8, g>>8, b>>8, p.what)
			}
		}
		for _, path := range []string{"/index.html", "/style.css", "/font.ttf", "/green.png", "/frame.html", "/data.json"} {
			if hits(path) == 0 {
				t.Errorf("the origin never served %s", path)
			}
		}
		var fetched []string
		for _, f := range j.Diagnostics.Fetched {
			fetched = append(fetched, fmt.Sprintf("%s %d %dB %dms", f.URL, f.Status, f.Bytes, f.Ms))
		}
		t.Logf("fetched: %s", strings.Join(fetched, "; "))
		if len(j.Diagnostics.Fetched) < 6 {
			t.Errorf("diagnostics list %d fetches, want each of the page's 6", len(j.Diagnostics.Fetched))
		}
	})

	t.Run("fail_on_resource_error names a 404", func(t *testing.T) {
		_, j := submitURL(t, c, key, "html-png", base+"/missing.html", map[string]any{"fail_on_resource_error": true})
		if j.State != "failed" || j.Error == nil || j.Error.Code != "render_failed" || !strings.Contains(j.Error.Message, base+"/gone.png (404)") {
			t.Fatalf("job %s %+v, want render_failed naming %s/gone.png", j.State, j.Error, base)
		}
	})

	t.Run("user_agent and prefers_color_scheme", func(t *testing.T) {
		for len(uaSeen) > 0 {
			<-uaSeen
		}
		_, j := submitURL(t, c, key, "html-png", base+"/scheme.html", map[string]any{
			"width": 100, "height": 100, "user_agent": "renderbox-test/1", "prefers_color_scheme": "dark"})
		if j.State != "succeeded" {
			t.Fatalf("job %s %+v", j.State, j.Error)
		}
		img, err := png.Decode(bytes.NewReader(c.do("GET", j.Outputs[0].URL, key, "", nil, nil).Body))
		if err != nil {
			t.Fatal(err)
		}
		if r, g, b, _ := img.At(50, 50).RGBA(); r+g+b > 3*0x1000 {
			t.Errorf("pixel (50,50) is %d,%d,%d; want the dark scheme's black", r>>8, g>>8, b>>8)
		}
		if got := <-uaSeen; got != "/scheme.html renderbox-test/1" {
			t.Errorf("the origin saw %q, want the job's user_agent", got)
		}
	})

	t.Run("nothing is answered from a cache", func(t *testing.T) {
		css, png := hits("/style.css"), hits("/green.png")
		_, j := submitURL(t, c, key, "html-png", base+"/twice.html", map[string]any{"width": 100, "height": 100, "javascript": true})
		if j.State != "succeeded" {
			t.Fatalf("job %s %+v", j.State, j.Error)
		}
		// The page uses each asset three times and its iframe once more.
		// Every request Chromium makes reaches the origin through the host
		// and is one record (no cache answers one: fetch.Record.FromCache),
		// and each document asks at least once. Whether Chromium reuses a
		// stylesheet within one document is its own timing: a second
		// <link> parsed after the first response finished asks again.
		dc, dp := hits("/style.css")-css, hits("/green.png")-png
		if dc < 2 || dp < 2 {
			t.Errorf("the origin served the stylesheet %d and the image %d times, want at least twice each (once a document)", dc, dp)
		}
		listed := map[string]int{}
		for _, f := range j.Diagnostics.Fetched {
			listed[f.URL[len(base):]]++
			if f.FromCache == nil || *f.FromCache {
				t.Errorf("a record says from_cache %v, want false: %+v", f.FromCache, f)
			}
		}
		if want := map[string]int{"/style.css": dc, "/green.png": dp, "/twice.html": 1, "/twice-frame.html": 1}; !maps.Equal(listed, want) {
			t.Errorf("fetched %v, want one record per request the origin served: %v", listed, want)
		}
	})

	t.Run("secrets go to the page's host only", func(t *testing.T) {
		for len(uaSeen) > 0 {
			<-uaSeen
		}
		_, j := submitURL(t, c, key, "html-pdf", base+"/cookies.html", map[string]any{
			"cookies": "session=COOKIE", "extra_http_headers": "X-Token: TOKEN", "http_username": "ann", "http_password": "PASS"})
		if j.State != "succeeded" {
			t.Fatalf("job %s %+v", j.State, j.Error)
		}
		if got := <-uaSeen; !strings.HasSuffix(got, "Cookie=session=COOKIE X-Token=TOKEN Authorization=Basic YW5uOlBBU1M=") {
			t.Errorf("the page's host saw %q", got)
		}
		if got := <-thirdSeen; got != "/pixel.png" {
			t.Errorf("the third party saw %q, want no secret", got)
		}
		view := c.do("GET", "/v1/jobs/"+j.ID, key, "", nil, nil)
		if b := string(view.Body); strings.Contains(b, "COOKIE") || strings.Contains(b, "TOKEN") || strings.Contains(b, "PASS\"") {
			t.Errorf("the job's record shows a secret: %s", b)
		}
	})

	t.Run("a response over its bound is cut", func(t *testing.T) {
		_, j := submitURL(t, c, key, "html-pdf", base+"/big.html", nil)
		if j.State != "succeeded" {
			t.Fatalf("job %s %+v", j.State, j.Error)
		}
		var refused string
		for _, f := range j.Diagnostics.Fetched {
			if f.URL == base+"/big.png" {
				refused = f.Refused
			}
		}
		if refused != "too_large" || len(j.Diagnostics.RefusedRequests) != 1 || !strings.Contains(j.Diagnostics.RefusedRequests[0], "refused: too_large") {
			t.Errorf("big.png: refused %q, refused_requests %q; want too_large", refused, j.Diagnostics.RefusedRequests)
		}
	})

	t.Run("a trickle ends at the job's timeout", func(t *testing.T) {
		t0 := time.Now()
		_, j := submitURLBody(t, c, key, map[string]any{"renderer": "html-pdf", "url": base + "/trickle.html", "limits": map[string]any{"timeout_seconds": 5}})
		if j.State != "failed" || j.Error == nil || j.Error.Code != "timeout" {
			t.Fatalf("job %s %+v, want timeout", j.State, j.Error)
		}
		if d := time.Since(t0); d > 30*time.Second {
			t.Errorf("the job took %s", d)
		}
		// The worker is unharmed: the next page renders.
		if _, j := submitURL(t, c, key, "html-pdf", base+"/scheme.html", nil); j.State != "succeeded" {
			t.Errorf("the next job: %s %+v", j.State, j.Error)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		_, j := submitURL(t, c, key, "html-pdf", base+"/refusals.html", nil)
		if j.State != "succeeded" {
			t.Fatalf("job %s %+v", j.State, j.Error)
		}
		reasons := map[string]string{}
		for _, f := range j.Diagnostics.Fetched {
			reasons[f.URL] = f.Refused
		}
		for u, want := range map[string]string{
			canary + "/loopback.png":                   "address",
			"http://169.254.169.254/latest/meta-data/": "address",
			base + "/redirect.png":                     "address",
		} {
			if reasons[u] != want {
				t.Errorf("%s: refused %q, want %q (fetched: %+v)", u, reasons[u], want, j.Diagnostics.Fetched)
			}
		}
		if len(j.Diagnostics.RefusedRequests) < 3 {
			t.Errorf("refused_requests %q, want the three with their reasons", j.Diagnostics.RefusedRequests)
		}
		for _, f := range j.Diagnostics.Fetched {
			if strings.HasPrefix(f.URL, "file:") && f.Refused == "" {
				t.Errorf("file:// was fetched: %+v", f)
			}
		}
		// The page itself on a disallowed address: the job fails, refused.
		_, j = submitURL(t, c, key, "html-pdf", canary+"/page.html", nil)
		if j.State != "failed" || j.Error == nil || j.Error.Code != "render_failed" || !strings.Contains(j.Error.Message, "refused: address") {
			t.Errorf("a loopback page: %s %+v, want render_failed, refused", j.State, j.Error)
		}
		// file:// is no page's URL at all.
		if r, _ := submitURL(t, c, key, "html-pdf", "file:///etc/passwd", nil); r.Status != 400 {
			t.Errorf("a file:// url: %d %s, want 400", r.Status, r.Body)
		}
		if n := canaryHits.Load(); n != 0 {
			t.Errorf("the canary on loopback saw %d connections", n)
		}
	})
}

func absDiff(a uint32, b uint8) uint32 {
	if a > uint32(b) {
		return a - uint32(b)
	}
	return uint32(b) - a
}

// The broker's cost: a page of 20 images rendered from its URL against the
// same page uploaded as a ZIP, three of each, the medians of the jobs'
// run times (started to finished) logged for docs/security.md.
func TestURLPageCostPerSubresource(t *testing.T) {
	if os.Getenv("RENDERBOX_URL_FIGURES") == "" {
		t.Skip("a measurement: RENDERBOX_URL_FIGURES=1 runs it")
	}
	const n = 20
	site := samples.ImagePage(n)
	files := map[string][]byte{}
	for name, b := range site.Files {
		files["/"+name] = b
	}
	base, _ := fileServer(t, "127.0.0.3", files, nil)
	s := newStack(t, stackOpts{apiArgs: []string{"-remote-content"}, workerArgs: []string{"-remote-content", "-remote-allow", "127.0.0.3/32"}})
	c, key := s.client, s.key("figures")
	zipped := site.Zip()
	runTime := func(id string) time.Duration {
		var j struct {
			StartedAt, FinishedAt time.Time
		}
		var raw struct {
			StartedAt  time.Time `json:"started_at"`
			FinishedAt time.Time `json:"finished_at"`
		}
		c.do("GET", "/v1/jobs/"+id, key, "", nil, nil).json(t, &raw)
		j.StartedAt, j.FinishedAt = raw.StartedAt, raw.FinishedAt
		return j.FinishedAt.Sub(j.StartedAt)
	}
	median := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	var byURL, byZIP []time.Duration
	for range 3 {
		_, j := submitURL(t, c, key, "html-png", base+"/index.html", nil)
		if j.State != "succeeded" {
			t.Fatalf("url: %s %+v", j.State, j.Error)
		}
		byURL = append(byURL, runTime(j.ID))
		r, jz := submitJSON(t, c, key, "html-png", zipped, nil, "?wait=60", nil)
		if r.Status >= 300 || jz.State != "succeeded" {
			t.Fatalf("zip: %d %s", r.Status, r.Body)
		}
		byZIP = append(byZIP, runTime(jz.ID))
	}
	mu, mz := median(byURL), median(byZIP)
	t.Logf("a page of %d images: by url %s (%v), as a ZIP %s (%v); %.1f ms a subresource", n, mu, byURL, mz, byZIP, float64((mu-mz).Microseconds())/1000/float64(n+1))
}

// recorder serves an empty 200 on host and sends what each request
// carried of a page's secrets, after its path, to seen.
func recorder(t *testing.T, host string, seen chan string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case seen <- r.URL.Path + secretsOf(r):
		default:
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// A URL page runs in a Chromium restored from the pool's checkpoint as in
// a cold one: the restored agent reads the host's answers on its new
// stdin.
func TestURLPageFromThePool(t *testing.T) {
	canary, _ := canaryServer(t)
	base, _ := pageOrigin(t, "127.0.0.3", canary, canary)
	s := newStack(t, stackOpts{apiArgs: []string{"-remote-content"},
		workerArgs: append([]string{"-remote-content", "-remote-allow", "127.0.0.3/32"}, poolArgs...)})
	waitPoolFull(t, s)
	c, key := s.client, s.key("pool")
	_, j := submitURL(t, c, key, "html-png", base+"/index.html", map[string]any{"width": 400, "height": 200})
	if j.State != "succeeded" {
		t.Fatalf("job %s %+v", j.State, j.Error)
	}
	var mode struct {
		SandboxMode string `json:"sandbox_mode"`
	}
	c.do("GET", "/v1/jobs/"+j.ID, key, "", nil, nil).json(t, &mode)
	if mode.SandboxMode != "restored" {
		t.Errorf("the job ran in a %q sandbox, want restored", mode.SandboxMode)
	}
	img, err := png.Decode(bytes.NewReader(c.do("GET", j.Outputs[0].URL, key, "", nil, nil).Body))
	if err != nil {
		t.Fatal(err)
	}
	if r, g, b, _ := img.At(50, 50).RGBA(); r>>8 < 240 || g>>8 > 16 || b>>8 > 16 {
		t.Errorf("pixel (50,50) is %d,%d,%d; want the stylesheet's red", r>>8, g>>8, b>>8)
	}
}
