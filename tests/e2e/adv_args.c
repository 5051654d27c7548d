/*
 * tests/e2e/adv_args.c: round 11, kernel arguments, functions and modules
 * against the update decision (a review of core/fp_desc.c, fp_pinfo.c,
 * fp_build.c, cap_record.c and prof_util.c). The library compares the
 * argument bytes laid out as cuFuncGetParamInfo reports them; each case
 * gives it arguments whose bytes, layout or function are unusual, changes
 * what the kernel reads (or only what it does not read), and checks every
 * step's result on the host.
 *
 * Cases (argv[1]):
 *   sizes_update, sizes_setter, sizes_extra
 *           bytes_hash(out, u8, u16, 12 B, 16 B, 24 B, 264 B): each step
 *           changes one byte (the first or the last) of one argument, or
 *           nothing, by re-capture + cuGraphExecUpdate, by
 *           cuGraphExecKernelNodeSetParams with kernelParams, or with an
 *           `extra` buffer (its size first, garbage in the gaps, entries
 *           after CU_LAUNCH_PARAM_END; sizes_extra captures its graph
 *           with `extra` too); sizes_update_extra: re-captures with `extra`
 *           (run with CUDAEMU_FAIL making cuFuncGetParamInfo answer
 *           CUDA_ERROR_INVALID_VALUE, "no parameters", the library's layout
 *           is empty: before the fix every update compared equal);
 *   sizes_rotate
 *           the same kernel, out and the arguments rotating among three
 *           states (exec variants under skip_profiled hold all 336 bytes);
 *   padding pad_sum(out, struct { u8 a; u64 b; }) by value: the padding
 *           bytes differ at every step (the kernel never reads them), a or b
 *           at some;
 *   extra_size
 *           setters whose `extra` buffer size is one word more, then one
 *           byte less, than the arguments (the emulated driver refuses
 *           both), with the exec's own bytes (before the fix the larger one
 *           was answered CUDA_SUCCESS by the library);
 *   noparams
 *           a kernel without parameters: setters with neither kernelParams
 *           nor extra, its grid changed at some steps;
 *   kernel_ctx
 *           a CUkernel (cuLibraryLoadFromFile) launched as a function into
 *           captures in two contexts; the exec of context A updated with
 *           context B's graph (refused: the function's context changed) and
 *           with its own (accepted), and set through cuKernelGetFunction's
 *           function;
 *   scalar_ptr
 *           u64_store(out, v) with v a live device address (one of three
 *           buffers, as an integer) rotating with out: a pointer-looking
 *           scalar under skip_profiled.
 * Usage: adv_args CASE
 */
#include "adv_common.h"

#define STEPS 24
#define SP_STEPS 30

static CUcontext ctx;
static CUmodule mod;
static CUstream s;

/* ------------------------------------------------------------ bytes_hash */

static const unsigned hsizes[6] = { 1, 2, 12, 16, 24, 264 };
static const unsigned hoffs[6] = { 8, 10, 16, 32, 48, 72 };   /* the emulated layout */
#define HBYTES 336

typedef struct hargs {
    CUdeviceptr out;
    unsigned char a[6][264];
} hargs;

static uint32_t host_hash(const hargs *h)
{
    uint32_t v = 0x811c9dc5u;
    for (int i = 0; i < 6; i++)
        for (unsigned j = 0; j < hsizes[i]; j++) v = (v ^ h->a[i][j]) * 0x01000193u;
    return v;
}

static void hargs_init(hargs *h, CUdeviceptr out, unsigned seed)
{
    h->out = out;
    for (int i = 0; i < 6; i++)
        for (unsigned j = 0; j < 264; j++) h->a[i][j] = (unsigned char)(seed * 31u + i * 7u + j * 13u);
}

/* The step's change: one byte, the first or the last, of argument st % 6
 * (every fourth step changes nothing). */
static void hargs_step(hargs *h, int st)
{
    if (st % 4 == 3) return;
    int i = st % 6;
    unsigned j = (st / 6) % 2 ? hsizes[i] - 1 : 0;
    h->a[i][j] ^= (unsigned char)(0x11 + st);
}

static void hargs_kp(hargs *h, void **kp)
{
    kp[0] = &h->out;
    for (int i = 0; i < 6; i++) kp[i + 1] = h->a[i];
}

/* The `extra` form of h into buf (HBYTES), garbage in the gaps. */
static void hargs_buf(const hargs *h, unsigned char *buf, int st)
{
    memset(buf, 0xa5 ^ st, HBYTES);
    memcpy(buf, &h->out, 8);
    for (int i = 0; i < 6; i++) memcpy(buf + hoffs[i], h->a[i], hsizes[i]);
}

