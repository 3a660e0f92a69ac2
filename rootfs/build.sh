#!/usr/bin/env bash
# Builds the renderer root filesystem from Debian bookworm packages with
# mmdebstrap (no container runtime), installs the agent, and seals the tree
# with a manifest (package versions + tree digest) that the worker verifies
# at start.
#
# Layout (RENDERBOX_ROOTFS_DIR, default /var/lib/renderbox/rootfs):
#   <key>/rootfs/         the tree the sandbox mounts read-only (base + agent + files/)
#   <key>/manifest.json   package versions, agent digest, tree digest
#   <key>/rootfs.erofs    the tree as an EROFS image, what sandboxes mount
#                         (+ rootfs.erofs.json: its digest and its tree's)
#   current -> <key>      what the worker uses by default
# RENDERBOX_ROOTFS_DIR is root's and 0700, and so is each <key>/: no other
# user may reach a tree to drop a file into it while it is sealed or made
# into an image (docs/security.md, "The rootfs on the host").
# The slow part (mmdebstrap) is cached as a tarball keyed by a digest of its
# inputs (packages.txt, sources.list, the mmdebstrap arguments) and of the
# archives' state (their InRelease files) in RENDERBOX_CACHE_DIR.
# RENDERBOX_FONTS_DIR, when set, is a directory of the operator's own fonts
# (.ttf, .otf, .ttc, .pfb, .pfm, .afm, each a plain file; anything else
# fails the build): they join the tree under /usr/local/share/fonts/operator
# and its key, so every host built from the same inputs renders alike.
# The tree's font families are listed in /usr/share/renderbox/fonts.json
# (the workers publish it; GET /v1/fonts).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
out=${RENDERBOX_ROOTFS_DIR:-/var/lib/renderbox/rootfs}
cache=${RENDERBOX_CACHE_DIR:-/var/cache/renderbox}

die() { echo "rootfs/build.sh: $*" >&2; exit 1; }
fonts=${RENDERBOX_FONTS_DIR:-}
if [ -n "$fonts" ]; then
  [ -d "$fonts" ] || die "RENDERBOX_FONTS_DIR $fonts is not a directory"
  fonts=$(cd "$fonts" && pwd)
  # Plain font files only: no link out of the directory, nothing that
  # would run or configure anything in the tree.
  bad=$(cd "$fonts" && find . -mindepth 1 \( ! -type f ! -type d \) -o \( -type f ! -iregex '.*\.\(ttf\|otf\|ttc\|pfb\|pfm\|afm\)' \) | head -3)
  [ -z "$bad" ] || die "RENDERBOX_FONTS_DIR holds what is not a font file (.ttf, .otf, .ttc, .pfb, .pfm, .afm): $bad"
fi
[ "$(id -u)" = 0 ] || die "must run as root (mmdebstrap needs it to build the tree)"
command -v mmdebstrap >/dev/null || die "mmdebstrap is missing (try: apt-get install -y mmdebstrap)"
command -v mkfs.erofs >/dev/null || die "mkfs.erofs is missing (try: apt-get install -y erofs-utils)"

