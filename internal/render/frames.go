package render

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/renderbox/renderbox/internal/wire"
)

// safe-pdf's frames never sit in the worker's heap: the pixel stage's
// response writes them, as they arrive, to a frameSpool, which checks each
// one and writes it anew (its own header, then the pixel bytes) into the
// rebuild's ZIP, a spill file of the host's; the rebuild's input is read
// from that file. Up to 200 MiB of frames cost the heap a few buffers
// (docs/security.md, "Worker memory").

// maxFrameHeader is the longest header parseFrameHeader accepts,
// "P6\n99999 99999\n255\n".
const maxFrameHeader = len("P6\n99999 99999\n255\n")

// frameSpool is the pixel stage's wire.Spool. A write to it never fails:
// what it finds wrong with a frame, and its own failures, wait for the
// whole response (finish), so that the worker tells a bad frame
// (render_failed) from the host's trouble. It is safe for the goroutine
// reading a response and the one that ends the job.
type frameSpool struct {
	gray      bool
	maxPixels int64

	mu sync.Mutex
	// gen counts responses (Start): a writer of an earlier one writes
	// nothing more.
	gen   int
	pages []*spooledPage // in the order received
	seen  map[int]bool
	// f is the ZIP, unlinked from its private directory as soon as it is
	// made; nil until the first good frame.
	f  *os.File
	zw *zip.Writer
	// err is the host's own failure to spill.
	err error
}

// spooledPage is what the spool saw of one file.
type spooledPage struct {
	name  string
	n     int  // its page number; 0 when its name is not page-N.ext
	twice bool // a page number an earlier file had
	w, h  int
	err   error // what is wrong with the frame
}

func newFrameSpool(gray bool, maxPixels int64) *frameSpool {
	return &frameSpool{gray: gray, maxPixels: maxPixels}
}

// Start forgets an earlier response: the stage runs again.
func (sp *frameSpool) Start() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.closeLocked()
	sp.gen++
	sp.pages, sp.seen, sp.err = nil, map[int]bool{}, nil
}

func (sp *frameSpool) ext() string {
	if sp.gray {
		return "pgm"
	}
	return "ppm"
}

// File takes a frame named page-N.ppm (.pgm with grayscale); the bytes of
// any other file, or of a page number already seen, are dropped.
func (sp *frameSpool) File(name string, size int64) io.Writer {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	pg := &spooledPage{name: name}
	sp.pages = append(sp.pages, pg)
	if sp.seen == nil {
		sp.seen = map[int]bool{}
	}
	m := safePDFFrameRe.FindStringSubmatch(name)
	if m == nil || m[2] != sp.ext() {
		return io.Discard
	}
	pg.n, _ = strconv.Atoi(m[1])
	if sp.seen[pg.n] {
		pg.twice = true
		return io.Discard
	}
	sp.seen[pg.n] = true
	w := &frameWriter{sp: sp, gen: sp.gen, pg: pg, size: size}
	if size == 0 {
		w.beginLocked()
	}
	return w
}

// frameWriter checks one frame's header once it has it, then copies the
// pixel bytes behind the host's own header into the frame's ZIP entry.
type frameWriter struct {
	sp   *frameSpool
	gen  int
	pg   *spooledPage
	size int64
	head []byte    // the first bytes, until the header is read
	out  io.Writer // nil until then
}

func (w *frameWriter) Write(b []byte) (int, error) {
	n := len(b)
	w.sp.mu.Lock()
	defer w.sp.mu.Unlock()
	if w.gen != w.sp.gen {
		return n, nil
	}
	if w.out == nil {
		want := int(min(w.size, int64(maxFrameHeader)))
		k := min(len(b), want-len(w.head))
		w.head, b = append(w.head, b[:k]...), b[k:]
		if len(w.head) < want {
			return n, nil
		}
		w.beginLocked()
	}
	w.writeLocked(b)
	return n, nil
}

