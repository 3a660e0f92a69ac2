package rootfs

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// An archive is one sealed tree in one file, so that a tree built once can
// run on every worker host (deploy/README.md): a gzip-compressed tar in PAX format
// whose first entry is manifest.json, byte for byte, then rootfs/ in the
// order Digest walks it (each directory's entries sorted by name, parents
// first). It holds directories, regular files and symlinks with their
// numeric owners (root's: see normalForm), permission bits and
// modification times, nothing else: no user or group names, access or
// change times, extended attributes, devices or hard links (a second name
// of a file is packed as a copy; Digest sees no difference). The times are
// the tree's own, not the export's, because the tree's fontconfig caches
// (rootfs/build.sh) are valid only for directories whose times match; they
// do not change while the tree is sealed, so exporting a tree twice, on
// any host, gives the same bytes and the same archive digest.
const (
	// ArchivePrefix and ArchiveSuffix frame an archive's name around its
	// tree digest: what workers report (/metrics, GET /v1/workers, jobs).
	ArchivePrefix = "renderbox-rootfs-"
	ArchiveSuffix = ".tar.gz"
	// archiveLevel trades the archive's size for export time (gzip runs
	// on one core). The built tree (1538 MiB, 12747 files) on a 2-core VM:
	// BestSpeed 708 MiB in 19 s, DefaultCompression 640 MiB in 50 s.
	archiveLevel = gzip.BestSpeed
)

// ArchiveName is the file name of m's tree's archive.
func ArchiveName(m *Manifest) string { return ArchivePrefix + m.TreeSHA256 + ArchiveSuffix }

// Exported is an archive Export wrote.
type Exported struct {
	Path     string // the archive; Path+".sha256" holds its digest
	SHA256   string // the archive's digest (hex)
	Size     int64
	Manifest *Manifest
}

// Export packs tree (a sealed tree: rootfs/ and manifest.json) into an
// archive in dir, named by the tree's digest, with a sha256sum-style
// ".sha256" file beside it. It digests the tree as it packs it and writes
// nothing when the tree does not match its manifest (ErrTampered): an
// archive always holds a tree that verifies.
func Export(tree, dir string) (*Exported, error) {
	raw, err := os.ReadFile(filepath.Join(tree, ManifestName))
	if err != nil {
		return nil, fmt.Errorf("exporting rootfs: %w (build it with: make rootfs)", err)
	}
	m, err := parseManifest(raw)
	if err != nil {
		return nil, fmt.Errorf("exporting rootfs %s: %w", tree, err)
	}
	tmp, err := os.CreateTemp(dir, ".export-*"+ArchiveSuffix)
	if err != nil {
		return nil, fmt.Errorf("exporting rootfs: %w", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name()) // gone after the rename on success
	}()
	sum := sha256.New()
	counted := &countWriter{w: io.MultiWriter(tmp, sum)}
	buf := bufio.NewWriterSize(counted, 1<<20)
	gz, err := gzip.NewWriterLevel(buf, archiveLevel)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: ManifestName, Mode: 0o644, Size: int64(len(raw)),
		ModTime: m.Created, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, fmt.Errorf("exporting rootfs: %w", err)
	}
	if _, err := tw.Write(raw); err != nil {
		return nil, fmt.Errorf("exporting rootfs: %w", err)
	}
	digest, err := packTree(tw, Dir(tree))
	if err != nil {
		return nil, fmt.Errorf("exporting rootfs %s: %w", tree, err)
	}
	if digest != m.TreeSHA256 {
		return nil, fmt.Errorf("exporting rootfs: %w: %s has digest %s, its manifest says %s (rebuild with: make rootfs)",
			ErrTampered, Dir(tree), digest, m.TreeSHA256)
	}
	for _, c := range []io.Closer{tw, gz} {
		if err := c.Close(); err != nil {
			return nil, fmt.Errorf("exporting rootfs: %w", err)
		}
	}
	if err := buf.Flush(); err != nil {
		return nil, fmt.Errorf("exporting rootfs: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return nil, fmt.Errorf("exporting rootfs: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return nil, fmt.Errorf("exporting rootfs: %w", err)
	}
	ex := &Exported{Path: filepath.Join(dir, ArchiveName(m)), SHA256: hex.EncodeToString(sum.Sum(nil)), Size: counted.n, Manifest: m}
	if err := os.Rename(tmp.Name(), ex.Path); err != nil {
		return nil, fmt.Errorf("exporting rootfs: %w", err)
	}
	line := ex.SHA256 + "  " + filepath.Base(ex.Path) + "\n"
	if err := writeFileAtomic(ex.Path+".sha256", []byte(line)); err != nil {
		return nil, fmt.Errorf("exporting rootfs: %w", err)
	}
	return ex, nil
}