packages=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$here/packages.txt" | tr -s ' \n' ',' | sed 's/,$//')
# How the base is made; part of its cache key with the package list and
# sources, so editing the rest of this script does not rebuild the base.
base_args=(--variant=essential --format=tar --aptopt='Acquire::Retries "3"'
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/info/*')
static_key=$( (cat "$here/packages.txt" "$here/sources.list"; printf '%s\n' "${base_args[@]}") | sha256sum | cut -c1-16)
# The archives' state is part of the key too: when Debian publishes an
# update (the security archive does, often), the suites' InRelease files
# change and the base is built again, so a security fix to Chromium,
# poppler, LibreOffice or librsvg reaches the next `make rootfs`. Offline,
# the newest base built from the same inputs is used, and said so.
archive_state() {
  local line url suite
  while read -r line; do
    # shellcheck disable=SC2086 # a sources.list line is words
    set -- $line
    [ "${1:-}" = deb ] || continue
    url=$2 suite=$3
    curl -fsS --max-time 20 "$url/dists/$suite/InRelease" | sha256sum | cut -c1-16 || return 1
  done < "$here/sources.list"
}
mkdir -p "$cache"
install -d -m 0700 "$out" && chmod 0700 "$out"
if state=$(archive_state) && [ -n "$state" ]; then
  base_key="$static_key-$(printf '%s\n' "$state" | sha256sum | cut -c1-8)"
else
  # shellcheck disable=SC2012 # by age; the names are ours, digests without spaces
  newest=$(ls -1t "$cache"/rootfs-base-"$static_key"-*.tar 2>/dev/null | head -1 || true)
  [ -n "$newest" ] || die "cannot read the Debian archives' state (InRelease) and no base was built before"
  base_key=$(basename "$newest" .tar | sed 's/^rootfs-base-//')
  echo "rootfs: the archives cannot be reached; using the newest base built before ($base_key)" >&2
fi
base_tar="$cache/rootfs-base-$base_key.tar"

if [ ! -s "$base_tar" ]; then
  echo "rootfs: building base $base_key with mmdebstrap (packages: $packages)"
  mapfile -t sources < <(grep -v '^#' "$here/sources.list" | sed '/^$/d')
  mmdebstrap "${base_args[@]}" --include="$packages" bookworm "$base_tar.tmp" "${sources[@]}"
  mv "$base_tar.tmp" "$base_tar"
  # Two bases are plenty: the one in use and the one before.
  # shellcheck disable=SC2012 # by age; the names are ours, digests without spaces
  ls -1t "$cache"/rootfs-base-*.tar 2>/dev/null | tail -n +3 | xargs -r rm -f
else
  echo "rootfs: base $base_key cached at $base_tar"
fi
[ "${1:-}" = --base-only ] && exit 0

tmpbin=$(mktemp -d)
trap 'rm -rf "$tmpbin"' EXIT
(cd "$repo" && CGO_ENABLED=0 go build -trimpath -o "$tmpbin/renderbox-agent" ./cmd/agent)
(cd "$repo" && go build -o "$tmpbin/worker" ./cmd/worker)
# The tree's key: the base, the agent and the files this repo adds.
# This script is part of the key: how the tree is assembled changes it
# too, and so does the code that rewrites its fontconfig configuration.
# The operator's fonts, by path and content, are part of it.
agent_sum=$( (sha256sum "$tmpbin/renderbox-agent" "$0" "$repo/internal/rootfs/fontconfig.go" | cut -d' ' -f1; cd "$here/files" && find . -type f | LC_ALL=C sort | xargs sha256sum
  if [ -n "$fonts" ]; then echo operator-fonts; (cd "$fonts" && find . -type f | LC_ALL=C sort | xargs -r sha256sum); fi) | sha256sum | cut -c1-16)
key="$base_key-$agent_sum"
dest="$out/$key"

if [ -s "$dest/manifest.json" ]; then
  echo "rootfs: $dest is up to date"
else
  echo "rootfs: assembling $dest"
  work="$out/.tmp-$key"
  rm -rf "$work"
  mkdir -p "$work/rootfs"
  chmod 0700 "$work"
  tar -C "$work/rootfs" -xf "$base_tar"
  install -m 0755 -o root -g root "$tmpbin/renderbox-agent" "$work/rootfs/usr/local/bin/renderbox-agent"
  # Static files the renderers use (e.g. the Markdown page wrapper).
  (cd "$here/files" && find . -type f | while read -r f; do
    install -D -m 0644 -o root -g root "$f" "$work/rootfs/$f"
  done)
  if [ -n "$fonts" ]; then
    (cd "$fonts" && find . -type f | while read -r f; do
      install -D -m 0644 -o root -g root "$f" "$work/rootfs/usr/local/share/fonts/operator/$f"
    done)
  fi
  # Mount points the sandbox spec uses; the root itself is read-only.
  mkdir -p "$work/rootfs/tmp" "$work/rootfs/proc" "$work/rootfs/dev" "$work/rootfs/sys"
  # The empty file the spec mounts over what a sandbox must not have
  # (sandbox.MaskFile), and the mount point it is mounted on: /dev/fuse.
  install -D -m 0444 -o root -g root /dev/null "$work/rootfs/usr/share/renderbox/masked"
  install -m 0444 -o root -g root /dev/null "$work/rootfs/dev/fuse"
  # One fontconfig file instead of some hundred: every program that uses
  # fontconfig reads its whole configuration when it starts, and in a
  # sandbox each open and stat of it is a round trip to the Sentry (worker
  # rootfs fontconfig: conf.d inlined into fonts.conf, per-user parts and
  # the template directory dropped; it fails unless fontconfig answers as
  # before, and records the answers for the tests).
  "$tmpbin/worker" rootfs fontconfig "$work"
  # Fontconfig's caches, made for this very tree: the ones from the base
  # describe directories whose times changed when it was unpacked, and a
  # stale cache makes every renderer in every sandbox (read-only root, a
  # fresh home) rescan every font — seconds of CPU per Chromium or
  # LibreOffice start.
  chroot "$work/rootfs" /usr/bin/fc-cache --force --system-only >/dev/null
  # The families a document may name, for GET /v1/fonts (each font's
  # first family name, as fontconfig matches it).
  chroot "$work/rootfs" /usr/bin/fc-list --format '%{family[0]}\n' | LC_ALL=C sort -u |
    chroot "$work/rootfs" /usr/bin/python3 -c 'import json, sys; json.dump({"families": [l.strip() for l in sys.stdin if l.strip()]}, sys.stdout, indent=1)' \
    > "$work/rootfs/usr/share/renderbox/fonts.json"
  chmod 0644 "$work/rootfs/usr/share/renderbox/fonts.json"
  # The tree's normal form, which seal, export and import insist on: every
  # entry root's, no setuid, setgid or sticky bit. Nothing in the tree may
  # raise privileges, even if noNewPrivileges were ever lost, or belong to
  # whichever host user has a Debian account's uid. The scratch directories
  # (tmp, var/tmp, run/lock) lose only their sticky bit: in a sandbox /tmp
  # is a tmpfs and the rest of the root is read-only (the self-test writes
  # the world-writable /var/tmp to show it), and on the host the tree is
  # out of every other user's reach.
  chown -hR 0:0 "$work/rootfs"
  find "$work/rootfs" -xdev ! -type l -perm /7000 -exec chmod ug-s,-t {} +
  dpkg-query --admindir="$work/rootfs/var/lib/dpkg" -W -f='${Package}\t${Version}\n' > "$work/packages.tsv"
  "$tmpbin/worker" rootfs seal --packages "$work/packages.tsv" --inputs "$base_key" \
    --packages-at "$(date -u -r "$base_tar" +%Y-%m-%dT%H:%M:%SZ)" "$work"
  rm -f "$work/packages.tsv"
  rm -rf "$dest"
  mv "$work" "$dest"
fi
# The tree's EROFS image, which the sandboxes mount as their root (worker
# rootfs image; made again only when missing).
if [ ! -s "$dest/rootfs.erofs.json" ]; then
  "$tmpbin/worker" rootfs image "$dest"
fi
ln -sfn "$key" "$out/current.tmp" && mv -T "$out/current.tmp" "$out/current"
# Keep the three newest builds; older ones only take disk.
# shellcheck disable=SC2012 # by age; the names are ours, digests without spaces
ls -1dt "$out"/*-* 2>/dev/null | tail -n +4 | xargs -r rm -rf
echo "rootfs: ready at $out/current -> $key"
