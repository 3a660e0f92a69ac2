//go:build !unit

package render_test

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"strings"
	"sync"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
	"github.com/renderbox/renderbox/internal/wire"
)

// fakeBroker answers from a table, and records what it was asked.
type fakeBroker struct {
	mu    sync.Mutex
	asked []string
	pages map[string]string
}

func (b *fakeBroker) Fetch(req wire.FetchRequest) (wire.FetchAnswer, []byte) {
	b.mu.Lock()
	b.asked = append(b.asked, req.URL)
	b.mu.Unlock()
	body, ok := b.pages[req.URL]
	if !ok {
		return wire.FetchAnswer{Refused: "host", Error: "not in the table"}, nil
	}
	ct := "text/html"
	if strings.HasSuffix(req.URL, ".png") {
		ct = "image/png"
	}
	return wire.FetchAnswer{Status: 200, Headers: [][2]string{{"Content-Type", ct}}}, []byte(body)
}

// A page by URL is fetched through the job's broker, with what it loads;
// without a broker the job fails at once, naming the setting.
func TestURLPageThroughTheBroker(t *testing.T) {
	m := testenv.Manager(t, sandbox.Config{})
	red := image.NewRGBA(image.Rect(0, 0, 50, 50))
	for i := range red.Pix {
		red.Pix[i] = []byte{255, 0, 0, 255}[i%4]
	}
	b := &fakeBroker{pages: map[string]string{
		"http://page.test/":        `<body style="margin:0;background:rgb(0,0,255)"><img src="/red.png" style="display:block"><img src="http://elsewhere.test/x.png">`,
		"http://page.test/red.png": string(encodePNG(red)),
	}}
	r, err := render.Lookup("html-png")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := r.PrepareTyped([]byte("http://page.test/"), render.TypeURL, []byte(`{"width": 100, "height": 100}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	plan.Job.Input = bytes.NewReader([]byte("http://page.test/"))
	plan.Job.Broker = b
	res, err := m.Run(context.Background(), plan.Job)
	if err != nil {
		t.Fatalf("%v (asked %q)", err, b.asked)
	}
	outs := accepted(t, r, res.Response.Files)
	img := decode(t, outs["output.png"])
	for _, p := range []struct {
		x, y int
		want color.RGBA
	}{{25, 25, color.RGBA{255, 0, 0, 255}}, {75, 75, color.RGBA{0, 0, 255, 255}}} {
		if got := color.RGBAModel.Convert(img.At(p.x, p.y)).(color.RGBA); got != p.want {
			t.Errorf("pixel (%d,%d) is %v, want %v", p.x, p.y, got, p.want)
		}
	}
	if got := res.Response.Result.Blocked; len(got) != 1 || got[0] != "http://elsewhere.test/x.png (refused: host)" {
		t.Errorf("blocked %q, want the other host's image with its reason", got)
	}

	plan.Job.Broker = nil
	plan.Job.Input = bytes.NewReader([]byte("http://page.test/"))
	_, err = m.Run(context.Background(), plan.Job)
	if sandbox.OutcomeOf(err) != sandbox.RenderFailed || !strings.Contains(err.Error(), "-remote-content") {
		t.Errorf("without a broker: %v, want render_failed naming -remote-content", err)
	}
}
