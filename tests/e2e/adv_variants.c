/*
 * tests/e2e/adv_variants.c: an exec whose pointer arguments rotate among
 * three buffers by cuGraphExecKernelNodeSetParams, so that skip_profiled
 * serves it with exec variants (bought at once under the test's
 * free-variant costs), and then a valid call the variants must survive.
 *   unload      an unrelated module is unloaded half-way: the exec is not
 *               affected (before the fix every later launch got
 *               CUDA_ERROR_OUT_OF_MEMORY: the unload made the exec's content
 *               unknown, and the variants could no longer be given up);
 *   edges       the exec's source graph (fill, then add) gets its edge
 *               reversed after instantiation: the exec is a snapshot and
 *               still fills first (before the fix the variants were cloned
 *               from the source graph as it is now, and added first);
 *   ptds_enable the exec is launched on a thread's per-thread default
 *               stream, then cuGraphNodeSetEnabled (which makes the library
 *               give the variants up) and launches from the main thread, on
 *               its per-thread stream and a stream of its own: each must
 *               follow the previous one (mad_u32 does not commute with
 *               itself); before the fix they all got OUT_OF_MEMORY (no event
 *               could be recorded on the other thread's per-thread stream);
 *   ptds_grid   the same, the variants given up by a grid change.
 * Usage: adv_variants unload|edges|ptds_enable|ptds_grid
 */
#include "adv_common.h"

#define N 64

static CUcontext ctx;
static CUmodule mod;
static CUstream s;
static CUdeviceptr b[3];
static uint64_t n = N;

static void buffers(uint32_t first)
{
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 3; i++) {
        MUST(cuMemAlloc(&b[i], N * 4));
        MUST(cuMemsetD32(b[i], first + (uint32_t)i, N));
    }
}

static void check_all(const char *what, CUdeviceptr d, uint32_t want)
{
    uint32_t w[N];
    for (int j = 0; j < N; j++) w[j] = want;
    adv_check_words(what, d, w, N);
}

static void unload(void)
{
    CUmodule other;
    char path[PATH_MAX + 64];
    adv_path("adv_ver1.so", path, sizeof path);
    MUST(cuModuleLoad(&other, path));
    CUfunction add = adv_fn(mod, "add_u32");
    buffers(0);
    uint32_t v = 1, want[3] = { 0, 1, 2 };
    void *args[] = { &b[0], &v, &n };
    CUgraph g;
    CUgraphNode node;
    CUgraphExec e = adv_one_node_exec(s, add, args, &g, &node);
    for (int i = 0; i < 40; i++) {
        if (i == 20) R(cuModuleUnload(other));
        int k = i % 3;
        v = (uint32_t)i + 1;
        void *a[] = { &b[k], &v, &n };
        ADV_SET_KERNEL(e, node, add, a);
        if (R(cuGraphLaunch(e, s)) == CUDA_SUCCESS) want[k] += v;
    }
    MUST(cuStreamSynchronize(s));
    for (int k = 0; k < 3; k++) check_all("buffer", b[k], want[k]);
}

