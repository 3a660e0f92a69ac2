package render

import (
	"errors"
	"fmt"
	"mime"
	"sort"
	"strconv"
	"strings"
)

// TypeCSV is comma-separated values; like Markdown, only a client's
// declaration tells it from other text.
const TypeCSV = "text/csv"

// declarable are the types a client may declare for bytes that are text,
// by the names it may use for them. Bytes sniffed as another type are
// taken as the declared one when they are text: a page that starts with
// prose, CSV, Markdown that looks like HTML.
var declarable = map[string]string{
	"text/html": TypeHTML, "application/xhtml+xml": TypeHTML,
	"text/plain": TypeText, "text/markdown": TypeMarkdown, "text/x-markdown": TypeMarkdown,
	"text/csv": TypeCSV, "text/vnd.graphviz": TypeDOT,
}

// DeclarableTypes lists the media types a client may declare, sorted.
func DeclarableTypes() []string {
	ts := make([]string, 0, len(declarable))
	for t := range declarable {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

// ParseDeclared checks a client's input_type: a media type, parameters
// allowed but only a UTF-8 (or ASCII) charset honoured. It returns the
// bare type, lower-case.
func ParseDeclared(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	if len(s) > 255 {
		return "", fmt.Errorf("%w: input_type is over 255 bytes", ErrUnsupportedInput)
	}
	t, params, err := mime.ParseMediaType(s)
	if err == nil && !strings.Contains(t, "/") {
		err = errors.New("no subtype")
	}
	if err != nil {
		return "", fmt.Errorf("%w: input_type %s is not a media type: %v", ErrUnsupportedInput, strconv.Quote(s), err)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "us-ascii") {
		return "", fmt.Errorf("%w: input_type's charset %s: only UTF-8 text is taken", ErrUnsupportedInput, strconv.Quote(cs))
	}
	return t, nil
}

// resolveType decides the input's type from its sniffed type and the
// client's declaration (already through ParseDeclared; "" if none). A
// declared text type wins when the bytes are text; any other declaration
// must agree with the bytes.
func resolveType(input []byte, sniffed, declared string) (string, error) {
	if declared == "" {
		return sniffed, nil
	}
	if as, ok := declarable[declared]; ok {
		if as == sniffed || isText(input) {
			return as, nil
		}
		return "", fmt.Errorf("%w: input_type says %s, but the bytes are not UTF-8 text: they look like %s", ErrUnsupportedInput, declared, sniffed)
	}
	if declared == sniffed {
		return sniffed, nil
	}
	return "", fmt.Errorf("%w: input_type says %s, but the bytes look like %s (a type is taken from the bytes; only text types can be declared: %s)",
		ErrUnsupportedInput, declared, sniffed, strings.Join(DeclarableTypes(), ", "))
}

// seen describes the input's first bytes for a refusal: printable text as
// is, anything else in hex.
func seen(input []byte) string {
	head := input[:min(len(input), 24)]
	if isText(head) || isText(input) {
		return strconv.Quote(string(head)) + ellipsis(len(input) > len(head))
	}
	return fmt.Sprintf("% x", head) + ellipsis(len(input) > len(head))
}

func ellipsis(more bool) string {
	if more {
		return "…"
	}
	return ""
}