/* Captures one launch of f (grid x 1 x 1, block 1) into *g; *node its node. */
static void capture_one(CUfunction f, void **kp, void **extra, unsigned grid, CUgraph *g,
                        CUgraphNode *node)
{
    size_t n = 1;
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    R(cuLaunchKernel(f, grid, 1, 1, 1, 1, 1, 0, s, kp, extra));
    MUST(cuStreamEndCapture(s, g));
    MUST(cuGraphGetNodes(*g, node, &n));
}

/* Re-captures f(kp) and updates exec with it. */
static void recapture_update(CUgraphExec exec, CUfunction f, void **kp, void **extra, unsigned grid)
{
    CUgraph g;
    CUgraphNode node;
    CUgraphExecUpdateResultInfo info;
    capture_one(f, kp, extra, grid, &g, &node);
    R(cuGraphExecUpdate(exec, g, &info));
    R(cuGraphDestroy(g));
}

static uint32_t read_u32(CUdeviceptr d)
{
    uint32_t v = 0;
    R(cuStreamSynchronize(s));
    R(cuMemcpyDtoH(&v, d, 4));
    return v;
}

static void case_sizes(int mode)   /* 0 update, 1 setter, 2 extra, 3 rotate, 4 update_extra */
{
    CUfunction f = adv_fn(mod, "bytes_hash");
    CUdeviceptr out[3];
    for (int i = 0; i < 3; i++) MUST(cuMemAlloc(&out[i], 4));
    hargs h, rot[3];
    hargs_init(&h, out[0], 1);
    for (int i = 0; i < 3; i++) hargs_init(&rot[i], out[i], 2 + i);
    void *kp[7];
    hargs_kp(mode == 3 ? &rot[0] : &h, kp);
    unsigned char buf0[HBYTES];
    size_t size0 = HBYTES;
    void *extra0[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf0, CU_LAUNCH_PARAM_BUFFER_SIZE, &size0,
                       CU_LAUNCH_PARAM_END };
    hargs_buf(&h, buf0, 0);
    CUgraph g;
    CUgraphNode node;
    capture_one(f, mode >= 2 && mode != 3 ? NULL : kp, mode >= 2 && mode != 3 ? extra0 : NULL, 1, &g,
                &node);
    CUgraphExec exec;
    MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
    int good = 0;
    for (int st = 0; st < STEPS; st++) {
        hargs *cur = &h;
        if (mode == 3) {
            cur = &rot[st % 3];
        } else {
            hargs_step(&h, st);
        }
        hargs_kp(cur, kp);
        unsigned char buf[HBYTES];
        size_t size = HBYTES;
        /* the size before the pointer, and entries after the end */
        void *extra[] = { CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_BUFFER_POINTER, buf,
                          CU_LAUNCH_PARAM_END, (void *)(uintptr_t)0x77, NULL };
        if (mode == 0 || mode == 3) {
            recapture_update(exec, f, kp, NULL, 1);
        } else if (mode == 4) {
            hargs_buf(cur, buf, st);
            recapture_update(exec, f, NULL, extra, 1);
        } else if (mode == 1) {
            ADV_SET_KERNEL(exec, node, f, kp);
        } else {
            hargs_buf(cur, buf, st);
            CUDA_KERNEL_NODE_PARAMS p = adv_kernel_params(f, NULL);
            p.extra = extra;
            R(cuGraphExecKernelNodeSetParams(exec, node, &p));
        }
        R(cuMemsetD32(cur->out, 0, 1));
        R(cuGraphLaunch(exec, s));
        uint32_t got = read_u32(cur->out), want = host_hash(cur);
        if (got == want) good++;
        else fprintf(stderr, "step %d: got %08x, want %08x\n", st, got, want);
    }
    adv_check("steps whose arguments arrived", good == STEPS, "%d of %d", good, STEPS);
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    for (int i = 0; i < 3; i++) R(cuMemFree(out[i]));
}

/* ------------------------------------------------------------ padding */

static void case_padding(void)
{
    CUfunction f = adv_fn(mod, "pad_sum");
    CUdeviceptr out;
    MUST(cuMemAlloc(&out, 4));
    unsigned char sbuf[16];
    uint8_t a = 5;
    uint64_t b = 0x100000007ull;
    void *kp[] = { &out, sbuf };
    memset(sbuf, 0, sizeof sbuf);
    sbuf[0] = a;
    memcpy(sbuf + 8, &b, 8);
    CUgraph g;
    CUgraphNode node;
    capture_one(f, kp, NULL, 1, &g, &node);
    CUgraphExec exec;
    MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
    int good = 0;
    for (int st = 0; st < STEPS; st++) {
        if (st % 3 == 1) a = (uint8_t)(a + 3);
        if (st % 5 == 2) b += 0x100000001ull * (uint64_t)st;
        memset(sbuf + 1, 0x30 + st, 7);            /* the padding: never read */
        sbuf[0] = a;
        memcpy(sbuf + 8, &b, 8);
        if (st % 2) {
            recapture_update(exec, f, kp, NULL, 1);
        } else {
            ADV_SET_KERNEL(exec, node, f, kp);
        }
        R(cuGraphLaunch(exec, s));
        uint32_t want = a * 1000003u + (uint32_t)b + (uint32_t)(b >> 32);
        good += read_u32(out) == want;
    }
    adv_check("steps with the struct's meaningful bytes", good == STEPS, "%d of %d", good, STEPS);
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    R(cuMemFree(out));
}

