#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# esmtrain-example plot on real runs: two tiny trainings (a second with
# another learning rate and seed), one plotted to PNG (its IHDR size, and
# decoded with python3's zlib: not blank, several colours), both overlaid to
# SVG (well-formed XML with paths); an existing output refused without
# --force and left byte for byte; a missing run (exit 1) and an unknown flag
# (exit 2) refused with a message; nothing half-written left behind.
# Usage: test_plot.sh CLI   (exit 77: the CLI was built without cairo)
set -euo pipefail
cli=$1
work=$(mktemp -d /tmp/esmt-plot-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; [ -f "$work/err" ] && cat "$work/err"; exit 1; }
# run_plot EXPECTED_RC ARGS...: the plot command's status must be EXPECTED_RC
run_plot() {
  local want=$1 rc=0
  shift
  "$cli" plot "$@" > "$work/out" 2> "$work/err" || rc=$?
  [ "$rc" -eq "$want" ] || fail "plot $* exited $rc, expected $want"
}

set +e
"$cli" plot "$work/none" -o "$work/none.png" > /dev/null 2> "$work/err"; rc=$?
set -e
if grep -q "this build has no cairo" "$work/err"; then
  [ "$rc" -eq 1 ] || fail "without cairo: exit $rc, expected 1"
  echo "SKIP: built without cairo"
  exit 77
fi

echo "== two tiny runs"
awk 'BEGIN { srand(7); aa = "ACDEFGHIKLMNPQRSTVWY";
  for (r = 0; r < 400; r++) { printf(">p%d\n", r); n = 30 + int(rand() * 120);
    for (i = 0; i < n; i++) printf("%s", substr(aa, 1 + int(rand() * 20), 1)); printf("\n") } }' \
  > "$work/prot.fa"
"$cli" ingest "$work/prot.fa" -o "$work/data" --valid-fraction 0.1 --quiet > /dev/null
common=(--data "$work/data" --backend cpu --layers 2 --width 32 --heads 2 --max-len 128
        --batch-tokens 1024 --steps 40 --warmup 4 --eval-every 10 --save-every 0 --threads 2
        --log-every 1)
"$cli" train "${common[@]}" --out "$work/base" > /dev/null
"$cli" train "${common[@]}" --lr 3e-3 --seed 5 --out "$work/fast" > /dev/null
grep -q '"kind":"eval"' "$work/base/metrics.jsonl" || fail "no eval record in metrics.jsonl"

echo "== one run to PNG"
run_plot 0 "$work/base" -o "$work/one.png" --width 900 --height 560 --smooth 5
grep -q "wrote $work/one.png" "$work/err" || fail "no 'wrote' message"
python3 - "$work/one.png" 900 560 <<'PY'
import struct, sys, zlib
path, want_w, want_h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = open(path, "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
pos, idat, ihdr = 8, b"", None
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    assert zlib.crc32(kind + body) == struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0], kind
    if kind == b"IHDR": ihdr = struct.unpack(">IIBBBBB", body)
    if kind == b"IDAT": idat += body
    pos += 12 + n
w, h, depth, ctype, _, _, interlace = ihdr
assert (w, h) == (want_w, want_h), f"IHDR says {w}x{h}, asked {want_w}x{want_h}"
assert depth == 8 and ctype in (2, 6) and interlace == 0, f"unexpected PNG kind {ihdr}"
bpp = 3 if ctype == 2 else 4
raw, stride = zlib.decompress(idat), w * bpp
prev, rows = bytearray(stride), []
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):  # undo the row filter (PNG spec 9.2)
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(bytes(line))
    prev = line
pixels = [r[i:i + 3] for r in rows for i in range(0, stride, bpp)]
colours = set(pixels)
ink = sum(1 for p in pixels if p != b"\xff\xff\xff") / len(pixels)
coloured = sum(1 for p in colours if max(p) - min(p) > 60)  # not grey: the curves
print(f"PNG {w}x{h}: {len(colours)} colours ({coloured} not grey), {ink:.1%} not white")
assert ink > 0.02, "the image is (nearly) blank"
assert len(colours) >= 4 and coloured >= 2, "too few colours: no curves drawn?"
PY

grep -aq "esmtrain-example plot" "$work/one.png" || fail "the PNG lacks plot's Software mark"

echo "== two runs overlaid to SVG (labels, tokens on x, log y), from a metrics.jsonl path"
run_plot 0 "$work/base" "$work/fast/metrics.jsonl" -o "$work/two.svg" --width 1000 --height 700 \
  --x tokens --label base,fast --log-y --title "two runs"
