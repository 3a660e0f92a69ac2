#!/usr/bin/env bash
# The main job, end to end: Redis, the worker (after its start-up checks and
# self-test), the API, an API key, then real render jobs submitted over
# HTTP, waited for, and their outputs downloaded into out/. Run via
# `make run`; everything it starts is stopped when it ends (Redis, which
# scripts/redis.sh starts, is left running), and its API key is revoked.
#
# `scripts/run.sh up` (`make up`) starts the same stack and keeps it
# running until Ctrl-C: it prints the API's URL, a key for the session
# (revoked when it stops) and where the logs are, and renders nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-run}
case $mode in
  run | up) ;;
  *) echo "usage: scripts/run.sh [up]" >&2; exit 2 ;;
esac
out=${OUT:-out}
rm -rf "$out"
mkdir -p "$out"
# shellcheck source=scripts/stack.sh
LOGS="$out/logs" KEY_NAME="make-$mode" source scripts/stack.sh

if [ "$mode" = up ]; then
  cat <<EOF

renderbox is up; Ctrl-C stops the API and the worker and revokes the key.
  API     http://$addr  (GET /readyz, GET /v1/renderers)
  key     $key_id, for this session only:
            export RENDERBOX_SERVER=http://$addr RENDERBOX_KEY=$key
  logs    $logs/api.log
          $logs/worker.log
  try     curl -fsS -H "Authorization: Bearer \$RENDERBOX_KEY" -F renderer=html-pdf \\
            -F file=@examples/report.html "\$RENDERBOX_SERVER/v1/jobs?wait=60"
          bin/renderbox render -r html-pdf -o out/cli examples/report.html
EOF
  # Ctrl-C (or a TERM) ends the wait; the EXIT trap stops the rest.
  trap 'echo; echo "stopping…"; exit 0' INT TERM
  # shellcheck disable=SC2154 # stack_pids and worker_pid come from stack.sh
  wait -n "${stack_pids[@]}" "$worker_pid" || true
  echo "the API or the worker stopped on its own; see its log" >&2
  exit 1
fi

api() { curl -fsS -H "Authorization: Bearer $key" "$@"; }

submit() { # renderer file options → job id
  api -F "renderer=$1" -F "file=@$2" -F "options=$3" "http://$addr/v1/jobs?wait=60" |
    tee "$out/$1.job.json" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p'
}

fetch() { # renderer: download every output of its job
  local job state
  job=$(sed -n 's/.*"id":"\([^"]*\)".*/\1/p' "$out/$1.job.json")
  api "http://$addr/v1/jobs/$job?wait=60" > "$out/$1.job.json"
  state=$(sed -n 's/.*"state":"\([^"]*\)".*/\1/p' "$out/$1.job.json")
  echo "== $1: $job $state"
  [ "$state" = succeeded ] || { cat "$out/$1.job.json"; echo; return 1; }
  mkdir -p "$out/$1"
  while read -r url; do
    # Absolute when the API has -public-url (API_ARGS), else relative.
    case $url in http://* | https://*) ;; *) url="http://$addr$url" ;; esac
    api -o "$out/$1/${url##*/}" "$url"
  done < <(grep -o '"url":"[^"]*"' "$out/$1.job.json" | cut -d'"' -f4)
}

submit html-pdf examples/report.html '{"paper": "a4"}' >/dev/null
fetch html-pdf
submit pdf-png "$out/html-pdf/output.pdf" '{"dpi": 100}' >/dev/null
fetch pdf-png
submit svg-png examples/chart.svg '{"width": 640}' >/dev/null
fetch svg-png
submit markdown-html examples/notes.md '{"smart": true}' >/dev/null
fetch markdown-html
submit dot-svg examples/pipeline.dot '{"layout": "dot"}' >/dev/null
fetch dot-svg
# The same through the command-line client (cmd/renderbox, on package
# client): submit, a progress line, download with the digests checked.
echo "== renderbox render -r markdown-pdf examples/notes.md"
RENDERBOX_SERVER="http://$addr" RENDERBOX_KEY="$key" bin/renderbox render -r markdown-pdf -o "$out/cli" examples/notes.md

echo
echo "outputs (via http://$addr), in $(cd "$out" && pwd):"
find "$out" -mindepth 2 -type f -not -path "*/logs/*" -not -name "*.job.json" -printf '  %p  %s bytes\n' | sort
echo "the jobs' records: $out/*.job.json. The stack stops now; make up keeps one running."
