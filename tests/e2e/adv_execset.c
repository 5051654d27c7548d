/*
 * tests/e2e/adv_execset.c: round 8, valid programs against the exec-side
 * calls of an exec that skip_profiled serves with exec variants (more driver
 * execs of the program's exec, one chosen per launch). Every case first
 * points a mad_u32 exec (acc = acc * 3 + in) at three inputs in turn
 * (cuGraphExecKernelNodeSetParams, cuGraphLaunch), 12 steps on stream s1, so
 * that the variants are bought (at once under the runner's free-variant
 * costs), then:
 *   upload         each step holds s1 with a slow host function, points the
 *                  exec at the next input, launches it on s1, uploads it on
 *                  s2 (cuGraphUpload: "ordered behind ... any previous
 *                  launches of hGraphExec") and copies acc on s2 behind the
 *                  upload: the copy must see the launch's result;
 *   capture_enable the exec is launched on s1 and s2 in turn (so its
 *                  launches are ordered by the library across streams), then
 *                  cuGraphNodeSetEnabled (the variants are given up) and a
 *                  cuGraphLaunch into a capture on a third stream: the
 *                  launch gets the driver's answer (the emulated driver
 *                  refuses a captured graph launch, a real one makes a child
 *                  graph node), not an error of the library's own making;
 *                  then more launches on s1;
 *   capture_grid   the same, the variants given up by a grid change (the
 *                  exec goes back to profiling);
 *   setters        a chain memset (out[k] = v) -> add_u32 (out[k] += inc) ->
 *                  memcpy (cp[k] = out[k]); each step points all three nodes
 *                  at set k by their exec setters, changes the memset value
 *                  every 5th step (no variant carries it), and every 7th step
 *                  cuGraphExecUpdate from the original graph restores the
 *                  instantiation values; every step's cp[k] is checked;
 *   enable         a chain fill_u32 (out[k] = v + i) -> add_u32 (out[k] +=
 *                  1000) rotating among three outputs; the add node is
 *                  disabled at step 10 (cuGraphNodeSetEnabled) and enabled
 *                  again at step 20.
 * Checks: the values against the host's model.
 * Usage: adv_execset upload|capture_enable|capture_grid|setters|enable
 */
#include "adv_common.h"

#define N 256u
#define WARM 12

static CUcontext ctx;
static CUmodule mod;
static CUstream s1, s2, s3;
static CUfunction mad, add, fill;
static CUdeviceptr in[3], acc;
static uint32_t hin[3][N], model[N];
static uint64_t n = N;
static CUgraph g;
static CUgraphNode node;
static CUgraphExec exec;

static void CUDA_CB slow_host(void *arg)
{
    (void)arg;
    adv_sleep_us(20000);
}

static void setup(void)
{
    mad = adv_fn(mod, "mad_u32");
    add = adv_fn(mod, "add_u32");
    fill = adv_fn(mod, "fill_u32");
    MUST(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&s3, CU_STREAM_NON_BLOCKING));
}

/* The mad_u32 exec over three inputs, warmed up on s1 (variants bought). */
static void mad_exec(void)
{
    adv_mad_buffers(N, in, &hin[0][0], &acc, model);
    void *args[] = { &in[0], &acc, &n };
    exec = adv_one_node_exec(s1, mad, args, &g, &node);
}

/* Points the exec at input k and launches it on t; the model follows. */
static void mad_step(int k, CUstream t)
{
    void *args[] = { &in[k], &acc, &n };
    ADV_SET_KERNEL(exec, node, mad, args);
    if (R(cuGraphLaunch(exec, t)) == CUDA_SUCCESS)
        for (uint32_t i = 0; i < N; i++) model[i] = model[i] * 3u + hin[k][i];
}

static void warm(void)
{
    for (int i = 0; i < WARM; i++) mad_step(i % 3, s1);
    MUST(cuStreamSynchronize(s1));
}

