/*
 * mod_graph.c: an emulated kernel module (see emu_kernel.h) used by the graph
 * and capture tests. Every kernel runs the whole launch on the CPU; `n`
 * arguments count 32-bit elements. No shared state, no locks.
 *
 *   fill_u32(u32 *p, u32 v, u64 n)                 p[i] = v
 *   affine_u32(u32 *p, u32 mul, u32 add, u64 n)    p[i] = p[i] * mul + add (order-sensitive)
 *   add_u32(u32 *dst, const u32 *a, const u32 *b, u64 n)   dst[i] = a[i] + b[i]
 *   slow_fill_u32(u32 *p, u32 v, u64 n, u32 us)    sleeps `us` microseconds, then fills
 *   cond_dec_u32(u32 *p, u64 h, u64 n)             p[i] -= 1, then sets conditional h to p[0]
 *   cond_set(u64 h, u32 v)                         sets conditional h to v
 * (the conditional's value: cudaemu_set_conditional, the emulated
 * cudaGraphSetConditional).
 */
#include "emu_kernel.h"

#include <stdint.h>
#include <time.h>

static void fill_u32(void **a, const emu_launch *l)
{
    (void)l;
    uint32_t *p = *(uint32_t **)a[0], v = *(uint32_t *)a[1];
    uint64_t n = *(uint64_t *)a[2];
    for (uint64_t i = 0; i < n; i++) p[i] = v;
}

static void affine_u32(void **a, const emu_launch *l)
{
    (void)l;
    uint32_t *p = *(uint32_t **)a[0], mul = *(uint32_t *)a[1], add = *(uint32_t *)a[2];
    uint64_t n = *(uint64_t *)a[3];
    for (uint64_t i = 0; i < n; i++) p[i] = p[i] * mul + add;
}

static void add_u32(void **a, const emu_launch *l)
{
    (void)l;
    uint32_t *d = *(uint32_t **)a[0];
    const uint32_t *x = *(const uint32_t **)a[1], *y = *(const uint32_t **)a[2];
    uint64_t n = *(uint64_t *)a[3];
    for (uint64_t i = 0; i < n; i++) d[i] = x[i] + y[i];
}

static void slow_fill_u32(void **a, const emu_launch *l)
{
    uint32_t us = *(uint32_t *)a[3];
    struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
    fill_u32(a, l);
}

static void cond_dec_u32(void **a, const emu_launch *l)
{
    (void)l;
    uint32_t *p = *(uint32_t **)a[0];
    uint64_t h = *(uint64_t *)a[1], n = *(uint64_t *)a[2];
    for (uint64_t i = 0; i < n; i++) p[i] -= 1;
    cudaemu_set_conditional(h, p[0]);
}

static void cond_set(void **a, const emu_launch *l)
{
    (void)l;
    cudaemu_set_conditional(*(uint64_t *)a[0], *(uint32_t *)a[1]);
}

const emu_kernel emu_module[] = {
    { "fill_u32", fill_u32, 3, { 8, 4, 8 } },
    { "affine_u32", affine_u32, 4, { 8, 4, 4, 8 } },
    { "add_u32", add_u32, 4, { 8, 8, 8, 8 } },
    { "slow_fill_u32", slow_fill_u32, 4, { 8, 4, 8, 4 } },
    { "cond_dec_u32", cond_dec_u32, 3, { 8, 8, 8 } },
    { "cond_set", cond_set, 2, { 8, 4 } },
    { 0 },
};
