#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The tree describes the project as it is and how to reproduce it with its
# own commands. Fails, naming file and line, on what belongs to a
# development environment instead: a development machine's paths, the call
# syntax of a remote-run facility, and docs organised as a diary (dated or
# numbered-session headings, "second session" narrative). Git keeps history.
# Usage: check_tree_text.sh [SOURCE_ROOT]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
self=tests/docs/check_tree_text.sh
# The patterns are spelled in pieces so that this file does not match itself.
w=work h=home
patterns=(
  "/$w/[a-z]"                                   # a development machine's paths
  "/$h/[a-z]"
  "files""_at|files""_fetch|give""_back|budget""_left"  # remote-run call syntax
  "device"" machine|device"" time|device"" minutes"
  '`\$'"OUT"'`'                                  # the remote tool's out folder in docs
  "(first|second|third|this|next|GPU) ""session"  # diary narrative
)
headings='^#+ .*([0-9]{4}-[0-9]{2}-[0-9]{2}|[Ss]ession|Round [0-9])'
bad=0
scan() { # PATTERN [GREP_OPTIONS...]: every text file of the tree but this one
  local pat=$1; shift
  (cd "$root" && grep -rInE "$@" --exclude-dir=.git --exclude=.git --exclude-dir='build*' \
     --exclude-dir=.gpu-deps --exclude-dir=.gpu-prebuilt --exclude-dir=gpu-out \
     --exclude-dir=runs --exclude-dir=__pycache__ --exclude-dir=fixtures -e "$pat" . || true) |
    grep -v "^\./$self:" || true
}
for p in "${patterns[@]}"; do
  hits=$(scan "$p")
  [ -z "$hits" ] && continue
  echo "FAIL: text of a development environment (/$p/):"; echo "$hits"
  bad=1
done
hits=$(scan "$headings" --include='*.md')
[ -z "$hits" ] || { echo "FAIL: a diary heading (dates, sessions, rounds) in the docs:"; echo "$hits"; bad=1; }
[ "$bad" -eq 0 ] && echo "tree text: no development-machine paths, remote-run syntax or diary headings"
exit "$bad"
