package render

import (
	"bytes"
	"image"
	_ "image/gif" // header decoders for the megapixel check
	_ "image/jpeg"
	_ "image/png"
	"net/http"
	"strings"

	"golang.org/x/image/tiff"
	_ "golang.org/x/image/webp"
)

// Media types the catalogue speaks of.
const (
	TypePDF      = "application/pdf"
	TypeSVG      = "image/svg+xml"
	TypeHTML     = "text/html"
	TypeText     = "text/plain"
	TypeDOT      = "text/vnd.graphviz"
	TypePNG      = "image/png"
	TypeJPEG     = "image/jpeg"
	TypeGIF      = "image/gif"
	TypeWebP     = "image/webp"
	TypeTIFF     = "image/tiff"
	TypeRTF      = "application/rtf"
	TypeDOCX     = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
	TypeXLSX     = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
	TypePPTX     = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
	TypeODT      = "application/vnd.oasis.opendocument.text"
	TypeODS      = "application/vnd.oasis.opendocument.spreadsheet"
	TypeODP      = "application/vnd.oasis.opendocument.presentation"
	TypeZIP      = "application/zip"
	TypeEmpty    = "application/x-empty"
	TypeUnknown  = "application/octet-stream"
	TypeMarkdown = "text/markdown"
)

// Sniff returns the media type of input judged from its bytes alone. It
// reads headers and, for ZIP containers, the central directory's names; it
// never decompresses or decodes content. A ZIP whose directory is over the
// caps or disagrees with its end record is application/zip here; Prepare
// refuses it.
func Sniff(input []byte) string {
	t, _ := sniff(input)
	return t
}

// sniff is Sniff with the refusal of a ZIP directory over zipdir's caps (an
// ErrInputTooLarge error) or one that disagrees with its end record (an
// ErrInvalidInput error).
func sniff(input []byte) (string, error) {
	if len(input) == 0 {
		return TypeEmpty, nil
	}
	head := input
	if len(head) > 4096 {
		head = head[:4096]
	}
	if t := sniffOffice(input, head); t != "" {
		return t, nil
	}
	switch {
	case bytes.HasPrefix(head, []byte("%PDF-")):
		return TypePDF, nil
	case bytes.HasPrefix(head, []byte(`{\rtf`)):
		return TypeRTF, nil
	case bytes.HasPrefix(head, []byte("II*\x00")) || bytes.HasPrefix(head, []byte("MM\x00*")):
		return TypeTIFF, nil
	case bytes.HasPrefix(head, []byte("PK\x03\x04")):
		return sniffZip(input)
	case isSVG(head):
		return TypeSVG, nil
	case isDOT(head):
		return TypeDOT, nil
	case isHTML(head):
		return TypeHTML, nil
	}
	t := http.DetectContentType(head)
	t, _, _ = strings.Cut(t, ";")
	if t == TypeText && containsHTMLTag(head) && isText(input) {
		// Text that starts as prose and goes on as markup is HTML as a
		// browser would take it.
		return TypeHTML, nil
	}
	return t, nil
}

// sniffZip tells OOXML and ODF documents from other ZIP files.
func sniffZip(input []byte) (string, error) {
	// ODF puts an uncompressed "mimetype" entry first (ODF 1.2, 3.3).
	if len(input) > 38 && string(input[30:38]) == "mimetype" {
		rest := input[38:min(len(input), 38+80)]
		for _, t := range mimetypeFirst {
			if bytes.HasPrefix(rest, []byte(t)) && (len(rest) == len(t) || !isMimeChar(rest[len(t)])) {
				return t, nil
			}
		}
	}
	return sniffZipDirectory(input)
}

func isMimeChar(c byte) bool {
	return c == '.' || c == '-' || c == '+' || (c >= 'a' && c <= 'z')
}

// isSVG reports whether head is XML whose root element is <svg>: it skips
// a BOM, the XML declaration, comments, processing instructions and a
// doctype, then expects "<svg".
func isSVG(head []byte) bool {
	s := bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	for {
		s = bytes.TrimLeft(s, " \t\r\n")
		switch {
		case bytes.HasPrefix(s, []byte("<?")):
			i := bytes.Index(s, []byte("?>"))
			if i < 0 {
				return false
			}
			s = s[i+2:]
		case bytes.HasPrefix(s, []byte("<!--")):
			i := bytes.Index(s, []byte("-->"))
			if i < 0 {
				return false
			}
			s = s[i+3:]
		case bytes.HasPrefix(s, []byte("<!DOCTYPE")) || bytes.HasPrefix(s, []byte("<!doctype")):
			// A doctype may carry an internal subset in brackets.
			if i := bytes.IndexByte(s, '['); i >= 0 && i < bytes.IndexByte(s, '>') {
				j := bytes.Index(s, []byte("]>"))
				if j < 0 {
					return false
				}
				s = s[j+2:]
				continue
			}
			i := bytes.IndexByte(s, '>')
			if i < 0 {
				return false
			}
			s = s[i+1:]
		default:
			return bytes.HasPrefix(s, []byte("<svg")) && len(s) > 4 && strings.ContainsRune(" \t\r\n>/", rune(s[4]))
		}
	}
}

// isDOT reports whether head starts like a Graphviz graph: comments, then
// optionally "strict", then "graph" or "digraph", an optional ID and "{".
func isDOT(head []byte) bool {
	s := string(bytes.TrimPrefix(head, []byte("\xef\xbb\xbf")))
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		switch {
		case strings.HasPrefix(s, "//") || strings.HasPrefix(s, "#"):
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				return false
			}
			s = s[i+1:]
			continue
		case strings.HasPrefix(s, "/*"):
			i := strings.Index(s, "*/")
			if i < 0 {
				return false
			}
			s = s[i+2:]
			continue
		}
		break
	}
	words := strings.Fields(strings.ToLower(s))
	if len(words) > 0 && words[0] == "strict" {
		words = words[1:]
	}
	if len(words) == 0 {
		return false
	}
	kw, rest, _ := strings.Cut(words[0], "{")
	if kw != "graph" && kw != "digraph" {
		return false
	}
	if strings.Contains(words[0], "{") {
		_ = rest
		return true
	}
	// "digraph G {" or "digraph {" or "digraph "G" {"
	for _, w := range words[1:min(len(words), 3)] {
		if strings.HasPrefix(w, "{") || strings.HasSuffix(w, "{") {
			return true
		}
	}
	return false
}

// imageSize reads an image's dimensions from its header without decoding
// its pixels.
func imageSize(input []byte) (w, h int, err error) {
	var cfg image.Config
	if bytes.HasPrefix(input, []byte("II*\x00")) || bytes.HasPrefix(input, []byte("MM\x00*")) {
		// image.DecodeConfig hands the TIFF decoder a bufio.Reader, which
		// it copies into a buffer as far as the header's IFD offset says
		// (10 MB for a 9-byte input, found by FuzzImageHeader); given a
		// ReaderAt, it reads in place and an offset past the end fails.
		cfg, err = tiff.DecodeConfig(bytes.NewReader(input))
	} else {
		cfg, _, err = image.DecodeConfig(bytes.NewReader(input))
	}
	if err != nil {
		return 0, 0, err
	}
	return cfg.Width, cfg.Height, nil
}
