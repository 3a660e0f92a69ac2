package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/renderbox/renderbox/internal/render"
)

//go:generate go run ./cmd/renderer-schemas ../../openapi.yaml ../../docs/renderers.md

// RegenerateCommand is what rewrites openapi.yaml's generated regions, run
// from the repository's top directory.
const RegenerateCommand = "go generate ./internal/contract"

// The regions openapi.yaml marks as generated, each opened by a comment
// line "# BEGIN generated: <region> (go generate ./internal/contract) — do
// not edit" and closed by "# END generated" at the same indentation; what
// lies between is written at that indentation.
const (
	// RegionSchemas: each renderer's <Name>Options, <Name>Limits and
	// <Name>JobRequest, in components.schemas.
	RegionSchemas = "renderer schemas"
	// RegionJobRequest: JobRequest's oneOf and discriminator.
	RegionJobRequest = "renderer job requests"
	// RegionOptions: the anyOf of a job's options.
	RegionOptions = "renderer options"
	// RegionSecrets: the description of Option.secret, which names the
	// secret options.
	RegionSecrets = "secret options"
)

const (
	beginMarker = "# BEGIN generated: "
	endMarker   = "# END generated"
)

// BeginLine is the comment that opens region.
func BeginLine(region string) string {
	return beginMarker + region + " (" + RegenerateCommand + ") — do not edit"
}

// regions are the writers of each region, by name.
var regions = map[string]func(rs []*render.Renderer, w *writer){
	RegionSchemas:    writeSchemas,
	RegionJobRequest: writeJobRequest,
	RegionOptions:    writeOptionsAnyOf,
	RegionSecrets:    writeSecrets,
}

// RendererSchemas returns spec (openapi.yaml) with every generated region
// rewritten from the catalogue rs (render.All()). Everything outside the
// regions is kept byte for byte. Each region must be marked exactly once.
func RendererSchemas(spec []byte, rs []*render.Renderer) ([]byte, error) {
	prefixes := map[string]string{}
	for _, r := range rs {
		if !rendererName.MatchString(r.Name) {
			return nil, fmt.Errorf("renderer %q: its name must be source-target, lowercase letters and digits (%s), to name its schemas", r.Name, rendererName)
		}
		p := SchemaPrefix(r.Name)
		if other, ok := prefixes[p]; ok {
			return nil, fmt.Errorf("renderers %q and %q would both name their schemas %sOptions: rename one", other, r.Name, p)
		}
		prefixes[p] = r.Name
	}
	lines := strings.SplitAfter(string(spec), "\n")
	var out strings.Builder
	seen := map[string]bool{}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		out.WriteString(line)
		trimmed := strings.TrimSpace(line)
		if !strings.HasPrefix(trimmed, beginMarker) {
			if strings.HasPrefix(trimmed, endMarker) {
				return nil, fmt.Errorf("line %d: %q without a %q before it", i+1, endMarker, beginMarker)
			}
			continue
		}
		region := regionOf(trimmed)
		write := regions[region]
		if write == nil {
			return nil, fmt.Errorf("line %d: unknown generated region %q (known: %q, %q, %q, %q)", i+1, region, RegionSchemas, RegionJobRequest, RegionOptions, RegionSecrets)
		}
		if seen[region] {
			return nil, fmt.Errorf("line %d: generated region %q marked twice", i+1, region)
		}
		seen[region] = true
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		end := i + 1
		for end < len(lines) && lines[end] != indent+endMarker+"\n" && lines[end] != indent+endMarker {
			if strings.HasPrefix(strings.TrimSpace(lines[end]), beginMarker) {
				return nil, fmt.Errorf("line %d: generated region %q is not closed before line %d opens another (want %q at the same indentation)", i+1, region, end+1, endMarker)
			}
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("line %d: generated region %q is not closed (want %q at the same indentation)", i+1, region, endMarker)
		}
		w := &writer{indent: indent}
		write(rs, w)
		out.WriteString(w.String())
		out.WriteString(lines[end])
		i = end
	}
	for region := range regions {
		if !seen[region] {
			return nil, fmt.Errorf("no generated region %q: mark it with a line %q and a line %q", region, BeginLine(region), endMarker)
		}
	}
	return []byte(out.String()), nil
}

