/*
 * adv_multidev.c: round 31, graphs that span two devices. One process
 * captures a single graph across two GPUs: the capture on device 0's stream
 * (context A, its primary) forks by an event into a stream of device 1's
 * context (B, its primary), launches kernels there, copies between the
 * devices (cuMemcpyPeerAsync, and cuMemcpyAsync with unified addressing)
 * and joins back. Each step re-captures (temporaries allocated before the
 * capture and freed after the launch, on both devices),
 * cuGraphExecUpdate_v2's and launches; peer access is enabled both ways.
 * The kernels are CUkernels of one library (cuLibraryLoadFromFile), each
 * launched as a CUfunction cast on the streams of both contexts.
 *
 * The results are checked against a host model of the graph the exec holds:
 * each step's graph is a list of operations (set, add, mad, copy), the
 * exec's list is replaced when the update is accepted (a refusal is printed
 * and the exec keeps its list), and a launch applies the exec's list to the
 * host copies of the buffers. Every third step repeats the step before (a
 * skip may be right there).
 *
 * Cases:
 *   temps       temporaries: device 0's moves between two addresses (a new
 *               one allocated before the last is freed), device 1's is
 *               allocated and freed within the step (the same address each
 *               step under the library); values change at some steps;
 *   temps_b     the same with the devices' roles swapped;
 *   peer_arg    a kernel on device 1 whose pointer argument is device 0
 *               memory (two buffers in turn) and a mad on device 1 reading a
 *               placed temporary of device 0;
 *   kernel_both one CUkernel launched on device 0's stream, then on device
 *               1's stream (steps 0-2, 6-8) or on a second stream of device
 *               0 (3-5, 9-11), then on device 0's again: the same topology
 *               and arguments (the driver refuses the updates that change
 *               the middle node's context);
 *   copies      peer copies whose sizes change (some steps) and whose
 *               direction changes (others: refused by the driver);
 *   variants    rotating inputs on both devices (three on device 0, two on
 *               device 1), the exec launched on device 0's stream or on
 *               device 1's in turn (skip_profiled serves the states with
 *               variants and must order their launches across the two
 *               devices' streams);
 *   variants_upload  the same with cuGraphUpload on the launch stream
 *               before each launch;
 *   threads     two threads, each with its own streams, buffers and exec:
 *               thread 0's capture begins on device 0's stream and forks to
 *               device 1's, thread 1's the other way round (thread-local
 *               capture mode, contexts made current as each goes, as
 *               cudaSetDevice does), temporaries of both devices each step;
 *   pressure    (run with 256 MiB devices) each step a large temporary of
 *               device 1 of a size that grows, device 0 idle; then most of
 *               device 1 in one cuMemAlloc: the arenas must give device 1's
 *               chunks back.
 * Usage: adv_multidev CASE
 */
#include "adv_common.h"

#define N 256
#define STEPS 12
#define MIB ((size_t)1 << 20)

static CUcontext ca, cb;
static CUlibrary lib;
static CUfunction k_add, k_mad;         /* CUkernels, cast (launched in each stream's context) */
/* each thread's (`threads` runs two) */
static __thread CUstream sa, sa2, sb;
static __thread CUevent ea, ea2, eb;    /* ea, ea2: context A's; eb: B's */
static __thread CUdeviceptr accA, accA2, accB, accB2;
static __thread CUgraphExec exec;
static __thread CUstream origin;        /* the stream the capture begins on (sa, or sb) */
static __thread CUstreamCaptureMode capmode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* ------------------------------------------------------------ the model */

#define NBUF 12
static __thread struct { CUdeviceptr p; uint32_t h[N]; } buf[NBUF];
static __thread int nbuf;

static void reg(CUdeviceptr p) { buf[nbuf++].p = p; }

/* The host copy of device address x (a word of a registered buffer); a
 * temporary's slot is named by its index (tmp_set). */
static uint32_t *mirror(CUdeviceptr x)
{
    for (int i = nbuf - 1; i >= 0; i--)
        if (x >= buf[i].p && x < buf[i].p + N * 4) return &buf[i].h[(x - buf[i].p) / 4];
    printf("model: unknown buffer\n");
    exit(2);
}

enum { OP_SET, OP_ADD, OP_MAD, OP_COPY };
typedef struct { int kind; CUdeviceptr dst, src; uint32_t v; uint64_t n; } op;
static __thread op want[32], have[32];
static __thread int nwant, nhave;

