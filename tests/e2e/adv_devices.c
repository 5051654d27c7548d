/*
 * tests/e2e/adv_devices.c: round 10, valid programs over several devices
 * and several contexts against placement (one arena per context:
 * core/memory.c, core/mem_arena.c, core/contexts.c). Run with
 * CUDAEMU_DEVICES=2. Context A is device 0's primary context; context B is
 * device 1's primary context (the *_peer cases) or a second context of
 * device 0 made by cuCtxCreate (the *_ctx cases and the rest).
 *   free_peer_held, free_ctx_held
 *                 a cuMemAlloc block of A is freed (cuMemFree) while B is
 *                 current and a stream of A waits for the host (a host
 *                 function on a flag); the driver's implicit
 *                 synchronization is the current context's, so the free
 *                 returns and the flag is set after it (a library that
 *                 synchronized the block's context hung);
 *   free_peer_busy, free_ctx_busy
 *                 a kernel on B's stream reads a cuMemAlloc block of A
 *                 (sleep_count: it sleeps, then counts the words that
 *                 changed); B current, the block is freed, which waits for
 *                 B's work; then A allocates the same size and clears it (a
 *                 library that synchronized A only gave the block back at
 *                 once, cleared under the kernel);
 *   teardown_pending
 *                 a cuMemAllocAsync block made on a stream of B is read by a
 *                 kernel on a stream of A held by the host, and freed there
 *                 by cuMemFreeAsync; then cuCtxDestroy(B) ("will not destroy
 *                 memory allocations by cuMemAllocAsync"); then the flag;
 *   orphan_pending
 *                 the same, but B is destroyed first (the block outlives
 *                 it), then the block is read and freed on A's held stream;
 *   orphan_pressure
 *                 (a 256 MiB device) B makes four 48 MiB cuMemAllocAsync
 *                 blocks and a small one on its stream, frees the four
 *                 (cuMemFreeAsync) and synchronizes; cuCtxDestroy(B), the
 *                 small block alive; then A allocates 200 MiB, and then,
 *                 the small block freed, the whole device but 8 MiB;
 *   attrs         pointer attributes, address ranges and legacy-free
 *                 queries of placed blocks of A and B, asked with the other
 *                 context current, with a pushed context, and with none;
 *   meminfo       device 0 holds freed placed memory; cuMemGetInfo on each
 *                 device; then device 1 allocates nearly all of its memory,
 *                 and device 0's second context nearly all of device 0's;
 *   peer_copy     cuMemcpyPeer, cuMemcpyDtoD and a kernel of device 1 over
 *                 placed blocks of device 0 and back;
 *   graph_peer    a graph captured on device 1 whose kernel arguments are
 *                 placed blocks of device 0, re-captured each step after the
 *                 blocks are freed and allocated again (cuGraphExecUpdate);
 *   ctx_reuse     a created context is destroyed and a new one made, which
 *                 may get its handle value; blocks of each, their CONTEXT
 *                 attribute and frees.
 * Usage: adv_devices CASE (one of the names above)
 */
#include "adv_common.h"

#include <signal.h>

#define MIB ((size_t)1 << 20)
#define WORDS (256 * 1024u)
#define BYTES (WORDS * 4)

static CUcontext ca, cb;               /* A: device 0's primary; B: see the header */
static CUmodule mod_a, mod_b;
static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "check returned: WRONG (the call did not return in 5 s)\n";
    fflush(stdout);
    if (write(1, m, sizeof m - 1) < 0) _exit(3);
    _exit(3);
}

/* A current with its module; B as `peer` says, with its own module unless
 * no_mod_b (a context's teardown unloads its modules, which the emulated
 * driver does after every stream's work: a held stream would hold it). */
static int no_mod_b;

static void open_two(int peer)
{
    char path[PATH_MAX + 64];
    adv_open(&ca, &mod_a);
    if (peer) {
        CUdevice d1;
        MUST(cuDeviceGet(&d1, 1));
        MUST(cuDevicePrimaryCtxRetain(&cb, d1));
        MUST(cuCtxSetCurrent(cb));
    } else {
        MUST(cuCtxCreate(&cb, NULL, 0, 0));    /* current: B */
    }
    adv_path("adv_kernels.so", path, sizeof path);
    if (!no_mod_b) MUST(cuModuleLoad(&mod_b, path));
    MUST(cuCtxSetCurrent(ca));
}

