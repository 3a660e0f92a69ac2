//go:build tools

// Package gen pins oapi-codegen (a go tool of this module) and the runtime
// its generated client imports, so that generating and compiling a client
// from openapi.yaml needs nothing but the module proxy and this go.sum, and
// neither reaches the main module's build.
package gen

import _ "github.com/oapi-codegen/runtime"
