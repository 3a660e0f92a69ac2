package rootfs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ImageName is a tree's EROFS image of its rootfs/, beside its manifest.
// gVisor mounts it as the sandbox's root inside the Sentry: no gofer
// serves the rootfs, and a file's pages are read from the image without a
// round trip per open or stat. The image is made on each host from the
// verified tree (MakeImage) and recorded with the tree it came from; it is
// not reproducible byte for byte (mkfs.erofs stamps its build time), so
// archives carry the tree and each host makes its own.
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
// had. m is tree's manifest, which the caller has just verified (Verify,
// Import): the image is made only from a tree that matched it.
func MakeImage(tree string, m *Manifest) (*ImageRecord, error) {
	mkfs, err := exec.LookPath("mkfs.erofs")
	if err != nil {
		return nil, ErrNoMkfs
	}
	path := filepath.Join(tree, ImageName)
	tmp := path + ".tmp"
	os.Remove(tmp)
	// noinline_data: gVisor cannot load a program whose last block is
	// packed into its inode ("bad address"). No xattrs: the tree digest
	// does not cover them, so neither may the image.
	cmd := exec.Command(mkfs, "-Enoinline_data", "-x-1", tmp, Dir(tree))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("making the rootfs image: mkfs.erofs: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	sum, err := fileSHA256(tmp)
	if err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("making the rootfs image: %w", err)
	}
	st, err := os.Stat(tmp)
	if err != nil {
		os.Remove(tmp)
		return nil, err
	}
	rec := &ImageRecord{TreeSHA256: m.TreeSHA256, SHA256: sum, Bytes: st.Size()}
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

// VerifyImage checks tree's image against its record and the record
// against m (the tree's verified manifest). It returns the image's path,
// or "" when the tree has none (the sandboxes then mount the tree through
// the gofer); an image that does not match is ErrTampered.
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
	sum, err := fileSHA256(path)
	if err != nil {
		return "", nil, err
	}
	if sum != rec.SHA256 {
		return "", nil, tampered("has digest %s, its record says %s", sum, rec.SHA256)
	}
	return path, &rec, nil
}
