package agent

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/wire"
)

// entry is one member of a test archive.
type entry struct {
	name string
	body string
	mode fs.FileMode // 0: a regular file (or a directory, by its name)
	// flags are ORed into the header's (1: encrypted).
	flags uint16
}

// writeZip writes entries as an archive in dir and returns its path.
func writeZip(t *testing.T, dir string, entries ...entry) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Store, Flags: e.flags}
		if e.mode != 0 {
			h.SetMode(e.mode)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	p := filepath.Join(dir, "site.zip")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestUnpackWritesFilesAndDirectories(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	u := &wire.Unpack{
		Archive: writeZip(t, dir, entry{name: "index.html", body: "<p>hi"}, entry{name: "css/"},
			entry{name: "css/a.css", body: "p{}"}, entry{name: "img/deep/x.png", body: "PNG"}),
		Dir: filepath.Join(dir, "site"), MaxFiles: 3, MaxBytes: 11,
	}
	if err := unpack(u); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"index.html": "<p>hi", "css/a.css": "p{}", "img/deep/x.png": "PNG"} {
		got, err := os.ReadFile(filepath.Join(u.Dir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s: got %q, %v; want %q", name, got, err, want)
		}
	}
}

// Anything but files and directories with acceptable paths, more files or
// bytes than allowed, or a name seen twice fails the whole unpack, and
// nothing lands outside the directory.
func TestUnpackRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		entries  []entry
		maxFiles int
		maxBytes int64
		want     string
	}{
		{"a parent path", []entry{{name: "../escaped", body: "x"}}, 10, 100, `entry "../escaped": not an acceptable path`},
		{"a parent path inside", []entry{{name: "a/../../escaped", body: "x"}}, 10, 100, "not an acceptable path"},
		{"an absolute path", []entry{{name: "/tmp/escaped", body: "x"}}, 10, 100, "not an acceptable path"},
		{"a backslash", []entry{{name: `a\..\escaped`, body: "x"}}, 10, 100, "not an acceptable path"},
		{"a symlink", []entry{{name: "link", body: "/etc/passwd", mode: fs.ModeSymlink | 0o777}}, 10, 100, `entry "link" is not a file or a directory`},
		{"a device", []entry{{name: "dev", mode: fs.ModeDevice | 0o600}}, 10, 100, "is not a file or a directory"},
		{"an encrypted entry", []entry{{name: "secret", body: "x", flags: 1}}, 10, 100, `entry "secret" is encrypted`},
		{"too many files", []entry{{name: "a", body: "1"}, {name: "d/"}, {name: "b", body: "2"}, {name: "c", body: "3"}}, 2, 100, "the archive holds more than 2 files"},
		{"a file over the bytes", []entry{{name: "big", body: strings.Repeat("x", 101)}}, 10, 100, `entry "big": its 101 bytes are over what the archive may unpack to`},
		{"files over the bytes", []entry{{name: "a", body: strings.Repeat("x", 60)}, {name: "b", body: strings.Repeat("x", 60)}}, 10, 100, `entry "b": its 60 bytes are over`},
		{"a name twice", []entry{{name: "a", body: "1"}, {name: "a", body: "2"}}, 10, 100, "file exists"},
		{"a file under a file", []entry{{name: "a", body: "1"}, {name: "a/b", body: "2"}}, 10, 100, "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			u := &wire.Unpack{Archive: writeZip(t, dir, tc.entries...), Dir: filepath.Join(dir, "out", "site"), MaxFiles: tc.maxFiles, MaxBytes: tc.maxBytes}
			if err := os.Mkdir(filepath.Join(dir, "out"), 0o755); err != nil {
				t.Fatal(err)
			}
			err := unpack(u)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			ents, _ := os.ReadDir(filepath.Join(dir, "out"))
			if len(ents) != 1 || ents[0].Name() != "site" {
				t.Errorf("beside the unpack directory: %v", ents)
			}
			if _, err := os.Lstat(filepath.Join(dir, "escaped")); err == nil {
				t.Error("an entry was written outside the unpack directory")
			}
		})
	}
}

// A file whose data is longer than its header says is cut at the limit:
// the bytes are counted as written, not as claimed.
func TestUnpackCountsBytesAsWritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "liar", Method: zip.Store, CompressedSize64: 200, UncompressedSize64: 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(bytes.Repeat([]byte("x"), 200)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "liar.zip")
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	u := &wire.Unpack{Archive: p, Dir: filepath.Join(dir, "site"), MaxFiles: 10, MaxBytes: 100}
	if err := unpack(u); err == nil {
		t.Fatal("a file claiming 10 bytes and holding 200 unpacked under a limit of 100")
	}
	if st, err := os.Stat(filepath.Join(u.Dir, "liar")); err == nil && st.Size() > 101 {
		t.Errorf("wrote %d bytes, want at most the limit and one", st.Size())
	}
}

// The unpacker process's exit status and stderr: what the job reports.
func TestUnpackExitStatus(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, _ := json.Marshal(wire.Unpack{Archive: writeZip(t, dir, entry{name: "a", body: "1"}), Dir: filepath.Join(dir, "ok"), MaxFiles: 1, MaxBytes: 1})
	bad, _ := json.Marshal(wire.Unpack{Archive: filepath.Join(dir, "site.zip"), Dir: filepath.Join(dir, "ok2"), MaxFiles: 0, MaxBytes: 1})
	for _, tc := range []struct {
		name, arg string
		code      int
		stderr    string
	}{
		{"unpacked", string(good), 0, ""},
		{"refused", string(bad), 1, "renderbox-unpack: the archive holds more than 0 files\n"},
		{"a bad request", "{", 2, "renderbox-agent: unpack request: "},
		{"not a zip", `{"archive":"` + filepath.Join(dir) + `/none","dir":"` + dir + `/x"}`, 1, "renderbox-unpack: reading the archive: "},
	} {
		var stderr bytes.Buffer
		if code := Unpack(tc.arg, &stderr); code != tc.code || !strings.HasPrefix(stderr.String(), tc.stderr) || (tc.stderr == "" && stderr.Len() > 0) {
			t.Errorf("%s: got %d %q, want %d %q…", tc.name, code, stderr.String(), tc.code, tc.stderr)
		}
	}
}
