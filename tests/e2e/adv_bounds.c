/*
 * tests/e2e/adv_bounds.c: issue 10, class 17 (range checks the driver would
 * make). The driver refuses a copy or a memset that runs past the end of
 * its allocation (CUDA_ERROR_INVALID_VALUE) and leaves memory as it was; a
 * library that packs small allocations into one mapped chunk must refuse it
 * too, or the operation silently overwrites (or reads) the neighbour.
 * Two 4 KiB buffers A and B are allocated one after the other and filled
 * with known words; then, by case, an operation on A that is 4 KiB too long:
 *   memset       cuMemsetD32(A, ..., 2048 words)
 *   memset_async cuMemsetD32Async on a stream, then synchronize
 *   htod         cuMemcpyHtoD(A, host, 8 KiB)
 *   dtod         cuMemcpyDtoD(A, C, 8 KiB) from an 8 KiB buffer C
 *   dtoh         cuMemcpyDtoH(host, A, 8 KiB) (reads past A)
 *   node_update  a graph with a memset node over A (1024 words), updated
 *                with cuGraphExecMemsetNodeSetParams to 2048 words, launched
 * Printed: the operation's result; checked: B still holds its words (and, for
 * dtoh, that the host buffer's second half is untouched).
 * Usage: adv_bounds CASE
 */
#include "adv_common.h"

#define WORDS 1024u                 /* 4 KiB */

int main(int argc, char **argv)
{
    static const char *const cases[] = { "memset", "memset_async", "htod", "dtod", "dtoh",
                                         "node_update", NULL };
    int which = adv_case(argc, argv, cases);
    CUcontext ctx;
    CUstream s;
    CUdeviceptr a, b, c;
    adv_open(&ctx, NULL);
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&a, WORDS * 4));
    MUST(cuMemAlloc(&b, WORDS * 4));
    MUST(cuMemAlloc(&c, 2 * WORDS * 4));
    MUST(cuMemsetD32(a, 0xaaaaaaaau, WORDS));
    MUST(cuMemsetD32(b, 0xbbbbbbbbu, WORDS));
    MUST(cuMemsetD32(c, 0xccccccccu, 2 * WORDS));
    uint32_t host[2 * WORDS];
    for (uint32_t i = 0; i < 2 * WORDS; i++) host[i] = 0x11110000u + i;

    CUresult r = CUDA_SUCCESS;
    switch (which) {
    case 0:
        r = R(cuMemsetD32(a, 0x55555555u, 2 * WORDS));
        break;
    case 1:
        r = R(cuMemsetD32Async(a, 0x55555555u, 2 * WORDS, s));
        R(cuStreamSynchronize(s));
        break;
    case 2:
        r = R(cuMemcpyHtoD(a, host, sizeof host));
        break;
    case 3:
        r = R(cuMemcpyDtoD(a, c, 2 * WORDS * 4));
        break;
    case 4: {
        r = R(cuMemcpyDtoH(host, a, sizeof host));
        int untouched = 1;
        for (uint32_t i = WORDS; i < 2 * WORDS; i++) untouched &= host[i] == 0x11110000u + i;
        /* The driver refuses the whole copy, so nothing of B is read. */
        adv_check("host words past A's size not filled from B", untouched, "%s",
                  untouched ? "untouched" : "written");
        break;
    }
    default: {
        CUgraph g;
        CUgraphExec exec;
        CUgraphNode node;
        size_t nn = 1;
        MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        MUST(cuMemsetD32Async(a, 0x33333333u, WORDS, s));
        MUST(cuStreamEndCapture(s, &g));
        MUST(cuGraphGetNodes(g, &node, &nn));
        MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
        R(cuGraphLaunch(exec, s));
        R(cuStreamSynchronize(s));
        CUDA_MEMSET_NODE_PARAMS mp = { .dst = a, .pitch = 0, .value = 0x55555555u,
                                       .elementSize = 4, .width = 2 * WORDS, .height = 1 };
        r = R(cuGraphExecMemsetNodeSetParams(exec, node, &mp, ctx));
        R(cuGraphLaunch(exec, s));
        R(cuStreamSynchronize(s));
        R(cuGraphExecDestroy(exec));
        R(cuGraphDestroy(g));
        break;
    }
    }
    printf("operation running 4 KiB past A: %s\n", adv_err(r));
    uint32_t want[WORDS];
    for (uint32_t i = 0; i < WORDS; i++) want[i] = 0xbbbbbbbbu;
    adv_check_words("neighbour B", b, want, WORDS);
    R(cuMemFree(a));
    R(cuMemFree(b));
    R(cuMemFree(c));
    R(cuStreamDestroy(s));
    return adv_finish();
}
