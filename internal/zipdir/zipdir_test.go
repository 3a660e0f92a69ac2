package zipdir_test

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/renderbox/renderbox/internal/samples"
	"github.com/renderbox/renderbox/internal/zipdir"
)

var le = binary.LittleEndian

// endAt is where z's end record begins.
func endAt(z []byte) int { return bytes.LastIndex(z, []byte("PK\x05\x06")) }

// patched is a copy of z with edit applied to its end record.
func patched(z []byte, edit func(end []byte)) []byte {
	z = bytes.Clone(z)
	edit(z[endAt(z):])
	return z
}

// asZip64 is z (a ZIP without ZIP64 records) in ZIP64 form: a ZIP64 end
// record and its locator before the end record, whose fields say
// "in the ZIP64 record"; edit, if set, changes the ZIP64 record.
func asZip64(z []byte, edit func(rec []byte)) []byte {
	i := endAt(z)
	end := z[i:]
	rec := make([]byte, 56)
	le.PutUint32(rec, 0x06064b50)
	le.PutUint64(rec[4:], 44)
	le.PutUint16(rec[12:], 45)
	le.PutUint16(rec[14:], 45)
	le.PutUint64(rec[24:], uint64(le.Uint16(end[8:])))
	le.PutUint64(rec[32:], uint64(le.Uint16(end[10:])))
	le.PutUint64(rec[40:], uint64(le.Uint32(end[12:])))
	le.PutUint64(rec[48:], uint64(le.Uint32(end[16:])))
	if edit != nil {
		edit(rec)
	}
	loc := make([]byte, 20)
	le.PutUint32(loc, 0x07064b50)
	le.PutUint64(loc[8:], uint64(i))
	le.PutUint32(loc[16:], 1)
	out := append(append(append(bytes.Clone(z[:i]), rec...), loc...), end...)
	e := out[len(out)-len(end):]
	le.PutUint16(e[8:], 0xffff)
	le.PutUint16(e[10:], 0xffff)
	le.PutUint32(e[12:], 0xffffffff)
	le.PutUint32(e[16:], 0xffffffff)
	return out
}

// walked is the names Walk gives, in order.
func walked(z []byte) ([]string, error) {
	var names []string
	err := zipdir.Walk(z, func(e *zipdir.Entry) error {
		names = append(names, string(e.Name))
		return nil
	})
	return names, err
}

// goReads is the names archive/zip reads, in order.
func goReads(z []byte) ([]string, error) {
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	return names, nil
}

// Archives as zip tools write them are read, and as archive/zip reads
// them: the same entries in the same order.
func TestWalkReadsWhatArchiveZipReads(t *testing.T) {
	t.Parallel()
	var commented bytes.Buffer
	zw := zip.NewWriter(&commented)
	_, _ = zw.Create("a.html")
	_ = zw.SetComment("made by hand; PK")
	_ = zw.Close()
	var empty bytes.Buffer
	_ = zip.NewWriter(&empty).Close()
	crowd := samples.Crowd(1501).Zip()
	for name, z := range map[string][]byte{
		"1501 files":             crowd,
		"a report":               samples.Report([]byte("font")).Zip(),
		"a docx":                 samples.DOCX("a"),
		"a comment":              commented.Bytes(),
		"no entries":             empty.Bytes(),
		"ZIP64 form":             asZip64(samples.Crowd(3).Zip(), nil),
		"ZIP64 form, 1501 files": asZip64(crowd, nil),
		"a directory of 20":      samples.ZipDirectory(20, 20),
	} {
		got, err := walked(z)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		want, err := goReads(z)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: walked %d entries, archive/zip read %d (%v)", name, len(got), len(want), err)
		}
	}
}

