package rootfs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A tree's image is recorded with the tree it was made of, and VerifyImage refuses an image that is not the one recorded or a
// record of another tree.
func TestImage(t *testing.T) {
	if _, err := exec.LookPath("mkfs.erofs"); err != nil {
		t.Fatal("mkfs.erofs is missing: apt-get install erofs-utils (scripts/setup.sh installs it)")
	}
	tree := synthTree(t)
	m, err := ReadManifest(tree)
	if err != nil {
		t.Fatal(err)
	}
	if p, rec, err := VerifyImage(tree, m); p != "" || rec != nil || err != nil {
		t.Fatalf("a tree without an image: VerifyImage = %q, %v, %v; want none and no error", p, rec, err)
	}
	rec, err := MakeImage(tree, m)
	if err != nil {
		t.Fatal(err)
	}
	if rec.TreeSHA256 != m.TreeSHA256 || rec.Bytes == 0 {
		t.Fatalf("record %+v, want tree %s and a size", rec, m.TreeSHA256)
	}
	p, got, err := VerifyImage(tree, m)
	if err != nil || p != filepath.Join(tree, ImageName) || *got != *rec {
		t.Fatalf("VerifyImage = %q, %+v, %v; want the image and its record", p, got, err)
	}
	// One byte changed in the image.
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, 2048); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, _, err := VerifyImage(tree, m); !errors.Is(err, ErrTampered) {
		t.Errorf("a changed image: %v, want ErrTampered", err)
	}
	// A record of another tree (the tree changed, the image did not).
	if _, err := MakeImage(tree, m); err != nil {
		t.Fatal(err)
	}
	other := *m
	other.TreeSHA256 = "0000000000000000000000000000000000000000000000000000000000000000"
	if _, _, err := VerifyImage(tree, &other); !errors.Is(err, ErrTampered) {
		t.Errorf("an image of another tree: %v, want ErrTampered", err)
	}
	// An image without its record.
	if err := os.Remove(filepath.Join(tree, imageRecordName)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := VerifyImage(tree, m); !errors.Is(err, ErrTampered) {
		t.Errorf("an image without its record: %v, want ErrTampered", err)
	}
}
