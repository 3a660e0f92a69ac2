//go:build !unit

package rootfs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/renderbox/renderbox/internal/testenv/tool"
)

// synthTree builds a small sealed tree with what a real one holds, in
// normal form (root's, no setuid, setgid or sticky bit: rootfs/build.sh):
// directories, files with several modes, absolute and relative symlinks,
// a device in dev/, times with nanoseconds.
func synthTree(t *testing.T) string {
	t.Helper()
	tool.Root(t)
	tree := t.TempDir()
	root := Dir(tree)
	at := time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.UTC)
	dirs := map[string]os.FileMode{".": 0o755, "usr": 0o755, "usr/local": 0o755, "usr/local/bin": 0o755,
		"usr/share": 0o755, "usr/share/fonts": 0o775, "tmp": 0o777, "etc": 0o755}
	files := map[string]os.FileMode{AgentPath: 0o755, "etc/passwd": 0o644, "etc/shadow": 0o640,
		"usr/share/fonts/a.ttf": 0o444, "usr/share/fonts/.uuid": 0o644, "etc/empty": 0o600}
	for _, d := range []string{".", "usr", "usr/local", "usr/local/bin", "usr/share", "usr/share/fonts", "tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for f, mode := range files {
		body := []byte("contents of " + f + "\n")
		if f == "etc/empty" {
			body = nil
		}
		p := filepath.Join(root, f)
		if err := os.WriteFile(p, body, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	// mmdebstrap's devices in dev/, as a built tree has them.
	if err := os.Mkdir(filepath.Join(root, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(root, "dev/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatalf("making dev/null: %v (the tests run as root, like make test)", err)
	}
	if err := os.Chmod(filepath.Join(root, "dev/null"), 0o666); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{"etc/localtime": "/usr/share/zoneinfo/Etc/UTC", "usr/bin": "local/bin",
		"usr/share/fonts/b.ttf": "a.ttf", "lib": "usr/lib"}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	for d, mode := range dirs {
		// After the files: making one clears nothing, but chmod is last.
		if err := os.Chmod(filepath.Join(root, d), mode); err != nil {
			t.Fatal(err)
		}
	}
	// Times last, directories after what is in them.
	for l := range links {
		setTime(t, filepath.Join(root, l), at)
	}
	for f := range files {
		setTime(t, filepath.Join(root, f), at.Add(time.Second))
	}
	for d := range dirs {
		setTime(t, filepath.Join(root, d), at.Add(time.Minute))
	}
	if _, err := Seal(tree, "test", map[string]string{"chromium": "1"}, at); err != nil {
		t.Fatal(err)
	}
	return tree
}

func setTime(t *testing.T, p string, at time.Time) {
	t.Helper()
	ts := unix.NsecToTimespec(at.UnixNano())
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
}

func export(t *testing.T, tree string) *Exported {
	t.Helper()
	ex, err := Export(tree, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

func TestExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	tree := synthTree(t)
	src, err := Verify(tree)
	if err != nil {
		t.Fatal(err)
	}
	ex := export(t, tree)
	if got, want := filepath.Base(ex.Path), "renderbox-rootfs-"+src.TreeSHA256+".tar.gz"; got != want {
		t.Errorf("archive name %s, want %s", got, want)
	}
	if got, err := ReadSHA256File(ex.Path + ".sha256"); err != nil || got != ex.SHA256 {
		t.Errorf(".sha256 holds %q (%v), want %s", got, err, ex.SHA256)
	}
	again := export(t, tree)
	a, _ := os.ReadFile(ex.Path)
	b, _ := os.ReadFile(again.Path)
	if ex.SHA256 != again.SHA256 || !bytes.Equal(a, b) {
		t.Errorf("exported twice: digests %s and %s; want the same bytes", ex.SHA256, again.SHA256)
	}

	dir := t.TempDir()
	if err := os.Symlink("previous", filepath.Join(dir, CurrentName)); err != nil {
		t.Fatal(err)
	}
	im, err := Import(ex.Path, ex.SHA256, dir)
	if err != nil {
		t.Fatal(err)
	}
	if im.Previous != "previous" || im.Reused {
		t.Errorf("import: previous %q, reused %v; want previous, false", im.Previous, im.Reused)
	}
	if got, _ := os.Readlink(filepath.Join(dir, CurrentName)); got != filepath.Base(im.Tree) {
		t.Errorf("current -> %q, want %q", got, filepath.Base(im.Tree))
	}
	m, err := Verify(filepath.Join(dir, CurrentName))
	if err != nil || m.TreeSHA256 != src.TreeSHA256 {
		t.Fatalf("the imported tree: %v, digest %v; want %s", err, m, src.TreeSHA256)
	}
	// Times came along (fontconfig's caches depend on them): exporting the
	// imported tree gives the same archive.
	back := export(t, im.Tree)
	if back.SHA256 != ex.SHA256 {
		t.Errorf("exporting the imported tree gives %s, want %s (the same bytes)", back.SHA256, ex.SHA256)
	}
	for _, p := range []string{"usr/share/fonts", "etc/localtime"} {
		a, _ := os.Lstat(filepath.Join(Dir(tree), p))
		b, _ := os.Lstat(filepath.Join(Dir(im.Tree), p))
		if !a.ModTime().Equal(b.ModTime()) {
			t.Errorf("%s: imported with time %s, want %s", p, b.ModTime(), a.ModTime())
		}
	}
	// Importing it again reuses the tree.
	im2, err := Import(ex.Path, ex.SHA256, dir)
	if err != nil || !im2.Reused || im2.Tree != im.Tree {
		t.Errorf("second import: %+v, %v; want the same tree reused", im2, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".import-*")); len(left) > 0 {
		t.Errorf("staging left behind: %v", left)
	}
}

// archived is one entry of an archive, read back to be tampered with.
type archived struct {
	hdr  *tar.Header
	body []byte
}

func readArchive(t *testing.T, p string) []archived {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var ents []archived
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return ents
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		ents = append(ents, archived{hdr, body})
	}
}

// writeArchive writes ents as an archive and returns its path and digest:
// the digest of the tampered file, as if whoever tampered also wrote it.
func writeArchive(t *testing.T, ents []archived) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range ents {
		e.hdr.Size = int64(len(e.body))
		if e.hdr.Typeflag != tar.TypeReg {
			e.hdr.Size = 0
		}
		if err := tw.WriteHeader(e.hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.body); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	gz.Close()
	p := filepath.Join(t.TempDir(), "tampered.tar.gz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	return p, hex.EncodeToString(sum[:])
}

func find(t *testing.T, ents []archived, name string) int {
	for i, e := range ents {
		if e.hdr.Name == name {
			return i
		}
	}
	t.Fatalf("no entry %s in the archive", name)
	return -1
}

func TestImportRefuses(t *testing.T) {
	t.Parallel()
	ex := export(t, synthTree(t))
	insert := func(ents []archived, at int, e archived) []archived {
		return append(ents[:at:at], append([]archived{e}, ents[at:]...)...)
	}
	entry := func(typ byte, name, link string, body string) archived {
		return archived{&tar.Header{Typeflag: typ, Name: name, Linkname: link, Mode: 0o644, Format: tar.FormatPAX}, []byte(body)}
	}
	cases := []struct {
		name   string
		tamper func([]archived) []archived
		want   error
	}{
		{"one byte of a file", func(e []archived) []archived {
			i := find(t, e, "rootfs/etc/passwd")
			e[i].body = bytes.Replace(e[i].body, []byte("contents"), []byte("Contents"), 1)
			return e
		}, ErrTampered},
		{"an entry added", func(e []archived) []archived {
			return insert(e, find(t, e, "rootfs/etc/passwd"), entry(tar.TypeDir, "rootfs/etc/cron.d/", "", ""))
		}, ErrTampered},
		{"a file added", func(e []archived) []archived {
			return insert(e, find(t, e, "rootfs/etc/passwd"), entry(tar.TypeReg, "rootfs/etc/evil", "", "x"))
		}, ErrBadArchive}, // over the manifest's file count
		{"setuid added", func(e []archived) []archived {
			e[find(t, e, "rootfs/"+AgentPath)].hdr.Mode |= 0o4000
			return e
		}, ErrNotNormal},
		{"owner changed", func(e []archived) []archived {
			e[find(t, e, "rootfs/etc/passwd")].hdr.Uid = 4242
			return e
		}, ErrNotNormal},
		{"mode changed", func(e []archived) []archived {
			e[find(t, e, "rootfs/etc/passwd")].hdr.Mode = 0o666
			return e
		}, ErrTampered},
		{"a path with ..", func(e []archived) []archived {
			return insert(e, 2, entry(tar.TypeReg, "rootfs/../escaped", "", "x"))
		}, ErrBadArchive},
		{"a path with .. inside", func(e []archived) []archived {
			return insert(e, 2, entry(tar.TypeReg, "rootfs/etc/../../escaped", "", "x"))
		}, ErrBadArchive},
		{"an absolute path", func(e []archived) []archived {
			return insert(e, 2, entry(tar.TypeReg, "/tmp/escaped", "", "x"))
		}, ErrBadArchive},
		{"outside rootfs/", func(e []archived) []archived {
			return insert(e, 2, entry(tar.TypeReg, "escaped", "", "x"))
		}, ErrBadArchive},
		{"a symlink pointing out", func(e []archived) []archived {
			return insert(e, 2, entry(tar.TypeSymlink, "rootfs/out", "../../../../etc", ""))
		}, ErrBadArchive},
		{"a file through a symlink", func(e []archived) []archived {
			e = insert(e, 2, entry(tar.TypeSymlink, "rootfs/host", "/tmp", ""))
			return insert(e, 3, entry(tar.TypeReg, "rootfs/host/escaped", "", "x"))
		}, ErrBadArchive},
		{"a device node", func(e []archived) []archived {
			d := entry(tar.TypeChar, "rootfs/mem", "", "")
			d.hdr.Devmajor, d.hdr.Devminor = 1, 1
			return insert(e, 2, d)
		}, ErrBadArchive},
		{"/dev/mem as dev/null", func(e []archived) []archived {
			e[find(t, e, "rootfs/dev/null")].hdr.Devminor = 1
			return e
		}, ErrBadArchive},
		{"a hard link", func(e []archived) []archived {
			return insert(e, find(t, e, "rootfs/etc/passwd")+1, entry(tar.TypeLink, "rootfs/etc/shadow2", "rootfs/etc/shadow", ""))
		}, ErrBadArchive},
		{"an entry twice", func(e []archived) []archived {
			i := find(t, e, "rootfs/etc/passwd")
			return insert(e, i+1, e[i])
		}, ErrBadArchive},
		{"no manifest first", func(e []archived) []archived {
			return append(e[1:], e[0])
		}, ErrBadArchive},
		{"the manifest's digest is not hex", func(e []archived) []archived {
			e[0].body = bytes.Replace(e[0].body, []byte(`"tree_sha256": "`), []byte(`"tree_sha256": "../../../../../../../../../../../../../../../../../../../../../../`), 1)
			return e
		}, ErrBadArchive},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, sum := writeArchive(t, c.tamper(readArchive(t, ex.Path)))
			refused(t, p, sum, c.want)
		})
	}
	t.Run("a byte changed, its digest not", func(t *testing.T) {
		t.Parallel()
		b, _ := os.ReadFile(ex.Path)
		b[len(b)/2] ^= 1
		p := filepath.Join(t.TempDir(), filepath.Base(ex.Path))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		refused(t, p, ex.SHA256, ErrBadArchive)
	})
}

// refused imports archive p into a directory whose current points at a
// previous tree and wants err, current unchanged and nothing left.
func refused(t *testing.T, p, sum string, want error) {
	t.Helper()
	parent := t.TempDir()
	dir := filepath.Join(parent, "rootfs")
	if err := os.MkdirAll(filepath.Join(dir, "previous"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("previous", filepath.Join(dir, CurrentName)); err != nil {
		t.Fatal(err)
	}
	_, err := Import(p, sum, dir)
	t.Logf("refused: %v", err)
	if !errors.Is(err, want) {
		t.Errorf("import: %v; want %v", err, want)
	}
	if got, _ := os.Readlink(filepath.Join(dir, CurrentName)); got != "previous" {
		t.Errorf("current -> %q after a refused import, want previous", got)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if n := e.Name(); n != "previous" && n != CurrentName && n != ".import.lock" {
			t.Errorf("%s left in the rootfs directory", n)
		}
	}
	for _, p := range []string{"escaped", "tmp/escaped"} {
		if _, err := os.Lstat(filepath.Join(parent, p)); err == nil {
			t.Errorf("%s was written outside the rootfs directory", p)
		}
	}
	if _, err := os.Lstat("/tmp/escaped"); err == nil {
		t.Errorf("/tmp/escaped was written")
	}
}

func TestExportRefusesATamperedTree(t *testing.T) {
	t.Parallel()
	tree := synthTree(t)
	if err := os.WriteFile(filepath.Join(Dir(tree), "etc/passwd"), []byte("root::0:0::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if _, err := Export(tree, out); !errors.Is(err, ErrTampered) {
		t.Errorf("export of a tampered tree: %v, want %v", err, ErrTampered)
	}
	if ents, _ := os.ReadDir(out); len(ents) > 0 {
		t.Errorf("export of a tampered tree left %s", ents[0].Name())
	}
}