static void fill(CUfunction f, CUdeviceptr p, uint32_t v, uint64_t n, CUstream s)
{
    ADV_LAUNCH(f, s, &p, &v, &n);
}

/* ---------------------------------------------------------------- frees */

static void free_held(int peer)
{
    open_two(peer);
    CUstream sa;
    CUdeviceptr x;
    MUST(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&x, BYTES));
    MUST(cuMemsetD32(x, 5, WORDS));
    MUST(cuCtxSynchronize());
    MUST(cuLaunchHostFunc(sa, adv_gate_wait, NULL));   /* A's stream waits for the host */
    MUST(cuCtxSetCurrent(cb));
    signal(SIGALRM, on_alarm);
    alarm(5);
    R(cuMemFree(x));                               /* B current: B's work only */
    alarm(0);
    adv_check("returned", !adv_released(),
              "cuMemFree returned while A's stream waits for the host");
    adv_release();
    MUST(cuCtxSetCurrent(ca));
    MUST(cuStreamSynchronize(sa));
    CUdeviceptr y;
    MUST(cuMemAlloc(&y, BYTES));
    MUST(cuMemsetD32(y, 9, WORDS));
    uint32_t *want = malloc(BYTES);
    for (size_t i = 0; i < WORDS; i++) want[i] = 9;
    adv_check_words("after", y, want, WORDS);
    free(want);
    MUST(cuMemFree(y));
}

static void free_busy(int peer)
{
    open_two(peer);
    CUfunction fill_a = adv_fn(mod_a, "fill_u32"), sleep_b = adv_fn(mod_b, "sleep_count");
    CUdeviceptr x, bad, y;
    uint32_t v = 0x1000, us = 300000;
    uint64_t n = WORDS;
    MUST(cuMemAlloc(&bad, 4096));
    MUST(cuMemsetD32(bad, 0xffffffffu, 1));
    MUST(cuMemAlloc(&x, BYTES));
    fill(fill_a, x, v, n, NULL);
    MUST(cuCtxSynchronize());
    MUST(cuCtxSetCurrent(cb));
    ADV_LAUNCH(sleep_b, NULL, &x, &v, &n, &us, &bad);   /* B's legacy stream reads A's block */
    R(cuMemFree(x));                                     /* B current: waits for B's work */
    MUST(cuCtxSetCurrent(ca));
    MUST(cuMemAlloc(&y, BYTES));
    MUST(cuMemsetD32(y, 0, WORDS));
    MUST(cuCtxSetCurrent(cb));
    MUST(cuCtxSynchronize());
    MUST(cuCtxSetCurrent(ca));
    MUST(cuCtxSynchronize());
    uint32_t got = 0;
    MUST(cuMemcpyDtoH(&got, bad, 4));
    adv_check("kernel", got == 0, "%u of %u words changed under the kernel", got, WORDS);
    uint32_t *want = calloc(WORDS, 4);
    adv_check_words("cleared", y, want, WORDS);
    free(want);
    MUST(cuMemFree(y));
    MUST(cuMemFree(bad));
}

/* ------------------------------------------- stream-ordered vs. teardown */

