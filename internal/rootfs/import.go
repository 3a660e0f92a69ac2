package rootfs

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrBadArchive means an archive was refused before anything of it was
// installed: it is not the digest it should be, or it holds an entry that
// has no place in a rootfs or would be written outside it.
var ErrBadArchive = errors.New("rootfs archive refused")

// CurrentName is the link in a rootfs directory to the tree workers run
// (rootfs/build.sh makes it too).
const CurrentName = "current"

// importedPrefix names an imported tree in the rootfs directory, before
// the first 16 hex digits of its digest.
const importedPrefix = "tree-"

// maxManifest bounds the manifest entry (the real one is ~30 KiB).
const maxManifest = 1 << 20

// Imported is what Import installed.
type Imported struct {
	Tree     string // dir/tree-<digest>, what current now points to
	Manifest *Manifest
	Previous string // what current pointed to before; "" when nothing
	Reused   bool   // the tree was there and verified: nothing extracted
	// Image is the record of the tree's EROFS image, made (or, for a
	// reused tree, verified) before current moved; nil when mkfs.erofs is
	// missing (ErrNoMkfs): sandboxes then mount the tree through the gofer.
	Image *ImageRecord
}

// Import installs archive (see Export) under dir and points dir/current
// at it, refusing an archive whose SHA-256 is not wantSHA256.
//
// The archive is read once: it is hashed as it is extracted into a
// staging directory under dir, and nothing read from it (its manifest
// included) is acted on before the whole stream matched wantSHA256 (a
// second read, after a first pass that only hashed, could be served other
// bytes: an older archive, and current rolled back). Extraction never
// follows a link, never writes outside the staging directory, and refuses
// any entry not in normal form (normalForm: root's, no setuid, setgid or
// sticky bit). Then the staged tree is verified against the manifest, its
// EROFS image is made there and its contents checked against the manifest
// too (MakeImage), all is flushed to disk, and only then is it renamed
// into place and current switched: an import that fails or is interrupted
// leaves current as it was (its staging directory is removed by the next
// import). dir, its staging directories and its trees are private (0700,
// privateDir). Imports into one dir take turns.
func Import(archive, wantSHA256, dir string) (*Imported, error) {
	if !isSHA256(wantSHA256) {
		return nil, fmt.Errorf("importing rootfs: %q is not a SHA-256 digest in lowercase hex", wantSHA256)
	}
	if err := privateDir(dir); err != nil {
		return nil, fmt.Errorf("importing rootfs: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	removeLeftovers(dir)

	f, err := os.Open(archive)
	if err != nil {
		return nil, fmt.Errorf("importing rootfs: %w", err)
	}
	defer f.Close()
	sum := sha256.New()
	in := io.TeeReader(bufio.NewReaderSize(f, 1<<20), sum)
	gz, err := gzip.NewReader(in)
	if err != nil {
		return nil, fmt.Errorf("importing rootfs %s: %w: not gzip: %v", archive, ErrBadArchive, err)
	}
	tr := tar.NewReader(gz)
	raw, m, err := readManifestEntry(tr)
	if err != nil {
		return nil, fmt.Errorf("importing rootfs %s: %w", archive, err)
	}
	cur := filepath.Join(dir, CurrentName)
	prev, _ := os.Readlink(cur)
	res := &Imported{Tree: filepath.Join(dir, importedPrefix+m.TreeSHA256[:16]), Manifest: m, Previous: prev}
	// Looked at now, acted on only once the archive's digest matched.
	if res.Reused, err = existing(res.Tree, m, prev); err != nil {
		return nil, fmt.Errorf("importing rootfs: %w", err)
	}
	stage := ""
	if !res.Reused {
		if stage, err = os.MkdirTemp(dir, ".import-*"); err != nil {
			return nil, fmt.Errorf("importing rootfs: %w", err)
		}
		defer os.RemoveAll(stage) // gone after the rename on success
		if err := extract(tr, stage, raw, m); err != nil {
			return nil, fmt.Errorf("importing rootfs %s: %w", archive, err)
		}
		// The tar's end and gzip's checksum.
		if _, err := io.Copy(io.Discard, gz); err != nil {
			return nil, fmt.Errorf("importing rootfs %s: %w: %v", archive, ErrBadArchive, err)
		}
	}
	// The rest of the stream (all of it but the manifest, for a tree
	// already installed) is part of the digest.
	if _, err := io.Copy(io.Discard, in); err != nil {
		return nil, fmt.Errorf("importing rootfs %s: %w", archive, err)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != wantSHA256 {
		return nil, fmt.Errorf("importing rootfs %s: %w: it is not the archive exported, or it changed while it was read: its digest is %s, want %s (copy it again, with its .sha256)",
			archive, ErrBadArchive, got, wantSHA256)
	}
	if res.Reused {
		if err := os.Chmod(res.Tree, 0o700); err != nil { // imported before trees were private
			return nil, fmt.Errorf("importing rootfs: %w", err)
		}
		if res.Image, err = treeImage(res.Tree, m); err != nil {
			return nil, fmt.Errorf("importing rootfs: %w", err)
		}
		return res, switchCurrent(dir, filepath.Base(res.Tree))
	}
	if _, err := Verify(stage); err != nil {
		return nil, fmt.Errorf("importing rootfs %s: %w", archive, err)
	}
	if res.Image, err = treeImage(stage, m); err != nil {
		return nil, fmt.Errorf("importing rootfs %s: %w", archive, err)
	}
	// On disk before current names it: a crash after the switch must not
	// leave current on a tree that is half in the page cache.
	if err := syncFS(stage); err != nil {
		return nil, fmt.Errorf("importing rootfs: flushing the tree: %w", err)
	}
	// A tree of that name that did not verify (existing): never current.
	if err := os.RemoveAll(res.Tree); err != nil {
		return nil, fmt.Errorf("importing rootfs: %w", err)
	}
	if err := os.Rename(stage, res.Tree); err != nil {
		return nil, fmt.Errorf("importing rootfs: %w", err)
	}
	return res, switchCurrent(dir, filepath.Base(res.Tree))
}

// treeImage returns the record of tree's image, verified, or makes the
// image (MakeImage) when it has none or one that does not verify; nil
// when mkfs.erofs is missing.
func treeImage(tree string, m *Manifest) (*ImageRecord, error) {
	if img, rec, err := VerifyImage(tree, m); err == nil && img != "" {
		return rec, nil
	}
	rec, err := MakeImage(tree, m)
	if errors.Is(err, ErrNoMkfs) {
		return nil, nil
	}
	return rec, err
}

// privateDir makes dir, or makes it private: 0700 and root's (the
// importing user's). Nobody else may reach a tree, its image or a staging
// directory, to drop a file into one while it is verified or made into
// an image (a tree's tmp/ and var/tmp/ are world-writable). Root,
// runsc and its gofer need nothing more: they run as root.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	info, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if own := owner(info); own[0] != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to the importing user %d (chown it, or import into another -dir)", dir, own[0], os.Geteuid())
	}
	return os.Chmod(dir, 0o700)
}

// readManifestEntry reads the archive's first entry, its manifest.
func readManifestEntry(tr *tar.Reader) ([]byte, *Manifest, error) {
	hdr, err := tr.Next()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: reading its first entry: %v", ErrBadArchive, err)
	}
	if hdr.Name != ManifestName || hdr.Typeflag != tar.TypeReg || hdr.Size <= 0 || hdr.Size > maxManifest {
		return nil, nil, fmt.Errorf("%w: its first entry is %q, not the manifest (%s)", ErrBadArchive, hdr.Name, ManifestName)
	}
	raw, err := io.ReadAll(tr)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: reading its manifest: %v", ErrBadArchive, err)
	}
	m, err := parseManifest(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrBadArchive, err)
	}
	return raw, m, nil
}