static void upload(void)
{
    mad_exec();
    warm();
    CUdeviceptr snap;
    MUST(cuMemAlloc(&snap, N * 4));
    int good = 0;
    for (int st = 0; st < 9; st++) {
        R(cuLaunchHostFunc(s1, slow_host, NULL));
        mad_step(st % 3, s1);
        R(cuGraphUpload(exec, s2));
        R(cuMemcpyDtoDAsync(snap, acc, N * 4, s2));
        MUST(cuStreamSynchronize(s2));
        uint32_t *got = adv_read(snap, N);
        good += got && memcmp(got, model, sizeof model) == 0;
        free(got);
        MUST(cuStreamSynchronize(s1));
    }
    adv_check("copies behind the upload that saw the launch", good == 9, "%d of 9", good);
    adv_check_words("accumulator", acc, model, N);
}

static void capture(int grid)
{
    mad_exec();
    warm();
    for (int i = 0; i < 6; i++) mad_step(i % 3, i % 2 ? s2 : s1);
    if (!grid) {
        R(cuGraphNodeSetEnabled(exec, node, 1));
    } else {
        void *a[] = { &in[1], &acc, &n };
        CUDA_KERNEL_NODE_PARAMS kp = adv_kernel_params(mad, a);
        kp.gridDimX = 2;        /* no variant carries it (mad_u32 runs once per launch) */
        R(cuGraphExecKernelNodeSetParams(exec, node, &kp));
    }
    MUST(cuStreamBeginCapture(s3, CU_STREAM_CAPTURE_MODE_RELAXED));
    R(cuGraphLaunch(exec, s3));     /* captured: runs only if the captured graph is launched */
    printf("capture status after the captured launch: %s\n", adv_capture_status(s3));
    CUgraph cg = NULL;
    if (R(cuStreamEndCapture(s3, &cg)) == CUDA_SUCCESS && cg) R(cuGraphDestroy(cg));
    printf("captured graph: %s\n", cg ? "yes" : "none");
    for (int i = 0; i < 6; i++) mad_step(i % 3, i % 2 ? s1 : s3);
    MUST(cuCtxSynchronize());
    adv_check_words("accumulator", acc, model, N);
}

static void capture_enable(void) { capture(0); }
static void capture_grid(void) { capture(1); }

/* The setters case's node parameters for set k. */
static CUdeviceptr out[3], cp[3];

static CUDA_MEMSET_NODE_PARAMS memset_of(int k, uint32_t v)
{
    return (CUDA_MEMSET_NODE_PARAMS){ .dst = out[k], .pitch = 0, .value = v, .elementSize = 4,
                                      .width = N, .height = 1 };
}

static CUDA_MEMCPY3D memcpy_of(int k) { return adv_copy_1d(cp[k], out[k], N * 4); }

static void setters(void)
{
    for (int k = 0; k < 3; k++) {
        MUST(cuMemAlloc(&out[k], N * 4));
        MUST(cuMemAlloc(&cp[k], N * 4));
        MUST(cuMemsetD32(out[k], 0, N));
        MUST(cuMemsetD32(cp[k], 0, N));
    }
    CUgraphNode nd[3];
    uint32_t v0 = 5, inc0 = 3, inc = inc0;
    void *aa[] = { &out[0], &inc, &n };
    CUDA_MEMSET_NODE_PARAMS ms = memset_of(0, v0);
    CUDA_KERNEL_NODE_PARAMS kp = adv_kernel_params(add, aa);
    CUDA_MEMCPY3D mc = memcpy_of(0);
    MUST(cuGraphCreate(&g, 0));
    MUST(cuGraphAddMemsetNode(&nd[0], g, NULL, 0, &ms, ctx));
    MUST(cuGraphAddKernelNode(&nd[1], g, &nd[0], 1, &kp));
    MUST(cuGraphAddMemcpyNode(&nd[2], g, &nd[1], 1, &mc, ctx));
    MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
    /* what the exec holds: set k, memset value v, add increment */
    int ek = 0;
    uint32_t ev = v0, einc = inc0, hout[3][N], hcp[3][N];
    memset(hout, 0, sizeof hout);
    memset(hcp, 0, sizeof hcp);
    int good = 0, steps = 40;
    for (int st = 0; st < steps; st++) {
        if (st % 7 == 6) {
            CUgraphExecUpdateResultInfo info;
            if (R(cuGraphExecUpdate(exec, g, &info)) == CUDA_SUCCESS) {
                ek = 0;
                ev = v0;
                einc = inc0;
            }
        } else {
            int k = st % 3;
            uint32_t v = st % 5 == 4 ? 100u + (uint32_t)st : ev;
            CUDA_MEMSET_NODE_PARAMS m = memset_of(k, v);
            CUDA_MEMCPY3D c = memcpy_of(k);
            inc = 10u + (uint32_t)k;
            void *a[] = { &out[k], &inc, &n };
            CUDA_KERNEL_NODE_PARAMS p = adv_kernel_params(add, a);
            int ok = R(cuGraphExecMemsetNodeSetParams(exec, nd[0], &m, ctx)) == CUDA_SUCCESS;
            ok &= R(cuGraphExecKernelNodeSetParams(exec, nd[1], &p)) == CUDA_SUCCESS;
            ok &= R(cuGraphExecMemcpyNodeSetParams(exec, nd[2], &c, ctx)) == CUDA_SUCCESS;
            if (ok) {
                ek = k;
                ev = v;
                einc = inc;
            }
        }
        if (R(cuGraphLaunch(exec, s1)) == CUDA_SUCCESS)
            for (uint32_t i = 0; i < N; i++) hcp[ek][i] = hout[ek][i] = ev + einc;
        MUST(cuStreamSynchronize(s1));
        uint32_t *got = adv_read(cp[ek], N);
        good += got && memcmp(got, hcp[ek], sizeof hcp[ek]) == 0;
        free(got);
    }
    adv_check("steps whose copy held the step's values", good == steps, "%d of %d", good, steps);
    for (int k = 0; k < 3; k++) {
        adv_check_words("out", out[k], hout[k], N);
        adv_check_words("cp", cp[k], hcp[k], N);
    }
}

