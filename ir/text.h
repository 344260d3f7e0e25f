/*
 * text.h — the textual form of the IR (.cir files), documented in docs/ir.md.
 *
 * ir_print() writes the canonical form; ir_parse() reads it back. Printing,
 * parsing and printing again gives byte-identical text. Parse errors are
 * reported through diag (file:line:col, source line, caret, hint).
 */
#ifndef COLOSSAL_TEXT_H
#define COLOSSAL_TEXT_H

#include "ir.h"

void ir_print(const Graph *g, StrBuf *out);
void ir_print_node(const Graph *g, NodeId n, StrBuf *out); /* one line, no newline */

/* Formats a double as the shortest text that reads back to the same value. */
void ir_print_float(StrBuf *b, double x);

/* Parses .cir text. The graph keeps a copy of the text so that later passes
 * can point diagnostics into it. Returns NULL after reporting an error. */
Graph *ir_parse(const char *filename, const char *text, size_t len);

#endif
