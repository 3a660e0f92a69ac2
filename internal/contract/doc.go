// Package contract generates a Go client from openapi.yaml with the pinned
// oapi-codegen (the nested module in gen/, which keeps the generator's
// dependencies out of renderbox's own build), so tests can prove that the
// contract makes a client that compiles and talks to the real server.
package contract