// packTree writes dir's entries to tw, named rootfs/…, and returns the
// tree digest of what it wrote (Digest's, computed on the way).
func packTree(tw *tar.Writer, dir string) (string, error) {
	var ents []*entry
	err := walk(dir, func(p, rel string, info fs.FileInfo) (err error) {
		mode, own := info.Mode(), owner(info)
		if err := normalForm(mode, own); err != nil {
			return fmt.Errorf("%s: %w (an import would refuse it)", rel, err)
		}
		hdr := &tar.Header{Name: archivePath(rel), Mode: tarMode(mode), Uid: own[0], Gid: own[1],
			ModTime: info.ModTime(), Format: tar.FormatPAX}
		target := ""
		switch {
		case mode.IsDir():
			hdr.Typeflag = tar.TypeDir
		case mode.IsRegular():
			hdr.Typeflag, hdr.Size = tar.TypeReg, info.Size()
		case mode&fs.ModeSymlink != 0:
			if target, err = os.Readlink(p); err != nil {
				return err
			}
			if linkEscapes(rel, target) {
				return fmt.Errorf("%s: symlink to %q leaves the tree (an import would refuse it)", rel, target)
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		case mode.Type() == fs.ModeDevice|fs.ModeCharDevice:
			hdr.Typeflag = tar.TypeChar
			hdr.Devmajor, hdr.Devminor = devNumbers(info)
			if !stockDevice(rel, hdr.Devmajor, hdr.Devminor) {
				return fmt.Errorf("%s: device %d:%d is not one of mmdebstrap's in dev/ (an import would refuse it)", rel, hdr.Devmajor, hdr.Devminor)
			}
		default:
			return fmt.Errorf("%s: a %s has no place in a rootfs (an import would refuse it)", rel, mode.Type())
		}
		e := &entry{rel: rel, line: describe(rel, mode, own, info.Size(), target)}
		ents = append(ents, e)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			e.sum, err = packFile(tw, p, hdr.Size)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	return sumLines(ents), nil
}

// packFile copies the size bytes of regular file p to w and returns their
// digest; a file that changed size since it was listed is an error.
func packFile(w io.Writer, p string, size int64) (string, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(f, size)); err != nil || n != size {
		return "", fmt.Errorf("%s: read %d of its %d bytes: %v", p, n, size, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// stockDevices are the character devices mmdebstrap makes in a tree's dev/,
// with their numbers: the only device nodes an archive may hold. Sandboxes
// never see them (the spec mounts a tmpfs on /dev). The tree digest covers
// a device's type, mode and owner but not its numbers, so an import pins
// these itself: /dev/mem under the name dev/null is refused.
var stockDevices = map[string][2]int64{
	"dev/console": {5, 1}, "dev/full": {1, 7}, "dev/null": {1, 3}, "dev/ptmx": {5, 2},
	"dev/random": {1, 8}, "dev/tty": {5, 0}, "dev/urandom": {1, 9}, "dev/zero": {1, 5},
}

// stockDevice reports whether a character device at rel with numbers
// major:minor is one of stockDevices.
func stockDevice(rel string, major, minor int64) bool {
	n, ok := stockDevices[filepath.ToSlash(rel)]
	return ok && n == [2]int64{major, minor}
}

// devNumbers is a device's major and minor numbers.
func devNumbers(info fs.FileInfo) (major, minor int64) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, -1
	}
	return int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
}

// archivePath is the tar name of the entry at rel in rootfs/.
func archivePath(rel string) string {
	if rel == "." {
		return "rootfs/"
	}
	return "rootfs/" + filepath.ToSlash(rel)
}

// tarMode is mode's permission bits with setuid, setgid and sticky in
// tar's (and the kernel's) encoding.
func tarMode(mode fs.FileMode) int64 {
	m := int64(mode.Perm())
	if mode&fs.ModeSetuid != 0 {
		m |= 0o4000
	}
	if mode&fs.ModeSetgid != 0 {
		m |= 0o2000
	}
	if mode&fs.ModeSticky != 0 {
		m |= 0o1000
	}
	return m
}

// fileMode is tarMode's inverse.
func fileMode(m int64) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	if m&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// linkEscapes reports whether a symlink at rel (in rootfs/) to target
// leaves the tree. A sandbox resolves an absolute target from its own root
// (the tree's), so those stay in it, as Debian's many absolute links do; a
// relative one is resolved from the link's directory and must not climb
// out of rootfs/ (on the host it would point at the host's files).
func linkEscapes(rel, target string) bool {
	if target == "" || strings.ContainsRune(target, 0) {
		return true
	}
	if path.IsAbs(target) {
		return false
	}
	j := path.Join(path.Dir(filepath.ToSlash(rel)), target)
	return j == ".." || strings.HasPrefix(j, "../")
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// writeFileAtomic writes b to p through a temporary file and a rename.
func writeFileAtomic(p string, b []byte) error {
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// ReadSHA256File reads the digest from a sha256sum-style file ("HEX  NAME").
func ReadSHA256File(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 || !isSHA256(strings.ToLower(f[0])) {
		return "", fmt.Errorf("%s holds no SHA-256 digest", p)
	}
	return strings.ToLower(f[0]), nil
}
