// Package doccheck reads the repository's Markdown (README.md and docs/)
// for what tests check in it: the shell blocks marked runnable, which the
// end-to-end suite runs against a live stack, and the relative links, which
// must name files and headings that exist. docs/testing.md, "Commands in
// the documentation run as written", describes the marking.
package doccheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Marker is the line that marks the shell block right after it runnable.
const Marker = "<!-- runnable -->"

// Block is one runnable shell block.
type Block struct {
	File string // as given to Runnable
	Line int    // of the opening fence, from 1
	Text string // the block's lines, without the fences
}

// shellFence opens a block Runnable takes.
var shellFence = regexp.MustCompile("^```(sh|bash|shell)\\s*$")

// Runnable returns the runnable blocks of md, the Markdown of file, in
// order. A marker that is not directly followed by a shell fence, or a
// fence left open, is an error: a marked command must not silently drop
// out of the test.
func Runnable(file string, md []byte) ([]Block, error) {
	lines := strings.Split(string(md), "\n")
	var blocks []Block
	for i := 0; i < len(lines); i++ {
		if strings.TrimRight(lines[i], " \t\r") != Marker {
			continue
		}
		if i+1 >= len(lines) || !shellFence.MatchString(strings.TrimRight(lines[i+1], "\r")) {
			return nil, fmt.Errorf("%s:%d: %s is not followed by a ```sh fence on the next line", file, i+1, Marker)
		}
		start := i + 1
		var body []string
		closed := false
		for i = start + 1; i < len(lines); i++ {
			if strings.TrimRight(lines[i], " \t\r") == "```" {
				closed = true
				break
			}
			body = append(body, lines[i])
		}
		if !closed {
			return nil, fmt.Errorf("%s:%d: the runnable block is not closed", file, start+1)
		}
		blocks = append(blocks, Block{File: file, Line: start + 1, Text: strings.Join(body, "\n") + "\n"})
	}
	return blocks, nil
}

// Files returns README.md and every docs/*.md under root, in that order.
func Files(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	return append([]string{filepath.Join(root, "README.md")}, docs...), nil
}

// Link is a Markdown link's target, where it was found.
type Link struct {
	Line   int
	Target string
}

var (
	inlineLink = regexp.MustCompile(`\]\(([^()\s]+)\)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
)

// Links returns the inline links of md outside code blocks and code spans.
func Links(md []byte) []Link {
	var links []Link
	fenced := false
	for i, line := range strings.Split(string(md), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t") {
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			links = append(links, Link{Line: i + 1, Target: m[1]})
		}
	}
	return links
}

// Anchors returns the anchors GitHub makes of md's headings: lower case,
// punctuation but '-' and '_' dropped, spaces as '-', a repeated one
// suffixed -1, -2, ….
func Anchors(md []byte) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(md), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := Slug(text)
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// Slug is the anchor of a heading whose text is text, as GitHub makes
// it: letters, marks, digits, '_' and '-' kept (lower case), spaces as '-',
// everything else dropped.
func Slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// CheckLinks returns a problem for each relative link of the Markdown file
// path that names no existing file, or no heading of the file it names.
func CheckLinks(path string) ([]string, error) {
	md, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, l := range Links(md) {
		t := l.Target
		if strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") {
			continue
		}
		file, anchor, _ := strings.Cut(t, "#")
		target := path
		if file != "" {
			target = filepath.Join(filepath.Dir(path), file)
		}
		fi, err := os.Stat(target)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s:%d: %s: no such file", path, l.Line, t))
			continue
		}
		if anchor == "" || fi.IsDir() || !strings.HasSuffix(target, ".md") {
			continue
		}
		b, err := os.ReadFile(target)
		if err != nil {
			return nil, err
		}
		if !Anchors(b)[anchor] {
			problems = append(problems, fmt.Sprintf("%s:%d: %s: %s has no heading with the anchor #%s", path, l.Line, t, target, anchor))
		}
	}
	return problems, nil
}
