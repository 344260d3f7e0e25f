"""check_share.py SHARED_DIR UNSHARED_DIR [MIN_RATIO] — the generated schedule
with shared functions (compiler/codegen/cg_share.c) against the same plan
written out (`--no-share`): every loop over a shared function expanded (row r
of its table for o[k], a + d * r for the stepped integers) gives the written-out
schedule token for token (comments and profile entry numbers aside), so the
program makes the same calls with the same arguments in the same order. Also:
at least one shared function, the profile's marks one per entry, and
M.c at least MIN_RATIO (default 1) times smaller."""
import glob
import os
import re
import sys

shared_dir, plain_dir = sys.argv[1], sys.argv[2]
min_ratio = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
path = [f for f in glob.glob(shared_dir + "/*.c") if not f.endswith("_kernels.c")][0]
px = os.path.basename(path)[:-2]
shared = open(path).read()
plain = open(os.path.join(plain_dir, px + ".c")).read()
errs = []

fn = re.compile(r"^/\* %%[^\n]*\n \*[^\n]*\*/\n(?:static const int64_t (%s_r\d+)_o\[(\d+)\]\[(\d+)\] = \{\n(.*?)^\};\n)?"
                r"^static void (%s_r\d+)\(%s \*M, int64_t r(, const int64_t \*o)?\) \{\n    \(void\)M, \(void\)r;\n(.*?)^\}\n\n"
                % (px, px, px), re.S | re.M)
funcs = {}
for m in fn.finditer(shared):
    name, body = m.group(5), m.group(7)
    rows = [[int(x) for x in row.split(", ")] for row in re.findall(r"^    \{([^}]*)\},$", m.group(4) or "", re.M)]
    if m.group(1) and (m.group(1) != name or len(rows) != int(m.group(2)) or any(len(r) != int(m.group(3)) for r in rows)):
        errs.append("%s: its table does not match its declaration" % name)
    funcs[name] = (body, rows)
if not funcs:
    errs.append("no shared function in %s" % path)
rest = fn.sub("", shared)


def expand(m):
    count, name = int(m.group(1)), m.group(2)
    body, rows = funcs[name]
    out = []
    for r in range(count):
        b = re.sub(r"o\[(\d+)\]", lambda q: str(rows[r][int(q.group(1))]), body)
        b = re.sub(r"\((-?\d+) ([-+]) (\d+) \* r\)",
                   lambda q: str(int(q.group(1)) + (1 if q.group(2) == "+" else -1) * int(q.group(3)) * r), b)
        out.append(b)
    return "".join(out)


loop = re.compile(r"^    for \(int r = 0; r < (\d+); r\+\+\) /\*[^\n]*\*/\n        (%s_r\d+)\(M, r[^;]*\);\n" % px, re.M)
n_loops = len(loop.findall(rest))
expanded = loop.sub(expand, rest)


def tokens(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"%s_prof\((\d+)\)" % px, "%s_prof(#)" % px, text)  # entries are renumbered
    text = re.sub(r"static colrt_prof_entry %s_prof_tab\[\d+\] = \{\n.*?^\};" % px, "", text, flags=re.S | re.M)
    text = re.sub(r"colrt_profile_register\(\"%s\", %s_kernels_isa\(\), %s_prof_tab, \d+\)" % (px, px, px), "", text)
    return re.findall(r"\"(?:\\.|[^\"\\])*\"|\w+|[^\s\w]", text)


a, b = tokens(expanded), tokens(plain)
if a != b:
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    errs.append("expanded schedule differs from the written-out one at token %d: %r vs %r"
                % (i, " ".join(a[max(0, i - 12):i + 12]), " ".join(b[max(0, i - 12):i + 12])))
marks = [int(k) for k in re.findall(r"^\s+%s_prof\((\d+)\);$" % px, shared, re.M)]
n_tab = re.search(r"%s_prof_tab\[(\d+)\]" % px, shared)
if marks and (sorted(marks) != list(range(len(marks))) or not n_tab or int(n_tab.group(1)) != len(marks)):
    errs.append("profile marks are not one per entry 0..%d" % (len(marks) - 1))
ratio = len(plain) / len(shared)
if ratio < min_ratio:
    errs.append("%s.c is %.2fx smaller, not %.2fx" % (px, ratio, min_ratio))
print("%s.c: %d shared functions, %d loops, %d -> %d bytes (%.2fx); %d tokens compared"
      % (px, len(funcs), n_loops, len(plain), len(shared), ratio, len(a)))
sys.exit("; ".join(errs) if errs else 0)
