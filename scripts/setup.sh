#!/usr/bin/env bash
# Installs what renderbox needs on a fresh Debian bookworm machine, as root,
# idempotently: Debian packages (mmdebstrap, erofs-utils, redis-server,
# poppler-utils, postgresql, iproute2, systemd, shellcheck), promtool, a static runsc at the pinned version
# and the renderer rootfs; with --tests also what only the tests use: helm (pinned, for the chart's
# tests) and SeaweedFS's weed at the pinned version (the tests' S3-compatible server).
#   scripts/setup.sh              what make run needs
#   scripts/setup.sh --tests      and the tests' tools (make test)
#   scripts/setup.sh --no-rootfs  skip the rootfs build
set -euo pipefail
cd "$(dirname "$0")/.."
rootfs=1 tests=
for arg in "$@"; do
  case $arg in
  --no-rootfs) rootfs= ;;
  --tests) tests=1 ;;
  *) echo "setup: unknown argument $arg (--tests, --no-rootfs)" >&2; exit 2 ;;
  esac
done

die() { echo "setup: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root: runsc, cgroups and mmdebstrap need it"
export PATH=/usr/local/go/bin:/usr/local/bin:$PATH
command -v go >/dev/null || die "Go 1.26 is required (https://go.dev/doc/install); it builds runsc, the agent and the services"

# Debian packages. poppler-utils on the host is only for the benchmark's
# native baseline; renderers always run in the sandbox's rootfs.
# postgresql: the ledger's tests run each backend, PostgreSQL on a private
# server they start from its binaries (internal/testenv). iproute2: the
# topology test puts each API replica and worker in a network namespace.
# systemd: systemd-analyze verifies the worker's unit (TestWorkerRunsAsItsUnitRunsIt;
# util-linux's unshare and setpriv run the worker as that unit would).
# erofs-utils: mkfs.erofs makes the rootfs image the sandboxes mount.
# make lint checks scripts/ and rootfs/ with shellcheck.
missing=()
for pkg in mmdebstrap erofs-utils redis-server poppler-utils util-linux iproute2 curl postgresql systemd shellcheck; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [[ " ${missing[*]} " == *" postgresql "* ]]; then
  # Debian's package would create a "main" cluster on port 5432 and may
  # start it: a server nobody configured, which the tests do not use. Ask
  # for none (a drop-in that pg_createcluster's settings read), and stop
  # any cluster that the install started anyway.
  mkdir -p /etc/postgresql-common/createcluster.d
  echo "create_main_cluster = false  # renderbox: no system cluster (scripts/setup.sh)" \
    > /etc/postgresql-common/createcluster.d/renderbox.conf
  fresh_postgresql=1
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# promtool checks and unit-tests deploy/prometheus's alert rules in the
# tests. It comes from Debian's prometheus package, unpacked rather than
# installed: the package would start a Prometheus server on port 9090,
# the API's metrics port.
if ! command -v promtool >/dev/null; then
  echo "setup: installing promtool (from Debian's prometheus package)"
  tmp=$(mktemp -d) && chmod 755 "$tmp"
  (cd "$tmp" && { apt-get download prometheus 2>/dev/null || { apt-get update -qq && apt-get download prometheus; }; } &&
    dpkg-deb -x prometheus_*.deb x) || die "could not fetch Debian's prometheus package for promtool"
  install -m 0755 "$tmp/x/usr/bin/promtool" /usr/local/bin/promtool
  rm -rf "$tmp"
fi
if [ -n "${fresh_postgresql:-}" ] && command -v pg_lsclusters >/dev/null; then
  pg_lsclusters -h | while read -r version cluster _ status _; do
    if [ "$status" = online ]; then
      echo "setup: stopping PostgreSQL cluster $version/$cluster that the install started"
      pg_ctlcluster "$version" "$cluster" stop
      echo manual > "/etc/postgresql/$version/$cluster/start.conf"
    fi
  done
fi

# The OpenAPI lint in the test suite runs through npx.
if ! command -v npx >/dev/null; then
  echo "setup: installing nodejs and npm (for the OpenAPI lint)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

# runsc, static (a cgo build dies in its own chroot), at the pinned version.
pinned=$(sed -n 's/^[[:space:]]*PinnedRunsc[[:space:]]*=[[:space:]]*"\(.*\)"/\1/p' internal/sandbox/locate.go)
[ -n "$pinned" ] || die "cannot read PinnedRunsc from internal/sandbox/locate.go"
if ! go version -m /usr/local/bin/runsc 2>/dev/null | grep -q "gvisor.dev/gvisor[[:space:]]*$pinned" ||
   go version -m /usr/local/bin/runsc 2>/dev/null | grep -q "CGO_ENABLED=1"; then
  echo "setup: building runsc $pinned (about a minute)"
  CGO_ENABLED=0 GOBIN=/usr/local/bin go install "gvisor.dev/gvisor/runsc@$pinned"
fi

# Huge pages for the sandboxes' memory: runsc uses them only when the host's
# shmem THP is advise (with a defrag that does not compact directly) or
# always. Memory-heavy renderers fault several times less (LibreOffice:
# 8.2 s -> 2.8 s a page, measured here). Both settings only touch memory
# that asks for huge pages. Not persistent: deploy/tmpfiles.d sets them at
# boot on a worker host.
thp=/sys/kernel/mm/transparent_hugepage
if [ -w "$thp/shmem_enabled" ] && [ -w "$thp/defrag" ]; then
  grep -q '\[advise\]\|\[always\]\|\[within_size\]' "$thp/shmem_enabled" || echo advise > "$thp/shmem_enabled"
  if grep -q '\[advise\]' "$thp/shmem_enabled" && ! grep -q '\[always\]\|\[defer\]\|\[never\]' "$thp/defrag"; then
    echo defer > "$thp/defrag"
  fi
  echo "setup: huge pages: shmem_enabled $(grep -o '\[[a-z_+]*\]' "$thp/shmem_enabled"), defrag $(grep -o '\[[a-z_+]*\]' "$thp/defrag")"
else
  echo "setup: cannot set $thp (not writable here); sandboxes will run without huge pages" >&2
fi

# The tests' own tools (make test), not needed to run the service.
test_tools() {
  # helm, for the chart's tests (deploy/kubernetes, docs/kubernetes.md): from
  # the Go module proxy at a pinned version, into bin/tools beside lint's
  # staticcheck. A go-installed helm prints no patch version (helm version
  # says v4.3), so the module version is read from the binary. About 3 minutes
  # with the modules cached, 20 on a loaded 2-core machine.
  helm_version=v4.3.2
  if ! go version -m bin/tools/helm 2>/dev/null | grep -q "helm.sh/helm/v4[[:space:]]*$helm_version"; then
    echo "setup: building helm $helm_version into bin/tools"
    CGO_ENABLED=0 GOBIN=$PWD/bin/tools go install "helm.sh/helm/v4/cmd/helm@$helm_version"
  fi

  # SeaweedFS's weed, the S3-compatible server the object-store tests start
  # (testenv.StartS3), built from the module proxy at the pinned version
  # into a path keyed by it. `go install mod@version` refuses the module (its
  # go.mod has a replace directive), so it is built inside the downloaded
  # module; about 25 minutes of CPU on two busy cores, once.
  weed_pinned=$(sed -n 's/^const PinnedSeaweedFS = "\(.*\)"/\1/p' internal/testenv/s3.go)
  [ -n "$weed_pinned" ] || die "cannot read PinnedSeaweedFS from internal/testenv/s3.go"
  weed_bin=/var/cache/renderbox/bin/weed-$weed_pinned
  if [ ! -x "$weed_bin" ]; then
    echo "setup: building SeaweedFS $weed_pinned (weed; many minutes, once)"
    weed_src=$(cd / && GOFLAGS=-mod=mod go mod download -json "github.com/seaweedfs/seaweedfs@$weed_pinned" |
      sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [ -d "$weed_src" ] || die "could not download github.com/seaweedfs/seaweedfs@$weed_pinned"
    mkdir -p /var/cache/renderbox/bin
    (cd "$weed_src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$weed_bin.tmp" ./weed) ||
      die "building weed failed"
    mv "$weed_bin.tmp" "$weed_bin"
  fi
}
if [ -n "$tests" ]; then
  test_tools
fi

if [ -n "$rootfs" ]; then
  bash rootfs/build.sh
fi
echo "setup: done (runsc $pinned at /usr/local/bin/runsc${tests:+, helm in bin/tools, weed at $weed_bin})"
