/*
 * tests/e2e/adv_ring.c: issue 10, class 1 (aliasing breaks pointer
 * relations). One graph kernel node writes into a 1 MiB ring buffer through
 * fixed `begin` and `end` pointers and a moving `cur` pointer, wrapping with
 * `if (p >= end) p -= end - begin`; each step the program moves `cur` with
 * cuGraphExecKernelNodeSetParams and launches. Only `cur` varies, so a
 * library that aliases the buffer translates `cur` into a slot while
 * `begin` and `end` stay raw: the wrap goes wrong. The ring is the first
 * 1 MiB of a 1.25 MiB buffer, so writes that miss the wrap land in the
 * guard behind it (which must stay zero) rather than, by chance, in another
 * mapping of the same memory.
 *
 * Checks: the buffer's final contents (ring and guard) equal the host's
 * model, word for word.
 * Usage: adv_ring [STEPS]  (default 16)
 */
#include "adv_common.h"

#define WORDS (256u * 1024u)        /* the ring: 1 MiB */
#define GUARD (64u * 1024u)         /* 256 KiB behind it */
#define PER_STEP 50000u
#define STRIDE 70001u

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 16;
    CUcontext ctx;
    CUmodule mod;
    CUstream s;
    CUdeviceptr buf;
    adv_open(&ctx, &mod);
    CUfunction f = adv_fn(mod, "ring_write");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&buf, (WORDS + GUARD) * 4));
    MUST(cuMemsetD32(buf, 0, WORDS + GUARD));

    CUdeviceptr begin = buf, end = buf + WORDS * 4, cur = buf;
    uint32_t n = PER_STEP, val = 0;
    void *args[] = { &begin, &end, &cur, &n, &val };
    CUgraph g;
    CUgraphNode node;
    CUgraphExec exec = adv_one_node_exec(s, f, args, &g, &node);

    uint32_t *model = calloc(WORDS + GUARD, 4);
    if (!model) return 2;
    uint32_t pos = 0;
    for (int st = 0; st < steps; st++) {
        pos = (uint32_t)(((uint64_t)st * STRIDE) % WORDS);
        cur = buf + (CUdeviceptr)pos * 4;
        val = (uint32_t)st + 1;
        ADV_SET_KERNEL(exec, node, f, args);
        R(cuGraphLaunch(exec, s));
        for (uint32_t i = 0, p = pos; i < n; i++) {
            model[p] = val * 0x9e3779b1u + i;
            if (++p == WORDS) p = 0;
        }
    }
    R(cuStreamSynchronize(s));
    adv_check_words("ring and guard contents", buf, model, WORDS + GUARD);
    free(model);
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    R(cuMemFree(buf));
    R(cuStreamDestroy(s));
    return adv_finish();
}
