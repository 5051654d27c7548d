/*
 * tests/e2e/adv_kernels.c: the kernels of the adversarial programs
 * (tests/e2e/adv_*.c) as an emulated module (tests/emu/driver/emu_kernel.h): each
 * function runs the whole launch on the CPU. No shared state (but no_args's
 * counter, an atomic), no locks.
 *
 * Built three ways (tests/e2e/adv.mk):
 *   adv_kernels.so          the kernels below;
 *   adv_ver1.so, adv_ver2.so  (-DADV_VERSION=1 / 2) one kernel "versioned"
 *                           whose second version has one more argument
 *                           (issue 10, class 9).
 * `n` arguments count 32-bit words.
 */
#include "emu_kernel.h"

#include <stdint.h>
#include <time.h>

#define ARG(type, i) (*(type *)params[i])
#define P sizeof(void *)

#ifndef ADV_VERSION

/* ring_write(u32 *begin, u32 *end, u32 *cur, u32 n, u32 val): writes n words
 * from cur on, wrapping from end back to begin (a ring buffer). */
static void ring_write(void **params, const emu_launch *l)
{
    uint32_t *begin = ARG(uint32_t *, 0), *end = ARG(uint32_t *, 1), *p = ARG(uint32_t *, 2);
    uint32_t n = ARG(uint32_t, 3), val = ARG(uint32_t, 4);
    (void)l;
    for (uint32_t i = 0; i < n; i++) {
        *p++ = val * 0x9e3779b1u + i;
        if (p >= end) p -= end - begin;
    }
}

/* store_ptr(u64 *table, u32 idx, u32 *p, u32 v): table[idx] = p; p[idx] = v
 * (a kernel that keeps the pointer it was given). */
static void store_ptr(void **params, const emu_launch *l)
{
    uint64_t *table = ARG(uint64_t *, 0);
    uint32_t idx = ARG(uint32_t, 1);
    uint32_t *p = ARG(uint32_t *, 2);
    (void)l;
    table[idx] = (uint64_t)(uintptr_t)p;
    p[idx] = ARG(uint32_t, 3);
}

/* follow_ptr(const u64 *table, u32 n, u32 *out): out[i] = ((u32 *)table[i])[i]. */
static void follow_ptr(void **params, const emu_launch *l)
{
    const uint64_t *table = ARG(const uint64_t *, 0);
    uint32_t n = ARG(uint32_t, 1);
    uint32_t *out = ARG(uint32_t *, 2);
    (void)l;
    for (uint32_t i = 0; i < n; i++) out[i] = ((const uint32_t *)(uintptr_t)table[i])[i];
}

/* mad_u32(const u32 *in, u32 *acc, u64 n): acc[i] = acc[i] * 3 + in[i]
 * (the order of two launches shows in the result). */
static void mad_u32(void **params, const emu_launch *l)
{
    const uint32_t *in = ARG(const uint32_t *, 0);
    uint32_t *acc = ARG(uint32_t *, 1);
    uint64_t n = ARG(uint64_t, 2);
    (void)l;
    for (uint64_t i = 0; i < n; i++) acc[i] = acc[i] * 3u + in[i];
}

/* add_u32(u32 *p, u32 v, u64 n): p[i] += v. */
static void add_u32(void **params, const emu_launch *l)
{
    uint32_t *p = ARG(uint32_t *, 0), v = ARG(uint32_t, 1);
    uint64_t n = ARG(uint64_t, 2);
    (void)l;
    for (uint64_t i = 0; i < n; i++) p[i] += v;
}

/* fill_u32(u32 *p, u32 v, u64 n): p[i] = v + i. */
static void fill_u32(void **params, const emu_launch *l)
{
    uint32_t *p = ARG(uint32_t *, 0), v = ARG(uint32_t, 1);
    uint64_t n = ARG(uint64_t, 2);
    (void)l;
    for (uint64_t i = 0; i < n; i++) p[i] = v + (uint32_t)i;
}

/* sum_u32(const u32 *in, u64 n, u64 *out): *out = sum of in[i] * (i + 1). */
static void sum_u32(void **params, const emu_launch *l)
{
    const uint32_t *in = ARG(const uint32_t *, 0);
    uint64_t n = ARG(uint64_t, 1), s = 0;
    (void)l;
    for (uint64_t i = 0; i < n; i++) s += (uint64_t)in[i] * (i + 1);
    *ARG(uint64_t *, 2) = s;
}

/* range_sum(const u32 *begin, const u32 *end, u64 *out): the sum of the
 * words of [begin, end), or ADV_BAD_RANGE if end < begin or the range is
 * longer than 64 Mi words (it cannot be a range of one buffer). */
#define ADV_BAD_RANGE 0xbad0bad0bad0bad0ull
static void range_sum(void **params, const emu_launch *l)
{
    const uint32_t *b = ARG(const uint32_t *, 0), *e = ARG(const uint32_t *, 1);
    uint64_t s = 0;
    (void)l;
    if (e < b || e - b > (64 << 20)) {
        *ARG(uint64_t *, 2) = ADV_BAD_RANGE;
        return;
    }
    for (const uint32_t *p = b; p < e; p++) s += *p;
    *ARG(uint64_t *, 2) = s;
}

