package rootfs

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/erofs"
)

// ImageName is a tree's EROFS image of its rootfs/, beside its manifest.
// gVisor mounts it as the sandbox's root inside the Sentry: no gofer
// serves the rootfs, and a file's pages are read from the image without a
// round trip per open or stat. The image is made on each host from the
// verified tree (MakeImage) and recorded with the tree it came from; it is
// not reproducible byte for byte (mkfs.erofs stamps its build time), so
// archives carry the tree and each host makes its own. What makes it
// trustworthy is its contents: read with gVisor's own EROFS reader, they
// digest to its tree's manifest (ImageDigest), checked when it is made
// and each time a worker starts.
const ImageName = "rootfs.erofs"

// imageRecordName records the image's digest and the tree it was made of.
const imageRecordName = "rootfs.erofs.json"

// ImageRecord is what MakeImage recorded of an image.
type ImageRecord struct {
	TreeSHA256 string `json:"tree_sha256"`
	SHA256     string `json:"sha256"`
	Bytes      int64  `json:"bytes"`
}

// ErrNoMkfs means mkfs.erofs (Debian's erofs-utils) is not installed.
var ErrNoMkfs = errors.New("making the rootfs image: mkfs.erofs is missing (apt-get install erofs-utils)")

// MakeImage makes tree's image with mkfs.erofs, replacing any image it
// had, and keeps it only if its contents are the tree m describes (m is
// tree's manifest, which the caller has verified: Verify, Import). The
// tree's directory is made private first (0700: only root reaches its
// rootfs/ while mkfs.erofs reads it), and the image is checked after, not
// trusted: a file dropped into the tree while mkfs.erofs ran, even one
// removed again after, is in the image and not in the manifest's digest,
// and the image is refused (ErrTampered).
func MakeImage(tree string, m *Manifest) (*ImageRecord, error) {
	mkfs, err := exec.LookPath("mkfs.erofs")
	if err != nil {
		return nil, ErrNoMkfs
	}
	if err := os.Chmod(tree, 0o700); err != nil {
		return nil, fmt.Errorf("making the rootfs image: %w", err)
	}
	path := filepath.Join(tree, ImageName)
	tmp := path + ".tmp"
	os.Remove(tmp)
	defer os.Remove(tmp) // gone after the rename on success
	// noinline_data: gVisor cannot load a program whose last block is
	// packed into its inode ("bad address"). No xattrs: the tree digest
	// does not cover them, so neither may the image.
	cmd := exec.Command(mkfs, "-Enoinline_data", "-x-1", tmp, Dir(tree))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("making the rootfs image: mkfs.erofs: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	rec, err := checkImage(tmp, m)
	if err != nil {
		return nil, fmt.Errorf("making the rootfs image of %s: %w", tree, err)
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, err
	}
	// The old record goes first: an image never sits beside a record
	// that is not its own.
	if err := os.Remove(filepath.Join(tree, imageRecordName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	return rec, writeFileAtomic(filepath.Join(tree, imageRecordName), append(b, '\n'))
}

// VerifyImage checks tree's image against its record and m (the tree's
// verified manifest): the image must be the file recorded and its
// contents the tree m describes (ImageDigest). It returns the image's
// path, or "" when the tree has none (the sandboxes then mount the tree
// through the gofer); an image that does not match is ErrTampered.
func VerifyImage(tree string, m *Manifest) (string, *ImageRecord, error) {
	path := filepath.Join(tree, ImageName)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return "", nil, nil
	}
	tampered := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s %s (make it again with: worker rootfs image %s)", ErrTampered, path, fmt.Sprintf(format, args...), tree)
	}
	b, err := os.ReadFile(filepath.Join(tree, imageRecordName))
	if err != nil {
		return "", nil, tampered("has no record of what it was made from")
	}
	var rec ImageRecord
	if err := json.Unmarshal(b, &rec); err != nil || !isSHA256(rec.SHA256) {
		return "", nil, tampered("has an unreadable record")
	}
	if rec.TreeSHA256 != m.TreeSHA256 {
		return "", nil, tampered("was made from tree %s, not %s", rec.TreeSHA256, m.TreeSHA256)
	}
	got, err := checkImage(path, m)
	if err != nil {
		return "", nil, fmt.Errorf("%w (make it again with: worker rootfs image %s)", err, tree)
	}
	if got.SHA256 != rec.SHA256 {
		return "", nil, tampered("has digest %s, its record says %s", got.SHA256, rec.SHA256)
	}
	return path, got, nil
}

// checkImage reads the image at p, its bytes and its contents, and
// returns its record if its contents are the tree m describes. The two
// reads run at once: each is about a second of one core for the built
// tree's 1.4 GiB image, and a worker makes both at every start.
func checkImage(p string, m *Manifest) (*ImageRecord, error) {
	var sum string
	var sumErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		sum, sumErr = fileSHA256(p)
	}()
	d, err := ImageDigest(p)
	<-done
	if err := cmp.Or(sumErr, err); err != nil {
		return nil, err
	}
	if d.SHA256 != m.TreeSHA256 {
		return nil, fmt.Errorf("%w: the image %s holds a tree with digest %s (%d files, %d bytes), its manifest says %s (%d files, %d bytes)",
			ErrTampered, p, d.SHA256, d.Files, d.Bytes, m.TreeSHA256, m.Files, m.Bytes)
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	return &ImageRecord{TreeSHA256: d.SHA256, SHA256: sum, Bytes: st.Size()}, nil
}

// ImageDigest is the tree digest (Digest's) of what an EROFS image holds,
// read with gVisor's EROFS reader, the one the Sentry mounts it with (go.mod
// pins the module at runsc's version, sandbox.PinnedRunsc): every entry reachable
// from the image's root, its path, type, permission bits, owner, size,
// symlink target and contents. An image whose digest is its tree's
// manifest's serves the sandbox that very tree, whatever mkfs.erofs read.
// Neither digest covers times, or device numbers: the sandbox's /dev is
// a tmpfs of its own.
func ImageDigest(p string) (TreeDigest, error) {
	var td TreeDigest
	f, err := os.Open(p)
	if err != nil {
		return td, fmt.Errorf("reading the rootfs image: %w", err)
	}
	img, err := erofs.OpenImage(f) // owns f from here
	if err != nil {
		f.Close()
		return td, fmt.Errorf("%w: reading the rootfs image %s: %v", ErrTampered, p, err)
	}
	defer img.Close()
	w := imageWalk{img: img, dirs: map[uint64]bool{}}
	if err := w.visit(img.RootNid(), "."); err != nil {
		return td, fmt.Errorf("%w: reading the rootfs image %s: %v", ErrTampered, p, err)
	}
	if err := hashContents(w.ents); err != nil {
		return td, fmt.Errorf("reading the rootfs image %s: %w", p, err)
	}
	return TreeDigest{SHA256: sumLines(w.ents), Files: w.files, Bytes: w.bytes}, nil
}

// imageWalk lists an image's entries in Digest's order: a directory, then
// each of its entries by name, depth first.
type imageWalk struct {
	img   *erofs.Image
	ents  []*entry
	dirs  map[uint64]bool // directories entered: a directory reached twice is a loop
	files int
	bytes int64
}

func (w *imageWalk) visit(nid uint64, rel string) error {
	ino, err := w.img.Inode(nid)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	mode, target := statMode(uint32(ino.Mode())), ""
	e := &entry{rel: rel}
	switch {
	case ino.IsRegular():
		ranges, err := ino.DataRanges()
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		e.hash = func() (string, error) {
			h := sha256.New()
			for _, r := range ranges {
				h.Write(r.Bytes)
			}
			return hex.EncodeToString(h.Sum(nil)), nil
		}
		w.files++
		w.bytes += int64(ino.Size())
	case ino.IsSymlink():
		if target, err = ino.Readlink(); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
	}
	e.line = describe(rel, mode, [2]int{int(ino.UID()), int(ino.GID())}, int64(ino.Size()), target)
	w.ents = append(w.ents, e)
	if !ino.IsDir() {
		return nil
	}
	if w.dirs[nid] {
		return fmt.Errorf("%s: directory %d is reached twice", rel, nid)
	}
	w.dirs[nid] = true
	type dirent struct {
		name string
		nid  uint64
	}
	var names []dirent
	err = ino.IterDirents(func(name string, _ uint8, nid uint64) error {
		if name == "." || name == ".." {
			return nil
		}
		if name == "" || strings.ContainsAny(name, "/\x00") {
			return fmt.Errorf("%s: an entry is named %q", rel, name)
		}
		names = append(names, dirent{name, nid})
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	slices.SortFunc(names, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
	for _, d := range names {
		if err := w.visit(d.nid, path.Join(rel, d.name)); err != nil {
			return err
		}
	}
	return nil
}

// statMode is a stat(2) mode as os.Lstat reports it.
func statMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
