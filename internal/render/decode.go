package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/renderbox/renderbox/internal/bytesize"
)

// Bounds on the JSON a client sends for options and limits. Every option
// and limit the catalogue knows fits in a few hundred bytes; issue 10 saw a
// 51 MB options object with 4 M unknown keys cost 940 MB and come back as a
// 55 MB error.
const (
	// MaxOptionsBytes bounds the options object, and MaxLimitsBytes the
	// limits object, as JSON text.
	MaxOptionsBytes = 8 << 10
	MaxLimitsBytes  = 8 << 10
	// maxNameInError bounds a client's name quoted back in an error.
	maxNameInError = 64
)

// MinTimeout is the shortest timeout_seconds a request may ask for: less
// would round to nothing (and a zero timeout means the renderer's own).
const MinTimeout = 0.001

// MinMemoryBytes is the least memory_bytes a request may lower a limit to:
// less than a renderer can start in.
const MinMemoryBytes = 64 << 20

// quoteName quotes a client's key for an error message, cut to a bounded
// length.
func quoteName(s string) string {
	if len(s) > maxNameInError {
		return strconv.Quote(s[:maxNameInError]) + "…"
	}
	return strconv.Quote(s)
}

// jsonSpace is the whitespace JSON allows around a value; bytes.TrimSpace
// would also take \v, \f and Unicode spaces, which encoding/json refuses.
const jsonSpace = " \t\r\n"

// decodeObject reads raw as one JSON object, token by token, calling field
// for each key with the decoder positioned at its value; field must consume
// the value. A repeated key, trailing data or raw over max bytes is an
// error; so is anything field returns, which ends the parse at once.
// "null" and empty input are an empty object.
func decodeObject(what string, raw []byte, max int, field func(key string, dec *json.Decoder) error) error {
	if len(raw) > max {
		return fmt.Errorf("%s are %s of JSON, more than the %s accepted", what, bytesize.String(int64(len(raw))), bytesize.String(int64(max)))
	}
	raw = bytes.Trim(raw, jsonSpace)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("%s must be a JSON object", what)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%s: %v", what, err)
		}
		key := tok.(string) // inside an object, json.Decoder yields only string keys here
		if seen[key] {
			return fmt.Errorf("%s: %s appears twice", what, quoteName(key))
		}
		seen[key] = true
		if err := field(key, dec); err != nil {
			return err
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return fmt.Errorf("%s: the object is not closed", what)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: data after the object", what)
	}
	return nil
}

// DecodeOptions parses a renderer's options object. The first unknown
// option ends the parse, and the error names only that one.
func (r *Renderer) DecodeOptions(raw []byte) (map[string]any, error) {
	opts := map[string]any{}
	err := decodeObject("options", raw, MaxOptionsBytes, func(key string, dec *json.Decoder) error {
		if r.option(key) == nil {
			return r.unknownOption(key)
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("option %s: %v", quoteName(key), err)
		}
		opts[key] = v
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrInvalidOptions) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	return opts, nil
}

// DecodeLimits parses a limits object. Unknown keys are refused, and so is
// an explicit value that is not positive: a request lowers a limit or
// leaves it out.
func DecodeLimits(raw []byte) (LimitRequest, error) {
	var lim LimitRequest
	fields := map[string]any{
		"timeout_seconds": &lim.TimeoutSeconds, "memory_bytes": &lim.MemoryBytes,
		"max_output_bytes": &lim.MaxOutputBytes, "max_pages": &lim.MaxPages, "max_pixels": &lim.MaxPixels,
	}
	err := decodeObject("limits", raw, MaxLimitsBytes, func(key string, dec *json.Decoder) error {
		p, ok := fields[key]
		if !ok {
			return fmt.Errorf("unknown limit %s (known: timeout_seconds, memory_bytes, max_output_bytes, max_pages, max_pixels)", quoteName(key))
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("limit %s: %v", key, err)
		}
		if string(v) == "null" {
			return nil
		}
		if err := json.Unmarshal(v, p); err != nil {
			return fmt.Errorf("limit %s: got %s, want a number", key, v)
		}
		var f float64
		_ = json.Unmarshal(v, &f)
		if f <= 0 {
			return fmt.Errorf("limit %s must be positive, got %s (leave it out for the renderer's own)", key, v)
		}
		return nil
	})
	if err != nil {
		return LimitRequest{}, fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	return lim, nil
}

// option returns the option called name, or nil.
func (r *Renderer) option(name string) *Option {
	for i := range r.Options {
		if r.Options[i].Name == name {
			return &r.Options[i]
		}
	}
	return nil
}

// unknownOption is the refusal of one unknown option: it names that one
// (bounded) and the renderer's own.
func (r *Renderer) unknownOption(name string) error {
	return unknownOption(r.Name, r.Options, name)
}

func unknownOption(renderer string, schema []Option, name string) error {
	if len(schema) == 0 {
		return fmt.Errorf("%w: %s takes no options, got %s", ErrInvalidOptions, renderer, quoteName(name))
	}
	var known bytes.Buffer
	for i, o := range schema {
		if i > 0 {
			known.WriteString(", ")
		}
		known.WriteString(o.Name)
	}
	return fmt.Errorf("%w: unknown option %s for %s (known: %s)", ErrInvalidOptions, quoteName(name), renderer, known.String())
}
