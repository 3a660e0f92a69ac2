// Command renderer-schemas rewrites, in place, the regions of openapi.yaml
// marked as generated from the renderer catalogue: each renderer's
// Options, Limits and JobRequest schemas, JobRequest's oneOf and
// discriminator, the anyOf of a job's options, and the secret options
// Option.secret's description names. Adding a renderer to
// internal/render is then one command, `go generate ./internal/contract`,
// which runs this with the file's path.
//
//	go run ./internal/contract/cmd/renderer-schemas [openapi.yaml]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/renderbox/renderbox/internal/contract"
	"github.com/renderbox/renderbox/internal/render"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: renderer-schemas [openapi.yaml]\n\nRewrites openapi.yaml's generated regions from the renderer catalogue.\n")
	}
	flag.Parse()
	path := "openapi.yaml"
	switch flag.NArg() {
	case 0:
	case 1:
		path = flag.Arg(0)
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err := run(path); err != nil {
		fmt.Fprintln(os.Stderr, "renderer-schemas:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	spec, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := contract.RendererSchemas(spec, render.All())
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if bytes.Equal(out, spec) {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, fi.Mode().Perm())
}
