// Command bench measures what the sandbox costs against the same work run
// natively; internal/bench holds the measurements and says what each is.
package main

import (
	"os"

	"github.com/renderbox/renderbox/internal/bench"
)

func main() { os.Exit(bench.Main(os.Args[0], os.Args[1:])) }
