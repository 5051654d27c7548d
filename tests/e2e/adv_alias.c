/*
 * tests/e2e/adv_alias.c: beyond the classes, more valid programs
 * that the aliasing and variant shortcuts do not model. Every case feeds a
 * one-node exec, step after step (cuGraphExecKernelNodeSetParams, then
 * cuGraphLaunch), pointers into three 1 MiB windows of one 3 MiB buffer
 * (only the offset into the allocation varies, which is what a library
 * that aliases finds cheapest to alias):
 *   list     list_walk(head, stop): a linked list stored in the window (its
 *            links are raw addresses in device memory) is walked from the
 *            `head` argument until the `stop` argument; the arguments and
 *            the stored links must stay comparable;
 *   ptr_eq   ptr_eq(stored, p): the program writes p into device memory
 *            itself, then asks the kernel whether its argument equals it;
 *   foreign  mad_u32(in, acc): after 8 steps `in` is a buffer the library
 *            did not place (cuMemAllocFromPoolAsync), then windows again;
 *   extra    mad_u32(in, acc): the parameters alternate between the
 *            kernelParams and the `extra` forms;
 *   dims     grid_tag(out, v): out moves among the windows and, from step
 *            8 on, the grid changes too (the kernel writes its grid).
 * Checks: every step's result equals the host's.
 * Usage: adv_alias list|ptr_eq|foreign|extra|dims
 */
#include "adv_common.h"

#define MIB ((size_t)1 << 20)
#define STEPS 12
#define LIST 64
#define SPAN 4096u

static CUstream s;
static CUgraphExec exec;
static CUgraphNode node;
static CUgraph graph;

/* Instantiates a one-node exec of f with args (kernelParams). */
static void make_exec(CUfunction f, void **args)
{
    exec = adv_one_node_exec(s, f, args, &graph, &node);
}

/* Sets the node to f(args) with grid x `grid` (kernelParams, or the
 * `extra` form of the packed buffer `packed` of `size` bytes), launches,
 * synchronizes. */
static void step(CUfunction f, void **args, unsigned grid, void *packed, size_t size)
{
    void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                      CU_LAUNCH_PARAM_END };
    CUDA_KERNEL_NODE_PARAMS kp = { .func = f, .gridDimX = grid, .gridDimY = 1, .gridDimZ = 1,
                                   .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1,
                                   .kernelParams = packed ? NULL : args,
                                   .extra = packed ? extra : NULL };
    R(cuGraphExecKernelNodeSetParams(exec, node, &kp));
    R(cuGraphLaunch(exec, s));
    R(cuStreamSynchronize(s));
}

