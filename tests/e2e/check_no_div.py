"""A generated CPU program's kernels divide no element's index (issue 21,
bidx21): fails when an operand's subscript in M_kernels.c, i.e. an index
computed per element, holds a `%` or `/` by a constant that is not a power of
two (GCC 12's `omp simd` loop over a0[i] + a1[i % 192]: 108 us against 7 us
for a plain add). Row offsets computed once a row, outside the subscripts,
pass. usage: check_no_div.py DIR... (each holding a *_kernels.c)"""
import glob
import re
import sys

SUB = re.compile(r"\ba\d+\[([^\[\]]*)\]")
DIV = re.compile(r"[%/]\s*\(?\s*(\d+)\b")

bad, files = [], 0
for d in sys.argv[1:]:
    for path in glob.glob(d + "/*_kernels.c"):
        files += 1
        for no, line in enumerate(open(path), 1):
            for sub in SUB.findall(line):
                for k in DIV.findall(sub):
                    k = int(k)
                    if k > 1 and k & (k - 1):
                        bad.append("%s:%d: a division by %d per element: %s" % (path, no, k, line.strip()))
if not files:
    sys.exit("no *_kernels.c under %s" % " ".join(sys.argv[1:]))
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
