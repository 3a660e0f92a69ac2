package doccheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunnableTakesMarkedShellBlocksOnly(t *testing.T) {
	md := strings.Join([]string{
		"# Title",
		"```sh",
		"echo unmarked",
		"```",
		Marker,
		"```sh",
		"echo one",
		"echo two",
		"```",
		"text",
		"    " + Marker, // an example inside an indented block: not a marker
		"    ```sh",
		"    echo example",
		"    ```",
		Marker,
		"```bash",
		"echo three",
		"```",
	}, "\n")
	blocks, err := Runnable("x.md", []byte(md))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 {
		t.Fatalf("got %d blocks, want 2: %+v", len(blocks), blocks)
	}
	if blocks[0].Text != "echo one\necho two\n" || blocks[0].Line != 6 || blocks[0].File != "x.md" {
		t.Errorf("first block: %+v", blocks[0])
	}
	if blocks[1].Text != "echo three\n" || blocks[1].Line != 16 {
		t.Errorf("second block: %+v", blocks[1])
	}
}

// A marker that marks nothing is an error, so a command meant to be
// tested cannot drop out of the test by a blank line or a wrong fence.
func TestRunnableRefusesAStrayMarker(t *testing.T) {
	for name, md := range map[string]string{
		"blank line":    Marker + "\n\n```sh\necho\n```\n",
		"not shell":     Marker + "\n```go\nfmt.Println()\n```\n",
		"indented code": Marker + "\n    echo\n",
		"at the end":    "text\n" + Marker,
		"not closed":    Marker + "\n```sh\necho\n",
	} {
		if _, err := Runnable("x.md", []byte(md)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestLinksAndAnchors(t *testing.T) {
	md := "# The ledger: `-db`\n\n## Warm sandboxes: the pool\n\n## Warm sandboxes: the pool\n\nSee [a](api.md#the-contract), [b](#x) and `[c](not.md)`.\n\n    [d](indented.md)\n\n```\n[e](fenced.md)\n```\n"
	links := Links([]byte(md))
	if len(links) != 2 || links[0].Target != "api.md#the-contract" || links[1].Target != "#x" || links[0].Line != 7 {
		t.Errorf("links: %+v", links)
	}
	a := Anchors([]byte(md))
	for _, want := range []string{"the-ledger--db", "warm-sandboxes-the-pool", "warm-sandboxes-the-pool-1"} {
		if !a[want] {
			t.Errorf("no anchor %q in %v", want, a)
		}
	}
	if got := Slug("Systrap's fast path is off"); got != "systraps-fast-path-is-off" {
		t.Errorf("Slug: %q", got)
	}
}

func TestCheckLinksFindsMissingFilesAndAnchors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "b.md"), []byte("# Here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(dir, "a.md")
	md := "[ok](b.md#here) [ok](b.md) [web](https://example.com/x.md) [no file](c.md) [no anchor](b.md#there) [self](#nowhere)\n"
	if err := os.WriteFile(a, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	problems, err := CheckLinks(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 3 {
		t.Fatalf("got %d problems, want 3: %q", len(problems), problems)
	}
	for i, want := range []string{"c.md: no such file", "b.md#there", "#nowhere"} {
		if !strings.Contains(problems[i], want) {
			t.Errorf("problem %d: %q, want it to name %q", i, problems[i], want)
		}
	}
}

// The README is the front door: short enough to read, its reference in
// docs/.
func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > 250 {
		t.Errorf("README.md has %d lines, at most 250: move reference material to docs/", n)
	}
}

// Every relative link in README.md and docs/*.md names a file that exists
// and, with an anchor, a heading in it; every runnable marker marks a block.
func TestDocumentationLinksResolve(t *testing.T) {
	files, err := Files(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		problems, err := CheckLinks(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Error(p)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Runnable(f, b); err != nil {
			t.Error(err)
		}
	}
}
