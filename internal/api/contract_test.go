package api_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/renderbox/renderbox"
	"github.com/renderbox/renderbox/internal/api"
	"github.com/renderbox/renderbox/internal/render"
)

// publishedRenderer is a renderer as GET /v1/renderers shows it, its
// options kept as the JSON they are sent as.
type publishedRenderer struct {
	Name      string           `json:"name"`
	Options   []map[string]any `json:"options"`
	MaxPages  int64            `json:"max_pages"`
	MaxPixels int64            `json:"max_pixels"`
	Limits    struct {
		TimeoutSeconds float64 `json:"timeout_seconds"`
		MemoryBytes    int64   `json:"memory_bytes"`
		MaxOutputBytes int64   `json:"max_output_bytes"`
	} `json:"limits"`
}

// The contract's typed request schemas say what the live catalogue
// (GET /v1/renderers) says: JobRequest selects one schema per renderer by
// `renderer`, each renderer's options schema has exactly its options with
// the same type, description, bounds, enum, pattern, length, default and
// secrecy, and its limits schema exactly the limits a request may lower,
// capped at the renderer's. A renderer or an option on one side only fails.
func TestRequestSchemasMatchTheCatalogue(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("openapi.yaml's per-renderer schemas are generated from the catalogue: run `go generate ./internal/contract` from the repository's top directory")
		}
	})
	var list struct{ Renderers []publishedRenderer }
	getRenderers(t, &list)
	doc, err := openapi3.NewLoader().LoadFromData(renderbox.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	schemas := doc.Components.Schemas
	jr := schemas["JobRequest"].Value
	if jr.Discriminator == nil || jr.Discriminator.PropertyName != "renderer" {
		t.Fatalf("JobRequest has no discriminator on renderer: %+v", jr.Discriminator)
	}
	var mapped, published []string
	for name := range jr.Discriminator.Mapping {
		mapped = append(mapped, name)
	}
	sort.Strings(mapped)
	for _, r := range list.Renderers {
		published = append(published, r.Name)
	}
	if !slices.Equal(mapped, published) {
		t.Errorf("JobRequest's renderers: got %v, want the catalogue's %v", mapped, published)
	}
	var oneOf []string
	for _, s := range jr.OneOf {
		oneOf = append(oneOf, s.Ref)
	}
	for _, r := range list.Renderers {
		m, ok := jr.Discriminator.Mapping[r.Name]
		if !ok {
			continue
		}
		if !slices.Contains(oneOf, m.Ref) {
			t.Errorf("%s: JobRequest maps it to %s, which is not one of its oneOf", r.Name, m.Ref)
		}
		own := variantProperties(t, schemas, m.Ref)
		if got := own["renderer"].Value.Enum; !reflect.DeepEqual(got, []any{r.Name}) {
			t.Errorf("%s: %s's renderer is %v, want only %q", r.Name, m.Ref, got, r.Name)
		}
		checkOptions(t, r, schemas, own["options"].Ref)
		checkLimits(t, r, schemas, own["limits"].Ref)
	}
}

// getRenderers decodes GET /v1/renderers (checked against the contract)
// into list.
func getRenderers(t *testing.T, list any) {
	t.Helper()
	srv := httptest.NewServer((&api.Server{OpenAPI: renderbox.OpenAPI}).Handler())
	defer srv.Close()
	resp, body := get(t, srv, "/v1/renderers")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/renderers: status %d", resp.StatusCode)
	}
	if err := json.Unmarshal(body, list); err != nil {
		t.Fatal(err)
	}
}

// variantProperties returns the properties a renderer's JobRequest adds
// to JobInput: its allOf's second part.
func variantProperties(t *testing.T, schemas openapi3.Schemas, ref string) openapi3.Schemas {
	t.Helper()
	v := schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
	if v == nil || len(v.Value.AllOf) != 2 || v.Value.AllOf[0].Ref != "#/components/schemas/JobInput" {
		t.Fatalf("%s is not allOf JobInput and the renderer's own properties", ref)
	}
	return v.Value.AllOf[1].Value.Properties
}

