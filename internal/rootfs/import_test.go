//go:build !unit

package rootfs

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// An archive whose bytes change between two reads of it cannot roll
// current back: the archive of an older tree, installed beside the
// current one, served on a second read of the newer tree's archive (which
// a first read has hashed) must not become current. Import reads the
// archive once, so there is no second read to serve; watchReads would
// see it and swap the bytes before it.
func TestImportCannotBeRolledBackByASecondRead(t *testing.T) {
	t.Parallel()
	tree := synthTree(t)
	older := export(t, tree)
	if err := os.WriteFile(filepath.Join(Dir(tree), "etc/passwd"), []byte("a newer passwd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Seal(tree, "test", nil, older.Manifest.PackagesAt); err != nil {
		t.Fatal(err)
	}
	newer := export(t, tree)
	dir := filepath.Join(t.TempDir(), "rootfs")
	a, err := Import(older.Path, older.SHA256, dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Import(newer.Path, newer.SHA256, dir)
	if err != nil {
		t.Fatal(err)
	}

	// The newer archive, pinned by its digest; the older one's bytes are
	// served from the start of any read after a first.
	p := filepath.Join(t.TempDir(), filepath.Base(newer.Path))
	copyFile(t, newer.Path, p)
	olderBytes, err := os.ReadFile(older.Path)
	if err != nil {
		t.Fatal(err)
	}
	passes := watchReads(t, p, func() {
		if err := os.WriteFile(p, olderBytes, 0o644); err != nil {
			t.Error(err)
		}
	})
	im, err := Import(p, newer.SHA256, dir)
	if n := passes(); n != 1 {
		t.Errorf("Import read the archive %d times, want once", n)
	}
	if got, _ := os.Readlink(filepath.Join(dir, CurrentName)); got != filepath.Base(b.Tree) {
		t.Fatalf("current -> %s after importing %s pinned by its digest (import: %v); want %s, not the older %s",
			got, filepath.Base(newer.Path), err, filepath.Base(b.Tree), filepath.Base(a.Tree))
	}
	if err != nil || im.Manifest.TreeSHA256 != newer.Manifest.TreeSHA256 {
		t.Errorf("import: %v; want the newer tree, reused", err)
	}
}

// Import refuses an entry with a setuid, setgid or sticky bit or an owner
// other than root, even in an archive that is otherwise whole (its
// manifest's digest matches the entries), and Seal and Export refuse such
// a tree: rootfs/build.sh makes every tree root's, without those bits.
func TestImportRefusesPrivilegeBitsAndForeignOwners(t *testing.T) {
	t.Parallel()
	ex := export(t, synthTree(t))
	t.Run("unchanged, resealed", func(t *testing.T) {
		t.Parallel()
		ents := readArchive(t, ex.Path)
		reseal(t, ents)
		p, sum := writeArchive(t, ents)
		if _, err := Import(p, sum, filepath.Join(t.TempDir(), "rootfs")); err != nil {
			t.Fatalf("an archive resealed unchanged: %v; want it imported (reseal is wrong)", err)
		}
	})
	for _, c := range []struct {
		name, entry string
		change      func(*tar.Header)
	}{
		{"a setuid file", "rootfs/" + AgentPath, func(h *tar.Header) { h.Mode |= 0o4000 }},
		{"a setgid file", "rootfs/" + AgentPath, func(h *tar.Header) { h.Mode |= 0o2000 }},
		{"a setgid directory", "rootfs/usr/share/fonts", func(h *tar.Header) { h.Mode |= 0o2000 }},
		{"a sticky directory", "rootfs/tmp", func(h *tar.Header) { h.Mode = 0o1777 }},
		{"a file of another user", "rootfs/etc/passwd", func(h *tar.Header) { h.Uid = 1000 }},
		{"a file of another group", "rootfs/etc/shadow", func(h *tar.Header) { h.Gid = 42 }},
		{"a directory of another user", "rootfs/usr/local", func(h *tar.Header) { h.Uid, h.Gid = 100, 65534 }},
		{"a symlink of another user", "rootfs/lib", func(h *tar.Header) { h.Uid = 1000 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ents := readArchive(t, ex.Path)
			c.change(ents[find(t, ents, c.entry)].hdr)
			reseal(t, ents)
			p, sum := writeArchive(t, ents)
			refused(t, p, sum, ErrNotNormal)
		})
	}
	t.Run("seal and export", func(t *testing.T) {
		t.Parallel()
		tree := synthTree(t)
		agent := filepath.Join(Dir(tree), AgentPath)
		if err := os.Chmod(agent, 0o755|fs.ModeSetuid); err != nil {
			t.Fatal(err)
		}
		if _, err := Export(tree, t.TempDir()); !errors.Is(err, ErrNotNormal) {
			t.Errorf("export of a tree with a setuid file: %v, want %v", err, ErrNotNormal)
		}
		if _, err := Seal(tree, "test", nil, time.Now()); !errors.Is(err, ErrNotNormal) {
			t.Errorf("seal of a tree with a setuid file: %v, want %v", err, ErrNotNormal)
		}
		if err := os.Chmod(agent, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(filepath.Join(Dir(tree), "etc"), 0, 42); err != nil {
			t.Fatal(err)
		}
		if _, err := Seal(tree, "test", nil, time.Now()); !errors.Is(err, ErrNotNormal) {
			t.Errorf("seal of a tree with a directory of group 42: %v, want %v", err, ErrNotNormal)
		}
	})
}

// An imported tree is nobody else's business: the rootfs directory (even
// one an older build left 0755), the tree and everything in it are out of
// reach of any user but root, so nobody can drop a file into it while it
// is verified or made into an image (nor read it). Tried as uid 65534.
func TestImportedTreeIsPrivate(t *testing.T) {
	t.Parallel()
	ex := export(t, synthTree(t))
	parent := t.TempDir()
	// The test's temporary directories are 0700: open them as /var/lib is.
	for _, d := range []string{filepath.Dir(parent), parent} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(parent, "rootfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	im, err := Import(ex.Path, ex.SHA256, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, im.Tree} {
		if info, err := os.Stat(p); err != nil || info.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v (%v), want 0700", p, info.Mode(), err)
		}
	}
	current := filepath.Join(dir, CurrentName)
	for _, p := range []string{current, Dir(current), filepath.Join(Dir(current), "tmp"), filepath.Join(current, ManifestName)} {
		if out, err := asNobody("ls", "-d", p); err == nil || !strings.Contains(out, "Permission denied") {
			t.Errorf("uid 65534 reaches %s: ls: %v %s; want permission denied", p, err, out)
		}
	}
	if out, err := asNobody("touch", filepath.Join(Dir(current), "tmp", "dropped")); err == nil {
		t.Errorf("uid 65534 dropped a file into the imported tree's tmp/: %s", out)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// reseal sets the manifest (ents[0]) of an archive's entries to their
// tree digest, as Seal would have written it for the tree they make:
// the archive is whole, whatever was changed in it.
func reseal(t *testing.T, ents []archived) {
	t.Helper()
	var lines []*entry
	for _, e := range ents[1:] {
		rel := strings.TrimSuffix(strings.TrimPrefix(e.hdr.Name, "rootfs/"), "/")
		if rel == "" {
			rel = "."
		}
		mode := fileMode(e.hdr.Mode)
		switch e.hdr.Typeflag {
		case tar.TypeDir:
			mode |= fs.ModeDir
		case tar.TypeSymlink:
			mode |= fs.ModeSymlink
		case tar.TypeChar:
			mode |= fs.ModeDevice | fs.ModeCharDevice
		}
		l := &entry{rel: rel, line: describe(rel, mode, [2]int{e.hdr.Uid, e.hdr.Gid}, int64(len(e.body)), e.hdr.Linkname)}
		if e.hdr.Typeflag == tar.TypeReg {
			s := sha256.Sum256(e.body)
			l.sum = hex.EncodeToString(s[:])
		}
		lines = append(lines, l)
	}
	var m map[string]any
	if err := json.Unmarshal(ents[0].body, &m); err != nil {
		t.Fatal(err)
	}
	m["tree_sha256"] = sumLines(lines)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	ents[0].body = b
}

// asNobody runs a command as uid and gid 65534 and returns its output.
func asNobody(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// watchReads holds every read of the file at p until it has looked at
// where the reader is (fanotify permission events), and calls swap before
// a read from the start that follows a read past it: before a second pass
// over the file, so that it reads other bytes than the first. It returns
// a function that stops watching and says how many passes it saw.
func watchReads(t *testing.T, p string, swap func()) func() int {
	t.Helper()
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_CONTENT|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK, unix.O_RDONLY|unix.O_LARGEFILE|unix.O_CLOEXEC)
	if err != nil {
		t.Fatalf("fanotify: %v (the test runs as root, on a kernel with CONFIG_FANOTIFY_ACCESS_PERMISSIONS)", err)
	}
	f := os.NewFile(uintptr(fd), "fanotify")
	if err := unix.FanotifyMark(fd, unix.FAN_MARK_ADD, unix.FAN_ACCESS_PERM, unix.AT_FDCWD, p); err != nil {
		f.Close()
		t.Fatalf("fanotify: watching %s: %v", p, err)
	}
	var (
		mu     sync.Mutex
		passes int
		past0  bool // a read past the start was seen in this pass
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			if err != nil {
				return // closed
			}
			for off := 0; off+24 <= n; {
				size := binary.NativeEndian.Uint32(buf[off:])
				event := int32(binary.NativeEndian.Uint32(buf[off+16:]))
				if event >= 0 {
					pos, err := readerPos(p, int(event), fd)
					mu.Lock()
					switch {
					case err != nil:
						t.Errorf("finding the reader of %s: %v", p, err)
					case passes == 0:
						passes = 1
					case pos == 0 && past0:
						passes++
						past0 = false
						swap()
					}
					if pos > 0 {
						past0 = true
					}
					mu.Unlock()
					resp := make([]byte, 8)
					binary.NativeEndian.PutUint32(resp, uint32(event))
					binary.NativeEndian.PutUint32(resp[4:], unix.FAN_ALLOW)
					if _, err := f.Write(resp); err != nil {
						t.Errorf("fanotify: answering: %v", err)
					}
					unix.Close(int(event))
				}
				off += int(size)
			}
		}
	}()
	stop := func() int {
		f.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return passes
	}
	t.Cleanup(func() { stop() })
	return stop
}

// readerPos is the lowest file offset among this process's descriptors of
// p but skip (the event's and the watcher's own): where the read being
// held starts.
func readerPos(p string, skip ...int) (int64, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	pos, found := int64(-1), false
	for _, e := range ents {
		fd, _ := strconv.Atoi(e.Name())
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || target != p || slices.Contains(skip, fd) {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "pos:"); ok {
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err == nil && (!found || n < pos) {
					pos, found = n, true
				}
			}
		}
	}
	if !found {
		return 0, fmt.Errorf("no descriptor of %s", p)
	}
	return pos, nil
}
