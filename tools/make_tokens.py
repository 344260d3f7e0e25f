#!/usr/bin/env python3
"""make_tokens.py — text to token files in llm.c's format, with a byte-level
tokenizer (token id = byte value, vocabulary 256), for the training drivers
(examples/gpt2/train.c, examples/llama/train.c).

File format (examples/common/tokens.h reads it): a header of 256
little-endian int32 — [0] = 20240520 (magic), [1] = 1 (version: uint16
tokens), [2] = number of tokens, the rest 0 — then the tokens as
little-endian uint16. Real GPT-2 or LLaMA tokenization is a tokenizer
library's job (tiktoken, tokenizers); write its ids in the same format.

usage: tools/make_tokens.py INPUT.txt [INPUT2.txt ...] -o OUT_PREFIX [--val-fraction 0.1]
writes OUT_PREFIX_train.bin and OUT_PREFIX_val.bin (the last fraction of the text),
creating OUT_PREFIX's folder when it does not exist. Mistakes (a missing input,
an unwritable output) are one line and exit status 1, never a traceback.
"""
import argparse
import os
import struct
import sys

MAGIC = 20240520
VERSION = 1


def write_tokens(path, toks):
    header = [MAGIC, VERSION, len(toks)] + [0] * 253
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack("<%dH" % len(toks), *toks))


def read(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="text files (read as bytes)")
    ap.add_argument("-o", "--out", required=True, help="output prefix")
    ap.add_argument("--val-fraction", type=float, default=0.1)
    a = ap.parse_args()
    if not 0 <= a.val_fraction < 1:
        sys.exit("make_tokens.py: --val-fraction must be in [0, 1)")
    try:
        data = b"".join(read(p) for p in a.inputs)
        folder = os.path.dirname(a.out)
        if folder and os.path.exists(folder) and not os.path.isdir(folder):
            sys.exit("make_tokens.py: -o %s: %s is not a folder" % (a.out, folder))
        if folder:
            os.makedirs(folder, exist_ok=True)
    except OSError as e:
        sys.exit("make_tokens.py: %s: %s" % (e.filename, e.strerror))
    n_val = int(len(data) * a.val_fraction)
    train, val = list(data[: len(data) - n_val]), list(data[len(data) - n_val :])
    if len(train) < 2 or (a.val_fraction > 0 and len(val) < 2):
        sys.exit("make_tokens.py: the text is too short (%d bytes)" % len(data))
    try:
        write_tokens(a.out + "_train.bin", train)
        print("%s_train.bin: %d tokens" % (a.out, len(train)))
        if a.val_fraction > 0:
            write_tokens(a.out + "_val.bin", val)
            print("%s_val.bin: %d tokens" % (a.out, len(val)))
    except OSError as e:
        sys.exit("make_tokens.py: cannot write %s: %s" % (e.filename, e.strerror))


if __name__ == "__main__":
    main()