static void m_run(const op *o)
{
    uint32_t *d = mirror(o->dst), tmp[N];
    if (o->kind == OP_MAD || o->kind == OP_COPY) memcpy(tmp, mirror(o->src), o->n * 4);
    for (uint64_t i = 0; i < o->n; i++) {
        switch (o->kind) {
        case OP_SET: d[i] = o->v; break;
        case OP_ADD: d[i] += o->v; break;
        case OP_MAD: d[i] = d[i] * 3u + tmp[i]; break;
        default: d[i] = tmp[i]; break;
        }
    }
}

static void add_op(int kind, CUdeviceptr dst, CUdeviceptr src, uint32_t v, uint64_t n)
{
    want[nwant++] = (op){ kind, dst, src, v, n };
}

/* ------------------------------------------------------------ the operations */

static void on(CUcontext c) { MUST(cuCtxSetCurrent(c)); }
static CUcontext ctx_of(CUstream st) { return st == sb ? cb : ca; }

static void e_set(CUstream st, CUdeviceptr p, uint32_t v, uint64_t n)
{
    on(ctx_of(st));
    R(cuMemsetD32Async(p, v, n, st));
    add_op(OP_SET, p, 0, v, n);
}
static void e_add(CUstream st, CUdeviceptr p, uint32_t v, uint64_t n)
{
    void *a[] = { &p, &v, &n };
    on(ctx_of(st));
    R(cuLaunchKernel(k_add, 1, 1, 1, 1, 1, 1, 0, st, a, NULL));
    add_op(OP_ADD, p, 0, v, n);
}
static void e_mad(CUstream st, CUdeviceptr in, CUdeviceptr acc, uint64_t n)
{
    void *a[] = { &in, &acc, &n };
    on(ctx_of(st));
    R(cuLaunchKernel(k_mad, 1, 1, 1, 1, 1, 1, 0, st, a, NULL));
    add_op(OP_MAD, acc, in, 0, n);
}
/* dst and src of the devices dc and sc (0: A, 1: B): cuMemcpyPeerAsync if
 * peer, else cuMemcpyAsync (unified addressing). */
static void e_copy(CUstream st, CUdeviceptr dst, int dc, CUdeviceptr src, int sc, uint64_t n, int peer)
{
    on(ctx_of(st));
    if (peer) R(cuMemcpyPeerAsync(dst, dc ? cb : ca, src, sc ? cb : ca, n * 4, st));
    else R(cuMemcpyAsync(dst, src, n * 4, st));
    add_op(OP_COPY, dst, src, 0, n);
}
/* from's work so far joins `to` (event ev, of from's context) */
static void e_fork(CUstream from, CUevent ev, CUstream to)
{
    on(ctx_of(from));
    R(cuEventRecord(ev, from));
    on(ctx_of(to));
    R(cuStreamWaitEvent(to, ev, 0));
}

static void begin(void)
{
    on(ctx_of(origin));
    MUST(cuStreamBeginCapture(origin, capmode));
    nwant = 0;
}

/* Ends step k's capture, instantiates or updates, launches on `ls`, checks
 * the persistent buffers. */
static int upload;                      /* variants_upload: cuGraphUpload before each launch */

static void finish(int k, CUstream ls)
{
    CUgraph g;
    char name[64];
    on(ctx_of(origin));
    MUST(cuStreamEndCapture(origin, &g));
    int took = 1;
    if (!exec) {
        MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
    } else {
        CUgraphExecUpdateResultInfo info;
        if (R(cuGraphExecUpdate_v2(exec, g, &info)) != CUDA_SUCCESS) {
            fprintf(ADV_OUT, "step %d: update refused, result %d\n", k, (int)info.result);
            took = 0;
        }
    }
    if (took) memcpy(have, want, sizeof have), nhave = nwant;
    on(ctx_of(ls));
    if (upload) R(cuGraphUpload(exec, ls));
    R(cuGraphLaunch(exec, ls));
    R(cuStreamSynchronize(ls));
    for (int i = 0; i < nhave; i++) m_run(&have[i]);
    on(ca);
    static const char *const nm[] = { "accA", "accA2", "accB", "accB2" };
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "step%d_%s", k, nm[i]);
        adv_check_words(name, buf[i].p, buf[i].h, N);
    }
    MUST(cuGraphDestroy(g));
}


