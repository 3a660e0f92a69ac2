//go:build !unit

package render_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// randomPage prints what a page can draw at random: Math.random in the
// page (its first draws), in an iframe and in a worker, and
// crypto.randomUUID.
var randomPage = []byte(`<!doctype html><html><body><pre id="o">waiting</pre>
<iframe srcdoc="<script>parent.frameDraws = [Math.random(), Math.random(), Math.random()].map(x => x.toFixed(15)).join(' ')</script>"></iframe>
<script>
const draws = () => [Math.random(), Math.random(), Math.random()].map(x => x.toFixed(15)).join(' ');
const page = draws();
const uuid = crypto.randomUUID();
window.done = false;
let worker = "none";
function finish() {
  document.getElementById("o").textContent = "PAGE " + page + "\nFRAME " + window.frameDraws + "\nWORKER " + worker + "\nUUID " + uuid + "\nEND";
  window.done = true;
}
try {
  const src = "postMessage([Math.random(), Math.random(), Math.random()].map(x => x.toFixed(15)).join(' '))";
  const w = new Worker(URL.createObjectURL(new Blob([src], {type: "text/javascript"})));
  w.onmessage = e => { worker = e.data; finish(); };
  w.onerror = e => { worker = "error " + e.message; finish(); };
} catch (e) { worker = "threw " + e; finish(); }
</script></body></html>`)

var pdfID = regexp.MustCompile(`/ID\s*\[\s*<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>\s*\]`)

// seenOnce records values by what they are and fails on a repeat.
type seenOnce map[string]int

func (s seenOnce) add(t *testing.T, job int, what, v string) {
	t.Helper()
	if v == "" || strings.Contains(v, "undefined") || strings.Contains(v, "none") || strings.Contains(v, "error") {
		t.Fatalf("job %d: no %s: %q", job, what, v)
	}
	k := what + " " + v
	if prev, ok := s[k]; ok {
		t.Errorf("job %d repeats job %d's %s: %s", job, prev, what, v)
	}
	s[k] = job
}

// Nothing a document can observe at random repeats across jobs whose
// sandboxes were restored from one checkpoint image: not Math.random (in
// the page, an iframe and a worker, from the first draw), not
// crypto.randomUUID, not the PDF's /ID. Every restored copy starts with
// the memory its image saved, V8's random state included.
func TestRestoredChromiumDrawsFreshRandomness(t *testing.T) {
	const jobs = 8
	m := testenv.Manager(t, sandbox.Config{})
	p := oneImagePool(t, m, render.FamilyChromium)
	opts := map[string]any{"javascript": true, "wait_for_expression": "window.done === true", "wait_timeout": 20}
	seen := seenOnce{}
	for i := range jobs {
		waitIdle(t, p, render.FamilyChromium, 1, 3*time.Minute)
		out, _ := renderIn(t, m, p, "html-pdf", randomPage, opts, sandbox.ModeRestored)
		pdf := out["output.pdf"]
		text := pdfText(t, m, pdf)
		for _, what := range []string{"PAGE", "FRAME", "WORKER", "UUID"} {
			_, v, ok := strings.Cut(text, what+" ")
			if !ok {
				t.Fatalf("job %d: the page printed no %s: %q", i, what, text)
			}
			v, _, _ = strings.Cut(v, "\n")
			seen.add(t, i, what, strings.TrimSpace(v))
		}
		// Chromium's PDFs carry no /ID and no XMP today; any they carry
		// must be fresh.
		for _, id := range pdfIDs(pdf) {
			seen.add(t, i, "PDF id", id)
		}
		t.Logf("job %d: %s; ids in the PDF: %q", i, strings.Join(strings.Fields(text), " "), pdfIDs(pdf))
	}
}

// LibreOffice restored from one image writes a fresh /ID into every PDF.
func TestRestoredOfficeWritesFreshIDs(t *testing.T) {
	const jobs = 8
	m := testenv.Manager(t, sandbox.Config{})
	p := oneImagePool(t, m, render.FamilyOffice)
	seen := seenOnce{}
	for i := range jobs {
		waitIdle(t, p, render.FamilyOffice, 1, 3*time.Minute)
		out, _ := renderIn(t, m, p, "office-pdf", samples.DOCX("Entropy", "the same document every time"), nil, sandbox.ModeRestored)
		ids := pdfIDs(out["output.pdf"])
		if len(ids) == 0 {
			t.Fatalf("job %d: LibreOffice's PDF has no /ID", i)
		}
		for _, id := range ids {
			seen.add(t, i, "PDF id", id)
		}
	}
}

// pdfIDs returns the ids a PDF carries: its trailer's /ID pair and XMP's
// DocumentID and InstanceID (as attributes or elements).
func pdfIDs(pdf []byte) []string {
	var ids []string
	for _, m := range pdfID.FindAllSubmatch(pdf, -1) {
		ids = append(ids, "/ID "+string(m[1])+" "+string(m[2]))
	}
	for _, m := range xmpID.FindAllSubmatch(pdf, -1) {
		ids = append(ids, string(m[1])+" "+string(m[2])+string(m[3]))
	}
	return ids
}

var xmpID = regexp.MustCompile(`xmpMM:(DocumentID|InstanceID)(?:="([^"]*)"|>([^<]*)<)`)