static void pending(int destroy_first)
{
    no_mod_b = 1;
    open_two(0);
    CUfunction fill_a = adv_fn(mod_a, "fill_u32"), sleep_a = adv_fn(mod_a, "sleep_count");
    CUstream sa, sb;
    CUdeviceptr x, bad, keep;
    uint32_t v = 0x2000, us = 1000;
    uint64_t n = WORDS;
    MUST(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&bad, 4096));
    MUST(cuMemsetD32(bad, 0xffffffffu, 1));
    MUST(cuCtxSetCurrent(cb));
    MUST(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAllocAsync(&x, BYTES, sb));
    MUST(cuMemAllocAsync(&keep, 4096, sb));        /* another block of B's, freed at the end */
    MUST(cuMemsetD32Async(keep, 77, 1, sb));
    MUST(cuStreamSynchronize(sb));
    MUST(cuCtxSetCurrent(ca));
    fill(fill_a, x, v, n, sa);                     /* pool memory: any stream may use it */
    MUST(cuStreamSynchronize(sa));
    if (destroy_first) {
        MUST(cuCtxDestroy(cb));
        uint32_t k = 0;
        MUST(cuMemcpyDtoH(&k, keep, 4));
        adv_check("keep", k == 77, "the other block holds %u", k);
        R(cuMemFree(keep));                        /* x is the last block of B's now */
    }
    MUST(cuLaunchHostFunc(sa, adv_gate_wait, NULL));
    ADV_LAUNCH(sleep_a, sa, &x, &v, &n, &us, &bad);
    R(cuMemFreeAsync(x, sa));
    if (!destroy_first) {
        R(cuMemFreeAsync(keep, sa));
        MUST(cuCtxDestroy(cb));
    }
    adv_sleep_us(20000);
    adv_release();
    MUST(cuStreamSynchronize(sa));
    uint32_t got = 0;
    MUST(cuMemcpyDtoH(&got, bad, 4));
    adv_check("kernel", got == 0, "%u of %u words wrong", got, WORDS);
    /* the memory is usable again */
    CUdeviceptr y;
    MUST(cuMemAllocAsync(&y, BYTES, sa));
    MUST(cuMemsetD32Async(y, 3, WORDS, sa));
    MUST(cuStreamSynchronize(sa));
    uint32_t *want = malloc(BYTES);
    for (size_t i = 0; i < WORDS; i++) want[i] = 3;
    adv_check_words("after", y, want, WORDS);
    free(want);
    MUST(cuMemFreeAsync(y, sa));
    MUST(cuStreamSynchronize(sa));
    MUST(cuMemFree(bad));
}

static void orphan_pressure(void)
{
    no_mod_b = 1;
    open_two(0);
    CUstream sb;
    CUdeviceptr big[4], small, a;
    size_t fr = 0, tot = 0;
    MUST(cuCtxSetCurrent(cb));
    MUST(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 4; i++) MUST(cuMemAllocAsync(&big[i], 48 * MIB, sb));
    MUST(cuMemAllocAsync(&small, 4096, sb));
    MUST(cuMemsetD32Async(small, 12, 1, sb));
    for (int i = 0; i < 4; i++) MUST(cuMemFreeAsync(big[i], sb));
    MUST(cuStreamSynchronize(sb));
    MUST(cuCtxSetCurrent(ca));
    MUST(cuCtxDestroy(cb));
    if (R(cuMemAlloc(&a, 200 * MIB)) == CUDA_SUCCESS) {
        MUST(cuMemsetD8(a, 1, 200 * MIB));
        MUST(cuMemFree(a));
    }
    uint32_t w = 0;
    MUST(cuMemcpyDtoH(&w, small, 4));
    adv_check("small", w == 12, "the small block holds %u", w);
    R(cuMemFree(small));
    MUST(cuMemGetInfo(&fr, &tot));
    adv_check("info", fr >= tot - 8 * MIB, "at least all but 8 MiB free");
    if (R(cuMemAlloc(&a, tot - 8 * MIB)) == CUDA_SUCCESS) {
        MUST(cuMemsetD8(a, 2, tot - 8 * MIB));
        MUST(cuMemFree(a));
    }
}

/* -------------------------------------------------------------- queries */