// regionOf is the region a BEGIN line names: what follows the marker, up
// to " (" or the end.
func regionOf(trimmed string) string {
	r := strings.TrimPrefix(trimmed, beginMarker)
	if i := strings.Index(r, " ("); i >= 0 {
		r = r[:i]
	}
	return r
}

// rendererName is a name that is safe as a plain YAML scalar and makes a
// schema name of its own: pdf-png, image-thumbnail.
var rendererName = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

// SchemaPrefix is the prefix of a renderer's schemas: PdfPng for pdf-png.
func SchemaPrefix(renderer string) string {
	var b strings.Builder
	for _, part := range strings.Split(renderer, "-") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

func ref(schema string) string { return `"#/components/schemas/` + schema + `"` }

func writeJobRequest(rs []*render.Renderer, w *writer) {
	w.line(0, "oneOf:")
	for _, r := range rs {
		w.line(1, "- $ref: "+ref(SchemaPrefix(r.Name)+"JobRequest"))
	}
	w.line(0, "discriminator:")
	w.line(1, "propertyName: renderer")
	w.line(1, "mapping:")
	for _, r := range rs {
		w.line(2, r.Name+": "+ref(SchemaPrefix(r.Name)+"JobRequest"))
	}
}

func writeOptionsAnyOf(rs []*render.Renderer, w *writer) {
	w.line(0, "anyOf:")
	for _, r := range rs {
		w.line(1, "- $ref: "+ref(SchemaPrefix(r.Name)+"Options"))
	}
	// A chain's options are its steps', each under "<renderer>.".
	w.line(1, "- $ref: "+ref("ChainOptions"))
}

// writeSecrets writes Option.secret's description, naming each
// renderer's secret options: "office-pdf's `password`, pdf-protect's
// `owner_password` and `user_password`".
func writeSecrets(rs []*render.Renderer, w *writer) {
	var each []string
	for _, r := range rs {
		var names []string
		for _, o := range r.Options {
			if o.Secret {
				names = append(names, "`"+o.Name+"`")
			}
		}
		if len(names) > 0 {
			each = append(each, r.Name+"'s "+and(names))
		}
	}
	which := ""
	if len(each) > 0 {
		which = " (" + strings.Join(each, ", ") + ")"
	}
	w.line(0, "description: "+jsonText("The value"+which+" reaches the sandbox only: the job's record, its `options` and its webhooks show `"+render.Redacted+"`."))
}

// and joins names as a list in prose: "a", "a and b", "a, b and c".
func and(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

func writeSchemas(rs []*render.Renderer, w *writer) {
	for _, r := range rs {
		writeOptions(r, w)
		writeLimits(r, w)
		writeRequest(r, w)
	}
}

func writeOptions(r *render.Renderer, w *writer) {
	w.line(0, SchemaPrefix(r.Name)+"Options:")
	w.line(1, "type: object")
	w.line(1, fmt.Sprintf("description: The options of `%s`, as `GET /v1/renderers` lists them; defaults fill in those absent. The first unknown option is refused by name (400 `invalid_options`). At most %s of JSON.", r.Name, kib(render.MaxOptionsBytes)))
	w.line(1, "additionalProperties: false")
	if len(r.Options) == 0 {
		w.line(1, "properties: {}")
		return
	}
	w.line(1, "properties:")
	for _, o := range r.Options {
		w.line(2, o.Name+":")
		w.line(3, "type: "+o.Type)
		w.line(3, "description: "+jsonText(o.Description))
		if o.Minimum != nil {
			w.line(3, "minimum: "+jsonText(*o.Minimum))
		}
		if o.Maximum != nil {
			w.line(3, "maximum: "+jsonText(*o.Maximum))
		}
		if len(o.Enum) > 0 {
			w.line(3, "enum: ["+strings.Join(quoteAll(o.Enum), ", ")+"]")
		}
		if o.CaseInsensitive {
			w.line(3, "x-case-insensitive: true")
		}
		if o.Pattern != "" {
			// The catalogue's patterns match a whole value; JSON
			// Schema's match anywhere in it.
			w.line(3, "pattern: "+jsonText("^(?:"+o.Pattern+")$"))
		}
		if o.MaxLength > 0 {
			w.line(3, fmt.Sprintf("maxLength: %d", o.MaxLength))
		}
		if o.Secret {
			w.line(3, "format: password")
		}
		if o.Default != nil {
			w.line(3, "default: "+jsonText(o.Default))
		}
	}
}

// writeLimits writes the limits a request may lower: the sandbox's as
// GET /v1/renderers publishes them (the renderer's, defaults filled in),
// and max_pages and max_pixels where the renderer has them.
func writeLimits(r *render.Renderer, w *writer) {
	l := r.Limits
	w.line(0, SchemaPrefix(r.Name)+"Limits:")
	w.line(1, "type: object")
	w.line(1, fmt.Sprintf("description: Lowered limits for a `%s` job, at most the renderer's (`GET /v1/renderers`); a higher one, a limit this renderer does not have, a timeout under %s ms or memory under %s MiB is refused (400 `invalid_options`). At most %s of JSON.",
		r.Name, jsonText(render.MinTimeout*1000), jsonText(render.MinMemoryBytes>>20), kib(render.MaxLimitsBytes)))
	w.line(1, "additionalProperties: false")
	w.line(1, "properties:")
	limit := func(name, typ, format string, lo, hi any) {
		w.line(2, name+":")
		w.line(3, "type: "+typ)
		if format != "" {
			w.line(3, "format: "+format)
		}
		w.line(3, "minimum: "+jsonText(lo))
		w.line(3, "maximum: "+jsonText(hi))
	}
	limit("timeout_seconds", "number", "", render.MinTimeout, l.Timeout.Seconds())
	limit("memory_bytes", "integer", "", render.MinMemoryBytes, l.MemoryBytes)
	limit("max_output_bytes", "integer", "", 1, l.MaxOutputBytes)
	if r.MaxPages > 0 {
		limit("max_pages", "integer", "", 1, r.MaxPages)
	}
	if r.MaxPixels > 0 {
		limit("max_pixels", "integer", "int64", 1, r.MaxPixels)
	}
}

func writeRequest(r *render.Renderer, w *writer) {
	p := SchemaPrefix(r.Name)
	w.line(0, p+"JobRequest:")
	w.line(1, "description: A `"+r.Name+"` job.")
	w.line(1, "allOf:")
	w.line(2, "- $ref: "+ref("JobInput"))
	w.line(2, "- type: object")
	w.line(3, "required: [renderer]")
	w.line(3, "properties:")
	w.line(4, "renderer:")
	w.line(5, "type: string")
	w.line(5, "enum: ["+r.Name+"]")
	w.line(4, "options:")
	w.line(5, "$ref: "+ref(p+"Options"))
	w.line(4, "limits:")
	w.line(5, "$ref: "+ref(p+"Limits"))
	w.line(1, "unevaluatedProperties: false")
}

// kib says n bytes in KiB: "8 KiB".
func kib(n int) string { return fmt.Sprintf("%d KiB", n>>10) }

// jsonText is v as JSON, which YAML reads as the same value: a string in
// double quotes with JSON's escapes (HTML characters kept as they are), a
// number as encoding/json writes it (67108864, not 6.7108864e+07).
func jsonText(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Options hold strings, numbers and booleans only.
		panic(fmt.Sprintf("encoding %#v as JSON: %v", v, err))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = jsonText(s)
	}
	return out
}

// writer writes YAML lines two spaces a level below a region's indentation.
type writer struct {
	indent string
	b      strings.Builder
}

func (w *writer) line(level int, s string) {
	w.b.WriteString(w.indent + strings.Repeat("  ", level) + s + "\n")
}

func (w *writer) String() string { return w.b.String() }
