//go:build !unit

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/renderbox/renderbox/internal/doccheck"
)

// Every shell block README.md and docs/*.md mark runnable runs as written
// against a live stack: the commands a newcomer copies work, downloads
// included (docs/testing.md, "Commands in the documentation run as
// written").
func TestDocCommands(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	files, err := doccheck.Files(root)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []doccheck.Block
	for _, f := range files {
		md, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		bs, err := doccheck.Runnable(f, md)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, bs...)
	}
	if len(blocks) == 0 {
		t.Fatal("no runnable block in README.md or docs/*.md")
	}
	s := newStack(t, stackOpts{})
	key := s.key("doc-commands")
	// A scratch directory that looks like the repository's top to the
	// blocks: examples/ and bin/ with the binaries under test.
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "examples"), filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bins, filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		rel, _ := filepath.Rel(root, b.File)
		t.Run(rel+":"+strconv.Itoa(b.Line), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", b.Text)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "RENDERBOX_SERVER="+s.base, "RENDERBOX_KEY="+key,
				"HOME="+dir, "RENDERBOX_KEY_FILE=", "RENDERBOX_CONFIG=")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s:%d: %v\n--- block:\n%s--- output:\n%s", rel, b.Line, err, b.Text, out)
			}
			t.Logf("%s:%d:\n%s", rel, b.Line, out)
		})
	}
}
