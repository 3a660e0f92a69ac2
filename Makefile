# renderbox — see README.md. Every target that renders needs root.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:/usr/local/bin:$(PATH)

.PHONY: setup setup-tests rootfs build run up test unit lint bench check redis clean

## setup: Debian packages, static runsc at the pinned version, the rootfs
setup:
	bash scripts/setup.sh

## setup-tests: setup, and the tests' own tools (helm, SeaweedFS's weed)
setup-tests:
	bash scripts/setup.sh --tests

## rootfs: (re)build the renderer rootfs if its inputs or the agent changed
rootfs:
	bash rootfs/build.sh

## build: the binaries, into bin/
build:
	CGO_ENABLED=0 go build -trimpath -o bin/ ./cmd/...

## run: the main job — setup, Redis, worker, API, a key, real renders over HTTP into
## out/; then it stops the worker and API, revokes the key and says where the logs are
run: setup build
	bash scripts/run.sh

## up: the same stack, kept running until Ctrl-C: prints the URL, a key for the
## session (revoked on exit) and where the logs are
up: setup build
	bash scripts/run.sh up

## test: setup, then the full suite (real runsc, rootfs, cgroups)
test: setup-tests
	bash scripts/test.sh

## unit: the tests that need nothing from the machine (no root, runsc, rootfs,
## Redis, PostgreSQL or network), in seconds; docs/testing.md
unit:
	go test -tags unit -count=1 ./...

## lint: gofmt, go vet, staticcheck (pinned), shellcheck on scripts/ and rootfs/
lint:
	bash scripts/lint.sh

## bench: sandbox vs native figures as JSON lines
bench: setup-tests build
	bash scripts/bench.sh

## redis: start a local redis-server if none answers
redis:
	bash scripts/redis.sh

## check: the worker's start-up checks and self-test
check: build
	bin/worker check

clean:
	rm -rf bin out