static void attrs_of(const char *name, CUdeviceptr p, CUcontext want_ctx, int want_dev)
{
    CUcontext c = (CUcontext)1;
    int ord = -1;
    unsigned type = 0;
    CUdeviceptr base = 0;
    size_t size = 0;
    CUresult r1 = R(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, p + 100));
    CUresult r2 = R(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p + 100));
    CUresult r3 = R(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p));
    CUresult r4 = R(cuMemGetAddressRange(&base, &size, p + 100));
    CUpointer_attribute at[2] = { CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL };
    CUcontext c2 = (CUcontext)1;
    int ord2 = -1;
    void *data[2] = { &c2, &ord2 };
    CUresult r5 = R(cuPointerGetAttributes(2, at, data, p + 100));
    if (want_dev < 0) {            /* freed: every query refused, as for unallocated memory */
        adv_check(name, r1 && r2 && r3 && r4, "queries of a freed block refused");
        return;
    }
    int ok = (r1 || c == want_ctx) && (r2 || ord == want_dev) && (r3 || type == CU_MEMORYTYPE_DEVICE) &&
             (r4 || (base == p && size == BYTES)) && (r5 || (c2 == want_ctx && ord2 == want_dev));
    adv_check(name, ok, "context %s, ordinal %d/%d, type %u, range %s", c == want_ctx ? "right" : "wrong",
              r2 ? -1 : ord, r5 ? -1 : ord2, r3 ? 0 : type,
              r4 ? "-" : base == p && size == BYTES ? "right" : "wrong");
}

static void attrs(void)
{
    open_two(1);
    CUdeviceptr a, b, as, bs;
    CUstream sb;
    MUST(cuMemAlloc(&a, BYTES));
    MUST(cuCtxPushCurrent(cb));
    MUST(cuMemAlloc(&b, BYTES));
    MUST(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAllocAsync(&bs, BYTES, sb));
    MUST(cuStreamSynchronize(sb));
    CUcontext popped = NULL;
    MUST(cuCtxPopCurrent(&popped));
    adv_check("popped", popped == cb, "the pushed context popped");
    MUST(cuMemAllocAsync(&as, BYTES, sb));          /* A current, B's stream: B's device */
    MUST(cuStreamSynchronize(sb));
    attrs_of("a_from_a", a, ca, 0);
    attrs_of("b_from_a", b, cb, 1);
    attrs_of("bs_from_a", bs, NULL, 1);
    attrs_of("as_from_a", as, NULL, 1);
    MUST(cuCtxSetCurrent(cb));
    attrs_of("a_from_b", a, ca, 0);
    attrs_of("b_from_b", b, cb, 1);
    MUST(cuCtxSetCurrent(NULL));
    attrs_of("a_none", a, ca, 0);
    attrs_of("b_none", b, cb, 1);
    CUdeviceptr x;
    R(cuMemAlloc(&x, BYTES));
    R(cuMemFree(a));
    MUST(cuCtxSetCurrent(cb));
    R(cuMemFree(a));                                /* a block of A, B current */
    R(cuMemFree(a));
    R(cuMemFree(bs));
    R(cuMemFreeAsync(as, NULL));                    /* B's legacy stream */
    MUST(cuCtxSynchronize());
    MUST(cuCtxPushCurrent(ca));
    R(cuMemFree(b));                                /* a block of B, A pushed */
    MUST(cuCtxPopCurrent(&popped));
    attrs_of("b_freed", b, NULL, -1);
}

