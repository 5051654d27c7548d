/*
 * tests/e2e/adv_ordered.c: stream-ordered memory (cuMemAllocAsync), which
 * the library places, where its documented semantics differ from
 * cuMemAlloc's, and calls without a current context.
 *   free_no_sync  cuMemFree of cuMemAllocAsync memory "will not perform any
 *                 implicit synchronization" (cuda.h): it must return while
 *                 another stream still waits for a host function that only
 *                 runs after it returned (before the fix: a hang);
 *   no_context    with no context current, cuMemFree and
 *                 cuMemGetAddressRange of a cuMemAlloc block and of a
 *                 cuMemAllocAsync block get CUDA_ERROR_INVALID_CONTEXT and
 *                 free nothing (the block is used and freed afterwards);
 *   two_contexts  pool memory belongs to no context: allocated on the legacy
 *                 stream of context A, written and freed (cuMemFreeAsync) on
 *                 the legacy stream of context B behind a slow host
 *                 function; then context A allocates on its own legacy
 *                 stream: a different stream, not ordered after B's free,
 *                 so it must not get memory B still writes (before the fix:
 *                 both legacy streams were one stream to the library);
 *   ctx_destroy   cuMemAllocAsync memory made in a context of the program's
 *                 own outlives cuCtxDestroy ("not associated with any CUDA
 *                 context": cuda.h) and keeps its bytes, its range, and is
 *                 freed after.
 * Usage: adv_ordered free_no_sync|no_context|two_contexts|ctx_destroy
 */
#include "adv_common.h"

#include <signal.h>

#define BYTES ((size_t)1 << 20)

static CUcontext ctx;
static CUdevice dev;
static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "check no_sync: WRONG (cuMemFree did not return in 20 s)\n";
    if (write(1, m, sizeof m - 1) < 0) _exit(3);
    _exit(3);
}

static void free_no_sync(void)
{
    CUstream s1, s2;
    CUdeviceptr p;
    MUST(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAllocAsync(&p, BYTES, s2));
    MUST(cuMemsetD8Async(p, 7, BYTES, s2));
    MUST(cuStreamSynchronize(s2));             /* every access to p done */
    MUST(cuLaunchHostFunc(s1, adv_gate_wait, NULL));
    signal(SIGALRM, on_alarm);
    alarm(20);
    R(cuMemFree(p));
    alarm(0);
    adv_check("no_sync", !adv_released(), "cuMemFree returned while s1 waits");
    adv_release();
    MUST(cuStreamSynchronize(s1));
    /* the memory is usable again at once */
    CUdeviceptr q;
    MUST(cuMemAllocAsync(&q, BYTES, s2));
    MUST(cuMemsetD32Async(q, 0x01020304, BYTES / 4, s2));
    MUST(cuStreamSynchronize(s2));
    uint32_t *want = malloc(BYTES);
    for (size_t i = 0; i < BYTES / 4; i++) want[i] = 0x01020304;
    adv_check_words("reuse", q, want, BYTES / 4);
    free(want);
    MUST(cuMemFreeAsync(q, s2));
    MUST(cuStreamSynchronize(s2));
}

static void no_context(void)
{
    CUstream s;
    CUdeviceptr a, b, base;
    size_t size;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&a, BYTES));
    MUST(cuMemAllocAsync(&b, BYTES, s));
    MUST(cuStreamSynchronize(s));
    MUST(cuCtxSetCurrent(NULL));
    R(cuMemGetAddressRange(&base, &size, a));
    R(cuMemGetAddressRange(&base, &size, b));
    R(cuMemFree(a));
    R(cuMemFree(b));
    MUST(cuCtxSetCurrent(ctx));
    /* both still live */
    MUST(cuMemsetD32(a, 5, BYTES / 4));
    MUST(cuMemcpyDtoD(b, a, BYTES));
    uint32_t *want = malloc(BYTES);
    for (size_t i = 0; i < BYTES / 4; i++) want[i] = 5;
    adv_check_words("b", b, want, BYTES / 4);
    free(want);
    R(cuMemGetAddressRange(&base, &size, b + 10));
    adv_check("range", base == b && size == BYTES, "base +%lld, %zu bytes", (long long)(base - b), size);
    R(cuMemFree(a));
    R(cuMemFree(b));
}

