// Package e2e holds the end-to-end tests: the real api and worker binaries
// against a real Redis, real runsc and the real rootfs, every response
// checked against openapi.yaml. A stack's ledger is a SQLite file, or a
// private PostgreSQL server (stackOpts.postgres) that a second API replica
// (stack.startReplica) shares.
//
// Most tests run one at a time. A test that spends most of its time
// waiting (a long page, retry back-off, leases, retention, held requests)
// and asserts no tight timing calls t.Parallel: it runs after the serial
// tests, beside the others like it (scripts/test.sh passes -parallel 8,
// so all of them at once), each stack on its own Redis, state dir and
// cgroup parent. A test that times an outage against asynq's leases
// (leaseSafeOutage) stays serial.
package e2e
