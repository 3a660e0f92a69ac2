// Package testenv gives tests the real things they need — runsc, the
// rootfs, a private sandbox manager, Redis, PostgreSQL — and fails (never
// skips) with the command that gets them when they are missing. It also
// guards against tests reaching for docker or podman.
//
// It is also the one place that knows which tests need the machine. The
// parts that start or find something (runsc, the rootfs, redis-server,
// PostgreSQL, LibreOffice) are built without the "unit" build tag only, so
// a test file that uses them must say "//go:build !unit" or `make unit`
// (go test -tags unit) does not compile; what needs nothing (Run, Poll,
// TLSFiles) is in both tiers. TestTiers checks that a file leaves the
// unit tier only for that reason. See docs/testing.md.
package testenv
