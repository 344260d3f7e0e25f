#!/usr/bin/env bash
# checkpoint.sh BIN DIR MPIRUN... — a save killed half-way leaves the previous
# checkpoint whole:
#   1. 2 ranks save values v1 (checkpoint generation 1);
#   2. 2 ranks save values v2, rank 1 dies half-way through its file
#      (fault injection): the job fails, the manifest still names generation 1;
#   3. 2 ranks load: v1, intact;
#   4. 1 rank loads the same checkpoint (another mesh: slices are reassembled);
#   5. 2 ranks save v3 (generation 2, replacing the crashed attempt's files)
#      and load it; generation 1's files and the stale temporary are gone;
#   6. a flipped byte is caught by the CRC and the load touches nothing;
#   7. files that are not ours survive saves: only files a manifest of ours
#      names are deleted;
#   8. crafted directories are refused with a message, never followed: a FIFO
#      in place of a shard (it would block every rank), a directory as the
#      manifest, a slice outside its tensor, a CRC-consistent shard whose
#      header points past the file, a manifest naming a path outside DIR;
#   9. a manifest whose generation is past 2^52 (where a double stops
#      counting) makes the next save fail with a message.
set -u
BIN=$1 DIR=$2; shift 2
MPI=("$@")
rm -rf "$DIR"
fail() { echo "checkpoint.sh: FAIL: $*"; exit 1; }
"${MPI[@]}" -np 2 "$BIN" save "$DIR" 1 || fail "save of generation 1"
"${MPI[@]}" -np 2 "$BIN" crash "$DIR" 2 >"$DIR.crash.log" 2>&1 && fail "the crashing save succeeded"
grep -q "fault injection" "$DIR.crash.log" || { cat "$DIR.crash.log"; fail "no fault-injection message"; }
ls "$DIR"
"${MPI[@]}" -np 2 "$BIN" load "$DIR" 1 || fail "generation 1 did not load after the crash"
"$BIN" load "$DIR" 1 || fail "generation 1 did not load on one rank"
"${MPI[@]}" -np 2 "$BIN" save "$DIR" 3 || fail "save of generation 3"
"${MPI[@]}" -np 2 "$BIN" load "$DIR" 3 || fail "generation 3 did not load"
ls "$DIR" | grep -q '^g1-' && fail "generation 1 files were not removed"
ls "$DIR" | grep -q 'tmp$' && fail "stale temporaries were not removed"
"${MPI[@]}" -np 2 "$BIN" corrupt "$DIR" || fail "corruption was not detected"

# 7. only what a manifest of ours names is deleted
rm -rf "$DIR" && mkdir -p "$DIR"
echo keep > "$DIR/g7-r00000.safetensors"; echo keep > "$DIR/notes.tmp"; echo keep > "$DIR/x.safetensors.tmp"
"${MPI[@]}" -np 2 "$BIN" save "$DIR" 1 || fail "save into a directory with other files"
"${MPI[@]}" -np 2 "$BIN" save "$DIR" 2 || fail "second save"
for f in g7-r00000.safetensors notes.tmp x.safetensors.tmp; do [ -f "$DIR/$f" ] || fail "a save deleted $f, which no manifest named"; done
ls "$DIR" | grep -q '^g1-' && fail "generation 1 (named by the old manifest) was not removed"
"${MPI[@]}" -np 2 "$BIN" load "$DIR" 2 || fail "load after saves beside other files"

# 8. crafted directories
craft() { # craft WHAT: edits the checkpoint in $DIR (python: the CRC is recomputed where it must stay consistent)
python3 - "$DIR" "$1" <<'PY'
import json, os, struct, sys, zlib
d, what = sys.argv[1], sys.argv[2]
mp = os.path.join(d, "manifest.json")
m = json.load(open(mp))
f0 = m["files"][0]
path = os.path.join(d, f0["file"])
if what == "fifo":
    os.remove(path); os.mkfifo(path)
elif what == "manifest_dir":
    os.remove(mp); os.mkdir(mp)
elif what == "slice":
    f0["tensors"][0]["offset"][0] = 2 ** 40
elif what == "traversal":
    f0["file"] = "../g1-r00000.safetensors"
elif what == "header":
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    name = next(k for k in h if k != "__metadata__")
    h[name]["data_offsets"] = [0, 2 ** 40]
    t = json.dumps(h).encode(); t += b" " * ((8 - len(t) % 8) % 8)
    b = struct.pack("<Q", len(t)) + t + b[8 + n:]
    open(path, "wb").write(b)
    f0["bytes"], f0["crc32"] = len(b), zlib.crc32(b)
if what not in ("fifo", "manifest_dir"):
    json.dump(m, open(mp, "w"))
PY
}
rm -rf "$DIR" "$DIR.good" && "${MPI[@]}" -np 2 "$BIN" save "$DIR.good" 4 >/dev/null || fail "save before crafting"
for what in "fifo:not a regular file" "manifest_dir:not a regular file" "slice:a slice lies outside the global shape" \
            "header:lies outside the file" "traversal:file record 0 is malformed"; do
  rm -rf "$DIR" && cp -r "$DIR.good" "$DIR"
  craft "${what%%:*}"
  timeout 30 "${MPI[@]}" -np 2 "$BIN" refuse "$DIR" "${what#*:}" || fail "crafted checkpoint (${what%%:*}) was not refused with '${what#*:}'"
done
# 9. a generation the manifest's double cannot count past is refused, not reused
rm -rf "$DIR" && cp -r "$DIR.good" "$DIR"
python3 - "$DIR/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["generation"] = 2 ** 60; json.dump(m, open(sys.argv[1], "w"))
PY
"${MPI[@]}" -np 2 "$BIN" save "$DIR" 5 >"$DIR.gen.log" 2>&1 && fail "a save over generation 2^60 succeeded"
grep -q "names no valid generation" "$DIR.gen.log" || { cat "$DIR.gen.log"; fail "no message for a generation past 2^52"; }
echo "checkpoint.sh: all phases passed"