// existing reports whether tree is already installed and verifies, so the
// import only has to switch current to it. It changes nothing: a tree
// there that does not verify is replaced once the archive is checked,
// unless it is what current names (a worker may be running it), which is
// an error.
func existing(tree string, m *Manifest, current string) (bool, error) {
	if _, err := os.Lstat(tree); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	got, err := Verify(tree)
	if err == nil && got.TreeSHA256 == m.TreeSHA256 {
		return true, nil
	}
	if filepath.Base(filepath.Clean(current)) == filepath.Base(tree) {
		return false, fmt.Errorf("%s is current and does not match its manifest (%v): point current elsewhere and import again", tree, err)
	}
	return false, nil
}

// extractor installs an archive's entries into a staging directory.
type extractor struct {
	root        *os.Root // the staging directory: nothing resolves outside it
	stage       string
	m           *Manifest
	kinds       map[string]byte // rel in rootfs/ -> tar type, of each entry so far
	files       int
	bytes       int64
	dirs, links []stamp // times set once nothing more is made in them (dirs: devices too)
}

type stamp struct {
	name string
	at   time.Time
}

func extract(tr *tar.Reader, stage string, raw []byte, m *Manifest) error {
	root, err := os.OpenRoot(stage)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.WriteFile(ManifestName, raw, 0o644); err != nil {
		return err
	}
	x := &extractor{root: root, stage: stage, m: m, kinds: map[string]byte{}}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadArchive, err)
		}
		if err := x.add(hdr, tr); err != nil {
			return err
		}
	}
	if x.kinds["."] != tar.TypeDir {
		return fmt.Errorf("%w: it holds no rootfs/", ErrBadArchive)
	}
	return x.setTimes()
}