static void enable(void)
{
    CUdeviceptr o[3];
    uint32_t ho[3][N];
    for (int k = 0; k < 3; k++) {
        MUST(cuMemAlloc(&o[k], N * 4));
        MUST(cuMemsetD32(o[k], 0, N));
    }
    memset(ho, 0, sizeof ho);
    uint32_t v = 1, inc = 1000;
    CUgraphNode nd[2];
    void *fa[] = { &o[0], &v, &n }, *ab[] = { &o[0], &inc, &n };
    CUDA_KERNEL_NODE_PARAMS pf = adv_kernel_params(fill, fa), pa = adv_kernel_params(add, ab);
    MUST(cuGraphCreate(&g, 0));
    MUST(cuGraphAddKernelNode(&nd[0], g, NULL, 0, &pf));
    MUST(cuGraphAddKernelNode(&nd[1], g, &nd[0], 1, &pa));
    MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
    int enabled = 1;
    for (int st = 0; st < 30; st++) {
        int k = st % 3;
        v = 7u * (uint32_t)st;
        void *x[] = { &o[k], &v, &n }, *y[] = { &o[k], &inc, &n };
        CUDA_KERNEL_NODE_PARAMS p1 = adv_kernel_params(fill, x), p2 = adv_kernel_params(add, y);
        int ok = R(cuGraphExecKernelNodeSetParams(exec, nd[0], &p1)) == CUDA_SUCCESS;
        ok &= R(cuGraphExecKernelNodeSetParams(exec, nd[1], &p2)) == CUDA_SUCCESS;
        if (st == 10 && R(cuGraphNodeSetEnabled(exec, nd[1], 0)) == CUDA_SUCCESS) enabled = 0;
        if (st == 20 && R(cuGraphNodeSetEnabled(exec, nd[1], 1)) == CUDA_SUCCESS) enabled = 1;
        if (ok && R(cuGraphLaunch(exec, st % 2 ? s2 : s1)) == CUDA_SUCCESS)
            for (uint32_t i = 0; i < N; i++) ho[k][i] = v + i + (enabled ? inc : 0);
        MUST(cuCtxSynchronize());
    }
    for (int k = 0; k < 3; k++) adv_check_words("out", o[k], ho[k], N);
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "upload", "capture_enable", "capture_grid", "setters",
                                         "enable", NULL };
    static void (*const fns[])(void) = { upload, capture_enable, capture_grid, setters, enable };
    int c = adv_case(argc, argv, names);
    adv_open(&ctx, &mod);
    setup();
    fns[c]();
    return adv_finish();
}
