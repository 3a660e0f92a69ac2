// Package e2e holds the end-to-end tests: the real api and worker binaries
// against a real Redis, real runsc and the real rootfs, every response
// checked against openapi.yaml. A stack's ledger is a SQLite file, or a
// private PostgreSQL server (stackOpts.postgres) that a second API replica
// (stack.startReplica) shares.
package e2e