// add installs one entry. Its parent must be a directory the archive made
// before it: no entry is ever written through a link, whatever the links
// point at, and none outside rootfs/.
func (x *extractor) add(hdr *tar.Header, body io.Reader) error {
	refuse := func(format string, a ...any) error {
		return fmt.Errorf("%w: entry %q: %s", ErrBadArchive, hdr.Name, fmt.Sprintf(format, a...))
	}
	rel, ok := entryPath(hdr.Name, hdr.Typeflag)
	if !ok {
		return refuse("not a clean relative path in rootfs/")
	}
	if _, dup := x.kinds[rel]; dup {
		return refuse("appears twice")
	}
	if rel == "." && hdr.Typeflag != tar.TypeDir {
		return refuse("rootfs/ must be a directory")
	}
	if rel != "." && x.kinds[path.Dir(rel)] != tar.TypeDir {
		return refuse("its directory is not a directory earlier in the archive")
	}
	if hdr.Mode&^0o7777 != 0 {
		return refuse("mode %o has bits beyond permissions, setuid, setgid and sticky", hdr.Mode)
	}
	name, mode := path.Join("rootfs", rel), fileMode(hdr.Mode)
	// Refused, not normalised: the manifest's digest covers owners and
	// modes, so a tree changed on the way in would not verify.
	if err := normalForm(mode, [2]int{hdr.Uid, hdr.Gid}); err != nil {
		return fmt.Errorf("%w: entry %q: %w", ErrBadArchive, hdr.Name, err)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := x.root.Mkdir(name, 0o700); err != nil {
			return err
		}
		if err := x.root.Chmod(name, mode); err != nil {
			return err
		}
		x.dirs = append(x.dirs, stamp{name, hdr.ModTime})
	case tar.TypeReg:
		x.files++
		x.bytes += hdr.Size
		if x.files > x.m.Files || x.bytes > x.m.Bytes {
			return refuse("the archive holds more than its manifest's %d files and %d bytes", x.m.Files, x.m.Bytes)
		}
		if err := x.file(name, hdr, body, mode); err != nil {
			return err
		}
	case tar.TypeSymlink:
		if linkEscapes(rel, hdr.Linkname) {
			return refuse("a symlink to %q leaves the tree", hdr.Linkname)
		}
		if err := x.root.Symlink(hdr.Linkname, name); err != nil {
			return err
		}
		x.links = append(x.links, stamp{name, hdr.ModTime})
	case tar.TypeChar:
		if !stockDevice(rel, hdr.Devmajor, hdr.Devminor) {
			return refuse("device %d:%d: the only devices in a rootfs are mmdebstrap's in dev/ (null 1:3, zero 1:5, …)", hdr.Devmajor, hdr.Devminor)
		}
		// Its parents are directories of the archive (above), never links.
		dev := int(unix.Mkdev(uint32(hdr.Devmajor), uint32(hdr.Devminor)))
		if err := unix.Mknod(filepath.Join(x.stage, name), unix.S_IFCHR|0o600, dev); err != nil {
			return err
		}
		if err := x.root.Chmod(name, mode); err != nil {
			return err
		}
		x.dirs = append(x.dirs, stamp{name, hdr.ModTime})
	default:
		return refuse("type %q: a rootfs holds directories, regular files, symlinks and mmdebstrap's devices in dev/ (no other devices, fifos or hard links)", hdr.Typeflag)
	}
	x.kinds[rel] = hdr.Typeflag
	return nil
}