// beginLocked checks the header and opens the frame's entry.
func (w *frameWriter) beginLocked() {
	w.out = io.Discard
	fw, fh, hlen, err := parseFrameHeader(w.head, w.sp.gray, w.sp.maxPixels)
	if err == nil {
		ch := 3
		if w.sp.gray {
			ch = 1
		}
		if want := int64(fw) * int64(fh) * int64(ch); w.size-int64(hlen) != want {
			err = fmt.Errorf("it announces %d×%d×%d = %d bytes of pixels and holds %d", fw, fh, ch, want, w.size-int64(hlen))
		}
	}
	if err != nil {
		w.pg.err = err
		return
	}
	w.pg.w, w.pg.h = fw, fh
	entry, err := w.sp.entryLocked(w.pg)
	if err != nil {
		w.sp.err = err
		return
	}
	w.out = entry
	w.writeLocked(w.head[hlen:])
	w.head = nil
}

func (w *frameWriter) writeLocked(b []byte) {
	if len(b) == 0 {
		return
	}
	if _, err := w.out.Write(b); err != nil {
		if w.sp.err == nil {
			w.sp.err = err
		}
		w.out = io.Discard
	}
}

// entryLocked starts page pg's entry in the ZIP, making the spill file
// first: in a private directory (0700) of the worker's temporary
// directory, 0600, and unlinked at once, so that no path names it and its
// space comes back when it is closed, even when the worker dies.
func (sp *frameSpool) entryLocked(pg *spooledPage) (io.Writer, error) {
	if sp.err != nil {
		return nil, sp.err
	}
	if sp.f == nil {
		dir, err := os.MkdirTemp("", "renderbox-frames-")
		if err != nil {
			return nil, fmt.Errorf("making the frames' directory: %w", err)
		}
		defer os.Remove(dir)
		f, err := os.CreateTemp(dir, "pages-*.zip")
		if err != nil {
			return nil, fmt.Errorf("making the frames' file: %w", err)
		}
		if err := os.Remove(f.Name()); err != nil {
			f.Close()
			return nil, fmt.Errorf("unlinking the frames' file: %w", err)
		}
		sp.f, sp.zw = f, zip.NewWriter(f)
	}
	magic := "P6"
	if sp.gray {
		magic = "P5"
	}
	w, err := sp.zw.CreateHeader(&zip.FileHeader{Name: frameName(pg.n, sp.ext()), Method: zip.Store})
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(w, "%s\n%d %d\n255\n", magic, pg.w, pg.h); err != nil {
		return nil, err
	}
	return w, nil
}

// frameName is page n's name in the ZIP.
func frameName(n int, ext string) string { return fmt.Sprintf("page-%04d.%s", n, ext) }

