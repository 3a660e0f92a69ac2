// Not under the race detector: it makes gzip and SHA-256 over 1.5 GiB
// some ten times slower (11 minutes instead of one) and has nothing to
// find in a sequential export; scripts/test.sh runs this test without it.

//go:build !unit && !race

package rootfs_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/rootfs"
	"github.com/renderbox/renderbox/internal/testenv"
)

// The built rootfs (make rootfs) round-trips: exported, imported into an
// empty rootfs directory, it verifies with the same digest and current
// names it; exported again it gives the same archive.
func TestExportImportBuiltTree(t *testing.T) {
	tree, err := filepath.EvalSymlinks(testenv.RootfsTree(t))
	if err != nil {
		t.Fatal(err)
	}
	src, err := rootfs.ReadManifest(tree)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	start := time.Now()
	ex, err := rootfs.Export(tree, out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("export: %d files, %d MiB into %d MiB in %.1fs", src.Files, src.Bytes>>20, ex.Size>>20, time.Since(start).Seconds())

	dir := filepath.Join(t.TempDir(), "rootfs")
	start = time.Now()
	im, err := rootfs.Import(ex.Path, ex.SHA256, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("import: %.1fs", time.Since(start).Seconds())
	if err := os.Remove(ex.Path); err != nil { // half a gigabyte less on disk
		t.Fatal(err)
	}
	m, err := rootfs.Verify(filepath.Join(dir, rootfs.CurrentName))
	if err != nil || m.TreeSHA256 != src.TreeSHA256 {
		t.Fatalf("the imported tree: %v; want it to verify with digest %s", err, src.TreeSHA256)
	}
	// Its image, made and read back by the import, is what the worker
	// verifies at start.
	start = time.Now()
	if img, rec, err := rootfs.VerifyImage(filepath.Join(dir, rootfs.CurrentName), m); err != nil || img == "" || im.Image == nil || *rec != *im.Image {
		t.Fatalf("the imported tree's image: %q, %+v, %v; want the one the import made (%+v), verified", img, rec, err, im.Image)
	}
	t.Logf("image verified: %.1fs", time.Since(start).Seconds())
	start = time.Now()
	again, err := rootfs.Export(im.Tree, out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("export of the imported tree: %.1fs", time.Since(start).Seconds())
	if again.SHA256 != ex.SHA256 {
		t.Errorf("the imported tree exports to %s, the built one to %s; want the same archive", again.SHA256, ex.SHA256)
	}
}