int main(int argc, char **argv)
{
    static const char *const cases[] = { "list", "ptr_eq", "foreign", "extra", "dims", NULL };
    int which = adv_case(argc, argv, cases);
    CUcontext ctx;
    CUmodule mod;
    CUdeviceptr big, small, acc;
    adv_open(&ctx, &mod);
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&big, 3 * MIB));
    MUST(cuMemAlloc(&small, 4096));
    MUST(cuMemAlloc(&acc, 4096));
    MUST(cuMemsetD32(small, 0, 1024));
    MUST(cuMemsetD32(acc, 0, 1024));
    uint32_t *img = calloc(3 * MIB, 1);
    if (!img) return 2;
    int good = 0;

    if (which == 0) {
        uint64_t *w = (uint64_t *)img;
        for (int k = 0; k < 3; k++) {
            CUdeviceptr base = big + (CUdeviceptr)k * MIB;
            size_t o = (size_t)k * MIB / 8;
            for (uint64_t i = 0; i <= LIST; i++) {
                size_t at = o + i * SPAN / 8;
                w[at] = i < LIST ? base + (i + 1) * SPAN : base + i * SPAN;   /* sentinel: itself */
                w[at + 1] = i < LIST ? (uint64_t)k * 100 + i : 0;
            }
        }
        MUST(cuMemcpyHtoD(big, img, 3 * MIB));
        CUfunction f = adv_fn(mod, "list_walk");
        CUdeviceptr head = big, stop = big + LIST * SPAN;
        uint32_t max = 1000;
        void *args[] = { &head, &stop, &max, &small };
        make_exec(f, args);
        for (int st = 0; st < STEPS; st++) {
            int k = st % 3;
            head = big + (CUdeviceptr)k * MIB;
            stop = head + LIST * SPAN;
            step(f, args, 1, NULL, 0);
            uint64_t got = 0, want = (uint64_t)LIST << 32 | (uint64_t)(LIST * k * 100 + 2016);
            R(cuMemcpyDtoH(&got, small, 8));
            good += got == want;
        }
    } else if (which == 1) {
        CUfunction f = adv_fn(mod, "ptr_eq");
        CUdeviceptr p = big, out = small + 64;
        void *args[] = { &small, &p, &out };
        make_exec(f, args);
        for (int st = 0; st < STEPS; st++) {
            p = big + (CUdeviceptr)(st % 3) * MIB + 256;
            uint64_t v = p;
            uint32_t eq = 7;
            R(cuMemcpyHtoD(small, &v, 8));
            step(f, args, 1, NULL, 0);
            R(cuMemcpyDtoH(&eq, out, 4));
            good += eq == 1;
        }
    } else if (which == 2 || which == 3) {
        CUfunction f = adv_fn(mod, "mad_u32");
        uint32_t model[1024] = { 0 };
        for (int k = 0; k < 3; k++)
            for (uint32_t i = 0; i < 1024; i++) img[(size_t)k * MIB / 4 + i] = (uint32_t)k * 1000u + i;
        MUST(cuMemcpyHtoD(big, img, 3 * MIB));
        CUdeviceptr in = big, pool_buf = 0;
        uint64_t n = 1024;
        void *args[] = { &in, &acc, &n };
        struct { CUdeviceptr in, acc; uint64_t n; } packed;
        if (which == 2) {
            uint32_t hp[1024];
            for (uint32_t i = 0; i < 1024; i++) hp[i] = 0x70000u + i;
            CUmemoryPool pool;
            CUdevice dev;
            MUST(cuCtxGetDevice(&dev));
            MUST(cuDeviceGetDefaultMemPool(&pool, dev));
            MUST(cuMemAllocFromPoolAsync(&pool_buf, 4096, pool, s));
            MUST(cuMemcpyHtoDAsync(pool_buf, hp, 4096, s));
            MUST(cuStreamSynchronize(s));
        }
        make_exec(f, args);
        for (int st = 0; st < STEPS; st++) {
            int k = st % 3;
            int foreign = which == 2 && st == 8;
            in = foreign ? pool_buf : big + (CUdeviceptr)k * MIB;
            packed.in = in;
            packed.acc = acc;
            packed.n = n;
            step(f, args, 1, which == 3 && st % 2 ? &packed : NULL, sizeof packed);
            for (uint32_t i = 0; i < 1024; i++)
                model[i] = model[i] * 3u + (foreign ? 0x70000u + i : (uint32_t)k * 1000u + i);
            uint32_t *got = adv_read(acc, 1024);
            good += got && memcmp(got, model, sizeof model) == 0;
            free(got);
        }
        if (pool_buf) {
            R(cuMemFreeAsync(pool_buf, s));
            R(cuStreamSynchronize(s));
        }
    } else {
        CUfunction f = adv_fn(mod, "grid_tag");
        CUdeviceptr out = big;
        uint32_t v = 0;
        void *args[] = { &out, &v };
        make_exec(f, args);
        for (int st = 0; st < STEPS; st++) {
            unsigned grid = st >= 8 ? 3 : 1;
            out = big + (CUdeviceptr)(st % 3) * MIB + 512;
            v = (uint32_t)st;
            step(f, args, grid, NULL, 0);
            uint32_t got = 0;
            R(cuMemcpyDtoH(&got, out, 4));
            good += got == (uint32_t)st * 1000u + grid * 10u + 1u;
        }
    }
    adv_check("steps with the right result", good == STEPS, "%d of %d", good, STEPS);
    free(img);
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(graph));
    R(cuMemFree(big));
    R(cuMemFree(small));
    R(cuMemFree(acc));
    R(cuStreamDestroy(s));
    return adv_finish();
}
