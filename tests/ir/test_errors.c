/*
 * test_errors.c — malformed IR text: each case gives the exact first line of
 * the diagnostic (file:line:col: error: message) and, where there is one, the
 * hint. No case may crash or leak (the sanitizer build runs this too).
 */
#include "check.h"
#include "ir_test_util.h"

#define H "# colossal-ir 1\ngraph t\ninput %x : f32[4,8]\n"

typedef struct BadCase {
    const char *text;
    size_t len;           /* 0: strlen(text) */
    const char *first;    /* the first line of the diagnostic */
    const char *hint;     /* a substring of the hint line, or NULL */
} BadCase;

static const BadCase cases[] = {
    {H "%y : f32[4,8] = relux(%x)\n", 0, "bad.cir:4:17: error: unknown op 'relux'", "did you mean 'relu'?"},
    {H "%y : f32[4,8] = add(%x)\n", 0, "bad.cir:4:17: error: add takes 2 operands, got 1", NULL},
    {H "%y : f32[4,8] = concat(%x)\n", 0, "bad.cir:4:17: error: concat takes 2 to 8 operands, got 1", NULL},
    {H "param %w : f32[9,3] init=normal(0.02)\n%y : f32[4,3] = matmul(%x, %w) {ta=0, tb=0}\n", 0,
     "bad.cir:5:17: error: matmul of [4,8] by [9,3]: inner dims differ (8 vs 9)", NULL},
    {H "input %b : f32[5]\n%y : f32[4,8] = add(%x, %b)\n", 0,
     "bad.cir:5:17: error: shapes [4,8] and [5] do not broadcast: dim 1 is 8 vs 5", NULL},
    {H "input %i : f32[4]\n%y : f32[4,8] = add(%x, %i)\n", 0,
     "bad.cir:5:17: error: shapes [4,8] and [4] do not broadcast: dim 1 is 8 vs 4", NULL},
    {H "input %i : i32[4,8]\n%y : f32[4,8] = add(%x, %i)\n", 0,
     "bad.cir:5:17: error: operand 1 is f32 but operand 2 is i32; insert a cast", NULL},
    {H "%y : f32[4,9] = relu(%x)\n", 0, "bad.cir:4:1: error: %y is declared f32[4,9] but relu gives f32[4,8]",
     "the written type must equal"},
    {H "%y : f32[4,8] = relu(%z)\n", 0, "bad.cir:4:22: error: use of undefined value %z", "defined"},
    {H "%x : f32[4,8] = relu(%x)\n", 0, "bad.cir:4:1: error: redefinition of %x", NULL},
    {H "input %x : f32[2]\n", 0, "bad.cir:4:7: error: redefinition of %x", NULL},
    {H "input %z : f33[4]\n", 0, "bad.cir:4:12: error: unknown dtype 'f33'", "f32, bf16, f16 and i32"},
    {H "input %z : f32[4,0]\n", 0, "bad.cir:4:18: error: dim 0 is not positive", "positive"},
    {H "input %z : f32[1,1,1,1,1,1,1,1,1]\n", 0, "bad.cir:4:32: error: too many dims: tensors have at most 8", NULL},
    {H "%y : f32[4,8] = add(%x, %x", 0, "bad.cir:4:27: error: expected ',' or ')' before end of file", NULL},
    {H "%y : f32[4,8", 0, "bad.cir:4:13: error: expected ',' or ']' before end of file", NULL},
    {H "%y : f32[4,8] = scale(%x)\n", 0, "bad.cir:4:17: error: scale needs the attribute 's'", NULL},
    {H "%y : f32[4,8] = scale(%x) {s=1.0, q=2}\n", 0, "bad.cir:4:35: error: scale has no attribute 'q'",
     "scale's attributes are s"},
    {H "%y : f32[4,8] = scale(%x) {s=1.0, s=2.0}\n", 0, "bad.cir:4:35: error: attribute 's' is given twice", NULL},
    {H "%y : f32[4,8] = scale(%x) {s=abc}\n", 0, "bad.cir:4:30: error: expected a number, found 'abc'", NULL},
    {H "%y : f32[4,8] = relu(%x) @h[0]\n", 0, "bad.cir:4:27: error: undeclared block 'h'", "block NAME INSTANCES"},
    {"# colossal-ir 1\ngraph t\nblock h 2\ninput %x : f32[4,8]\n%y : f32[4,8] = relu(%x) @h[2]\n", 0,
     "bad.cir:5:29: error: instance 2 of block 'h' is outside 0..1", NULL},
    {H "%y : f32[4,8] = relu(%x)\ninput %w : f32[2]\n", 0, "bad.cir:5:1: error: leaf declared after a node",
     "before the first node"},
    {H "%a : f32[2,8], %b : f32[2,8] = relu(%x)\n", 0, "bad.cir:4:1: error: relu gives 1 result here, but 2 are named", NULL},
    {H "%y : f32[4,8] = split(%x) {axis=1, parts=3}\n", 0,
     "bad.cir:4:17: error: split into 3 parts: need 2..8 parts that divide dim 1 (8)", NULL},
    {H "%y : f32[4,8] = permute(%x) {perm=[0,0]}\n", 0,
     "bad.cir:4:17: error: permute axes must be a permutation of 0..1", NULL},
    {H "%y : f32[5,8] = reshape(%x) {shape=[5,8]}\n", 0,
     "bad.cir:4:17: error: reshape of [4,8] (32 elements) to [5,8] (40 elements)", NULL},
    {H "%y : f32[4,8] = relu(%x) extra\n", 0, "bad.cir:4:26: error: expected end of line after the node, found 'extra'", NULL},
    {H "output %nope\n", 0, "bad.cir:4:8: error: use of undefined value %nope", NULL},
    {H "param %w : f32[2] init=gaussian(1)\n", 0, "bad.cir:4:24: error: expected an initializer, found 'gaussian'",
     "zeros, ones, normal(std), uniform(lo, hi)"},
    {H "%y : f32[4,8] act = relu(%x)\n%z : f32[4,8] param = relu(%y)\n", 0,
     "bad.cir:5:15: error: unknown result role 'param'", "act (the default) or grad"},
    {H "param %w : f32[2]\n", 0, "bad.cir:4:7: error: param %w needs an initializer", "init=normal(STD)"},
    {H "param %w : f32[2] init=zeros\n%y : f32[4,8] updates=%w = relu(%x)\n", 0,
     "bad.cir:5:1: error: %y cannot update %w", "same type"},
    {H "\x01\x02\xff junk\n", 0, "bad.cir:4:1: error: unexpected byte 0x01, expected a statement", "text file"},
    {H "%y : f32[4,8] = relu(%x)\x00\n", sizeof(H "%y : f32[4,8] = relu(%x)\x00\n") - 1,
     "bad.cir:4:25: error: NUL byte in IR text", "text file"},
    {"hello\n", 0, "bad.cir:1:1: error: expected 'graph NAME' to start the file, found 'hello'", "graph NAME"},
    {"", 0, "bad.cir:1:1: error: expected 'graph NAME' to start the file before end of file", NULL},
    {"graph\n", 0, "bad.cir:1:6: error: expected the graph's name before end of line", NULL},
    {H "%y : f32[4,8] = relu(%x)\n%z : f32[4,8] = gelu(%y\n%w : f32[4,8] = relu(%x)\n", 0,
     "bad.cir:5:24: error: expected ',' or ')' before end of line", NULL},
    {H "%y : f32[4,8] = add(%x, %x) {}\nwat\n", 0, "bad.cir:5:1: error: expected a statement", NULL},
    {H "%y : f32[4,8] = add(%x, 99999999999999999999)\n", 0, "bad.cir:4:25: error: expected an operand like %x, found '99999999999999999999'", NULL},
};

int main(void) {
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const BadCase *k = &cases[c];
        size_t len = k->len ? k->len : strlen(k->text);
        char *diags = NULL;
        Graph *g = parse_capture("bad.cir", k->text, len, &diags);
        CHECK(g == NULL);
        ir_graph_free(g);
        /* first line of the diagnostic */
        char first[512];
        size_t n = strcspn(diags, "\n");
        snprintf(first, sizeof first, "%.*s", (int)(n < 511 ? n : 511), diags);
        if (strncmp(first, k->first, strlen(k->first))) fprintf(stderr, "case %zu:\n", c);
        CHECK_INT(strncmp(first, k->first, strlen(k->first)), 0);
        if (strncmp(first, k->first, strlen(k->first))) fprintf(stderr, "  got:  %s\n  want: %s\n", first, k->first);
        /* the source line is quoted with a caret under the column */
        CHECK(strstr(diags, "\n  ") != NULL);
        CHECK(strchr(diags, '^') != NULL);
        if (k->hint) CHECK_CONTAINS(diags, k->hint);
        free(diags);
    }
    return check_done("ir_errors");
}
