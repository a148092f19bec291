#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The installed examples/embed.c built against a moved prefix with
# pkg-config and run on a model: tokenize, embed (one protein longer than
# the window, so windowed), a pseudo-log-likelihood equal to the installed
# CLI's `score` of the same protein.
# Usage: check_embed_example.sh PREFIX LIBDIR MODEL_DIR   ($CFLAGS, such as a
# sanitizer's, are added to the compile line)
set -euo pipefail
stage=$1 libdir=$2 model=$3
echo "== the embedder's starting point, examples/embed.c (infer.h)"
# shellcheck disable=SC2046,SC2086
cc -std=c11 -Wall -Werror ${CFLAGS:-} "$stage/share/doc/esmtrain/examples/embed.c" \
   $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs esmtrain) -lm \
   -Wl,-rpath,"$libdir" -o "$stage/embed-pc"
out=$("$stage/embed-pc" "$model")
echo "$out"
grep -Eq '^protein 2: [0-9]+ residues, [2-9][0-9]* windows, \|mean\| = [0-9.]+$' <<<"$out" ||
  { echo "embed: the protein longer than the window was not windowed" >&2; exit 1; }
api=$(sed -n 's/^protein 0: pseudo-log-likelihood \(-[0-9.]*\)$/\1/p' <<<"$out")
[ -n "$api" ] || { echo "embed: no pseudo-log-likelihood" >&2; exit 1; }
work=$(mktemp -d "$stage/embed-XXXXXX")
printf '>p0\nMKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQ\n' > "$work/p0.fa"
"$stage/bin/esmtrain-example" score "$model" "$work/p0.fa" -o "$work/p0.csv" --quiet >/dev/null
cli=$(awk -F, 'NR == 2 { printf("%.4f", $3) }' "$work/p0.csv")
[ "$api" = "$cli" ] ||
  { echo "embed: the API's pseudo-log-likelihood $api is not the CLI's $cli" >&2; exit 1; }
echo "pseudo-log-likelihood: API $api = CLI $cli"
