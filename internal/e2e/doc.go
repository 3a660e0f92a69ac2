// Package e2e holds the end-to-end tests: the real api and worker binaries
// against a real Redis, real runsc and the real rootfs, every response
// checked against openapi.yaml.
package e2e
