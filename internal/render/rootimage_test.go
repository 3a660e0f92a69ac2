//go:build !unit

package render_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/sandbox"
	"github.com/renderbox/renderbox/internal/testenv"
)

// Seen from inside: with the tree's image the root is an EROFS mount, read
// from the image inside the Sentry; without it, the tree through the
// gofer. Either way the root is read-only and holds the tree's files.
func TestRootIsTheImage(t *testing.T) {
	const probe = `sed -n 1,40p /proc/self/mountinfo > /tmp/out/mountinfo.txt
if touch /usr/renderbox-write 2>/dev/null; then echo written; else echo refused; fi > /tmp/out/write.txt
cat /usr/share/renderbox/markdown-style.html > /tmp/out/file.txt`
	want, err := os.ReadFile(filepath.Join(testenv.RootfsDir(t), "usr/share/renderbox/markdown-style.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, image := range []string{"", testenv.GoferRoot} {
		name := map[string]string{"": "image", testenv.GoferRoot: "gofer"}[image]
		t.Run(name, func(t *testing.T) {
			files := shellFiles(t, testenv.Manager(t, sandbox.Config{RootfsImage: image}), probe, 0)
			var root string
			for _, l := range strings.Split(files["mountinfo.txt"], "\n") {
				if f := strings.Fields(l); len(f) > 4 && f[4] == "/" {
					root = l
				}
			}
			t.Logf("root: %s", root)
			_, fstype, _ := strings.Cut(root, " - ")
			if isErofs := strings.HasPrefix(fstype, "erofs "); isErofs != (name == "image") {
				t.Errorf("the root is %q; want erofs only with the image", root)
			}
			if !strings.Contains(root, " ro") {
				t.Errorf("the root is not read-only: %q", root)
			}
			if w := strings.TrimSpace(files["write.txt"]); w != "refused" {
				t.Errorf("writing under /usr: %q, want refused", w)
			}
			if files["file.txt"] != string(want) {
				t.Errorf("a file of the tree reads %d bytes, want the tree's %d", len(files["file.txt"]), len(want))
			}
		})
	}
	// With the image, nothing of the root comes from the tree (which the
	// worker therefore does not digest at its start, only the mask file:
	// hostcheck's checkRootfs): over a decoy tree holding only a
	// placeholder agent, the mask file and a changed file, the sandbox
	// runs the image's agent and reads the image's file.
	t.Run("image over a decoy tree", func(t *testing.T) {
		decoy := t.TempDir()
		for name, data := range map[string]string{strings.TrimPrefix(sandbox.AgentPath, "/"): "not the agent", "usr/share/renderbox/markdown-style.html": "decoy",
			strings.TrimPrefix(sandbox.MaskFile, "/"): ""} {
			if err := os.MkdirAll(filepath.Join(decoy, filepath.Dir(name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(decoy, name), []byte(data), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		m := testenv.Manager(t, sandbox.Config{Rootfs: decoy, RootfsImage: testenv.RootfsImage(t)})
		if got := shellFiles(t, m, probe, 0)["file.txt"]; got != string(want) {
			t.Errorf("a file of the root reads %q (%d bytes), want the image's %d bytes", got[:min(len(got), 40)], len(got), len(want))
		}
	})
}