/* ------------------------------------------------------------ extra_size */

static void case_extra_size(void)
{
    CUfunction f = adv_fn(mod, "bytes_hash");
    CUdeviceptr out;
    MUST(cuMemAlloc(&out, 4));
    hargs h;
    hargs_init(&h, out, 9);
    void *kp[7];
    hargs_kp(&h, kp);
    CUgraph g;
    CUgraphNode node;
    capture_one(f, kp, NULL, 1, &g, &node);
    CUgraphExec exec;
    MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
    unsigned char buf[HBYTES + 8];
    hargs_buf(&h, buf, 0);
    memset(buf + HBYTES, 0, 8);
    size_t sizes[] = { HBYTES + 8, HBYTES - 1, HBYTES };
    for (int k = 0; k < 3; k++) {
        void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &sizes[k],
                          CU_LAUNCH_PARAM_END };
        CUDA_KERNEL_NODE_PARAMS p = adv_kernel_params(f, NULL);
        p.extra = extra;
        R(cuGraphExecKernelNodeSetParams(exec, node, &p));
        R(cuGraphLaunch(exec, s));
        uint32_t got = read_u32(out);
        adv_check("result after the setter", got == host_hash(&h), "size %zu", sizes[k]);
    }
    /* the same with a re-capture (the launch itself is refused) */
    for (int k = 0; k < 2; k++) {
        void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &sizes[k],
                          CU_LAUNCH_PARAM_END };
        CUgraph g2;
        CUgraphNode n2 = NULL;
        size_t nn = 1;
        MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        R(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra));
        R(cuStreamEndCapture(s, &g2));
        printf("capture with size %zu: status after the end ok\n", sizes[k]);
        if (g2) {
            R(cuGraphGetNodes(g2, &n2, &nn));
            R(cuGraphDestroy(g2));
        }
    }
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    R(cuMemFree(out));
}

/* ------------------------------------------------------------ noparams */

static void case_noparams(void)
{
    CUfunction f = adv_fn(mod, "no_args"), rd = adv_fn(mod, "no_args_read");
    CUdeviceptr out;
    MUST(cuMemAlloc(&out, 4));
    CUgraph g;
    CUgraphNode node;
    capture_one(f, NULL, NULL, 1, &g, &node);
    CUgraphExec exec;
    MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
    uint32_t want = 0;
    int good = 0;
    for (int st = 0; st < STEPS; st++) {
        unsigned grid = st % 5 == 4 ? 3 : 1;
        if (st % 2) {
            recapture_update(exec, f, NULL, NULL, grid);
        } else {
            CUDA_KERNEL_NODE_PARAMS p = adv_kernel_params(f, NULL);
            p.gridDimX = grid;
            R(cuGraphExecKernelNodeSetParams(exec, node, &p));
        }
        R(cuGraphLaunch(exec, s));
        want += grid;
        ADV_LAUNCH(rd, s, &out);
        good += read_u32(out) == want;
    }
    adv_check("steps with the right block count", good == STEPS, "%d of %d", good, STEPS);
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    R(cuMemFree(out));
}

/* ------------------------------------------------------------ kernel_ctx */