// oneImagePool is a pool of one restored sandbox of the family whose
// every restore comes from one checkpoint image; the test fails at its
// end if the pool made another.
func oneImagePool(t *testing.T, m *sandbox.Manager, name string) *sandbox.Pool {
	fam := family(t, name)
	fam.Size, fam.Restore = 1, true
	fam.Images, fam.ImageMaxRestores = 1, 100
	var n atomic.Int32
	p := testenv.PoolWithEvents(t, m, func(e sandbox.PoolEvent) {
		if e.Kind == "image" {
			n.Add(1)
		}
	}, fam)
	t.Cleanup(func() {
		if n := n.Load(); n != 1 {
			t.Errorf("the jobs' sandboxes came from %d images, want 1", n)
		}
	})
	return p
}

// family is the catalogue's pool family name.
func family(t *testing.T, name string) sandbox.PoolFamily {
	t.Helper()
	for _, f := range render.PoolFamilies() {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("no pool family %q", name)
	return sandbox.PoolFamily{}
}

// What each checkpoint image costs, for choosing the pool's defaults
// (docs/security.md, "What restored sandboxes share"): the time and the
// host's CPU to make one (boot, TemplateWait, checkpoint), its size on
// disk, and a restore from two images in rotation against from one. The
// pool keeps at most Images images and each serves at most
// ImageMaxRestores restores.
func TestCheckpointImageCosts(t *testing.T) {
	for _, name := range []string{render.FamilyChromium, render.FamilyOffice} {
		t.Run(name, func(t *testing.T) {
			m := testenv.Manager(t, sandbox.Config{})
			for _, images := range []int{1, 2} {
				t.Run(strconv.Itoa(images), func(t *testing.T) { imageCosts(t, m, name, images) })
			}
		})
	}
}

func imageCosts(t *testing.T, m *sandbox.Manager, name string, images int) {
	const restores, perImage = 8, 3
	cpu := startCPUMeter()
	var mu sync.Mutex
	var made, restored []time.Duration
	var busy []float64
	justMade := false
	fam := family(t, name)
	fam.Size, fam.Restore, fam.Images, fam.ImageMaxRestores = 1, true, images, perImage
	fam.Settle = 0
	p := testenv.PoolWithEvents(t, m, func(e sandbox.PoolEvent) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Kind == "image":
			made = append(made, e.Duration)
			busy = append(busy, cpu.since(time.Now().Add(-e.Duration)))
			justMade = true
		case e.Kind == "fill" && e.Mode == sandbox.ModeRestored:
			// A fill that made its image first counts it too.
			if !justMade {
				restored = append(restored, e.Duration)
			}
			justMade = false
		}
	}, fam)
	var disk []int64
	for i := range restores {
		waitIdle(t, p, name, 1, 3*time.Minute)
		dirs, _ := filepath.Glob(filepath.Join(m.Config().StateDir, "images", name+"-*"))
		if len(dirs) > images {
			t.Fatalf("%d images on disk, want at most %d", len(dirs), images)
		}
		for _, d := range dirs {
			disk = append(disk, duBytes(t, d))
		}
		sb, _ := p.Take(context.Background(), name, fam.Limits)
		if sb == nil {
			t.Fatalf("restore %d: nothing to take", i)
		}
		_ = sb.Destroy(context.Background())
	}
	waitIdle(t, p, name, 1, 3*time.Minute)
	cpu.stop()
	mu.Lock()
	t.Logf("%s, %d image(s) of at most %d restores: %d images made in %v, host CPU-s %.1f; on disk %s MiB each; restores %v (median %v)",
		name, images, perImage, len(made), made, busy, mib(disk), restored, median(restored))
	mu.Unlock()
	if want := (restores + 1 + perImage - 1) / perImage; len(made) < want {
		t.Errorf("%d images made for %d restores of at most %d each, want at least %d", len(made), restores+1, perImage, want)
	}
}

// cpuMeter samples the host's busy CPU time (/proc/stat) every 50 ms.
type cpuMeter struct {
	mu      sync.Mutex
	samples []cpuSample
	done    chan struct{}
}

type cpuSample struct {
	at   time.Time
	busy float64 // CPU-seconds
}

func startCPUMeter() *cpuMeter {
	c := &cpuMeter{done: make(chan struct{})}
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if b, ok := hostBusy(); ok {
				c.mu.Lock()
				c.samples = append(c.samples, cpuSample{time.Now(), b})
				c.mu.Unlock()
			}
			select {
			case <-c.done:
				return
			case <-tick.C:
			}
		}
	}()
	return c
}

func (c *cpuMeter) stop() { close(c.done) }

// since returns the CPU-seconds the host spent from t to now.
func (c *cpuMeter) since(t time.Time) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.samples) == 0 {
		return 0
	}
	i, _ := slices.BinarySearchFunc(c.samples, t, func(s cpuSample, t time.Time) int { return s.at.Compare(t) })
	i = min(i, len(c.samples)-1)
	b, _ := hostBusy()
	return b - c.samples[i].busy
}

// hostBusy is the CPU time the host has spent not idle, in seconds.
func hostBusy() (float64, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
	var busy float64
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy / 100, true // USER_HZ
}

func duBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if st, err := os.Stat(path); err == nil {
				n += st.Sys().(*syscall.Stat_t).Blocks * 512
			}
		}
		return nil
	})
	return n
}

func mib(ns []int64) string {
	slices.Sort(ns)
	ns = slices.Compact(ns)
	var s []string
	for _, n := range ns {
		s = append(s, strconv.FormatInt(n>>20, 10))
	}
	return strings.Join(s, "/")
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2].Round(time.Millisecond)
}
