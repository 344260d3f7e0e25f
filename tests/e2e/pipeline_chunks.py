#!/usr/bin/env python3
"""pipeline_chunks.py CHUNKED_DIR [UNCHUNKED_DIR] -- ZeRO chunks under a pipeline
(compiler/lower/chunk.c; docs/sharding.md "Chunks"): each (virtual) stage packs
its own parameters' slices (ZeRO-3) and gradients (ZeRO-2/3), so the plan JSON's
lowering.chunks.stages lists every stage with chunks of its own, and each stage runs
fewer reduce-scatters (and under ZeRO-3 fewer all-gathers) than the same stage one
per gradient (per parameter and reader): the counts the lowering has before its
chunk pass. Every parameter chunk's gradients are one chunk in its layout (aligned).

With UNCHUNKED_DIR (the same plan without --chunk-bytes, run by its own e2e test):
the chunked program runs fewer collectives than that program, and after the
driver's steps both
programs saved the same bits (every tensor of every rank's checkpoint shard): on two
ranks a stage's reduce-scatter sums two addends whatever buffer holds them, and an
all-gather copies, so packing changes no value. An unpipelined plan (ZeRO over two
mesh axes of 2, each collective in two steps of two ranks) is checked for the
chunks' layout and these counts and bits only.
"""
import glob
import json
import os
import re
import struct
import sys


def plan(d):
    return json.load(open(glob.glob(os.path.join(d, "*.plan.json"))[0]))


def shards(d):
    """Per rank, the newest generation's safetensors shard: {rank: {name: (header, bytes)}}."""
    newest = {}
    for f in glob.glob(os.path.join(d, "ckpt", "g*-r*.safetensors")):
        m = re.match(r"g(\d+)-r(\d+)\.safetensors$", os.path.basename(f))
        if m:
            gen, rank = int(m.group(1)), int(m.group(2))
            if rank not in newest or newest[rank][0] < gen:
                newest[rank] = (gen, f)
    out = {}
    for rank, (_, f) in newest.items():
        raw = open(f, "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        head = json.loads(raw[8:8 + n])
        data = raw[8 + n:]
        out[rank] = {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
                     for k, v in head.items() if k != "__metadata__"}
    return out


def main():
    c = plan(sys.argv[1])
    low = c["lowering"]
    ch = low["chunks"]
    pipelined = c.get("pipeline", {}).get("schedule", "none") != "none"
    stages = ch["stages"] if pipelined else []  # unpipelined (ZeRO over two mesh axes): the same bits only
    n = len(c["pipeline"]["stages"]) * c["pipeline"].get("chunks", 1) if pipelined else 0
    assert len(stages) == n, ("one entry per (virtual) stage", n, stages)
    zero3 = ch["count"] > 0  # parameter chunks: ZeRO-3's gathers packed too
    assert ch["gradient_chunks"] > 0 and ch["aligned"] == ch["count"], ("each chunk's gradients in its layout", ch)
    assert not pipelined or sum(s["count"] for s in stages) == ch["count"], ("each chunk on one stage", ch)
    assert not pipelined or sum(s["gradient_chunks"] for s in stages) == ch["gradient_chunks"], ("each chunk on one stage", ch)
    for s in stages:
        assert s["gradient_chunks"] > 0, ("every stage packs its own", s)
        assert s["reduce_scatter_count"] < s["unchunked_reduce_scatter_count"], ("fewer reduce-scatters", s)
        if zero3:
            assert s["count"] > 0 and s["gathers"] > 0, ("every stage packs its own", s)
            assert s["all_gather_count"] < s["unchunked_all_gather_count"], ("fewer all-gathers", s)
    if len(sys.argv) > 2:
        u = plan(sys.argv[2])["lowering"]
        assert "chunks" not in u, u
        if zero3:
            assert low["all_gather_count"] < u["all_gather_count"], (low["all_gather_count"], u["all_gather_count"])
        assert low["reduce_scatter_count"] < u["reduce_scatter_count"], (low["reduce_scatter_count"], u["reduce_scatter_count"])
        a, b = shards(sys.argv[1]), shards(sys.argv[2])
        assert a and sorted(a) == sorted(b), ("the same ranks saved", sorted(a), sorted(b))
        tensors = 0
        for rank in a:
            assert sorted(a[rank]) == sorted(b[rank]), ("rank %d saved the same tensors" % rank)
            for name in a[rank]:
                assert a[rank][name] == b[rank][name], ("rank %d %s: not the same bits as without chunks" % (rank, name))
                tensors += 1
        print("%d tensors on %d ranks: the same bits with and without chunks" % (tensors, len(a)))
    for s in stages:
        print("stage %d: %d chunks (%d parameters), %d all-gathers (%d without chunks), %d reduce-scatters (%d)" % (
            s["stage"], s["count"], s["parameters"], s["all_gather_count"], s["unchunked_all_gather_count"],
            s["reduce_scatter_count"], s["unchunked_reduce_scatter_count"]))


if __name__ == "__main__":
    main()
