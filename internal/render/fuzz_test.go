package render

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/wire"
	"github.com/renderbox/renderbox/internal/zipdir"
)

// An option decoded is an option known, read as encoding/json reads it.
func FuzzDecodeOptions(f *testing.F) {
	for _, s := range []string{`{"dpi": 72, "format": "jpeg"}`, `null`, ``, `{"dpi":72,"dpi":73}`, `{"zz":1,"aa":2}`, `[1]`, `{"dpi":{"a":[1,2,{"b":null}]}}`, `{} {}`, `{"first_page":1e400}`} {
		f.Add([]byte(s))
	}
	r, _ := Lookup("pdf-png")
	f.Fuzz(func(t *testing.T, raw []byte) {
		opts, err := r.DecodeOptions(raw)
		if err != nil {
			if len(err.Error()) > 1024 {
				t.Fatalf("a %d-byte error", len(err.Error()))
			}
			return
		}
		var want map[string]any
		if len(bytes.TrimSpace(raw)) > 0 {
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatalf("accepted %q, which encoding/json refuses: %v", raw, err)
			}
		}
		for k, v := range opts {
			if r.option(k) == nil {
				t.Fatalf("accepted unknown option %q", k)
			}
			a, _ := json.Marshal(v)
			b, _ := json.Marshal(want[k])
			if !bytes.Equal(a, b) {
				t.Fatalf("option %s = %s, encoding/json read %s", k, a, b)
			}
		}
	})
}

