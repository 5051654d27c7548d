/*
 * tests/e2e/adv_escape.c: issue 10, class 2 (slot addresses escape). A graph
 * kernel stores the pointer it is given into a device table (store_ptr);
 * each step the program points it at another place of a 1 MiB buffer with
 * cuGraphExecKernelNodeSetParams. After cuGraphExecDestroy an ordinary
 * kernel follows the stored pointers (follow_ptr). Without the library they
 * are the program's own addresses and stay valid; a library that aliased
 * the buffer handed the kernel slot addresses, which it unmaps with the exec.
 *
 * Checks: the table holds exactly the pointers the program passed; the
 * words written through them; the words read through them after the exec
 * is gone.
 * Usage: adv_escape [STEPS]  (default 16, at most 64)
 */
#include "adv_common.h"

#define WORDS (256u * 1024u)        /* 1 MiB */
#define SPACING 8192u               /* bytes between the places of two steps */

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 16;
    if (steps < 1 || steps > 64) steps = 16;
    CUcontext ctx;
    CUmodule mod;
    CUstream s;
    CUdeviceptr buf, table, out;
    adv_open(&ctx, &mod);
    CUfunction store = adv_fn(mod, "store_ptr"), follow = adv_fn(mod, "follow_ptr");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&buf, WORDS * 4));
    MUST(cuMemAlloc(&table, 64 * 8));
    MUST(cuMemAlloc(&out, 64 * 4));
    MUST(cuMemsetD32(buf, 0, WORDS));
    MUST(cuMemsetD32(table, 0, 128));

    uint32_t idx = 0, v = 0;
    CUdeviceptr p = buf;
    void *args[] = { &table, &idx, &p, &v };
    CUgraph g;
    CUgraphNode node;
    CUgraphExec exec = adv_one_node_exec(s, store, args, &g, &node);
    for (int st = 0; st < steps; st++) {
        idx = (uint32_t)st;
        p = buf + (CUdeviceptr)st * SPACING;
        v = 1000u + (uint32_t)st;
        ADV_SET_KERNEL(exec, node, store, args);
        R(cuGraphLaunch(exec, s));
    }
    R(cuStreamSynchronize(s));

    uint64_t tab[64];
    int same = 0;
    if (R(cuMemcpyDtoH(tab, table, sizeof tab)) == CUDA_SUCCESS)
        for (int st = 0; st < steps; st++) same += tab[st] == buf + (uint64_t)st * SPACING;
    adv_check("stored pointers are the program's", same == steps, "%d of %d", same, steps);
    uint32_t *h = adv_read(buf, WORDS);
    int written = 0;
    for (int st = 0; h && st < steps; st++)
        written += h[(size_t)st * SPACING / 4 + (size_t)st] == 1000u + (uint32_t)st;
    free(h);
    adv_check("words written through the pointers", written == steps, "%d of %d", written, steps);

    /* The exec goes; the pointers the kernel kept are still the program's. */
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    uint32_t n = (uint32_t)steps;
    ADV_LAUNCH(follow, s, &table, &n, &out);
    R(cuStreamSynchronize(s));
    uint32_t got[64] = { 0 };
    int followed = 0;
    if (R(cuMemcpyDtoH(got, out, n * 4)) == CUDA_SUCCESS)
        for (int st = 0; st < steps; st++) followed += got[st] == 1000u + (uint32_t)st;
    adv_check("words read through the kept pointers after cuGraphExecDestroy", followed == steps,
              "%d of %d", followed, steps);
    R(cuMemFree(out));
    R(cuMemFree(table));
    R(cuMemFree(buf));
    R(cuStreamDestroy(s));
    return adv_finish();
}
