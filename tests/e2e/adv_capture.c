/*
 * tests/e2e/adv_capture.c: issue 10, class 7 (capture semantics), and the
 * neighbouring calls. During a stream capture the driver refuses calls that
 * are not safe to capture (allocation, synchronous free, ...) from a thread
 * in global or thread-local mode, and the refusal invalidates the capture;
 * a library that serves such a call from memory it already mapped, without
 * the driver, changes what the program sees.
 *
 * Before each capture the program allocates and frees a small block, so a
 * placing library has room to serve the next allocation without a driver
 * call. Cases (the capture is on stream s, one kernel recorded before the
 * call under test):
 *   alloc_global        cuMemAlloc on the capturing thread, global mode;
 *   alloc_thread_local  the same, thread-local mode;
 *   alloc_relaxed       the same, relaxed mode (allowed: the control);
 *   free_async          cuMemFreeAsync on the capturing stream of a block
 *                       allocated before the capture (not a graph allocation);
 *   free_sync           cuMemFree of a block allocated before the capture;
 *   other_thread        (beyond the issue) another thread, not capturing,
 *                       calls cuMemAlloc while this thread's global-mode
 *                       capture is active;
 *   free_relaxed        cuMemFree of a block allocated before the capture,
 *                       on the capturing thread in relaxed mode (allowed);
 *   free_other_thread_local  another thread frees such a block while this
 *                       thread's thread-local capture is active (allowed: the
 *                       capture is not the other thread's);
 *   free_other_global   the same during a global-mode capture (refused, and
 *                       the capture is invalidated).
 * A library whose cuMemFree synchronizes the context itself (cuCtxSynchronize
 * is refused whenever a stream of the context captures, in every mode) fails
 * the allowed cases: the free refused, the capture invalidated.
 * Printed: the result of the call, the capture status after it, the result
 * of cuStreamEndCapture; then, whatever happened, the program runs its
 * kernel normally and checks the result (the process is still usable).
 * Usage: adv_capture CASE
 */
#include "adv_common.h"

static CUfunction f_fill;
static CUstream s;
static CUdeviceptr buf;

static CUdeviceptr victim;
static CUresult other_free_rc;

static void *other_free(void *arg)
{
    MUST(cuCtxSetCurrent((CUcontext)arg));
    other_free_rc = R(cuMemFree(victim));
    return NULL;
}

static void *other_thread(void *arg)
{
    CUcontext ctx = arg;
    CUdeviceptr p = 0;
    CUresult r;
    MUST(cuCtxSetCurrent(ctx));
    r = R(cuMemAlloc(&p, 4096));
    printf("other thread: cuMemAlloc during the capture: %s\n", adv_err(r));
    if (r == CUDA_SUCCESS) R(cuMemFree(p));
    return NULL;
}

int main(int argc, char **argv)
{
    static const char *const cases[] = { "alloc_global", "alloc_thread_local", "alloc_relaxed",
                                         "free_async", "free_sync", "other_thread",
                                         "free_relaxed", "free_other_thread_local",
                                         "free_other_global", NULL };
    int which = adv_case(argc, argv, cases);
    CUcontext ctx;
    CUmodule mod;
    adv_open(&ctx, &mod);
    f_fill = adv_fn(mod, "fill_u32");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&buf, 4096));
    CUdeviceptr warm;
    MUST(cuMemAlloc(&warm, 4096));
    MUST(cuMemFree(warm));
    if (which == 3) MUST(cuMemAllocAsync(&victim, 4096, s));
    if (which == 4 || which >= 6) MUST(cuMemAlloc(&victim, 4096));
    MUST(cuStreamSynchronize(s));

    CUstreamCaptureMode mode = which == 1 || which == 7 ? CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
                               : which == 2 || which == 6 ? CU_STREAM_CAPTURE_MODE_RELAXED
                                                          : CU_STREAM_CAPTURE_MODE_GLOBAL;
    uint32_t v = 5;
    uint64_t n = 1024;
    CUgraph g = NULL;
    CUdeviceptr p = 0;
    CUresult r = CUDA_SUCCESS;
    MUST(cuStreamBeginCapture(s, mode));
    ADV_LAUNCH(f_fill, s, &buf, &v, &n);
    switch (which) {
    case 0:
    case 1:
    case 2:
        r = R(cuMemAlloc(&p, 4096));
        break;
    case 3:
        r = R(cuMemFreeAsync(victim, s));
        break;
    case 4:
    case 6:
        r = R(cuMemFree(victim));
        break;
    case 5: {
        pthread_t t;
        pthread_create(&t, NULL, other_thread, ctx);
        pthread_join(t, NULL);
        break;
    }
    default: {
        pthread_t t;
        pthread_create(&t, NULL, other_free, ctx);
        pthread_join(t, NULL);
        r = other_free_rc;
        break;
    }
    }
    if (which != 5) printf("call under test: %s\n", adv_err(r));
    printf("capture status after it: %s\n", adv_capture_status(s));
    CUresult e = R(cuStreamEndCapture(s, &g));
    printf("cuStreamEndCapture: %s, graph %s\n", adv_err(e), g ? "returned" : "none");
    if (g) R(cuGraphDestroy(g));
    if (p) R(cuMemFree(p));
    /* Whatever the capture did, the victim is freed once (the program's
     * own bookkeeping: a refused free is freed again here). */
    if (victim && r != CUDA_SUCCESS) R(cuMemFree(victim));

    /* The process is still usable. */
    v = 9;
    ADV_LAUNCH(f_fill, s, &buf, &v, &n);
    R(cuStreamSynchronize(s));
    uint32_t want[1024];
    for (uint32_t i = 0; i < 1024; i++) want[i] = 9 + i;
    adv_check_words("kernel after the capture", buf, want, 1024);
    R(cuMemFree(buf));
    R(cuStreamSynchronize(s));
    R(cuStreamDestroy(s));
    return adv_finish();
}