python3 - "$work/two.svg" <<'PY'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg", root.tag
assert (root.get("width"), root.get("height")) == ("1000pt", "700pt"), root.attrib
paths = root.findall(".//" + ns + "path")
strokes = {p.get("style", "").split("stroke:")[1].split(";")[0] for p in paths if "stroke:rgb" in p.get("style", "")}
print(f"SVG: {len(paths)} paths, {len(strokes)} stroke colours")
assert len(paths) >= 20, "too few paths"
assert len(strokes) >= 3, "the two runs are not in distinct colours"
PY

echo "== an existing output is refused without --force and left as it was"
cp "$work/one.png" "$work/keep.png"
run_plot 1 "$work/base" -o "$work/one.png" --width 400 --height 300
grep -q "^esmtrain-example: plot: .*one.png exists" "$work/err" || fail "no 'exists' message"
cmp "$work/one.png" "$work/keep.png" || fail "the existing file was changed"
run_plot 0 "$work/base" -o "$work/one.png" --width 400 --height 300 --force
cmp -s "$work/one.png" "$work/keep.png" && fail "--force did not replace the file"
python3 -c "import struct,sys; d=open(sys.argv[1],'rb').read(24); assert struct.unpack('>II', d[16:24]) == (400, 300)" \
  "$work/one.png" || fail "the replaced PNG is not 400x300"

echo "== --force replaces only a figure of plot; never a run's file nor through a link"
echo "the user's notes" > "$work/notes.png"
run_plot 1 "$work/base" -o "$work/notes.png" --force
grep -q "notes.png exists and is not a figure written by \`plot\`" "$work/err" || fail "no 'not a figure' message"
[ "$(cat "$work/notes.png")" = "the user's notes" ] || fail "--force replaced the user's file"
ln -s notes.png "$work/link.png"
run_plot 1 "$work/base" -o "$work/link.png" --force
grep -q "link.png is a symbolic link" "$work/err" || fail "no 'symbolic link' message"
cp "$work/base/metrics.jsonl" "$work/metrics.keep"
run_plot 1 "$work/base" -o "$work/base/metrics.jsonl" --format png --force
cmp "$work/base/metrics.jsonl" "$work/metrics.keep" || fail "the run's metrics.jsonl was changed"
run_plot 1 "$work/fast/metrics.jsonl" -o "$work/base/curves.png"
grep -q "(a run), whose files esmtrain keeps" "$work/err" || fail "no 'inside ... (a run)' message"
[ ! -e "$work/base/curves.png" ] || fail "a figure was written into a run"

echo "== a missing run, a directory that is not a run, no output directory: exit 1"
run_plot 1 "$work/no-such-run" -o "$work/missing.png"
grep -q "^esmtrain-example: plot: .*no-such-run" "$work/err" || fail "the message does not name the run"
run_plot 1 "$work/data" -o "$work/missing.png"
grep -q "metrics.jsonl" "$work/err" || fail "the message does not name metrics.jsonl"
run_plot 1 "$work/base" -o "$work/no/dir/x.png"
[ ! -e "$work/missing.png" ] || fail "a failed plot left an output"

echo "== usage errors: exit 2"
run_plot 2 "$work/base" -o "$work/u.png" --bogus
grep -q "^esmtrain-example: plot: unknown option '--bogus'" "$work/err" || fail "unknown option message"
run_plot 2 "$work/base" -o "$work/u.jpg"
run_plot 2 "$work/base" "$work/fast" -o "$work/u.png" --label onlyone
run_plot 2 "$work/base" -o "$work/u.png" --width 12
run_plot 2 "$work/base"
[ ! -e "$work/u.png" ] && [ ! -e "$work/u.jpg" ] || fail "a refused plot left an output"
run_plot 0 --help
grep -q "usage: esmtrain-example plot" "$work/out" || fail "--help prints no usage"

echo "== a run with no records yet: every panel says no data"
mkdir "$work/empty" && : > "$work/empty/metrics.jsonl"
run_plot 0 "$work/empty" -o "$work/empty.svg" --format svg
grep -q "no train or eval record" "$work/err" || fail "no warning about an empty run"

leftover=$(find "$work" -name '.*.tmp-*')
[ -z "$leftover" ] || fail "temporary files left: $leftover"
echo "plot CLI test passed"
