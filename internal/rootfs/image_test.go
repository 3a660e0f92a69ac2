//go:build !unit

package rootfs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/renderbox/renderbox/internal/testenv/exe"
	"github.com/renderbox/renderbox/internal/testenv/tool"
)

// A tree's image is recorded with the tree it was made of, and VerifyImage refuses an image that is not the one recorded or a
// record of another tree.
func TestImage(t *testing.T) {
	tool.Need(t, "mkfs.erofs", "erofs-utils")
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

// An image's contents, read as the Sentry reads them, digest to the tree
// it was made of: the same lines as Digest, in the same order.
func TestImageDigestIsTheTreeDigest(t *testing.T) {
	t.Parallel()
	tool.Need(t, "mkfs.erofs", "erofs-utils")
	tree := synthTree(t)
	m, err := ReadManifest(tree)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := MakeImage(tree, m); err != nil {
		t.Fatal(err)
	}
	d, err := ImageDigest(filepath.Join(tree, ImageName))
	if err != nil || d.SHA256 != m.TreeSHA256 || d.Files != m.Files || d.Bytes != m.Bytes {
		t.Fatalf("ImageDigest = %+v, %v; want the manifest's %s, %d files, %d bytes", d, err, m.TreeSHA256, m.Files, m.Bytes)
	}
}

// A file dropped into the tree while mkfs.erofs reads it, and removed
// again after, so that the tree still verifies, does not reach an image:
// MakeImage reads the image back and refuses it, and so does Import,
// which makes the image of the tree it stages before current moves.
func TestImageRefusesAFileDroppedWhileItIsMade(t *testing.T) {
	// Not parallel: PATH is the test's.
	mkfs := tool.Need(t, "mkfs.erofs", "erofs-utils")
	// mkfs.erofs that drops a file into the directory it is given, runs,
	// and removes the file: an attacker racing it, or a writer it raced.
	bin := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\nfor src; do :; done\necho evil > \"$src/etc/dropped\"\n%s \"$@\"\nrc=$?\nrm -f \"$src/etc/dropped\"\nexit $rc\n", mkfs)
	exe.Write(t, filepath.Join(bin, "mkfs.erofs"), script)
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))

	tree := synthTree(t)
	m, err := ReadManifest(tree)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := MakeImage(tree, m); !errors.Is(err, ErrTampered) {
		t.Errorf("MakeImage with a file dropped during mkfs.erofs: %v, want %v", err, ErrTampered)
	}
	if _, err := Verify(tree); err != nil {
		t.Fatalf("the tree after: %v; want it to verify (the file is gone again)", err)
	}
	for _, name := range []string{ImageName, ImageName + ".tmp", imageRecordName} {
		if _, err := os.Stat(filepath.Join(tree, name)); err == nil {
			t.Errorf("%s was left beside the tree", name)
		}
	}
	ex := export(t, tree)
	refused(t, ex.Path, ex.SHA256, ErrTampered)
}

// VerifyImage reads what the image holds, not only the digest of its
// file: an image of another tree, recorded as if it were this one's (its
// file's digest written after the fact, as MakeImage did once), is
// refused.
func TestVerifyImageReadsTheImagesContents(t *testing.T) {
	t.Parallel()
	tool.Need(t, "mkfs.erofs", "erofs-utils")
	tree := synthTree(t)
	m, err := ReadManifest(tree)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := MakeImage(tree, m)
	if err != nil {
		t.Fatal(err)
	}
	// The same tree but one file, imaged and recorded under its name.
	other := t.TempDir()
	if out, err := exec.Command("cp", "-a", Dir(tree), other).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(other, "rootfs/etc/dropped"), []byte("evil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(tree, ImageName)
	if out, err := exec.Command("mkfs.erofs", "-Enoinline_data", "-x-1", img+".other", Dir(other)).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.erofs: %v %s", err, out)
	}
	if err := os.Rename(img+".other", img); err != nil {
		t.Fatal(err)
	}
	sum, err := fileSHA256(img)
	if err != nil {
		t.Fatal(err)
	}
	forged := *rec
	forged.SHA256 = sum
	b, _ := json.Marshal(forged)
	if err := os.WriteFile(filepath.Join(tree, imageRecordName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := VerifyImage(tree, m); !errors.Is(err, ErrTampered) {
		t.Errorf("an image of another tree under a record of its file's digest: %v, want %v", err, ErrTampered)
	}
}