static void case_kernel_ctx(void)
{
    char path[PATH_MAX + 64];
    adv_path("adv_kernels.so", path, sizeof path);
    CUlibrary lib;
    CUkernel k;
    MUST(cuLibraryLoadFromFile(&lib, path, NULL, NULL, 0, NULL, NULL, 0));
    MUST(cuLibraryGetKernel(&k, lib, "u64_store"));
    CUdevice dev;
    MUST(cuDeviceGet(&dev, 0));
    CUcontext cb;
    MUST(cuCtxCreate(&cb, NULL, 0, dev));   /* current: B */
    CUstream sb;
    MUST(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
    CUdeviceptr outb;
    MUST(cuMemAlloc(&outb, 8));
    MUST(cuCtxSetCurrent(ctx));      /* A */
    CUdeviceptr out;
    MUST(cuMemAlloc(&out, 8));
    uint64_t v = 11;
    void *kp[] = { &out, &v };
    void *kpb[] = { &outb, &v };
    CUgraph ga, gb;
    CUgraphNode na;
    size_t n = 1;
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    R(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, s, kp, NULL));
    MUST(cuStreamEndCapture(s, &ga));
    MUST(cuGraphGetNodes(ga, &na, &n));
    CUgraphExec exec;
    MUST(cuGraphInstantiateWithFlags(&exec, ga, 0));
    CUfunction fa;
    MUST(cuKernelGetFunction(&fa, k));
    int good = 0;
    for (int st = 0; st < 12; st++) {
        CUgraphExecUpdateResultInfo info;
        v = 100u + (uint64_t)(st % 3);
        if (st % 3 == 0) {
            /* B's capture of the same kernel, arguments, dimensions: another context */
            MUST(cuStreamBeginCapture(sb, CU_STREAM_CAPTURE_MODE_GLOBAL));
            kpb[0] = &out;                 /* (the same bytes as A's graph) */
            R(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, sb, kpb, NULL));
            MUST(cuStreamEndCapture(sb, &gb));
            CUresult r = R(cuGraphExecUpdate(exec, gb, &info));
            printf("step %d: update from context B: %s, result %d\n", st, adv_err(r),
                   r == CUDA_SUCCESS ? 0 : (int)info.result);
            R(cuGraphDestroy(gb));
        }
        if (st % 3 == 1) {
            MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
            R(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, s, kp, NULL));
            CUgraph g2;
            MUST(cuStreamEndCapture(s, &g2));
            R(cuGraphExecUpdate(exec, g2, &info));
            R(cuGraphDestroy(g2));
        }
        if (st % 3 == 2) {
            ADV_SET_KERNEL(exec, na, fa, kp);
        }
        R(cuMemsetD32(out, 0, 2));
        R(cuGraphLaunch(exec, s));
        uint32_t w[2] = { 0, 0 };
        R(cuStreamSynchronize(s));
        R(cuMemcpyDtoH(w, out, 8));
        /* a refused update leaves the exec as it was: the value of the
         * step before (st % 3 == 0 follows a setter of 100 + 2) */
        uint64_t want = st % 3 == 0 ? (st ? 102u : 11u) : v;
        good += w[0] == (uint32_t)want && w[1] == 0;
    }
    adv_check("steps with the right value", good == 12, "%d of 12", good);
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(ga));
    R(cuMemFree(out));
    MUST(cuCtxSetCurrent(cb));
    R(cuMemFree(outb));
    R(cuStreamDestroy(sb));
    MUST(cuCtxSetCurrent(ctx));
    R(cuCtxDestroy(cb));
    MUST(cuCtxSetCurrent(ctx));
    R(cuLibraryUnload(lib));
}

/* ------------------------------------------------------------ scalar_ptr */

static void case_scalar_ptr(void)
{
    CUfunction f = adv_fn(mod, "u64_store");
    CUdeviceptr out[3], tgt[3];
    for (int i = 0; i < 3; i++) {
        MUST(cuMemAlloc(&out[i], 8));
        MUST(cuMemAlloc(&tgt[i], 4096));
    }
    CUdeviceptr o = out[0];
    uint64_t v = tgt[0] + 64;
    void *kp[] = { &o, &v };
    CUgraph g;
    CUgraphNode node;
    capture_one(f, kp, NULL, 1, &g, &node);
    CUgraphExec exec;
    MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
    int good = 0;
    for (int st = 0; st < SP_STEPS; st++) {
        o = out[st % 3];
        v = tgt[(st / 3) % 3 == 2 ? (st + 1) % 3 : st % 3] + 64;   /* mostly with out, not always */
        ADV_SET_KERNEL(exec, node, f, kp);
        R(cuMemsetD32(o, 0, 2));
        R(cuGraphLaunch(exec, s));
        uint64_t w = 0;
        R(cuStreamSynchronize(s));
        R(cuMemcpyDtoH(&w, o, 8));
        if (w == v) good++;
        else fprintf(stderr, "step %d: got %llx, want %llx\n", st, (unsigned long long)w,
                     (unsigned long long)v);
    }
    adv_check("steps whose integer arrived", good == SP_STEPS, "%d of %d", good, SP_STEPS);
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    for (int i = 0; i < 3; i++) {
        R(cuMemFree(out[i]));
        R(cuMemFree(tgt[i]));
    }
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "sizes_update", "sizes_setter", "sizes_extra",
                                         "sizes_rotate", "padding", "extra_size", "noparams",
                                         "kernel_ctx", "scalar_ptr", "sizes_update_extra", NULL };
    int c = adv_case(argc, argv, names);
    adv_open(&ctx, &mod);
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    switch (c) {
    case 0: case 1: case 2: case 3: case_sizes(c); break;
    case 4: case_padding(); break;
    case 5: case_extra_size(); break;
    case 6: case_noparams(); break;
    case 7: case_kernel_ctx(); break;
    case 8: case_scalar_ptr(); break;
    case 9: case_sizes(4); break;
    }
    R(cuStreamDestroy(s));
    return adv_finish();
}