static void meminfo(void)
{
    open_two(0);                                    /* B: a second context of device 0 */
    CUcontext c1;
    CUdevice d1;
    size_t fr[3] = { 0 }, tot = 0;
    CUdeviceptr p[8];
    MUST(cuDeviceGet(&d1, 1));
    MUST(cuDevicePrimaryCtxRetain(&c1, d1));
    for (int i = 0; i < 8; i++) MUST(cuMemAlloc(&p[i], 24 * MIB));   /* A: 192 MiB of 256 */
    for (int i = 0; i < 8; i++) MUST(cuMemFree(p[i]));
    MUST(cuMemGetInfo(&fr[0], &tot));
    MUST(cuCtxSetCurrent(c1));
    MUST(cuMemGetInfo(&fr[1], &tot));
    MUST(cuCtxSetCurrent(cb));
    MUST(cuMemGetInfo(&fr[2], &tot));
    adv_check("info", fr[0] == tot && fr[1] == tot && fr[2] == tot,
              "free %zu %zu %zu MiB of %zu", fr[0] / MIB, fr[1] / MIB, fr[2] / MIB, tot / MIB);
    CUdeviceptr big;
    MUST(cuCtxSetCurrent(c1));
    if (R(cuMemAlloc(&big, tot - 8 * MIB)) == CUDA_SUCCESS) {
        MUST(cuMemsetD8(big, 1, tot - 8 * MIB));
        MUST(cuMemGetInfo(&fr[1], &tot));
        MUST(cuCtxSetCurrent(ca));
        MUST(cuMemGetInfo(&fr[0], &tot));
        adv_check("info_dev1_full", fr[0] == tot && fr[1] == 8 * MIB, "free %zu %zu MiB", fr[0] / MIB,
                  fr[1] / MIB);
        MUST(cuCtxSetCurrent(c1));
        MUST(cuMemFree(big));
    }
    MUST(cuCtxSetCurrent(cb));                       /* device 0, the other context */
    if (R(cuMemAlloc(&big, tot - 8 * MIB)) == CUDA_SUCCESS) {
        MUST(cuMemsetD8(big, 2, tot - 8 * MIB));
        MUST(cuMemGetInfo(&fr[2], &tot));
        adv_check("info_dev0_full", fr[2] == 8 * MIB, "free %zu MiB", fr[2] / MIB);
        MUST(cuCtxSetCurrent(ca));
        CUdeviceptr more;
        R(cuMemAlloc(&more, 16 * MIB));              /* does not fit: refused */
        MUST(cuCtxSetCurrent(cb));
        MUST(cuMemFree(big));
    }
    MUST(cuCtxSetCurrent(ca));
    for (int i = 0; i < 4; i++) MUST(cuMemAlloc(&p[i], 48 * MIB));
    for (int i = 0; i < 4; i++) MUST(cuMemFree(p[i]));
    MUST(cuCtxDestroy(cb));
    MUST(cuMemGetInfo(&fr[0], &tot));
    adv_check("info_end", fr[0] == tot, "free %zu MiB", fr[0] / MIB);
}

/* ---------------------------------------------------------- peer work */

static void peer_copy(void)
{
    open_two(1);
    CUfunction fill_a = adv_fn(mod_a, "fill_u32"), add_b = adv_fn(mod_b, "add_u32");
    CUdeviceptr a, a2, b;
    uint64_t n = WORDS;
    uint32_t *want = malloc(BYTES);
    MUST(cuMemAlloc(&a, BYTES));
    MUST(cuMemAlloc(&a2, BYTES));
    fill(fill_a, a, 100, n, NULL);
    MUST(cuCtxSynchronize());
    MUST(cuCtxSetCurrent(cb));
    MUST(cuMemAlloc(&b, BYTES));
    R(cuMemcpyPeer(b, cb, a, ca, BYTES));
    uint32_t v = 7;
    ADV_LAUNCH(add_b, NULL, &b, &v, &n);
    ADV_LAUNCH(add_b, NULL, &a, &v, &n);            /* device 1 writes device 0's block */
    MUST(cuCtxSynchronize());
    for (size_t i = 0; i < WORDS; i++) want[i] = 107 + (uint32_t)i;
    adv_check_words("peer_b", b, want, WORDS);
    MUST(cuCtxSetCurrent(ca));
    adv_check_words("peer_a", a, want, WORDS);
    R(cuMemcpyDtoD(a2, b, BYTES));                  /* unified addressing: across devices */
    adv_check_words("dtod", a2, want, WORDS);
    R(cuMemcpyDtoD(a2, b, BYTES + 4));              /* past b's end */
    R(cuMemcpyPeer(a2, ca, b + 4, cb, BYTES));      /* past b's end */
    MUST(cuMemFree(a));
    MUST(cuMemFree(a2));
    MUST(cuCtxSetCurrent(cb));
    MUST(cuMemFree(b));
    free(want);
}

