// Package e2e holds the end-to-end tests: the real api and worker binaries
// against a real Redis, real runsc and the real rootfs, every response
// checked against openapi.yaml. A stack's ledger is a SQLite file, or a
// private PostgreSQL server (stackOpts.postgres) that a second API replica
// (stack.startReplica) shares.
//
// Most tests run one at a time. A test that spends most of its time
// waiting (a long page, leases, retention, held requests) and whose
// deadlines hold on a host shared with a fleet calls t.Parallel: it runs
// after the serial tests, beside the others like it (scripts/test.sh
// passes -parallel 8, so all of them at once), each stack on its own
// Redis, state dir and cgroup parent. Stay serial: a test that times an
// outage against asynq's leases (leaseSafeOutage), and one whose ?wait=
// must outlast retries or a worker's start (beside the fleet,
// TestFailingRunscIsRetriedThenFails took 59 s, and its job's ?wait= is
// 60 s).
package e2e