// A directory that disagrees with its end records is refused whole, fn
// never called: archive/zip would read it otherwise than the end record
// says (on past its size, from another offset), or not at all.
func TestDisagreeingDirectoriesAreRefused(t *testing.T) {
	t.Parallel()
	three := samples.Crowd(3).Zip()
	crowd := samples.Crowd(1501).Zip()
	setCount := func(n uint16) func([]byte) { return func(e []byte) { le.PutUint16(e[8:], n); le.PutUint16(e[10:], n) } }
	addSize := func(d int32) func([]byte) {
		return func(e []byte) { le.PutUint32(e[12:], uint32(int32(le.Uint32(e[12:]))+d)) }
	}
	// gap has n bytes of zeros between the directory and the end record,
	// counted in the stated size.
	gap := func(z []byte, n int) []byte {
		i := endAt(z)
		out := append(append(bytes.Clone(z[:i]), make([]byte, n)...), z[i:]...)
		return patched(out, addSize(int32(n)))
	}
	for _, tc := range []struct {
		name string
		zip  []byte
		kind error
		says string
	}{
		{"1501 entries stated in the size of one", samples.ZipUnderstated(crowd), zipdir.ErrDisagrees, "directory is 56 bytes"},
		{"3 entries stated as 1", patched(three, setCount(1)), zipdir.ErrDisagrees, "says 1 entries, but its directory holds 3"},
		{"3 entries stated as 5", patched(three, setCount(5)), zipdir.ErrDisagrees, "says 5 entries"},
		{"a size stated 10 bytes over", patched(three, addSize(10)), zipdir.ErrDisagrees, "end records begin"},
		{"bytes between the directory and the end record", gap(three, 12), zipdir.ErrDisagrees, "holds 3 entries and then 12 bytes"},
		{"data before the archive", append([]byte("MZ stub"), three...), zipdir.ErrDisagrees, "end records begin"},
		{"bytes after the end record", append(bytes.Clone(three), "tail"...), zipdir.ErrDisagrees, "a 0-byte comment follows it, but 4 bytes do"},
		{"a comment longer than the file", patched(three, func(e []byte) { le.PutUint16(e[20:], 9) }), zipdir.ErrDisagrees, "9-byte comment"},
		{"ZIP64: 3 entries stated as 1", asZip64(three, func(r []byte) { le.PutUint64(r[32:], 1) }), zipdir.ErrDisagrees, "says 1 entries"},
		{"ZIP64: the end record's size against the ZIP64 record's", patched(asZip64(three, nil), func(e []byte) { le.PutUint32(e[12:], 10) }), zipdir.ErrDisagrees, "says directory size 10, its ZIP64 end record"},
		{"ZIP64: the size of one entry", asZip64(crowd, func(r []byte) { le.PutUint64(r[40:], 56) }), zipdir.ErrDisagrees, "directory is 56 bytes"},
		{"ZIP64: an offset one byte on", asZip64(three, func(r []byte) { le.PutUint64(r[48:], le.Uint64(r[48:])+1) }), zipdir.ErrDisagrees, "end records begin"},
		{"ZIP64: the end record's count against the ZIP64 record's", patched(asZip64(three, nil), setCount(2)), zipdir.ErrDisagrees, "says entries 2, its ZIP64 end record 3"},
		{"ZIP64: a record longer than it says", asZip64(three, func(r []byte) { le.PutUint64(r[4:], 40) }), zipdir.ErrDisagrees, "is 52 bytes long"},
		{"ZIP64: a locator pointing nowhere", func() []byte {
			z := asZip64(three, nil)
			le.PutUint64(z[endAt(z)-12:], 3)
			return z
		}(), zipdir.ErrNotZip, "points at no ZIP64 end record"},
		{"ZIP64: several disks", func() []byte {
			z := asZip64(three, nil)
			le.PutUint32(z[endAt(z)-4:], 2)
			return z
		}(), zipdir.ErrNotZip, "several disks"},
		{"no end record", three[:len(three)-22], zipdir.ErrNotZip, "no end of central directory record"},
		{"10001 entries stated as 1", samples.ZipDirectory(zipdir.MaxEntries+1, 1), zipdir.ErrTooLarge, "more than 10000 entries"},
		{"10001 entries stated as 10001", samples.ZipDirectory(zipdir.MaxEntries+1, zipdir.MaxEntries+1), zipdir.ErrTooLarge, "lists 10001 entries"},
		{"a 4.7 MB directory", samples.ZipDirectory(100_000, 5), zipdir.ErrTooLarge, "4700000 bytes"},
		{"20 entries, the size 47 short", samples.ZipDirectoryShort(20, 20, 47), zipdir.ErrDisagrees, "end records begin"},
	} {
		calls := 0
		err := zipdir.Walk(tc.zip, func(*zipdir.Entry) error { calls++; return nil })
		var ref *zipdir.Refusal
		if !errors.As(err, &ref) || !errors.Is(err, tc.kind) || !bytes.Contains([]byte(err.Error()), []byte(tc.says)) || calls != 0 {
			t.Errorf("%s: %v after %d entries; want a %v refusal saying %q, before any entry", tc.name, err, calls, tc.kind, tc.says)
		}
	}
	// What the sandbox's archive/zip made of the first: every entry, where
	// a reader that stops at the stated size sees index.html alone.
	if names, err := goReads(samples.ZipUnderstated(crowd)); err != nil || len(names) != 1501 {
		t.Errorf("archive/zip read %d entries of the understated archive (%v), want 1501: the case is not the one that was found", len(names), err)
	}
}

// fn's error ends the walk and is returned as it is.
func TestWalkStopsAtFnsError(t *testing.T) {
	t.Parallel()
	stop := errors.New("stop")
	calls := 0
	err := zipdir.Walk(samples.Crowd(5).Zip(), func(e *zipdir.Entry) error {
		if calls++; calls == 2 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 2 {
		t.Errorf("Walk = %v after %d entries, want fn's error after 2", err, calls)
	}
}
