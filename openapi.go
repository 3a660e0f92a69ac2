// Package renderbox holds what belongs to the repository as a whole: the
// OpenAPI contract, embedded so the API serves exactly the file in the repo.
package renderbox

import _ "embed"

// OpenAPI is openapi.yaml, the HTTP contract.
//
//go:embed openapi.yaml
var OpenAPI []byte
