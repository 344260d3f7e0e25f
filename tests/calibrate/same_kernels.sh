#!/bin/sh
# same_kernels.sh COMPILE SRC CALIBRATE_KERNELS_C — colossal-calibrate times the
# CPU program's own kernels: the tiny GPT-2 (B=8 T=32 H=4 Dh=16, the ladder's
# third shape) generated for the CPU, its attention forward, dq and dk/dv
# kernels are, but for their names, the very functions calibrate_kernels.c times
# (cal_attention_2_*), and the AdamW of a 64-element tensor its loop (cal_adamw_6).
set -eu
cc=$1 src=$2 kern=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$cc" "$src/examples/gpt2/gpt2.c" -DN_LAYER=2 -DN_EMBD=64 -DN_HEAD=4 -DVOCAB=256 -DCTX=32 --batch 8 \
  --cluster cpu:1x1 --emit code --target cpu -q -o "$work/g" || fail "generating the tiny GPT-2"
# the function after the first line starting with $2 in file $1, its name replaced by K
fn_after() {
  awk -v m="$2" 'index($0, m) == 1 && !on { on = 1; next } on && /^void / { go = 1 } go { print } go && /^}/ { exit }' "$1" |
    sed '1s/^void [A-Za-z0-9_]*(/void K(/'
}
fn_named() {
  awk -v m="void $2(" 'index($0, m) == 1 { go = 1 } go { print } go && /^}/ { exit }' "$1" | sed '1s/^void [A-Za-z0-9_]*(/void K(/'
}
check() { # marker in the program, calibrate's function
  fn_after "$work/g/gpt2_kernels.c" "$1" > "$work/a.c"
  fn_named "$kern" "$2" > "$work/b.c"
  [ -s "$work/a.c" ] || fail "no kernel after '$1' in the program"
  [ -s "$work/b.c" ] || fail "no $2 in $kern"
  cmp -s "$work/a.c" "$work/b.c" || { diff "$work/a.c" "$work/b.c" | head -20; fail "$2 is not the program's '$1'"; }
  echo "same: $1 = $2"
}
check "/* attention -> " cal_attention_2_0
check "/* attention_dq -> " cal_attention_2_1
check "/* attention_dkv -> " cal_attention_2_2
# the AdamW runs in the layer's multi-tensor kernel (lower.updates): its first segment,
# h.0.ln_1.weight's 64 elements, is the same prologue and the same loop as cal_adamw_6
# (the group runs its loops in one OpenMP region where calibrate runs one loop alone)
adam_text() { # the prologue and the 64-element loop of the function in $1, unindented
  sed -n '/const double lr/,/const float rb2/p' "$1" | sed 's/^ *//'
  awk '!on && /for \(int64_t i = 0; i < 64; i\+\+\) \{/ { on = 1 } on { print } on && /^ *}$/ { exit }' "$1" | sed 's/^ *//'
}
fn_after "$work/g/gpt2_kernels.c" "/* adamw x12 -> %h.0." > "$work/a.c"
fn_named "$kern" cal_adamw_6 > "$work/b.c"
[ -s "$work/a.c" ] || fail "no multi-tensor AdamW kernel for layer 0 in the program"
adam_text "$work/a.c" > "$work/a.txt"
adam_text "$work/b.c" > "$work/b.txt"
[ "$(wc -l < "$work/a.txt")" -ge 12 ] || fail "the group's first segment is not a 64-element AdamW loop"
cmp -s "$work/a.txt" "$work/b.txt" || { diff "$work/a.txt" "$work/b.txt" | head -20; fail "cal_adamw_6 is not the program's AdamW"; }
echo "same: the layer's AdamW group, its first segment = cal_adamw_6"
echo "same_kernels.sh: ok"
