#!/usr/bin/env bash
# The lint tier (make lint): gofmt, go vet in both test tiers, staticcheck at
# a pinned version, shellcheck on scripts/ and rootfs/. Seconds once the
# tools are there; needs no root, runsc or service. docs/testing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:/usr/local/bin:$PATH

die() { echo "lint: $*" >&2; exit 1; }
command -v go >/dev/null || die "Go 1.26 is required (https://go.dev/doc/install)"

# staticcheck from the Go module proxy, pinned: a newer release adds checks,
# and lint must fail for the code, not for the day it ran.
staticcheck_version=v0.8.2
tools=$PWD/bin/tools
if ! "$tools/staticcheck" -version 2>/dev/null | grep -q "(${staticcheck_version#v})"; then
  echo "lint: installing staticcheck $staticcheck_version into bin/tools"
  GOBIN=$tools go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version"
fi
if ! command -v shellcheck >/dev/null; then
  [ "$(id -u)" = 0 ] || die "shellcheck is missing; install it with: apt-get install -y shellcheck (or: make setup)"
  echo "lint: installing shellcheck"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends shellcheck >/dev/null
fi

mapfile -t gofiles < <(git ls-files '*.go' 2>/dev/null || find . -name '*.go')
unformatted=$(gofmt -l "${gofiles[@]}")
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
# Both tiers: -tags unit builds what make unit runs, so a unit test that
# reaches for the machine fails here, in seconds (internal/testenv).
go vet ./...
go vet -tags unit ./...
"$tools/staticcheck" ./...
# -x follows the files the scripts source (their "shellcheck source=" lines).
mapfile -t shfiles < <(git ls-files 'scripts/*.sh' 'rootfs/*.sh' 2>/dev/null || ls scripts/*.sh rootfs/*.sh)
shellcheck -x "${shfiles[@]}"
echo "lint: clean"
