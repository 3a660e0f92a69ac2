#!/usr/bin/env bash
# The main job: the worker's start-up checks (runsc, cgroups, rootfs digest,
# reap, self-test inside a real sandbox), then real renders of the examples
# through fresh sandboxes into out/. Run via `make run`.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}
rm -rf "$out"
mkdir -p "$out"

bin/worker check
echo
echo "== html-pdf: examples/report.html"
bin/worker render -renderer html-pdf examples/report.html -o "$out/html-pdf"
echo "== pdf-png: the PDF just made"
bin/worker render -renderer pdf-png "$out/html-pdf/output.pdf" -o "$out/pdf-png"
echo "== svg-png: examples/chart.svg"
bin/worker render -renderer svg-png examples/chart.svg -o "$out/svg-png"
echo
echo "outputs:"
find "$out" -type f -printf '  %p  %s bytes\n' | sort