static int slow_done;
static void CUDA_CB slow(void *arg)
{
    (void)arg;
    usleep(200000);
    __atomic_store_n(&slow_done, 1, __ATOMIC_RELEASE);
}

static void two_contexts(void)
{
    CUcontext b;
    CUdeviceptr p, q;
    MUST(cuCtxCreate(&b, NULL, 0, dev));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuMemAllocAsync(&p, BYTES, NULL));
    MUST(cuCtxSynchronize());
    MUST(cuCtxSetCurrent(b));
    MUST(cuLaunchHostFunc(NULL, slow, NULL));
    MUST(cuMemsetD8Async(p, 0xaa, BYTES, NULL));   /* behind the host function */
    MUST(cuMemFreeAsync(p, NULL));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuMemAllocAsync(&q, BYTES, NULL));         /* A's legacy stream: not ordered after B's */
    MUST(cuMemsetD8Async(q, 0x11, BYTES, NULL));
    MUST(cuCtxSynchronize());
    MUST(cuCtxSetCurrent(b));
    MUST(cuCtxSynchronize());                       /* B's memset has run */
    MUST(cuCtxSetCurrent(ctx));
    uint8_t *h = malloc(BYTES);
    MUST(cuMemcpyDtoH(h, q, BYTES));
    size_t bad = 0;
    for (size_t i = 0; i < BYTES; i++) bad += h[i] != 0x11;
    adv_check("q", bad == 0, "%zu of %zu bytes not 0x11", bad, BYTES);
    free(h);
    MUST(cuMemFreeAsync(q, NULL));
    MUST(cuCtxSynchronize());
    MUST(cuCtxDestroy(b));
    MUST(cuCtxSetCurrent(ctx));
}

static void ctx_destroy(void)
{
    CUcontext c;
    CUstream s;
    CUdeviceptr p, base;
    size_t size;
    MUST(cuCtxCreate(&c, NULL, 0, dev));
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAllocAsync(&p, BYTES, s));
    MUST(cuMemsetD32Async(p, 0x5a5a5a5a, BYTES / 4, s));
    MUST(cuStreamSynchronize(s));
    MUST(cuStreamDestroy(s));
    MUST(cuCtxDestroy(c));
    MUST(cuCtxSetCurrent(ctx));
    uint32_t *want = malloc(BYTES);
    for (size_t i = 0; i < BYTES / 4; i++) want[i] = 0x5a5a5a5a;
    adv_check_words("after cuCtxDestroy", p, want, BYTES / 4);
    free(want);
    if (R(cuMemGetAddressRange(&base, &size, p + 1)) == CUDA_SUCCESS)
        adv_check("range", base == p && size == BYTES, "base +%lld, %zu bytes", (long long)(base - p), size);
    R(cuMemFree(p));
    R(cuMemGetAddressRange(&base, &size, p));       /* freed now */
}

int main(int argc, char **argv)
{
    static const struct { const char *name; void (*fn)(void); } cases[] = {
        { "free_no_sync", free_no_sync }, { "no_context", no_context },
        { "two_contexts", two_contexts }, { "ctx_destroy", ctx_destroy },
    };
    for (size_t i = 0; argc == 2 && i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(argv[1], cases[i].name) == 0) {
            adv_open(&ctx, NULL);
            MUST(cuDeviceGet(&dev, 0));
            cases[i].fn();
            return adv_finish();
        }
    printf("usage: %s free_no_sync|no_context|two_contexts|ctx_destroy\n", argv[0]);
    return 4;
}
