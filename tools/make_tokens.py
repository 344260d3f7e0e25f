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
writes OUT_PREFIX_train.bin and OUT_PREFIX_val.bin (the last fraction of the text).
"""
import argparse
import struct
import sys

MAGIC = 20240520
VERSION = 1


def write_tokens(path, toks):
    header = [MAGIC, VERSION, len(toks)] + [0] * 253
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack("<%dH" % len(toks), *toks))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="text files (read as bytes)")
    ap.add_argument("-o", "--out", required=True, help="output prefix")
    ap.add_argument("--val-fraction", type=float, default=0.1)
    a = ap.parse_args()
    data = b"".join(open(p, "rb").read() for p in a.inputs)
    if not 0 <= a.val_fraction < 1:
        sys.exit("make_tokens.py: --val-fraction must be in [0, 1)")
    n_val = int(len(data) * a.val_fraction)
    train, val = list(data[: len(data) - n_val]), list(data[len(data) - n_val :])
    if len(train) < 2 or (a.val_fraction > 0 and len(val) < 2):
        sys.exit("make_tokens.py: the text is too short (%d bytes)" % len(data))
    write_tokens(a.out + "_train.bin", train)
    print("%s_train.bin: %d tokens" % (a.out, len(train)))
    if a.val_fraction > 0:
        write_tokens(a.out + "_val.bin", val)
        print("%s_val.bin: %d tokens" % (a.out, len(val)))


if __name__ == "__main__":
    main()
