// Command validate checks the manifests `helm template` renders from
// deploy/kubernetes/renderbox, with no cluster and no network: every
// document is decoded strictly (an unknown or duplicated field is an
// error) into the Kubernetes API types through client-go's scheme, and
// the chart's promises are checked on the typed objects (invariants.go).
// It is its own module so that the k8s.io modules stay out of
// renderbox's; it reads the catalogue (internal/render) from the module
// beside it, so the longest job is the code's, not a number copied here.
//
// It reads docs/settings.md relative to its own directory, so run it there:
//
//	cd deploy/kubernetes/validate && ../../../bin/tools/helm template rb ../renderbox | go run .
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	var in io.Reader = os.Stdin
	if len(os.Args) == 2 && os.Args[1] != "-" {
		f, err := os.Open(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "validate:", err)
			os.Exit(1)
		}
		defer f.Close()
		in = f
	} else if len(os.Args) > 2 {
		fmt.Fprintln(os.Stderr, "usage: validate [MANIFESTS.yaml | -]")
		os.Exit(2)
	}
	objs, err := Decode(in)
	if err == nil {
		err = Check(objs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "validate:", err)
		os.Exit(1)
	}
	fmt.Printf("validate: %d documents decoded strictly; the chart's invariants hold\n", len(objs))
}