static void graph_peer(void)
{
    open_two(1);
    CUfunction mad_b = adv_fn(mod_b, "mad_u32");
    CUstream sb;
    CUgraph g = NULL;
    CUgraphExec exec = NULL;
    CUdeviceptr acc;
    uint64_t n = 4096;
    uint32_t model[4096] = { 0 };
    MUST(cuCtxSetCurrent(cb));
    MUST(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
    MUST(cuCtxSetCurrent(ca));
    MUST(cuMemAlloc(&acc, n * 4));
    MUST(cuMemsetD32(acc, 0, n));
    for (int step = 0; step < 12; step++) {
        CUdeviceptr in;
        MUST(cuCtxSetCurrent(ca));
        MUST(cuMemAlloc(&in, (step % 3 + 1) * n * 4));    /* device 0, three sizes in turn */
        uint32_t val = 11 * (uint32_t)step + 1;
        MUST(cuMemsetD32(in, val, n));
        MUST(cuCtxSetCurrent(cb));
        void *args[] = { &in, &acc, &n };
        MUST(cuStreamBeginCapture(sb, CU_STREAM_CAPTURE_MODE_GLOBAL));
        MUST(cuLaunchKernel(mad_b, 1, 1, 1, 1, 1, 1, 0, sb, args, NULL));
        CUgraph ng;
        MUST(cuStreamEndCapture(sb, &ng));
        if (!exec) {
            MUST(cuGraphInstantiateWithFlags(&exec, ng, 0));
        } else {
            CUgraphExecUpdateResultInfo info;
            R(cuGraphExecUpdate(exec, ng, &info));
        }
        if (g) MUST(cuGraphDestroy(g));
        g = ng;
        R(cuGraphLaunch(exec, sb));
        MUST(cuStreamSynchronize(sb));
        for (uint64_t i = 0; i < n; i++) model[i] = model[i] * 3u + val;
        MUST(cuCtxSetCurrent(ca));
        MUST(cuMemFree(in));
    }
    adv_check_words("acc", acc, model, n);
    MUST(cuCtxSetCurrent(cb));
    MUST(cuGraphExecDestroy(exec));
    MUST(cuGraphDestroy(g));
    MUST(cuCtxSetCurrent(ca));
    MUST(cuMemFree(acc));
}

static void ctx_reuse(void)
{
    open_two(0);
    CUdeviceptr a, b[4];
    CUcontext first = cb;
    int same = 0;
    MUST(cuMemAlloc(&a, BYTES));
    for (int k = 0; k < 4; k++) {
        CUcontext c;
        if (k == 0) {
            c = cb;
            MUST(cuCtxSetCurrent(c));
        } else {
            MUST(cuCtxCreate(&c, NULL, 0, k % 2));
            same += c == first;
        }
        MUST(cuMemAlloc(&b[k], BYTES));
        MUST(cuMemsetD32(b[k], 40 + k, WORDS));
        CUcontext got = NULL;
        R(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_CONTEXT, b[k]));
        adv_check("ctx_attr", got == c, "step %d: the block's context is the current one", k);
        uint32_t w = 0;
        MUST(cuMemcpyDtoH(&w, b[k] + 400, 4));
        adv_check("ctx_word", w == 40u + k, "step %d: %u", k, w);
        MUST(cuCtxDestroy(c));                       /* its blocks go with it */
        MUST(cuCtxSetCurrent(ca));
        CUdeviceptr base;
        size_t size;
        R(cuMemGetAddressRange(&base, &size, b[k]));  /* NOT_FOUND, or another block's */
    }
    fprintf(stderr, "context handle reused: %s\n", same ? "yes" : "no");
    uint32_t *want = malloc(BYTES);
    MUST(cuMemsetD32(a, 8, WORDS));
    for (size_t i = 0; i < WORDS; i++) want[i] = 8;
    adv_check_words("a", a, want, WORDS);
    free(want);
    MUST(cuMemFree(a));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "free_peer_held", "free_ctx_held", "free_peer_busy",
                                         "free_ctx_busy", "teardown_pending", "orphan_pending",
                                         "attrs", "meminfo", "peer_copy", "graph_peer",
                                         "ctx_reuse", "orphan_pressure", NULL };
    switch (adv_case(argc, argv, names)) {
    case 0: free_held(1); break;
    case 1: free_held(0); break;
    case 2: free_busy(1); break;
    case 3: free_busy(0); break;
    case 4: pending(0); break;
    case 5: pending(1); break;
    case 6: attrs(); break;
    case 7: meminfo(); break;
    case 8: peer_copy(); break;
    case 9: graph_peer(); break;
    case 10: ctx_reuse(); break;
    case 11: orphan_pressure(); break;
    }
    return adv_finish();
}