/* A temporary of context c, N words (registered in the model, slot `slot`). */
static CUdeviceptr tmp_alloc(CUcontext c, int slot)
{
    CUdeviceptr p;
    on(c);
    MUST(cuMemAlloc(&p, N * 4));
    buf[slot].p = p;
    return p;
}
static void tmp_free(CUcontext c, CUdeviceptr p)
{
    on(c);
    R(cuMemFree(p));
}

/* ------------------------------------------------------------ temps */

/* moving: the context whose temporary moves (the last step's is freed after
 * the new one is allocated); the other's is allocated and freed in the step */
static void case_temps(int b_moves)
{
    CUcontext cm = b_moves ? cb : ca, cs = b_moves ? ca : cb;
    CUdeviceptr old = 0;
    for (int k = 0; k < STEPS; k++) {
        CUdeviceptr tm = tmp_alloc(cm, 4);
        if (old) tmp_free(cm, old);
        CUdeviceptr ts = tmp_alloc(cs, 5);
        CUdeviceptr tA = b_moves ? ts : tm, tB = b_moves ? tm : ts;
        begin();
        e_set(sa, tA, adv_val(k, 3, 1, 5), N);
        e_add(sa, accA, 1, N);
        e_fork(sa, ea, sb);
        e_copy(sb, tB, 1, tA, 0, N, 1);
        e_mad(sb, tB, accB, N);
        e_add(sb, tB, adv_val(k, 4, 2, 9), N);
        e_copy(sb, accB2, 1, tB, 1, N, 0);
        e_fork(sb, eb, sa);
        e_copy(sa, accA2, 0, accB2, 1, N, 1);
        finish(k, sa);
        tmp_free(cs, ts);
        old = tm;
    }
    tmp_free(cm, old);
}

/* ------------------------------------------------------------ peer_arg */

static void case_peer_arg(void)
{
    for (int k = 0; k < STEPS; k++) {
        CUdeviceptr tA = tmp_alloc(ca, 4);
        begin();
        e_set(sa, tA, adv_val(k, 4, 3, 20), N);
        e_fork(sa, ea, sb);
        e_mad(sb, tA, accB, N);                               /* device 1 reads device 0's temporary */
        e_add(sb, adv_rep(k) / 3 % 2 ? accA2 : accA, 3, N);       /* device 1 writes device 0's memory */
        e_add(sb, accB2, adv_val(k, 5, 1, 2), N);
        e_fork(sb, eb, sa);
        e_add(sa, accA, 1, N);
        finish(k, sa);
        tmp_free(ca, tA);
    }
}

/* ------------------------------------------------------------ kernel_both */

static void case_kernel_both(void)
{
    for (int k = 0; k < STEPS; k++) {
        int on_b = k / 3 % 2 == 0;            /* switches where nothing else changes */
        CUstream sx = on_b ? sb : sa2;
        CUevent ex = on_b ? eb : ea2;
        begin();
        e_add(sa, accA, 11, N);
        e_fork(sa, ea, sx);
        e_add(sx, accB2, 13, N);
        e_fork(sx, ex, sa);
        e_add(sa, accB2, adv_val(k, 3, 1, 100), N);
        finish(k, sa);
    }
}

/* ------------------------------------------------------------ copies */

static void case_copies(void)
{
    for (int k = 0; k < STEPS; k++) {
        int r = adv_rep(k);
        uint64_t n = r / 2 % 2 ? N / 2 : N;    /* the size changes at steps 2, 4, ... */
        int back = r / 4 % 2;                 /* the direction at steps 4, 8 */
        begin();
        e_add(sa, accA, adv_val(k, 3, 0, 1), N);
        e_fork(sa, ea, sb);
        e_add(sb, accB, 2, N);
        if (back) e_copy(sb, accA2, 0, accB, 1, n, 1);
        else e_copy(sb, accB2, 1, accA, 0, n, 1);
        e_fork(sb, eb, sa);
        if (back) e_copy(sa, accB2, 1, accA, 0, N - n / 2, 0);
        else e_copy(sa, accA2, 0, accB, 1, N - n / 2, 0);
        finish(k, sa);
    }
}

/* ------------------------------------------------------------ variants */