func checkOptions(t *testing.T, r publishedRenderer, schemas openapi3.Schemas, ref string) {
	t.Helper()
	s := component(t, r.Name, schemas, ref)
	if s == nil {
		return
	}
	if ap := s.Value.AdditionalProperties.Has; ap == nil || *ap {
		t.Errorf("%s: %s allows options it does not name (want additionalProperties: false)", r.Name, ref)
	}
	want, defaults := map[string]bool{}, map[string]any{}
	for _, o := range r.Options {
		name := o["name"].(string)
		want[name] = true
		if d, ok := o["default"]; ok {
			defaults[name] = d
		}
		p := s.Value.Properties[name]
		if p == nil {
			t.Errorf("%s: option %s is in the catalogue, not in %s", r.Name, name, ref)
			continue
		}
		if got, want := asJSON(t, p.Value), optionSchema(o); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: option %s: %s says\n%v\nthe catalogue says\n%v", r.Name, name, ref, got, want)
		}
	}
	for name := range s.Value.Properties {
		if !want[name] {
			t.Errorf("%s: option %s is in %s, not in the catalogue", r.Name, name, ref)
		}
	}
	// A job shows its options with the defaults filled in: they must
	// be options the schema takes.
	if err := s.Value.VisitJSON(defaults); err != nil {
		t.Errorf("%s: the defaults %v do not match %s: %v", r.Name, defaults, ref, err)
	}
}

// component is the schema ref names, or nil and an error.
func component(t *testing.T, renderer string, schemas openapi3.Schemas, ref string) *openapi3.SchemaRef {
	t.Helper()
	s := schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
	if s == nil {
		t.Errorf("%s: no schema %q", renderer, ref)
	}
	return s
}

// optionSchema is the JSON Schema of a published option.
func optionSchema(o map[string]any) map[string]any {
	s := map[string]any{"type": o["type"], "description": o["description"]}
	for from, to := range map[string]string{"minimum": "minimum", "maximum": "maximum", "enum": "enum", "default": "default", "max_length": "maxLength", "case_insensitive": "x-case-insensitive"} {
		if v, ok := o[from]; ok {
			s[to] = v
		}
	}
	if p, ok := o["pattern"].(string); ok {
		// The catalogue's patterns match a whole value; JSON Schema's
		// match anywhere in it.
		s["pattern"] = "^(?:" + p + ")$"
	}
	if o["secret"] == true {
		s["format"] = "password"
	}
	return s
}

func checkLimits(t *testing.T, r publishedRenderer, schemas openapi3.Schemas, ref string) {
	t.Helper()
	s := component(t, r.Name, schemas, ref)
	if s == nil {
		return
	}
	limit := func(typ string, lo, hi any) map[string]any {
		return map[string]any{"type": typ, "minimum": lo, "maximum": hi}
	}
	want := map[string]any{
		"timeout_seconds":  limit("number", render.MinTimeout, r.Limits.TimeoutSeconds),
		"memory_bytes":     limit("integer", render.MinMemoryBytes, r.Limits.MemoryBytes),
		"max_output_bytes": limit("integer", 1, r.Limits.MaxOutputBytes),
	}
	if r.MaxPages > 0 {
		want["max_pages"] = limit("integer", 1, r.MaxPages)
	}
	if r.MaxPixels > 0 {
		l := limit("integer", 1, r.MaxPixels)
		l["format"] = "int64"
		want["max_pixels"] = l
	}
	got := map[string]any{}
	for name, p := range s.Value.Properties {
		got[name] = asJSON(t, p.Value)
	}
	if w := asJSON(t, want); !reflect.DeepEqual(asJSON(t, got), w) {
		t.Errorf("%s: %s says\n%v\nthe catalogue's limits make\n%v", r.Name, ref, asJSON(t, got), w)
	}
	if ap := s.Value.AdditionalProperties.Has; ap == nil || *ap {
		t.Errorf("%s: %s allows limits it does not name (want additionalProperties: false)", r.Name, ref)
	}
}

// asJSON is v as encoding/json decodes its JSON: numbers float64, objects
// maps, so that values from YAML and from the API compare alike.
func asJSON(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(fmt.Errorf("%s: %w", b, err))
	}
	return m
}
