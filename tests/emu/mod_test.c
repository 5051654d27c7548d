/*
 * mod_test.c: an emulated kernel module (see emu_kernel.h) used by the stream
 * and kernel tests of the emulated driver. Every kernel runs the whole launch
 * on the CPU; `n` arguments count 32-bit elements. No shared state, no locks.
 *
 *   fill_u32(u32 *p, u32 v, u64 n)             p[i] = v
 *   inc_u32(u32 *p, u64 n)                     p[i] += 1 (order-sensitive)
 *   sleep_fill_u32(u32 *p, u32 v, u64 n, u32 us)  sleeps `us` µs, then fills
 *   mixed(char c, double d, int i, double *out, struct {int a, b, c;} s)
 *                                              out[0..6] = every argument
 *   dims(u32 *out)                             out = grid xyz, block xyz, shared
 *   poke(u32 *p)                               *p = 1 (faults on a bad address)
 *   tex_read(u64 tex, i32 x0, i32 y0, u32 w, u32 h, u32 *out)
 *                                              out[y*w+x] = the first 4 bytes of
 *                                              element (x0+x, y0+y) of texture tex
 *                                              (cudaemu_tex_fetch); out[w*h] = the
 *                                              fetches that returned 0 (violations)
 */
#include "emu_kernel.h"

#include <stdint.h>
#include <time.h>

typedef struct trio { int a, b, c; } trio;

static void fill_u32(void **a, const emu_launch *l)
{
    (void)l;
    uint32_t *p = *(uint32_t **)a[0], v = *(uint32_t *)a[1];
    uint64_t n = *(uint64_t *)a[2];
    for (uint64_t i = 0; i < n; i++) p[i] = v;
}

static void inc_u32(void **a, const emu_launch *l)
{
    (void)l;
    uint32_t *p = *(uint32_t **)a[0];
    uint64_t n = *(uint64_t *)a[1];
    for (uint64_t i = 0; i < n; i++) p[i] += 1;
}

static void sleep_fill_u32(void **a, const emu_launch *l)
{
    uint32_t us = *(uint32_t *)a[3];
    struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
    fill_u32(a, l);
}

static void mixed(void **a, const emu_launch *l)
{
    (void)l;
    double *out = *(double **)a[3];
    const trio *t = a[4];
    out[0] = *(char *)a[0];
    out[1] = *(double *)a[1];
    out[2] = *(int *)a[2];
    out[3] = t->a;
    out[4] = t->b;
    out[5] = t->c;
}

static void dims(void **a, const emu_launch *l)
{
    uint32_t *out = *(uint32_t **)a[0];
    out[0] = l->grid.x; out[1] = l->grid.y; out[2] = l->grid.z;
    out[3] = l->block.x; out[4] = l->block.y; out[5] = l->block.z;
    out[6] = l->shared_bytes;
}

static void poke(void **a, const emu_launch *l)
{
    (void)l;
    volatile uint32_t *p = *(uint32_t **)a[0];
    *p = 1;
}

static void tex_read(void **a, const emu_launch *l)
{
    (void)l;
    unsigned long long tex = *(unsigned long long *)a[0];
    int32_t x0 = *(int32_t *)a[1], y0 = *(int32_t *)a[2];
    uint32_t w = *(uint32_t *)a[3], h = *(uint32_t *)a[4], *out = *(uint32_t **)a[5], bad = 0;
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            uint32_t e[4];
            bad += cudaemu_tex_fetch(tex, x0 + (long long)x, y0 + (long long)y, e) == 0;
            out[y * w + x] = e[0];
        }
    out[w * h] = bad;
}

const emu_kernel emu_module[] = {
    { "fill_u32", fill_u32, 3, { sizeof(void *), 4, 8 } },
    { "inc_u32", inc_u32, 2, { sizeof(void *), 8 } },
    { "sleep_fill_u32", sleep_fill_u32, 4, { sizeof(void *), 4, 8, 4 } },
    { "mixed", mixed, 5, { 1, 8, 4, sizeof(void *), sizeof(trio) } },
    { "dims", dims, 1, { sizeof(void *) } },
    { "poke", poke, 1, { sizeof(void *) } },
    { "tex_read", tex_read, 6, { 8, 4, 4, 4, 4, sizeof(void *) } },
    { NULL, NULL, 0, { 0 } },
};