static void case_variants(void)
{
    CUdeviceptr inA[3], inB[2];
    uint32_t h[N];
    for (int i = 0; i < 3; i++) {
        on(ca);
        MUST(cuMemAlloc(&inA[i], N * 4));
        for (int j = 0; j < N; j++) h[j] = 100u * (uint32_t)i + (uint32_t)j;
        MUST(cuMemcpyHtoD(inA[i], h, sizeof h));
        reg(inA[i]);
        memcpy(buf[nbuf - 1].h, h, sizeof h);
    }
    for (int i = 0; i < 2; i++) {
        on(cb);
        MUST(cuMemAlloc(&inB[i], N * 4));
        for (int j = 0; j < N; j++) h[j] = 7000u + 10u * (uint32_t)i + (uint32_t)j * 3u;
        MUST(cuMemcpyHtoD(inB[i], h, sizeof h));
        reg(inB[i]);
        memcpy(buf[nbuf - 1].h, h, sizeof h);
    }
    for (int k = 0; k < 2 * STEPS; k++) {
        begin();
        e_mad(sa, inA[k % 3], accA, N);
        e_fork(sa, ea, sb);
        e_mad(sb, inB[k / 2 % 2], accB, N);
        e_copy(sb, accB2, 1, accA, 0, N, 1);
        e_fork(sb, eb, sa);
        e_copy(sa, accA2, 0, accB, 1, N, 0);
        finish(k, k / 3 % 2 ? sb : sa);         /* the launch stream: device 0's or device 1's */
    }
    on(ca);
    for (int i = 0; i < 3; i++) R(cuMemFree(inA[i]));
    on(cb);
    for (int i = 0; i < 2; i++) R(cuMemFree(inB[i]));
}

/* ------------------------------------------------------------ pressure */

static void case_pressure(void)
{
    size_t total = 0, fr = 0;
    on(cb);
    MUST(cuMemGetInfo(&fr, &total));
    for (int k = 0; k < 8; k++) {
        /* a temporary of device 1: a fifth of the device and more each step */
        size_t bytes = total / 5 + (size_t)k * 4 * MIB;
        CUdeviceptr t;
        on(cb);
        if (R(cuMemAlloc(&t, bytes)) != CUDA_SUCCESS) continue;
        buf[5].p = t;
        begin();
        e_set(sa, accA2, adv_val(k, 3, 1, 4), N);
        e_fork(sa, ea, sb);
        e_copy(sb, t, 1, accA2, 0, N, 1);
        e_mad(sb, t, accB, N);
        e_fork(sb, eb, sa);
        e_add(sa, accA, 1, N);
        finish(k, sa);
        tmp_free(cb, t);
    }
    /* most of device 1, one block (device 0 idle) */
    CUdeviceptr big;
    on(cb);
    size_t want_b = total / 4 * 3;
    CUresult r = R(cuMemAlloc(&big, want_b));
    adv_check("big_alloc_device1", r == CUDA_SUCCESS, "%zu MiB of %zu MiB", want_b / MIB, total / MIB);
    if (r == CUDA_SUCCESS) R(cuMemFree(big));
}

/* ------------------------------------------------------------ threads */

/* Thread t's graph begins on device t's stream and forks to the other
 * device's, in thread-local capture mode, while the other thread captures
 * the other way round (each makes the contexts current as it goes). */
static void threads_body(int t)
{
    CUstream o = t ? sb : sa, x = t ? sa : sb;
    CUevent eo = t ? eb : ea, ex = t ? ea : eb;
    CUcontext co = t ? cb : ca, cx = t ? ca : cb;
    CUdeviceptr acc_o = t ? accB : accA, acc2_o = t ? accB2 : accA2;
    CUdeviceptr acc_x = t ? accA : accB, acc2_x = t ? accA2 : accB2;
    origin = o;
    capmode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    for (int k = 0; k < STEPS; k++) {
        CUdeviceptr to = tmp_alloc(co, 4), tx = tmp_alloc(cx, 5);
        begin();
        e_set(o, to, adv_val(k, 3, 1, 5u + 50u * (uint32_t)t), N);
        e_add(o, acc_o, 1, N);
        e_fork(o, eo, x);
        e_copy(x, tx, !t, to, t, N, 1);
        e_mad(x, tx, acc_x, N);
        e_copy(x, acc2_x, !t, tx, !t, N, 0);
        e_fork(x, ex, o);
        e_copy(o, acc2_o, t, acc2_x, !t, N, 1);
        finish(k, o);
        tmp_free(co, to);
        tmp_free(cx, tx);
    }
}