// Decoded limits are positive, and what is queued (their JSON) decodes to
// the same limits.
func FuzzDecodeLimits(f *testing.F) {
	for _, s := range []string{`{"timeout_seconds": 5}`, `{"timeout_seconds": 1e-10}`, `{"memory_bytes": 268435456, "max_pages": 2}`, `{"max_pixels": null}`, `{"timeout_seconds":5,"timeout_seconds":5}`, `{"max_pages": 1.5}`, `{"nope": 1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		lim, err := DecodeLimits(raw)
		if err != nil {
			return
		}
		if lim.TimeoutSeconds < 0 || lim.MemoryBytes < 0 || lim.MaxOutputBytes < 0 || lim.MaxPages < 0 || lim.MaxPixels < 0 {
			t.Fatalf("accepted %+v", lim)
		}
		queued, _ := json.Marshal(lim)
		again, err := DecodeLimits(queued)
		if err != nil || again != lim {
			t.Fatalf("queued %s decodes to %+v (%v), want %+v", queued, again, err, lim)
		}
	})
}

// The sniffer reads any bytes without panicking; a ZIP's directory is
// walked within the caps, and names only ever point inside the input.
func FuzzSniff(f *testing.F) {
	for _, s := range [][]byte{
		samples.PDF("a", 1), samples.SVG(2, 2, 0, 0, 1), samples.DOT("a", "b"), samples.DOCX("a"), samples.XLSX("a"),
		samples.ODT("a"), samples.PNGHeader(3, 3), samples.ZipDirectory(20, 20), samples.ZipDirectory(10_001, 1),
		samples.OLE("WordDocument"), samples.FODT("a"), samples.ODG("a"), samples.ZipUnderstated(samples.DOCX("a")),
		[]byte("II*\x00\x08\x00\x00\x00"), []byte("PK\x03\x04PK\x05\x06\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := sniff(in)
		if got == "" || Sniff(in) != got {
			t.Fatalf("sniff = %q, Sniff = %q", got, Sniff(in))
		}
		if err != nil && got != TypeZIP {
			t.Fatalf("refused a %s: %v", got, err)
		}
		n := 0
		_ = zipNames(in, func(name []byte) { n++ })
		if n > zipdir.MaxEntries {
			t.Fatalf("walked %d entries, over the cap", n)
		}
	})
}

// A ZIP directory over the caps is refused without walking it, one that
// disagrees with its end record (a count or a size other than the
// directory's) is refused whole, and the walk allocates nothing per entry.
func FuzzZipDirectory(f *testing.F) {
	f.Add(uint32(3), uint64(3), uint16(0), uint32(0))
	f.Add(uint32(1500), uint64(1500), uint16(0), uint32(0)) // walked whole
	f.Add(uint32(10_001), uint64(1), uint16(5), uint32(0))
	f.Add(uint32(11_000), uint64(0xffff+3), uint16(0), uint32(0))
	// The directory disagrees with its end record: 1501 entries stated as
	// 1, or in the size of one (archive/zip reads on past it), or as a
	// count equal modulo 65536 (all archive/zip compares) in ZIP64 form.
	f.Add(uint32(1501), uint64(1), uint16(0), uint32(0))
	f.Add(uint32(1501), uint64(1501), uint16(0), uint32(1500*47))
	f.Add(uint32(1501), uint64(0x10000+1501), uint16(0), uint32(0))
	f.Fuzz(func(t *testing.T, entries uint32, stated uint64, cut uint16, short uint32) {
		e := int(entries % 12_000)
		z := samples.ZipDirectoryShort(e, stated, uint64(short))
		z = z[:len(z)-int(cut)%min(len(z), 64)]
		n := 0
		err := zipNames(z, func([]byte) { n++ })
		if n > zipdir.MaxEntries || (err == nil && (n != e || stated != uint64(e) || (short != 0 && e > 0))) {
			t.Fatalf("%d entries stated as %d, the size %d bytes short, cut by %d: walked %d (%v)", e, stated, short, cut, n, err)
		}
		// Malloc counts are the whole process's: the fuzzing engine
		// allocates beside the walk (17 once, walking 0 entries), and so
		// does any goroutine an earlier test left (84 on average once, in
		// CI's race tier). The least of five averages is the walk's; one
		// allocation per entry would show in every one of them.
		a := math.Inf(1)
		for range 5 {
			a = min(a, testing.AllocsPerRun(10, func() { _ = zipNames(z, func([]byte) {}) }))
		}
		if a > 16 {
			t.Fatalf("walking %d entries made %.0f allocations", n, a)
		}
	})
}

// Image headers are read within the input and a bounded amount of memory.
func FuzzImageHeader(f *testing.F) {
	for _, s := range [][]byte{samples.PNGHeader(100000, 100000), samples.PNG(samples.Image(4, 4, 0, 0, 1)), samples.JPEG(samples.Image(4, 4, 0, 0, 1)),
		samples.GIF(samples.Image(4, 4, 0, 0, 1)), samples.TIFF(samples.Image(4, 4, 0, 0, 1)), []byte("RIFF\x00\x00\x00\x00WEBPVP8X")} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		w, h, err := imageSize(in)
		runtime.ReadMemStats(&after)
		if err == nil && (w < 0 || h < 0) {
			t.Fatalf("%d×%d", w, h)
		}
		if a := after.TotalAlloc - before.TotalAlloc; a > 4<<20+4*uint64(len(in)) {
			t.Fatalf("reading a %d-byte header allocated %d bytes", len(in), a)
		}
	})
}

// A site archive's directory is judged without a panic, an entry point it
// returns is a site path the archive lists, and an archive it accepts is
// one archive/zip (the sandbox's unpacker) reads entry for entry as the
// host did, or not at all.
func FuzzSiteArchive(f *testing.F) {
	f.Add(samples.Report([]byte("font")).Zip(), "")
	f.Add(samples.Site{Files: map[string][]byte{"a/b.html": []byte("x")}, Order: []string{"a/b.html"}}.Zip(), "a/b.html")
	f.Add(samples.ZipDirectory(3, 3), "index.html")
	// The directory disagrees with its end record: one index.html to a
	// reader that stops at the stated size, 1501 files to archive/zip.
	f.Add(samples.ZipUnderstated(samples.Crowd(1501).Zip()), "")
	f.Add(samples.ZipUnderstated(samples.Crowd(3).Zip()), "index.html")
	f.Add(append([]byte("MZ stub"), samples.Crowd(3).Zip()...), "")
	f.Fuzz(func(t *testing.T, z []byte, entry string) {
		got, err := htmlSite.check(z, entry, nil)
		if err != nil {
			return
		}
		if !wire.ValidSitePath(got) {
			t.Fatalf("entry %q is not a site path", got)
		}
		var names []string
		_ = zipNames(z, func(n []byte) { names = append(names, string(n)) })
		if !slices.Contains(names, got) {
			t.Fatalf("entry %q is not in the archive", got)
		}
		zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
		if err != nil {
			return
		}
		if len(zr.File) != len(names) {
			t.Fatalf("the host read %d entries, archive/zip %d", len(names), len(zr.File))
		}
		for i, f := range zr.File {
			if f.Name != names[i] {
				t.Fatalf("entry %d: the host read %q, archive/zip %q", i, names[i], f.Name)
			}
		}
	})
}
