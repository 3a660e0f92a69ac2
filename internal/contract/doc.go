// Package contract keeps openapi.yaml and what is made from it in step
// with the code. It writes the contract's per-renderer parts from the
// renderer catalogue (schemas.go: each renderer's Options, Limits and
// JobRequest schemas and the lists that name them, between marker
// comments; `go generate ./internal/contract` rewrites them, and a test
// fails when they are stale), so a new renderer is one command, not sixty
// lines of YAML by hand. And it generates a Go client from openapi.yaml
// with the pinned oapi-codegen (the nested module in gen/, which keeps the
// generator's dependencies out of renderbox's own build), so tests can
// prove that the contract makes a client that compiles and talks to the
// real server.
package contract