/* sleep_count(const u32 *p, u32 v, u64 n, u32 us, u32 *bad): sleeps `us`
 * microseconds, then *bad = number of words of p that differ from v + i
 * (a kernel that still reads a block while time passes). */
static void sleep_count(void **params, const emu_launch *l)
{
    const uint32_t *p = ARG(const uint32_t *, 0);
    uint32_t v = ARG(uint32_t, 1), us = ARG(uint32_t, 3), bad = 0;
    uint64_t n = ARG(uint64_t, 2);
    struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000 };
    (void)l;
    nanosleep(&ts, NULL);
    for (uint64_t i = 0; i < n; i++) bad += p[i] != v + (uint32_t)i;
    *ARG(uint32_t *, 4) = bad;
}

/* list_walk(const u64 *head, const u64 *stop, u32 max, u64 *out): follows a
 * list whose links are stored in device memory (word 0: the next node's
 * address, word 1: a value) from head until stop, at most max hops; *out =
 * hops << 32 | (sum of values & 0xffffffff). */
static void list_walk(void **params, const emu_launch *l)
{
    const uint64_t *p = ARG(const uint64_t *, 0), *stop = ARG(const uint64_t *, 1);
    uint32_t max = ARG(uint32_t, 2), hops = 0;
    uint64_t sum = 0;
    (void)l;
    while (p != stop && hops < max) {
        sum += p[1];
        p = (const uint64_t *)(uintptr_t)p[0];
        hops++;
    }
    *ARG(uint64_t *, 3) = (uint64_t)hops << 32 | (sum & 0xffffffffu);
}

/* ptr_eq(const u64 *stored, const void *p, u32 *out): *out = (stored[0] == p)
 * (a kernel comparing its argument with a pointer kept in device memory). */
static void ptr_eq(void **params, const emu_launch *l)
{
    const uint64_t *stored = ARG(const uint64_t *, 0);
    uint64_t p = (uint64_t)(uintptr_t)ARG(const void *, 1);
    (void)l;
    *ARG(uint32_t *, 2) = stored[0] == p;
}

/* grid_tag(u32 *out, u32 v): out[0] = v * 1000 + grid.x * 10 + block.x (a
 * kernel whose result depends on its launch dimensions). */
static void grid_tag(void **params, const emu_launch *l)
{
    *ARG(uint32_t *, 0) = ARG(uint32_t, 1) * 1000u + l->grid.x * 10u + l->block.x;
}

/* bytes_hash(u32 *out, u8, u16, 12 bytes, 16 bytes, 24 bytes, 264 bytes):
 * *out = FNV-1a 32 over the six arguments' bytes in order (arguments of
 * every size: round 11). */
static void bytes_hash(void **params, const emu_launch *l)
{
    static const unsigned sizes[6] = { 1, 2, 12, 16, 24, 264 };
    uint32_t h = 0x811c9dc5u;
    (void)l;
    for (int i = 0; i < 6; i++) {
        const unsigned char *b = params[i + 1];
        for (unsigned j = 0; j < sizes[i]; j++) h = (h ^ b[j]) * 0x01000193u;
    }
    *ARG(uint32_t *, 0) = h;
}

/* pad_sum(u32 *out, struct { u8 a; (7 bytes of padding) u64 b; } s):
 * *out = a * 1000003 + low word of b + high word of b (a struct by value
 * whose padding the kernel never reads). */
static void pad_sum(void **params, const emu_launch *l)
{
    const unsigned char *s = params[1];
    uint64_t b;
    (void)l;
    __builtin_memcpy(&b, s + 8, 8);
    *ARG(uint32_t *, 0) = s[0] * 1000003u + (uint32_t)b + (uint32_t)(b >> 32);
}

/* no_args(): counts its blocks in a counter of the module; no_args_read(u32
 * *out): *out = that count (a kernel without parameters). */
static uint32_t no_args_count;
static void no_args(void **params, const emu_launch *l)
{
    (void)params;
    __atomic_add_fetch(&no_args_count, l->grid.x * l->grid.y * l->grid.z, __ATOMIC_RELAXED);
}
static void no_args_read(void **params, const emu_launch *l)
{
    (void)l;
    *ARG(uint32_t *, 0) = __atomic_load_n(&no_args_count, __ATOMIC_RELAXED);
}

/* u64_store(u32 *out, u64 v): out[0] = low word of v, out[1] = high word (a
 * 64-bit integer the kernel never dereferences). */
static void u64_store(void **params, const emu_launch *l)
{
    uint64_t v = ARG(uint64_t, 1);
    (void)l;
    ARG(uint32_t *, 0)[0] = (uint32_t)v;
    ARG(uint32_t *, 0)[1] = (uint32_t)(v >> 32);
}

