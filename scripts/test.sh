#!/usr/bin/env bash
# The full test suite: formatting, vet, every test (against real runsc, the
# real rootfs and real cgroups) with the race detector, and a short run of
# each fuzz target. Run as root after scripts/setup.sh (make test does both).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:/usr/local/bin:$PATH

mapfile -t gofiles < <(git ls-files '*.go' 2>/dev/null || find . -name '*.go')
unformatted=$(gofmt -l "${gofiles[@]}")
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...
# The contract lints clean (npm registry; the pinned version is cached).
if command -v npx >/dev/null; then
  npx --yes @redocly/cli@2.77.0 lint --format=stylish openapi.yaml
else
  echo "npx (Node.js) is missing: the OpenAPI lint needs it" >&2; exit 1
fi
# The Helm chart: helm lint, helm template with each value set, every
# rendered document decoded strictly into the Kubernetes API types and the
# chart's promises checked; broken value sets must be refused
# (docs/kubernetes.md). Its own module, so the k8s.io modules stay out of
# renderbox's; helm comes from scripts/setup.sh.
# It requires renderbox's module by a replace, so a requirement renderbox
# gains is its too: -mod=mod takes it rather than stopping at "updates to
# go.mod needed" (go mod tidy there keeps the committed files current).
(cd deploy/kubernetes/validate && export GOFLAGS=-mod=mod && go vet ./... && go test -count=1 ./...)
# One package at a time: sandbox timing assertions (kill within a second of
# the deadline) are about renderbox, not about two cores shared by Chromium
# and LibreOffice runs from another package.
mapfile -t pkgs < <(go list ./... | grep -v '/internal/e2e$')
go test -race -count=1 -p 1 -timeout 45m "${pkgs[@]}"
# The end-to-end package without the race detector: its code is the client
# of binaries it builds (without -race, as they ship), and under -race its
# contract-validated requests were four times slower (200 submissions in
# 40 s instead of 12 s) for no race it could find in renderbox itself.
# -parallel 8: its tests that mostly wait (t.Parallel, the package's doc)
# run all at once after the serial ones, not two at a time (GOMAXPROCS).
go test -count=1 -parallel 8 -timeout 45m ./internal/e2e
# The built rootfs's export and import round trip, without -race (its
# file's build tag; a minute instead of eleven under the race detector).
go test -count=1 -run '^TestExportImportBuiltTree$' -timeout 10m ./internal/rootfs
# An execution count, not a duration: on go1.26 a duration -fuzztime can end
# with a spurious "context deadline exceeded" (golang/go#75804). Each line
# is a package, a target and its count: the framing parsers get the most,
# the parsers of a client's request (intake, options, limits, sniffing,
# cursors, idempotency keys) a short run each, and text stored by both
# ledger backends a shorter one (each input is two database round trips)
# ($FUZZTIME overrides all).
while read -r pkg target count; do
  go test -run '^$' -fuzz "^$target\$" -fuzztime "${FUZZTIME:-$count}" "$pkg" </dev/null
done <<'TARGETS'
./internal/wire FuzzReadResponse 300000x
./internal/wire FuzzReadRequest 300000x
./internal/api FuzzJSONIntake 20000x
./internal/api FuzzMultipartIntake 20000x
./internal/render FuzzDecodeOptions 20000x
./internal/render FuzzDecodeLimits 20000x
./internal/render FuzzSniff 20000x
./internal/render FuzzZipDirectory 20000x
./internal/render FuzzSiteArchive 20000x
./internal/render FuzzOLE 20000x
./internal/render FuzzImageHeader 20000x
./internal/ledger FuzzDecodeCursor 20000x
./internal/ledger FuzzIdempotencyKey 20000x
./internal/ledger FuzzStoredText 2000x
TARGETS
