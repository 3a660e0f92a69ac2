package render

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/renderbox/renderbox/internal/bytesize"
	"github.com/renderbox/renderbox/internal/wire"
	"github.com/renderbox/renderbox/internal/zipdir"
)

// siteRule is how a renderer takes several files: a ZIP whose files the
// page may load from its own origin, one of them the entry point.
type siteRule struct {
	// defaultEntry is the entry when the request names none and the
	// archive has it; else the first file with one of entryExts is.
	defaultEntry string
	entryExts    []string
	maxFiles     int
	maxBytes     int64 // unpacked, in all
}

// Bounds of a site: enough for a report's page, stylesheets, images and
// fonts; the renderer's /tmp holds them with Chromium's own files.
const (
	MaxSiteFiles = 1000
	MaxSiteBytes = 200 << 20
)

var (
	htmlSite     = &siteRule{defaultEntry: "index.html", entryExts: []string{".html", ".htm", ".xhtml"}, maxFiles: MaxSiteFiles, maxBytes: MaxSiteBytes}
	markdownSite = &siteRule{defaultEntry: "index.md", entryExts: []string{".md", ".markdown"}, maxFiles: MaxSiteFiles, maxBytes: MaxSiteBytes}
)

// siteDir is where a site is unpacked in the sandbox.
const siteDir = wire.InputDir + "/site"

// check reads a ZIP's directory (nothing is decompressed here: the
// sandbox unpacks it) and returns the entry point: the one named, the
// rule's default, or the first file with an entry extension. Every entry
// must be a file or directory with a site path, stored or deflated, not
// encrypted, within the rule's count and unpacked size; each of refs (other
// files an option names) must be there.
func (rule *siteRule) check(input []byte, entry string, refs map[string]string) (string, error) {
	var files []string
	has := map[string]bool{}
	var total uint64
	err := zipEntries(input, func(e *zipdir.Entry) error {
		name, dir := string(e.Name), false
		if strings.HasSuffix(name, "/") {
			name, dir = strings.TrimSuffix(name, "/"), true
		}
		switch {
		case !wire.ValidSitePath(name):
			return fmt.Errorf("%w: archive entry %q: a path must be relative, without \"..\" and without \\ \" < > & ' %% ? # or control characters", ErrInvalidInput, name)
		case e.Flags&1 != 0:
			return fmt.Errorf("%w: archive entry %q is encrypted", ErrInvalidInput, name)
		case e.Method != 0 && e.Method != 8:
			return fmt.Errorf("%w: archive entry %q is compressed with method %d; only stored and deflated entries are read", ErrInvalidInput, name, e.Method)
		case e.UnixMode&0o170000 != 0 && e.UnixMode&0o170000 != 0o100000 && e.UnixMode&0o170000 != 0o040000:
			return fmt.Errorf("%w: archive entry %q is not a file or a directory (a link?)", ErrInvalidInput, name)
		case dir || e.UnixMode&0o170000 == 0o040000:
			return nil
		case has[name]:
			return fmt.Errorf("%w: archive entry %q appears twice", ErrInvalidInput, name)
		}
		has[name] = true
		files = append(files, name)
		if len(files) > rule.maxFiles {
			return fmt.Errorf("%w: the archive holds more than %d files", ErrInputTooLarge, rule.maxFiles)
		}
		if total += uint64(e.Size); total > uint64(rule.maxBytes) {
			return fmt.Errorf("%w: the archive unpacks to more than %s", ErrInputTooLarge, bytesize.String(rule.maxBytes))
		}
		return nil
	})
	if errors.Is(err, zipdir.ErrNotZip) {
		return "", fmt.Errorf("%w: the ZIP's directory cannot be read: %v", ErrInvalidInput, err)
	}
	if err != nil {
		return "", err
	}
	for opt, ref := range refs {
		if ref != "" && !has[ref] {
			return "", fmt.Errorf("%w: option %s names %q, which the archive does not hold", ErrInvalidOptions, opt, ref)
		}
	}
	switch {
	case entry != "" && has[entry]:
		return entry, nil
	case entry != "":
		return "", fmt.Errorf("%w: option entry names %q, which the archive does not hold (it has %s)", ErrInvalidOptions, entry, listSome(files))
	case has[rule.defaultEntry]:
		return rule.defaultEntry, nil
	}
	for _, f := range files {
		if slices.Contains(rule.entryExts, strings.ToLower(path.Ext(f))) {
			return f, nil
		}
	}
	return "", fmt.Errorf("%w: the archive has no %s and no file ending in %s to start from (it has %s); name one with option entry",
		ErrInvalidInput, rule.defaultEntry, strings.Join(rule.entryExts, ", "), listSome(files))
}

// listSome names the first few files.
func listSome(files []string) string {
	if len(files) == 0 {
		return "no files"
	}
	if len(files) > 5 {
		return strings.Join(files[:5], ", ") + fmt.Sprintf(" and %d more", len(files)-5)
	}
	return strings.Join(files, ", ")
}