// finish checks what the pixel stage returned (files, the response's list,
// whose bytes went to the spool): page-1 … page-N, each a frame, N at most
// maxPages. Then it ends the ZIP with the page lists Tesseract reads,
// pages.txt (the frames) and jpeg.txt (the JPEG files jpegPaths names),
// and returns it, its size and the frames' paths in the rebuild, in page
// order. A fault of the frames wraps ErrBadOutput; the host's own does not.
func (sp *frameSpool) finish(files []wire.File, maxPages int) (io.ReaderAt, int64, []string, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if len(files) != len(sp.pages) {
		return nil, 0, nil, fmt.Errorf("the host's spool holds %d of the pixel stage's %d files", len(sp.pages), len(files))
	}
	for i, f := range files {
		if f.Data != nil || f.Name != sp.pages[i].name {
			return nil, 0, nil, fmt.Errorf("the pixel stage's file %q did not go to the host's spool", f.Name)
		}
	}
	if len(sp.pages) == 0 {
		return nil, 0, nil, fmt.Errorf("%w: the pixel stage returned no page", ErrBadOutput)
	}
	if len(sp.pages) > maxPages {
		return nil, 0, nil, fmt.Errorf("%w: the document has more pages than max_pages, %d", ErrBadOutput, maxPages)
	}
	for _, pg := range sp.pages {
		switch {
		case pg.n == 0:
			return nil, 0, nil, fmt.Errorf("%w: the pixel stage returned %q; it makes page-N.%s only", ErrBadOutput, pg.name, sp.ext())
		case pg.n > len(sp.pages) || pg.twice:
			return nil, 0, nil, fmt.Errorf("%w: the pixel stage returned %q among %d pages: the pages must be numbered 1 to %d, once each", ErrBadOutput, pg.name, len(sp.pages), len(sp.pages))
		case pg.err != nil:
			return nil, 0, nil, fmt.Errorf("%w: page %d: %v", ErrBadOutput, pg.n, pg.err)
		}
	}
	if sp.err != nil {
		return nil, 0, nil, fmt.Errorf("spilling the frames: %w", sp.err)
	}
	var paths []string
	for n := 1; n <= len(sp.pages); n++ {
		paths = append(paths, siteDir+"/"+frameName(n, sp.ext()))
	}
	for _, l := range []struct {
		name  string
		paths []string
	}{{"pages.txt", paths}, {"jpeg.txt", jpegPaths(len(paths))}} {
		w, err := sp.zw.CreateHeader(&zip.FileHeader{Name: l.name, Method: zip.Store})
		if err == nil {
			_, err = io.WriteString(w, strings.Join(l.paths, "\n")+"\n")
		}
		if err != nil {
			return nil, 0, nil, fmt.Errorf("spilling the frames: %w", err)
		}
	}
	if err := sp.zw.Close(); err != nil {
		return nil, 0, nil, fmt.Errorf("spilling the frames: %w", err)
	}
	st, err := sp.f.Stat()
	if err != nil {
		return nil, 0, nil, fmt.Errorf("spilling the frames: %w", err)
	}
	return sp.f, st.Size(), paths, nil
}

// close drops the spill file.
func (sp *frameSpool) close() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.closeLocked()
}

func (sp *frameSpool) closeLocked() {
	if sp.f != nil {
		sp.f.Close()
		sp.f, sp.zw = nil, nil
	}
}

// parseFrameHeader reads a netpbm header as pdftoppm writes it from b, the
// frame's first bytes: "P6\n<w> <h>\n255\n" (P5 for gray), no comment, no
// other maxval, and the frame within the limits. It returns the size and
// the header's length; the caller checks the pixel bytes that follow.
func parseFrameHeader(b []byte, gray bool, maxPixels int64) (w, h, n int, err error) {
	magic := "P6\n"
	if gray {
		magic = "P5\n"
	}
	if !bytes.HasPrefix(b, []byte(magic)) {
		return 0, 0, 0, fmt.Errorf("it does not begin %q", magic)
	}
	rest := b[len(magic):]
	num := func(end byte) (int, error) {
		i := bytes.IndexByte(rest, end)
		if i < 1 || i > 5 || rest[0] == '0' {
			return 0, fmt.Errorf("a size is not a number of 1 to 5 digits followed by %q", end)
		}
		n := 0
		for _, c := range rest[:i] {
			if c < '0' || c > '9' {
				return 0, fmt.Errorf("a size is not a number")
			}
			n = n*10 + int(c-'0')
		}
		rest = rest[i+1:]
		return n, nil
	}
	if w, err = num(' '); err != nil {
		return 0, 0, 0, err
	}
	if h, err = num('\n'); err != nil {
		return 0, 0, 0, err
	}
	if !bytes.HasPrefix(rest, []byte("255\n")) {
		return 0, 0, 0, fmt.Errorf("its maxval is not 255")
	}
	rest = rest[len("255\n"):]
	if w > safePDFMaxSide || h > safePDFMaxSide || int64(w)*int64(h) > maxPixels {
		return 0, 0, 0, fmt.Errorf("it is %d×%d pixels, over the limit of %d pixels (max_pixels; lower dpi) or %d a side", w, h, maxPixels, safePDFMaxSide)
	}
	return w, h, len(b) - len(rest), nil
}
