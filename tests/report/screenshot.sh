#!/usr/bin/env bash
# screenshot.sh — the HTML report in headless Chromium: it loads without a
# JavaScript error (its script runs to the end and marks <body
# data-ready="1">; no "Uncaught" in Chromium's console log), it makes no
# network request (one self-contained file), and a screenshot of it is not
# blank (many distinct colours, mostly not background). Skips (77) when
# Chromium is not installed (scripts/install-deps.sh installs it).
# usage: screenshot.sh PATH/TO/colossal-compile SOURCE_DIR
set -u
cc=$1
src=$2
chrome=""
for c in chromium chromium-browser google-chrome; do
  if command -v "$c" >/dev/null; then chrome=$c; break; fi
done
if [ -z "$chrome" ]; then
  echo "SKIP: chromium not found (install it with scripts/install-deps.sh)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$cc" report "$src/tests/report/gpt2-tiny.plan.json" --format html -o "$tmp/r.html" || exit 1
if grep -Eq '(src|href)=["'"'"']?(https?:)?//' "$tmp/r.html"; then
  echo "FAIL: the HTML refers to the network"
  fail=$((fail + 1))
fi
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run
       --user-data-dir="$tmp/profile" --enable-logging=stderr --v=0)
timeout 60 "$chrome" "${flags[@]}" --dump-dom "file://$tmp/r.html" > "$tmp/dom.html" 2> "$tmp/dom.err"
if ! grep -q 'data-ready="1"' "$tmp/dom.html"; then
  echo "FAIL: the report's script did not run to the end (no data-ready on <body>)"
  fail=$((fail + 1))
fi
if grep -E 'Uncaught|CONSOLE\(.*(Error|error)' "$tmp/dom.err"; then
  echo "FAIL: JavaScript errors in the console (above)"
  fail=$((fail + 1))
fi
# the block filter hides the other blocks' rows (set from the address here)
timeout 60 "$chrome" "${flags[@]}" --dump-dom "file://$tmp/r.html#block=h" > "$tmp/dom-h.html" 2>/dev/null
python3 - "$tmp/dom-h.html" <<'PY' || fail=$((fail + 1))
import re, sys
rows = re.findall(r'<tr data-block="([^"]*)"[^>]*?(style="[^"]*")?>', open(sys.argv[1]).read())
shown = {b for b, st in rows if "none" not in st}
hidden = {b for b, st in rows if "none" in st}
print(f"filter block=h: {len(rows)} rows, shown blocks {sorted(shown)}, hidden {sorted(hidden)}")
sys.exit(0 if rows and shown == {"h"} and "-" in hidden else 1)
PY
timeout 60 "$chrome" "${flags[@]}" --screenshot="$tmp/shot.png" --window-size=1280,1600 "file://$tmp/r.html" 2> "$tmp/shot.err" >/dev/null
if [ ! -s "$tmp/shot.png" ]; then
  echo "FAIL: no screenshot"; tail -5 "$tmp/shot.err"
  exit 1
fi
python3 - "$tmp/shot.png" <<'PY' || fail=$((fail + 1))
# Decodes the PNG (8-bit RGB/RGBA, the five filters) and checks it is not blank.
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, w = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        assert depth == 8 and ctype in (2, 6), f"unexpected PNG format {depth}/{ctype}"
        bpp = 3 if ctype == 2 else 4
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
raw, stride = zlib.decompress(idat), w * bpp
prev, colours, nonwhite, total = bytearray(stride), set(), 0, 0
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    prev = line
    if y % 4 == 0:  # sample every 4th row and column: fast enough, still thousands of pixels
        for x in range(0, w, 4):
            px = bytes(line[x * bpp:x * bpp + 3])
            colours.add(px)
            total += 1
            nonwhite += px != b"\xff\xff\xff"
share = nonwhite / total
print(f"screenshot {w}x{h}: {len(colours)} colours, {100 * share:.1f}% of sampled pixels not white")
sys.exit(0 if len(colours) >= 16 and share >= 0.05 else 1)
PY
[ "$fail" -eq 0 ]
