package contract

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
	"github.com/renderbox/renderbox/internal/sandbox"
)

// openapi.yaml's generated regions are what the catalogue makes: a renderer
// added, changed or removed in internal/render without regenerating fails
// here, naming the command.
func TestGeneratedRendererSchemas(t *testing.T) {
	path := filepath.Join("..", "..", "openapi.yaml")
	spec, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := RendererSchemas(spec, render.All())
	if err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if string(want) != string(spec) {
		t.Fatalf("openapi.yaml's generated renderer schemas differ from the catalogue's (internal/render): run `%s` from the repository's top directory and commit the result\n%s",
			RegenerateCommand, firstDifference(string(spec), string(want)))
	}
}

// firstDifference says where got and want first differ, by line.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "first at line " + strconv.Itoa(i+1) + ":\n  got:  " + gl + "\n  want: " + wl
		}
	}
	return ""
}

// A renderer added to the catalogue gets its three schemas and its place in
// every list (its secret options too), whatever the regions held before;
// text outside them is kept.
func TestGeneratedRegionsFollowTheCatalogue(t *testing.T) {
	spec := strings.Join([]string{
		"head: kept",
		"  " + BeginLine(RegionJobRequest),
		"  stale: text",
		"  " + endMarker,
		"middle: kept",
		"    " + BeginLine(RegionOptions),
		"    " + endMarker,
		"secret:",
		"  " + BeginLine(RegionSecrets),
		"  " + endMarker,
		"schemas:",
		"  " + BeginLine(RegionSchemas),
		"  " + endMarker,
		"tail: kept",
		"",
	}, "\n")
	rs := []*render.Renderer{{
		Name: "pdf-flatten",
		Options: []render.Option{
			{Name: "dpi", Type: "integer", Description: `Resolution "dpi".`, Default: 150},
			{Name: "password", Type: "string", Description: "The password.", Secret: true},
		},
		Limits: sandbox.Limits{MemoryBytes: 512 << 20},
	}}
	got, err := RendererSchemas([]byte(spec), rs)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"head: kept\n  " + BeginLine(RegionJobRequest) + "\n  oneOf:\n    - $ref: \"#/components/schemas/PdfFlattenJobRequest\"\n",
		"      pdf-flatten: \"#/components/schemas/PdfFlattenJobRequest\"\n  " + endMarker + "\nmiddle: kept\n",
		"    anyOf:\n      - $ref: \"#/components/schemas/PdfFlattenOptions\"\n      - $ref: \"#/components/schemas/ChainOptions\"\n    " + endMarker + "\n",
		"  description: \"The value (pdf-flatten's `password`) reaches the sandbox only: the job's record, its `options` and its webhooks show `[redacted]`.\"\n",
		"  PdfFlattenOptions:\n",
		"      password:\n        type: string\n        description: \"The password.\"\n        format: password\n",
		"      dpi:\n        type: integer\n        description: \"Resolution \\\"dpi\\\".\"\n        default: 150\n",
		"      memory_bytes:\n        type: integer\n        minimum: 67108864\n        maximum: 536870912\n",
		"  PdfFlattenJobRequest:\n",
		"  unevaluatedProperties: false\n  " + endMarker + "\ntail: kept\n",
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("the regenerated file has no\n%s\ngot:\n%s", want, got)
		}
	}
	if strings.Contains(string(got), "stale") {
		t.Errorf("a region kept what it held before:\n%s", got)
	}
}

// A region marked wrongly is refused, saying which and how to mark it.
func TestGeneratedRegionsMarkedWrongly(t *testing.T) {
	all := BeginLine(RegionJobRequest) + "\n" + endMarker + "\n" + BeginLine(RegionOptions) + "\n" + endMarker + "\n" +
		BeginLine(RegionSecrets) + "\n" + endMarker + "\n"
	schemas := BeginLine(RegionSchemas) + "\n" + endMarker + "\n"
	for _, tc := range []struct{ name, spec, want string }{
		{"missing", all, `no generated region "renderer schemas"`},
		{"twice", all + schemas + schemas, `"renderer schemas" marked twice`},
		{"unclosed", all + BeginLine(RegionSchemas) + "\n", `"renderer schemas" is not closed`},
		{"closed at another indentation", all + BeginLine(RegionSchemas) + "\n  " + endMarker + "\n", `"renderer schemas" is not closed`},
		{"unknown", all + schemas + "# BEGIN generated: renderer examples\n" + endMarker + "\n", `unknown generated region "renderer examples"`},
		{"end alone", all + schemas + endMarker + "\n", "line 9: \"# END generated\" without"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RendererSchemas([]byte(tc.spec), render.All())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}
