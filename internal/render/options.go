package render

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/renderbox/renderbox/internal/bytesize"
)

// Option describes one renderer option: its type, default and bounds. The
// catalogue publishes these, so the API documents exactly what it checks.
type Option struct {
	Name        string   `json:"name"`
	Type        string   `json:"type"` // integer, number, boolean, string
	Description string   `json:"description"`
	Default     any      `json:"default,omitempty"`
	Minimum     *float64 `json:"minimum,omitempty"`
	Maximum     *float64 `json:"maximum,omitempty"`
	Enum        []string `json:"enum,omitempty"`
	// Pattern a string value must match (anchored).
	Pattern string `json:"pattern,omitempty"`
	// MaxLength bounds a string value in bytes.
	MaxLength int `json:"max_length,omitempty"`
	// CaseInsensitive: an Enum value matches in any case.
	CaseInsensitive bool `json:"case_insensitive,omitempty"`
	// Secret: the value reaches the sandbox only; the job's record and
	// everything that shows it hold Redacted instead.
	Secret bool `json:"secret,omitempty"`
	re     *regexp.Regexp
	// rule says a secret's Pattern in words, for a refusal that may not
	// quote the value.
	rule string
	// more checks a string value further.
	more func(string) error
}

// Redacted stands for a secret option's value wherever options are stored
// or shown.
const Redacted = "[redacted]"

// Recorded returns v as it may be stored and shown: every secret option
// that was given reads Redacted.
func (r *Renderer) Recorded(v Values) Values {
	out := Values{}
	for k, x := range v {
		if o := r.option(k); o != nil && o.Secret {
			x = Redacted
		}
		out[k] = x
	}
	return out
}

func num(v float64) *float64 { return &v }

func intOpt(name, desc string, def, lo, hi int) Option {
	return Option{Name: name, Type: "integer", Description: desc, Default: def, Minimum: num(float64(lo)), Maximum: num(float64(hi))}
}

func numOpt(name, desc string, def, lo, hi float64) Option {
	return Option{Name: name, Type: "number", Description: desc, Default: def, Minimum: num(lo), Maximum: num(hi)}
}

func boolOpt(name, desc string, def bool) Option {
	return Option{Name: name, Type: "boolean", Description: desc, Default: def}
}

// secretOpt marks o secret: see Option.Secret.
// secretOpt makes o a secret whose values rule says in words (its
// refusals name neither the value nor the pattern).
func secretOpt(o Option, rule string) Option {
	o.Secret, o.rule = true, rule
	return o
}

func enumOpt(name, desc, def string, values ...string) Option {
	return Option{Name: name, Type: "string", Description: desc, Default: def, Enum: values}
}

func patternOpt(name, desc, pattern string) Option {
	return Option{Name: name, Type: "string", Description: desc, Pattern: pattern, re: regexp.MustCompile("^(?:" + pattern + ")$")}
}

// textOpt is free text of at most maxLen bytes of UTF-8.
func textOpt(name, desc string, maxLen int) Option {
	return Option{Name: name, Type: "string", Description: desc, MaxLength: maxLen}
}

// Values are validated options with defaults filled in: int, float64, bool
// or string by the option's type.
type Values map[string]any

func (v Values) Int(k string) int       { i, _ := v[k].(int); return i }
func (v Values) Float(k string) float64 { f, _ := v[k].(float64); return f }
func (v Values) Bool(k string) bool     { b, _ := v[k].(bool); return b }
func (v Values) String(k string) string { s, _ := v[k].(string); return s }
func (v Values) Has(k string) bool      { _, ok := v[k]; return ok }
func (v Values) IntOr(k string, d int) int {
	if v.Has(k) {
		return v.Int(k)
	}
	return d
}

// validate checks opts against schema and returns the typed values with
// defaults. An unknown option is refused by name (the first in order, if
// several; DecodeOptions stops at the first one it meets).
func validate(renderer string, schema []Option, opts map[string]any) (Values, error) {
	byName := map[string]*Option{}
	for i := range schema {
		byName[schema[i].Name] = &schema[i]
	}
	first, found := "", false
	for k := range opts {
		if byName[k] == nil && (!found || k < first) {
			first, found = k, true
		}
	}
	if found {
		return nil, unknownOption(renderer, schema, first)
	}
	vals := Values{}
	for _, o := range schema {
		raw, ok := opts[o.Name]
		if !ok || raw == nil {
			if o.Default != nil {
				vals[o.Name] = o.Default
			}
			continue
		}
		v, err := o.check(raw)
		if err != nil && o.Secret {
			// The error must not carry the value, and a pattern
			// reads worse than the rule it stands for.
			err = fmt.Errorf("not a valid value: want a string of %s", o.rule)
			if _, ok := raw.(string); !ok {
				err = fmt.Errorf("want a string of %s", o.rule)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%w: option %q of %s: %v", ErrInvalidOptions, o.Name, renderer, err)
		}
		vals[o.Name] = v
	}
	return vals, nil
}

func (o *Option) check(raw any) (any, error) {
	switch o.Type {
	case "boolean":
		b, ok := raw.(bool)
		if !ok {
			return nil, fmt.Errorf("got %s, want true or false", describe(raw))
		}
		return b, nil
	case "integer", "number":
		f, ok := toFloat(raw)
		if !ok {
			return nil, fmt.Errorf("got %s, want a number", describe(raw))
		}
		if o.Type == "integer" && f != math.Trunc(f) {
			return nil, fmt.Errorf("got %v, want a whole number", raw)
		}
		if (o.Minimum != nil && f < *o.Minimum) || (o.Maximum != nil && f > *o.Maximum) {
			return nil, fmt.Errorf("%v is out of range [%v, %v]", raw, *o.Minimum, *o.Maximum)
		}
		if o.Type == "integer" {
			return int(f), nil
		}
		return f, nil
	default:
		s, ok := raw.(string)
		if !ok {
			return nil, fmt.Errorf("got %s, want a string", describe(raw))
		}
		if len(o.Enum) > 0 {
			for _, e := range o.Enum {
				if s == e || (o.CaseInsensitive && strings.EqualFold(s, e)) {
					return e, nil
				}
			}
			return nil, fmt.Errorf("%s is not one of %s", quoteShort(s), strings.Join(o.Enum, ", "))
		}
		if o.re != nil && (len(s) > 256 || !o.re.MatchString(s)) {
			return nil, fmt.Errorf("%s does not match %s", quoteShort(s), o.Pattern)
		}
		if o.MaxLength > 0 && (len(s) > o.MaxLength || !utf8.ValidString(s)) {
			return nil, fmt.Errorf("want at most %s of UTF-8, got %s", bytesize.String(int64(o.MaxLength)), bytesize.String(int64(len(s))))
		}
		if o.more != nil {
			if err := o.more(s); err != nil {
				return nil, err
			}
		}
		return s, nil
	}
}

// describe says what a JSON value is, so that "150" does not read as 150.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		return quoteShort(x) + " (a string)"
	case bool:
		return fmt.Sprintf("%v (a boolean)", x)
	case float64, int, int64:
		return fmt.Sprintf("%v (a number)", x)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%v", v)
}

// quoteShort quotes s, cut to 64 bytes.
func quoteShort(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "…"
	}
	return strconv.Quote(s)
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case string:
		return 0, false
	}
	return 0, false
}
