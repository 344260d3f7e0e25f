/*
 * check.h — the tests' assertions. A failed check prints file:line and what
 * differed, and the test goes on; check_done() prints the tally and returns
 * the exit status (non-zero if anything failed).
 */
#ifndef COLOSSAL_CHECK_H
#define COLOSSAL_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int check_failures, check_count;

#define CHECK(c)                                                              \
    do {                                                                      \
        check_count++;                                                        \
        if (!(c)) {                                                           \
            check_failures++;                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
        }                                                                     \
    } while (0)

#define CHECK_INT(a, b)                                                                   \
    do {                                                                                  \
        long long _a = (long long)(a), _b = (long long)(b);                               \
        check_count++;                                                                    \
        if (_a != _b) {                                                                   \
            check_failures++;                                                             \
            fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__, #a, \
                    _a, #b, _b);                                                          \
        }                                                                                 \
    } while (0)

#define CHECK_NEAR(a, b, rtol)                                                               \
    do {                                                                                     \
        double _a = (double)(a), _b = (double)(b);                                           \
        check_count++;                                                                       \
        if (!(fabs(_a - _b) <= (rtol) * fmax(fabs(_a), fabs(_b)) || _a == _b)) {             \
            check_failures++;                                                                \
            fprintf(stderr, "%s:%d: %s = %.17g, expected %.17g (rtol %g)\n", __FILE__, __LINE__, \
                    #a, _a, _b, (double)(rtol));                                             \
        }                                                                                    \
    } while (0)

#define CHECK_STR(a, b)                                                                    \
    do {                                                                                   \
        const char *_a = (a), *_b = (b);                                                   \
        check_count++;                                                                     \
        if (!_a || !_b || strcmp(_a, _b)) {                                                \
            check_failures++;                                                              \
            fprintf(stderr, "%s:%d: %s is\n---\n%s\n---\nexpected\n---\n%s\n---\n", __FILE__, \
                    __LINE__, #a, _a ? _a : "(null)", _b ? _b : "(null)");                 \
        }                                                                                  \
    } while (0)

#define CHECK_CONTAINS(hay, needle)                                                          \
    do {                                                                                     \
        const char *_h = (hay), *_n = (needle);                                              \
        check_count++;                                                                       \
        if (!_h || !strstr(_h, _n)) {                                                        \
            check_failures++;                                                                \
            fprintf(stderr, "%s:%d: expected to find\n  %s\nin\n---\n%s\n---\n", __FILE__,   \
                    __LINE__, _n, _h ? _h : "(null)");                                       \
        }                                                                                    \
    } while (0)

static inline int check_done(const char *name) {
    printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
    return check_failures ? 1 : 0;
}

#endif
