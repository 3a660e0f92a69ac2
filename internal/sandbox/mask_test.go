//go:build !unit

package sandbox_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// The mask file is what a sandbox with the rootfs image opens of the tree:
// the worker refuses one that is not the empty, read-only, root-owned file
// make rootfs installs, or that sits under a symlink or a directory
// another user may write.
func TestCheckMaskFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the mask file's check looks at owners: run it as root (go test as root, or make test)")
	}
	if err := sandbox.CheckMaskFile(testenv.RootfsDir(t)); err != nil {
		t.Errorf("the built tree: %v", err)
	}
	mask := strings.TrimPrefix(sandbox.MaskFile, "/")
	for _, c := range []struct {
		name string
		bend func(root string) error
		want string // in the error; "" for none
	}{
		{"as built", func(string) error { return nil }, ""},
		{"not empty", func(root string) error { return os.WriteFile(filepath.Join(root, mask), []byte("x"), 0o444) }, "of 1 bytes"},
		{"writable", func(root string) error { return os.Chmod(filepath.Join(root, mask), 0o644) }, "-rw-r--r--"},
		{"setuid", func(root string) error { return os.Chmod(filepath.Join(root, mask), 0o444|os.ModeSetuid) }, "want an empty"},
		{"not root's", func(root string) error { return os.Chown(filepath.Join(root, mask), 65534, 0) }, "is not root's"},
		{"a symlink", func(root string) error {
			p := filepath.Join(root, mask)
			return errors.Join(os.Remove(p), os.Symlink("/dev/null", p))
		}, "want an empty"},
		{"under a symlink", func(root string) error {
			dir := filepath.Join(root, "usr/share/renderbox")
			return errors.Join(os.Rename(dir, dir+".real"), os.Symlink("renderbox.real", dir))
		}, "want a directory only root may write"},
		{"under a writable directory", func(root string) error { return os.Chmod(filepath.Join(root, "usr/share"), 0o777) }, "want a directory only root may write"},
		{"missing", func(root string) error { return os.Remove(filepath.Join(root, mask)) }, "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.Chmod(root, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(root, filepath.Dir(mask)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, mask), nil, 0o444); err != nil {
				t.Fatal(err)
			}
			if err := c.bend(root); err != nil {
				t.Fatal(err)
			}
			err := sandbox.CheckMaskFile(root)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}
