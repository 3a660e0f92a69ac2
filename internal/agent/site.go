package agent

import (
	"fmt"
	"io/fs"
	"mime"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/renderbox/renderbox/internal/wire"
)

// site is what the page may load from its own origin: its files by their
// paths, read into memory before the page loads, so nothing the renderer
// does afterwards changes what is served.
type site struct {
	files    map[string][]byte
	page     []byte // the page itself, served as HTML at pagePath
	pagePath string
}

// loadSite reads the page and, if dir is set, every regular file below it.
// Only regular files are served: the unpacker makes nothing else, and a
// symlink found here is skipped, never followed.
func loadSite(pageFile, dir, pagePath string) (*site, error) {
	page, err := os.ReadFile(pageFile)
	if err != nil {
		return nil, fmt.Errorf("reading the page: %w", err)
	}
	s := &site{files: map[string][]byte{}, page: page, pagePath: pagePath}
	if dir == "" {
		return s, nil
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || !wire.ValidSitePath(filepath.ToSlash(rel)) {
			return nil
		}
		b, err := readRegular(p)
		if err != nil {
			return err
		}
		s.files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the job's files: %w", err)
	}
	return s, nil
}

// readRegular reads p if it is a regular file, without following a link.
func readRegular(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	b := make([]byte, st.Size())
	_, err = f.ReadAt(b, 0)
	return b, err
}

// lookup answers a GET of rawURL on the page's origin: the page, a file,
// or (ok false) nothing. Another origin is the caller's to refuse.
func (s *site) lookup(rawURL string) (body []byte, contentType string, ok bool) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, "", false
	}
	p := strings.TrimPrefix(path.Clean("/"+u.EscapedPath()), "/")
	if dec, err := url.PathUnescape(p); err == nil {
		p = dec
	}
	if p == s.pagePath {
		return s.page, "text/html; charset=utf-8", true
	}
	b, ok := s.files[p]
	if !ok {
		return nil, "", false
	}
	return b, contentTypeOf(p), true
}

// siteTypes are the media types of what pages load, by extension; the rest
// is application/octet-stream.
var siteTypes = map[string]string{
	".html": "text/html; charset=utf-8", ".htm": "text/html; charset=utf-8", ".xhtml": "application/xhtml+xml",
	".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".mjs": "text/javascript; charset=utf-8",
	".json": "application/json", ".svg": "image/svg+xml", ".png": "image/png", ".jpg": "image/jpeg",
	".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp", ".avif": "image/avif", ".ico": "image/x-icon",
	".woff": "font/woff", ".woff2": "font/woff2", ".ttf": "font/ttf", ".otf": "font/otf", ".txt": "text/plain; charset=utf-8",
	".csv": "text/csv; charset=utf-8", ".xml": "application/xml", ".md": "text/markdown; charset=utf-8",
}

func contentTypeOf(p string) string {
	if t, ok := siteTypes[strings.ToLower(path.Ext(p))]; ok {
		return t
	}
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// pageURLFor is the URL the page is served at.
func pageURLFor(pagePath string) string {
	return pageURL + (&url.URL{Path: pagePath}).EscapedPath()
}
