package render

import (
	"bytes"
	"net/http"
	"strings"
)

// Sniff returns the media type of input judged from its bytes alone.
func Sniff(input []byte) string {
	head := input
	if len(head) > 4096 {
		head = head[:4096]
	}
	if len(input) == 0 {
		return "application/x-empty"
	}
	if bytes.HasPrefix(head, []byte("%PDF-")) {
		return "application/pdf"
	}
	if isSVG(head) {
		return "image/svg+xml"
	}
	t := http.DetectContentType(head)
	t, _, _ = strings.Cut(t, ";")
	return t
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
