package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/renderbox/renderbox/internal/wire"
)

// pdf-bookmarks: a PDF's outline read as JSON, or written from JSON. The
// rootfs's pdf-outline.py does both with pikepdf in the sandbox; what it
// writes comes from JSON the host checked, handed over as data.

func init() {
	r := pdfRenderer("pdf-bookmarks",
		"Read a PDF's bookmarks (its outline) as JSON with pikepdf: {\"bookmarks\": [{\"title\", \"page\" (from 1; absent for a bookmark that goes nowhere in the document), \"children\"}]}; or, given bookmarks, replace them with those. Output: bookmarks.json when reading, output.pdf when writing.",
		[]Option{bookmarksOpt}, bookmarksSteps)
	r.Output = TypeJSON
	catalogue[r.Name] = resolve(r)
	outputRules[r.Name] = outputRule{re: regexp.MustCompile(`^(bookmarks\.json|output\.pdf)$`)}
}

// Bounds of the bookmarks a job writes.
const (
	maxBookmarks     = 2000
	maxBookmarkDepth = 8
	// maxBookmarksJSON: the JSON reaches the sandbox as one argument of a
	// step, and Linux takes none over 128 KiB (MAX_ARG_STRLEN).
	maxBookmarksJSON = 120 << 10
)

// bookmark is one entry of the outline a job writes.
type bookmark struct {
	Title    string     `json:"title"`
	Page     int        `json:"page"`
	Children []bookmark `json:"children,omitempty"`
}

var bookmarksOpt = func() Option {
	o := textOpt("bookmarks", fmt.Sprintf(`The bookmarks to write instead of reading them, as JSON: [{"title": "Introduction", "page": 1, "children": [...]}, ...]; titles 1-%d bytes without control characters, pages from 1 (a page past the document's end fails the job), at most %d bookmarks, %d levels deep.`, maxTitle, maxBookmarks, maxBookmarkDepth), maxBookmarksJSON)
	o.more = func(s string) error {
		_, err := parseBookmarks(s)
		return err
	}
	return o
}()

// parseBookmarks reads and checks the JSON of bookmarks.
func parseBookmarks(s string) ([]bookmark, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var bs []bookmark
	if err := dec.Decode(&bs); err != nil {
		return nil, fmt.Errorf("not a JSON list of {title, page, children}: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	n := 0
	var check func([]bookmark, int) error
	check = func(level []bookmark, depth int) error {
		if depth > maxBookmarkDepth {
			return fmt.Errorf("bookmarks nested deeper than %d levels", maxBookmarkDepth)
		}
		for _, b := range level {
			if n++; n > maxBookmarks {
				return fmt.Errorf("more than %d bookmarks", maxBookmarks)
			}
			if strings.TrimSpace(b.Title) == "" || len(b.Title) > maxTitle {
				return fmt.Errorf("bookmark %d: the title is blank or over %d bytes", n, maxTitle)
			}
			if r, bad := controlIn(b.Title); bad {
				return fmt.Errorf("bookmark %d: the title holds the control character %U", n, r)
			}
			if b.Page < 1 || b.Page > 1000000 {
				return fmt.Errorf("bookmark %d (%q): page %d, want 1 or more", n, b.Title, b.Page)
			}
			if err := check(b.Children, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if len(bs) == 0 {
		return nil, fmt.Errorf("no bookmark (to remove them all, use pdf-pages or qpdf)")
	}
	return bs, check(bs, 1)
}

func bookmarksSteps(in inputFile, v Values) ([]wire.Step, error) {
	if !v.Has("bookmarks") {
		return []wire.Step{{Argv: []string{"/usr/bin/python3", "-I", pdfOutlineScript, "read", in.Path, wire.OutputDir + "/bookmarks.json"}}}, nil
	}
	bs, err := parseBookmarks(v.String("bookmarks"))
	if err != nil {
		return nil, fmt.Errorf("%w: bookmarks: %v", ErrInvalidOptions, err)
	}
	// Written again from what was checked: the script reads only that.
	var data bytes.Buffer
	if err := json.NewEncoder(&data).Encode(bs); err != nil {
		return nil, err
	}
	file := wire.WorkDir + "/bookmarks.json"
	return []wire.Step{
		{Argv: []string{"/usr/bin/printf", "%s", data.String()}, Stdout: file},
		{Argv: []string{"/usr/bin/python3", "-I", pdfOutlineScript, "write", in.Path, file, wire.OutputDir + "/output.pdf"}},
	}, nil
}

// controlIn returns the first control character (or U+FFFD, what invalid
// UTF-8 decodes to) of a line of text.
func controlIn(s string) (rune, bool) {
	for _, r := range s {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return r, true
		}
	}
	return 0, false
}
