/*
 * check.h: the test harness. Each test program runs named cases and prints
 * TAP lines ("ok N - name" / "not ok N - name"); tests/run.sh adds them up.
 *
 *   TEST(name) { CHECK(x == 1); CHECK_CU(cuInit(0), CUDA_SUCCESS); }
 *   int main(void) { RUN(name); return check_done(); }
 *
 * CHECK records a failure with file:line and carries on, so one run shows
 * every broken expectation of a case. A program that crashes is counted as a
 * failure by the runner.
 */
#ifndef STABLEGRAPH_CHECK_H
#define STABLEGRAPH_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_case_failed;
static int check_cases, check_failed_cases;

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond)) {                                                        \
            check_case_failed = 1;                                            \
            printf("#   %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);\
            fflush(stdout);                                                   \
        }                                                                     \
    } while (0)

/* Compares two integer-like values and prints both on failure. */
#define CHECK_EQ(a, b)                                                        \
    do {                                                                      \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);       \
        if (check_a_ != check_b_) {                                           \
            check_case_failed = 1;                                            \
            printf("#   %s:%d: %s == %s failed: %lld != %lld\n", __FILE__,    \
                   __LINE__, #a, #b, check_a_, check_b_);                     \
            fflush(stdout);                                                   \
        }                                                                     \
    } while (0)

/* A CUresult expression must produce `want`. */
#define CHECK_CU(expr, want) CHECK_EQ((int)(expr), (int)(want))

#define TEST(name) static void name(void)

static inline void check_run(const char *name, void (*fn)(void))
{
    check_case_failed = 0;
    fn();
    check_cases++;
    if (check_case_failed) check_failed_cases++;
    printf("%sok %d - %s\n", check_case_failed ? "not " : "", check_cases, name);
    fflush(stdout);
}
#define RUN(name) check_run(#name, name)

static inline int check_done(void)
{
    printf("1..%d\n", check_cases);
    return check_failed_cases ? 1 : 0;
}

#endif /* STABLEGRAPH_CHECK_H */