/* fault_if(const u32 *flag, i32 code): if *flag, the kernel faults with the
 * sticky error `code` (cudaemu_fault: 710 assert, 700 illegal address). */
static void fault_if(void **params, const emu_launch *l)
{
    (void)l;
    if (*ARG(const uint32_t *, 0)) cudaemu_fault(ARG(int32_t, 1));
}

/* cond_step(u32 *acc, u32 v, u32 *cnt, u64 h, u64 n): acc[i] += v, then
 * cnt[0] -= 1 and the conditional h = cnt[0] (a WHILE body's iteration;
 * cudaemu_set_conditional is the emulated cudaGraphSetConditional). */
static void cond_step(void **params, const emu_launch *l)
{
    uint32_t *acc = ARG(uint32_t *, 0), v = ARG(uint32_t, 1), *cnt = ARG(uint32_t *, 2);
    uint64_t n = ARG(uint64_t, 4);
    (void)l;
    for (uint64_t i = 0; i < n; i++) acc[i] += v;
    cudaemu_set_conditional(ARG(uint64_t, 3), --cnt[0]);
}

/* cond_set(u64 h, u32 v): the conditional h = v. */
static void cond_set(void **params, const emu_launch *l)
{
    (void)l;
    cudaemu_set_conditional(ARG(uint64_t, 0), ARG(uint32_t, 1));
}

/* fault_note(u32 *note, i32 code): sets *note (managed memory the host
 * polls without a driver call), then faults with the sticky error `code`. */
static void fault_note(void **params, const emu_launch *l)
{
    (void)l;
    __atomic_store_n(ARG(uint32_t *, 0), 1u, __ATOMIC_RELEASE);
    cudaemu_fault(ARG(int32_t, 1));
}

/* tex_read(u64 tex, u32 w, u32 h, u32 *out): out[y*w+x] = the first word
 * of element (x, y) of texture object tex (cudaemu_tex_fetch: x alone for a
 * linear resource, h 1); out[w*h] = the fetches that failed. */
static void tex_read(void **params, const emu_launch *l)
{
    unsigned long long tex = ARG(unsigned long long, 0);
    uint32_t w = ARG(uint32_t, 1), h = ARG(uint32_t, 2), *out = ARG(uint32_t *, 3), bad = 0;
    (void)l;
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            uint32_t e[4];
            bad += cudaemu_tex_fetch(tex, x, y, e) == 0;
            out[y * w + x] = e[0];
        }
    out[w * h] = bad;
}

const emu_kernel emu_module[] = {
    { "ring_write", ring_write, 5, { P, P, P, 4, 4 } },
    { "tex_read", tex_read, 4, { 8, 4, 4, P } },
    { "store_ptr", store_ptr, 4, { P, 4, P, 4 } },
    { "follow_ptr", follow_ptr, 3, { P, 4, P } },
    { "mad_u32", mad_u32, 3, { P, P, 8 } },
    { "add_u32", add_u32, 3, { P, 4, 8 } },
    { "fill_u32", fill_u32, 3, { P, 4, 8 } },
    { "sum_u32", sum_u32, 3, { P, 8, P } },
    { "range_sum", range_sum, 3, { P, P, P } },
    { "sleep_count", sleep_count, 5, { P, 4, 8, 4, P } },
    { "list_walk", list_walk, 4, { P, P, 4, P } },
    { "ptr_eq", ptr_eq, 3, { P, P, P } },
    { "grid_tag", grid_tag, 2, { P, 4 } },
    { "bytes_hash", bytes_hash, 7, { P, 1, 2, 12, 16, 24, 264 } },
    { "pad_sum", pad_sum, 2, { P, 16 } },
    { "no_args", no_args, 0, { 0 } },
    { "no_args_read", no_args_read, 1, { P } },
    { "u64_store", u64_store, 2, { P, 8 } },
    { "fault_if", fault_if, 2, { P, 4 } },
    { "fault_note", fault_note, 2, { P, 4 } },
    { "cond_step", cond_step, 5, { P, 4, P, 8, 8 } },
    { "cond_set", cond_set, 2, { 8, 4 } },
    { 0, 0, 0, { 0 } },
};

#elif ADV_VERSION == 1

/* versioned(u32 *out, u32 a): *out = a. */
static void versioned(void **params, const emu_launch *l)
{
    (void)l;
    *ARG(uint32_t *, 0) = ARG(uint32_t, 1);
}

const emu_kernel emu_module[] = {
    { "versioned", versioned, 2, { P, 4 } },
    { 0, 0, 0, { 0 } },
};

#else

/* versioned(u32 *out, u32 a, u32 b): *out = a * 1000 + b (one argument more
 * than version 1, in the bytes version 1 did not have). */
static void versioned(void **params, const emu_launch *l)
{
    (void)l;
    *ARG(uint32_t *, 0) = ARG(uint32_t, 1) * 1000u + ARG(uint32_t, 2);
}

const emu_kernel emu_module[] = {
    { "versioned", versioned, 3, { P, 4, 4 } },
    { 0, 0, 0, { 0 } },
};

#endif
