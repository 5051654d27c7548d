/*
 * tests/e2e/adv_streams.c: issue 10, class 10 (stream identities that the
 * library may not reuse). A stream-ordered free makes a block reusable at
 * once on the same stream only; another stream gets it after the free has
 * completed. Here the first user queues a slow kernel that reads its block
 * (sleep_count: sleeps, then counts the words that changed), frees the
 * block stream-ordered, and goes away without waiting; then a second user
 * allocates the same size on what is a different stream and overwrites
 * its block at once.
 *   ptds          the users are two threads, one after the other (so the
 *                 second may get the first one's pthread_t value), each on
 *                 its per-thread default stream (CU_STREAM_PER_THREAD);
 *   stream_reuse  the users are two streams, the first destroyed
 *                 (cuStreamDestroy: its queued work still runs) before the
 *                 second is created (the driver may reuse the handle).
 * Checks: the slow kernel saw its own block unchanged (0 words changed),
 * and the second user's block holds what it wrote. stream_reuse also says
 * on stderr whether the driver handed out the destroyed stream's handle
 * again (the runner needs that of the baseline: without it the case tests
 * nothing).
 * Usage: adv_streams ptds|stream_reuse
 */
#include "adv_common.h"

#define WORDS (64u * 1024u)         /* 256 KiB */
#define SLOW_US 100000u

static CUcontext ctx;
static CUfunction f_fill, f_slow;
static CUdeviceptr bad;

/* The first user: allocate, fill, queue the slow reader, free; no wait. */
static void first_user(CUstream s)
{
    CUdeviceptr p;
    uint32_t v = 1000, us = SLOW_US;
    uint64_t n = WORDS;
    MUST(cuMemAllocAsync(&p, WORDS * 4, s));
    ADV_LAUNCH(f_fill, s, &p, &v, &n);
    ADV_LAUNCH(f_slow, s, &p, &v, &n, &us, &bad);
    R(cuMemFreeAsync(p, s));
}

/* The second user: allocate, overwrite at once, wait, check. */
static void second_user(CUstream s)
{
    CUdeviceptr p;
    uint32_t v = 5000;
    uint64_t n = WORDS;
    MUST(cuMemAllocAsync(&p, WORDS * 4, s));
    ADV_LAUNCH(f_fill, s, &p, &v, &n);
    R(cuStreamSynchronize(s));
    uint32_t first = 0, last = 0;
    R(cuMemcpyDtoH(&first, p, 4));
    R(cuMemcpyDtoH(&last, p + (WORDS - 1) * 4, 4));
    adv_check("second user's block", first == 5000 && last == 5000 + WORDS - 1,
              "first %u, last %u", first, last);
    R(cuMemFreeAsync(p, s));
    R(cuStreamSynchronize(s));
}

static void *thread_first(void *arg)
{
    (void)arg;
    MUST(cuCtxSetCurrent(ctx));
    first_user(CU_STREAM_PER_THREAD);
    return NULL;
}

static void *thread_second(void *arg)
{
    (void)arg;
    MUST(cuCtxSetCurrent(ctx));
    second_user(CU_STREAM_PER_THREAD);
    return NULL;
}

int main(int argc, char **argv)
{
    static const char *const cases[] = { "ptds", "stream_reuse", NULL };
    int which = adv_case(argc, argv, cases);
    CUmodule mod;
    adv_open(&ctx, &mod);
    f_fill = adv_fn(mod, "fill_u32");
    f_slow = adv_fn(mod, "sleep_count");
    MUST(cuMemAlloc(&bad, 4));
    MUST(cuMemsetD32(bad, 0xffffffffu, 1));
    if (which == 0) {
        pthread_t t;
        pthread_create(&t, NULL, thread_first, NULL);
        pthread_join(t, NULL);
        pthread_create(&t, NULL, thread_second, NULL);
        pthread_join(t, NULL);
    } else {
        CUstream a, b;
        MUST(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
        first_user(a);
        R(cuStreamDestroy(a));
        MUST(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
        fprintf(stderr, "note: destroyed stream handle reused: %s\n", a == b ? "yes" : "no");
        second_user(b);
        R(cuStreamDestroy(b));
    }
    R(cuCtxSynchronize());
    uint32_t nbad = 0xffffffffu;
    R(cuMemcpyDtoH(&nbad, bad, 4));
    adv_check("words of the first user's block changed under its kernel", nbad == 0, "%u",
              nbad);
    R(cuMemFree(bad));
    return adv_finish();
}
