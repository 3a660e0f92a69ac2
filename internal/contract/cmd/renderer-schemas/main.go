// Command renderer-schemas rewrites, in place, the regions marked as
// generated from the renderer catalogue: in openapi.yaml each renderer's
// Options, Limits and JobRequest schemas, JobRequest's oneOf and
// discriminator, the anyOf of a job's options, and the secret options
// Option.secret's description names; in docs/renderers.md (any .md file)
// the reference of every renderer's inputs, output, limits and options.
// Adding a renderer to internal/render is then one command,
// `go generate ./internal/contract`, which runs this with both paths.
//
//	go run ./internal/contract/cmd/renderer-schemas [openapi.yaml docs/renderers.md]
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/renderbox/renderbox/internal/contract"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: renderer-schemas [openapi.yaml docs/renderers.md]\n\nRewrites the files' generated regions from the renderer catalogue.\n")
	}
	flag.Parse()
	paths := flag.Args()
	if len(paths) == 0 {
		paths = []string{"openapi.yaml", "docs/renderers.md"}
	}
	for _, path := range paths {
		regen := contract.RendererSchemas
		if strings.HasSuffix(path, ".md") {
			regen = contract.RendererDocs
		}
		if err := contract.RewriteFile(path, regen); err != nil {
			fmt.Fprintln(os.Stderr, "renderer-schemas:", err)
			os.Exit(1)
		}
	}
}