/* This thread's streams, events and persistent buffers (A's and B's). */
static void setup(void)
{
    for (int i = 0; i < 2; i++) {
        CUdeviceptr *a = i ? &accB : &accA, *a2 = i ? &accB2 : &accA2;
        on(i ? cb : ca);
        MUST(cuMemAlloc(a, N * 4));
        MUST(cuMemAlloc(a2, N * 4));
        MUST(cuMemsetD32(*a, 0, N));
        MUST(cuMemsetD32(*a2, 0, N));
    }
    reg(accA), reg(accA2), reg(accB), reg(accB2);
    nbuf = 6;                                      /* 4, 5: the temporaries' slots */
    on(cb);
    MUST(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
    MUST(cuEventCreate(&eb, CU_EVENT_DISABLE_TIMING));
    on(ca);
    MUST(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&sa2, CU_STREAM_NON_BLOCKING));
    MUST(cuEventCreate(&ea, CU_EVENT_DISABLE_TIMING));
    MUST(cuEventCreate(&ea2, CU_EVENT_DISABLE_TIMING));
    origin = sa;
}

static void teardown(void)
{
    on(ca);
    if (exec) R(cuGraphExecDestroy(exec));
    R(cuEventDestroy(ea));
    R(cuEventDestroy(ea2));
    R(cuStreamDestroy(sa));
    R(cuStreamDestroy(sa2));
    R(cuMemFree(accA));
    R(cuMemFree(accA2));
    on(cb);
    R(cuEventDestroy(eb));
    R(cuStreamDestroy(sb));
    R(cuMemFree(accB));
    R(cuMemFree(accB2));
}

static char *tout_buf[2];
static size_t tout_len[2];

static void *thread_main(void *arg)
{
    int t = (int)(intptr_t)arg;
    adv_tout = open_memstream(&tout_buf[t], &tout_len[t]);
    if (!adv_tout) {
        printf("open_memstream failed\n");
        exit(2);
    }
    setup();
    threads_body(t);
    teardown();
    fclose(adv_tout);
    adv_tout = NULL;
    return NULL;
}

static void case_threads(void)
{
    pthread_t th[2];
    for (int t = 0; t < 2; t++)
        if (pthread_create(&th[t], NULL, thread_main, (void *)(intptr_t)t) != 0) {
            printf("pthread_create failed\n");
            exit(2);
        }
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < 2; t++) {
        printf("thread %d:\n%s", t, tout_buf[t]);
        free(tout_buf[t]);
    }
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "temps", "temps_b", "peer_arg", "kernel_both", "copies",
                                         "variants", "variants_upload", "pressure", "threads", NULL };
    int which = adv_case(argc, argv, names);
    char path[PATH_MAX + 64];
    CUdevice d1;
    int can = 0;
    adv_open(&ca, NULL);
    MUST(cuDeviceGet(&d1, 1));
    MUST(cuDevicePrimaryCtxRetain(&cb, d1));
    MUST(cuDeviceCanAccessPeer(&can, 0, d1));
    if (!can) {
        printf("device 0 cannot access device 1\n");
        return 2;
    }
    adv_path("adv_kernels.so", path, sizeof path);
    MUST(cuLibraryLoadFromFile(&lib, path, NULL, NULL, 0, NULL, NULL, 0));
    MUST(cuLibraryGetKernel((CUkernel *)&k_add, lib, "add_u32"));
    MUST(cuLibraryGetKernel((CUkernel *)&k_mad, lib, "mad_u32"));
    on(ca);
    MUST(cuCtxEnablePeerAccess(cb, 0));
    on(cb);
    MUST(cuCtxEnablePeerAccess(ca, 0));
    if (which == 8) {
        case_threads();
    } else {
        setup();
        switch (which) {
        case 0: case_temps(0); break;
        case 1: case_temps(1); break;
        case 2: case_peer_arg(); break;
        case 3: case_kernel_both(); break;
        case 4: case_copies(); break;
        case 5: case_variants(); break;
        case 6: upload = 1, case_variants(); break;
        default: case_pressure(); break;
        }
        teardown();
    }
    on(ca);
    R(cuLibraryUnload(lib));
    return adv_finish();
}