static void edges(void)
{
    CUfunction fill = adv_fn(mod, "fill_u32"), add = adv_fn(mod, "add_u32");
    buffers(0);
    uint32_t v = 5, inc = 1000;
    void *aa[] = { &b[0], &v, &n }, *ab[] = { &b[0], &inc, &n };
    CUgraph g;
    CUgraphNode A, B;
    CUgraphExec e;
    MUST(cuGraphCreate(&g, 0));
    CUDA_KERNEL_NODE_PARAMS pa = adv_kernel_params(fill, aa), pb = adv_kernel_params(add, ab);
    MUST(cuGraphAddKernelNode(&A, g, NULL, 0, &pa));
    MUST(cuGraphAddKernelNode(&B, g, &A, 1, &pb));
    /* the edge removed and added again: the recorder then reads the graph
     * back, before instantiation as after the reversal below, so that both
     * descriptions are comparable (a recorded one and a read-back one are not) */
    MUST(cuGraphRemoveDependencies(g, &A, &B, NULL, 1));
    MUST(cuGraphAddDependencies(g, &A, &B, NULL, 1));
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    /* the program reuses g: the edge reversed (the exec is not affected) */
    MUST(cuGraphRemoveDependencies(g, &A, &B, NULL, 1));
    MUST(cuGraphAddDependencies(g, &B, &A, NULL, 1));
    int bad = 0;
    for (int i = 0; i < 30; i++) {
        int k = i % 3;
        v = (uint32_t)i * 7;
        void *x[] = { &b[k], &v, &n }, *y[] = { &b[k], &inc, &n };
        ADV_SET_KERNEL(e, A, fill, x);
        ADV_SET_KERNEL(e, B, add, y);
        R(cuGraphLaunch(e, s));
        MUST(cuStreamSynchronize(s));
        uint32_t h[N];
        MUST(cuMemcpyDtoH(h, b[k], sizeof h));
        for (int j = 0; j < N; j++)
            if (h[j] != v + (uint32_t)j + inc) {
                bad++;
                break;
            }
    }
    adv_check("fill before add", bad == 0, "%d of 30 steps wrong", bad);
}

static CUfunction mad;
static CUgraphExec pe;
static CUgraphNode pnode;
static CUdeviceptr acc;
static uint32_t want = 1;

static void *ptds_thread(void *arg)
{
    (void)arg;
    MUST(cuCtxSetCurrent(ctx));
    for (int i = 0; i < 12; i++) {
        int k = i % 3;
        void *a[] = { &b[k], &acc, &n };
        ADV_SET_KERNEL(pe, pnode, mad, a);
        if (R(cuGraphLaunch(pe, CU_STREAM_PER_THREAD)) == CUDA_SUCCESS) want = want * 3 + 10 + (uint32_t)k;
    }
    return NULL;
}

static void ptds(int grid)
{
    mad = adv_fn(mod, "mad_u32");
    buffers(10);
    MUST(cuMemAlloc(&acc, N * 4));
    MUST(cuMemsetD32(acc, 1, N));
    void *args[] = { &b[0], &acc, &n };
    CUgraph g;
    pe = adv_one_node_exec(s, mad, args, &g, &pnode);
    pthread_t t;
    if (pthread_create(&t, NULL, ptds_thread, NULL) != 0) {
        printf("set-up failed: pthread_create\n");
        exit(2);
    }
    pthread_join(t, NULL);
    uint32_t k = 2;                   /* the thread's last buffer */
    if (!grid) {
        R(cuGraphNodeSetEnabled(pe, pnode, 1));
    } else {
        void *a[] = { &b[1], &acc, &n };
        CUDA_KERNEL_NODE_PARAMS kp = adv_kernel_params(mad, a);
        kp.gridDimX = 2;              /* a change no variant carries (the emulated
                                       * mad_u32 runs once per launch whatever its grid) */
        R(cuGraphExecKernelNodeSetParams(pe, pnode, &kp));
        k = 1;
    }
    for (int r = 0; r < 3; r++)
        if (R(cuGraphLaunch(pe, CU_STREAM_PER_THREAD)) == CUDA_SUCCESS) want = want * 3 + 10 + k;
    if (R(cuGraphLaunch(pe, s)) == CUDA_SUCCESS) want = want * 3 + 10 + k;
    MUST(cuCtxSynchronize());
    check_all("acc", acc, want);
}

static void ptds_enable(void) { ptds(0); }
static void ptds_grid(void) { ptds(1); }

int main(int argc, char **argv)
{
    static const struct { const char *name; void (*fn)(void); } cases[] = {
        { "unload", unload }, { "edges", edges }, { "ptds_enable", ptds_enable },
        { "ptds_grid", ptds_grid },
    };
    for (size_t i = 0; argc == 2 && i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(argv[1], cases[i].name) == 0) {
            adv_open(&ctx, &mod);
            cases[i].fn();
            return adv_finish();
        }
    printf("usage: %s unload|edges|ptds_enable|ptds_grid\n", argv[0]);
    return 4;
}