func (x *extractor) file(name string, hdr *tar.Header, body io.Reader, mode fs.FileMode) error {
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if n, err := io.Copy(f, body); err != nil || n != hdr.Size {
		return fmt.Errorf("%w: entry %q: %d of its %d bytes: %v", ErrBadArchive, hdr.Name, n, hdr.Size, err)
	}
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return x.root.Chtimes(name, hdr.ModTime, hdr.ModTime)
}

// setTimes gives links and directories their times, once nothing more is
// created in them.
func (x *extractor) setTimes() error {
	for _, s := range x.links {
		ts := unix.NsecToTimespec(s.at.UnixNano())
		// The link's parents are directories of the archive (add), never
		// links, so the path resolves inside the stage.
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(x.stage, s.name), []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("setting the time of %s: %w", s.name, err)
		}
	}
	for _, s := range x.dirs {
		if err := x.root.Chtimes(s.name, s.at, s.at); err != nil {
			return err
		}
	}
	return nil
}

// entryPath is the path in rootfs/ of the tar entry name ("." for rootfs/
// itself), and whether it is one: relative, clean, with no "..".
func entryPath(name string, typ byte) (string, bool) {
	if strings.ContainsRune(name, 0) {
		return "", false
	}
	if typ == tar.TypeDir {
		name = strings.TrimSuffix(name, "/")
	}
	if name == "rootfs" {
		return ".", true
	}
	rel, ok := strings.CutPrefix(name, "rootfs/")
	if !ok || rel == "." || !fs.ValidPath(rel) {
		return "", false
	}
	return rel, true
}

// switchCurrent points dir/current at name in one rename.
func switchCurrent(dir, name string) error {
	tmp := filepath.Join(dir, ".current.tmp")
	os.Remove(tmp)
	if err := os.Symlink(name, tmp); err != nil {
		return fmt.Errorf("switching current: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, CurrentName)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("switching current: %w", err)
	}
	return syncDir(dir)
}

// lockDir takes dir's import lock, failing when another import holds it.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".import.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("importing rootfs: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("importing rootfs: another import into %s is running (%v)", dir, err)
	}
	// Unlocked, not only closed: a process forked meanwhile by another
	// goroutine holds the descriptor (and the lock with it) until it execs.
	return func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// removeLeftovers removes the staging directories of interrupted imports
// (the caller holds the lock: none is in use).
func removeLeftovers(dir string) {
	left, _ := filepath.Glob(filepath.Join(dir, ".import-*"))
	for _, p := range left {
		os.RemoveAll(p)
	}
}

func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
