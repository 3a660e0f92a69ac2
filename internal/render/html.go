package render

import (
	"bytes"
	"unicode/utf8"
)

// htmlElements are the element names that begin an HTML document or a
// fragment of one as browsers take them: a page may start with any of
// these (after a BOM, comments, an XML declaration or a doctype) and
// Chromium renders it as HTML.
var htmlElements = map[string]bool{}

func init() {
	for _, e := range bytes.Fields([]byte(`html head body meta title link style script base noscript template
		main header footer nav section article aside address h1 h2 h3 h4 h5 h6 hgroup p div span pre blockquote
		ol ul li dl dt dd figure figcaption hr br a b i u s em strong small mark code kbd samp var sub sup q cite
		abbr time data img picture source video audio canvas iframe object embed table caption colgroup col thead
		tbody tfoot tr td th form fieldset legend label input button select textarea details summary dialog
		center font`)) {
		htmlElements[string(e)] = true
	}
}

// isHTML reports whether head begins as an HTML document or fragment: it
// skips a UTF-8 BOM, white space, comments and an XML declaration, then
// wants an HTML doctype or one of htmlElements' start tags (any case).
func isHTML(head []byte) bool {
	s := bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	for {
		s = bytes.TrimLeft(s, " \t\r\n\f")
		switch {
		case bytes.HasPrefix(s, []byte("<!--")):
			i := bytes.Index(s, []byte("-->"))
			if i < 0 {
				return false
			}
			s = s[i+3:]
		case bytes.HasPrefix(s, []byte("<?xml")):
			i := bytes.Index(s, []byte("?>"))
			if i < 0 {
				return false
			}
			s = s[i+2:]
		case len(s) >= 9 && bytes.EqualFold(s[:9], []byte("<!doctype")):
			rest := bytes.TrimLeft(s[9:], " \t\r\n")
			return len(rest) >= 4 && bytes.EqualFold(rest[:4], []byte("html"))
		default:
			return startTag(s)
		}
	}
}

// startTag reports whether s begins with "<name" for one of htmlElements,
// followed by white space, ">" or "/".
func startTag(s []byte) bool {
	if len(s) < 2 || s[0] != '<' {
		return false
	}
	i := 1
	for i < len(s) && i < 12 && isAlnum(s[i]) {
		i++
	}
	if i == 1 || i >= len(s) || !bytes.ContainsRune([]byte(" \t\r\n\f>/"), rune(s[i])) {
		return false
	}
	return htmlElements[string(bytes.ToLower(s[1:i]))]
}

// containsHTMLTag reports whether head has a start tag of htmlElements
// anywhere.
func containsHTMLTag(head []byte) bool {
	for i := bytes.IndexByte(head, '<'); i >= 0; {
		if startTag(head[i:]) {
			return true
		}
		j := bytes.IndexByte(head[i+1:], '<')
		if j < 0 {
			return false
		}
		i += 1 + j
	}
	return false
}

func isAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// isText reports whether b is UTF-8 text (a BOM allowed): valid UTF-8 with
// no NUL and no control character but tab, line feed, form feed and
// carriage return.
func isText(b []byte) bool {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	if !utf8.Valid(b) {
		return false
	}
	for _, c := range b {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' {
			return false
		}
		if c == 0x7f {
			return false
		}
	}
	return true
}
