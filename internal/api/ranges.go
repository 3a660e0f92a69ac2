package api

import (
	"cmp"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
)

// maxRanges is the most ranges an output is answered with, once
// overlapping and adjacent ones are merged; a Range header asking for
// more is ignored and the whole output answered, 200 (RFC 9110 §14.2: a
// server may ignore a Range of many small ranges, "indications of either
// a broken client or a deliberate denial-of-service attack"). Each range
// is a seek and a fetch from Redis: 40,000 of "bytes=0-0,-1,…" over one
// 1 MiB output had Redis send 5.2 GB for a 6 MB answer.
const maxRanges = 16

// maxRangeSpecs bounds the ranges a header may list before they are
// merged: past it the header is ignored as above, unsorted. A 1 MiB
// header lists some 300,000.
const maxRangeSpecs = 256

// rangeMalformed is a Range that http.ServeContent refuses as malformed.
const rangeMalformed = "bytes=malformed"

// span is a range of an output, [start, end), and where the header asked
// for it.
type span struct {
	start, end int64
	at         int
}

// boundRanges rewrites r's Range header for an output of size bytes, so
// that http.ServeContent answers at most maxRanges ranges, each of bytes
// it was asked for:
//
//   - satisfiable ranges are merged where they overlap or touch (RFC 9110
//     §14.6 lets a server coalesce them) and kept in the order asked for;
//     more than maxRanges, or more than maxRangeSpecs as written, and the
//     header is dropped: the answer is the whole output;
//   - a header whose every range starts past the end becomes one such
//     range, and a malformed one a fixed malformed one, so ServeContent
//     answers 416 as before without reading the client's list again.
//
// ServeContent keeps the conditionals: If-Range, If-None-Match and the
// rest are weighed as before, on the header written here.
func boundRanges(r *http.Request, size int64) {
	h := r.Header.Get("Range")
	if h == "" {
		return
	}
	spans, tooMany, ok := parseRanges(h, size)
	switch {
	case tooMany:
		r.Header.Del("Range")
		return
	case !ok:
		r.Header.Set("Range", rangeMalformed)
		return
	case len(spans) == 0:
		r.Header.Set("Range", "bytes="+strconv.FormatInt(size, 10)+"-")
		return
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	merged := spans[:1]
	for _, s := range spans[1:] {
		last := &merged[len(merged)-1]
		if s.start > last.end {
			merged = append(merged, s)
			continue
		}
		last.end, last.at = max(last.end, s.end), min(last.at, s.at)
	}
	if len(merged) > maxRanges {
		r.Header.Del("Range")
		return
	}
	slices.SortFunc(merged, func(a, b span) int { return cmp.Compare(a.at, b.at) })
	var b strings.Builder
	b.WriteString("bytes=")
	for i, s := range merged {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(s.start, 10) + "-" + strconv.FormatInt(s.end-1, 10))
	}
	r.Header.Set("Range", b.String())
}

// parseRanges reads a Range header by the grammar http.ServeContent
// reads it by (RFC 9110 §14.1.2, optional whitespace around each part),
// so that what it finds malformed ServeContent does too. It returns the
// satisfiable ranges, the others dropped (a suffix of 0 bytes among
// them); ok is false for a malformed header. It stops at the range past
// maxRangeSpecs: tooMany.
func parseRanges(h string, size int64) (spans []span, tooMany, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found {
		return nil, false, false
	}
	n := 0
	for ra := range strings.SplitSeq(spec, ",") {
		ra = textproto.TrimString(ra)
		if ra == "" {
			continue
		}
		if n++; n > maxRangeSpecs {
			return nil, true, true
		}
		first, last, found := strings.Cut(ra, "-")
		if !found {
			return nil, false, false
		}
		first, last = textproto.TrimString(first), textproto.TrimString(last)
		if first == "" { // a suffix: the last bytes
			if last == "" || last[0] == '-' {
				return nil, false, false
			}
			k, err := strconv.ParseInt(last, 10, 64)
			if err != nil || k < 0 {
				return nil, false, false
			}
			if k > 0 && size > 0 {
				spans = append(spans, span{start: size - min(k, size), end: size, at: n})
			}
			continue
		}
		start, err := strconv.ParseInt(first, 10, 64)
		if err != nil || start < 0 {
			return nil, false, false
		}
		if start >= size {
			continue // as ServeContent: past the end, whatever follows the '-'
		}
		end := size
		if last != "" {
			e, err := strconv.ParseInt(last, 10, 64)
			if err != nil || e < start {
				return nil, false, false
			}
			if e < size {
				end = e + 1
			}
		}
		spans = append(spans, span{start: start, end: end, at: n})
	}
	return spans, false, true
}
