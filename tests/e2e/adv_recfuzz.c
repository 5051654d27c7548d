/*
 * tests/e2e/adv_recfuzz.c: issue 11, capture-time records under random
 * programs. The recorder must follow every valid way of building a graph by
 * capture, or notice that it did not; the cases of adv_record.c each try one
 * way, this program tries many at once, drawn from a seed.
 *
 * Three streams each own a buffer of 2 x N words (data, then aux). A step's
 * program is a list of operations, each on a stream taking part in the
 * capture (the origin, or one that joined it):
 *   add      add_u32(data, v) by cuLaunchKernel, grid (g, 1, 1);
 *   add_ex   the same by cuLaunchKernelEx with a priority attribute;
 *   add_coop the same by cuLaunchCooperativeKernel;
 *   add_aux  add_u32(aux, v);
 *   memset   cuMemsetD32Async(aux, v);
 *   copy     cuMemcpyDtoDAsync(data <- aux);
 *   fork     an event recorded on one stream, waited on by another (which
 *            joins the capture, or gains a dependency);
 *   capinfo  cuStreamGetCaptureInfo on a stream (the recorder may learn the
 *            handle of the stream's last node); when that node is an add,
 *            the program later changes its scalar in the graph with
 *            cuGraphKernelNodeSetParams on that handle.
 * Every stream that joined is joined back before the capture ends. Streams
 * touch only their own buffer, so the result does not depend on how the
 * streams interleave, and the host computes it.
 *
 * Each step re-captures the program, brings one exec to the graph
 * (cuGraphExecUpdate; instantiated again after a refusal, which is printed),
 * launches it and checks every buffer. From one step to the next the
 * program stays the same (an update that changes nothing: the library may
 * skip it) or changes one scalar, one grid, one priority, one memset value,
 * or all of it (a new topology, refused). Odd seeds instantiate with
 * CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY (a priority change is then
 * refused); seeds 3 mod 4 set stream 1's priority with cuStreamSetAttribute
 * at step STEPS / 2 (its kernels take it: the recorder must read those graphs
 * back).
 *
 * Mode explicit builds the same programs with the graph API instead
 * (cuGraphAddKernelNode, cuGraphAddNode for add_aux, the priority and
 * cooperative attributes by cuGraphKernelNodeSetAttribute,
 * cuGraphAddMemsetNode, cuGraphAddMemcpyNode, an empty node for capinfo,
 * dependencies as the streams would make them) and keeps the graph from step
 * to step: a change is made in place by cuGraphKernelNodeSetParams (every
 * other one by cuGraphNodeSetParams), cuGraphKernelNodeSetAttribute or
 * cuGraphMemsetNodeSetParams, and a new program rebuilds it. Every fifth step
 * a kernel's change reaches the exec by cuGraphExecKernelNodeSetParams
 * instead of cuGraphExecUpdate; every seventh the update is given a
 * cuGraphClone of the graph.
 *
 * Mode temps captures as mode capture, but a third of the operations (not
 * forks or capinfo) work through a temporary allocated before the capture
 * and freed after the launch: memset it to v, add v + 7, copy it to aux.
 * Where the temporaries land decides whether the graph changes: the
 * placement's promise. Seeds vary the allocation order, the call
 * (cuMemAlloc, cuMemAllocAsync) and the free (after a synchronization, at
 * once by cuMemFree, which synchronizes, or cuMemFreeAsync), with blocks of
 * other sizes allocated and freed among them.
 *
 * Mode rotate captures as mode capture, each step on the next of two (even
 * seeds) or three (odd) sets of the streams' buffers: pointer-only updates
 * that come back, which skip_profiled may serve with exec variants.
 *
 * Mode threads runs two programs at once on threads of their own: mode
 * capture with seed SEED and mode temps with SEED + 1, both capturing in
 * relaxed mode (so that one thread's allocations during the other's capture
 * are allowed); each thread's lines are printed after both ended.
 *
 * Mode wild captures as mode capture with calls the recorder does not model
 * among the operations: host functions (cuLaunchHostFunc, adding v to a
 * host sum the program checks) for half the add_aux, and for half the
 * capinfo a cuStreamUpdateCaptureDependencies that adds the dependencies the
 * stream has. Those graphs are read back: the older path, under the same
 * random programs.
 *
 * Mode extra (round 22) captures as mode capture, in global, thread-local
 * or relaxed mode (seed mod 3), with calls valid programs make that the
 * other modes do not: in half the programs a third of the operations (not
 * forks or capinfo) work through graph memory (cuMemAllocAsync, memset,
 * add v + 7, copy to aux, cuMemFreeAsync, all inside the capture), half the
 * memsets are cuMemsetD2D32Async of aux as two rows, half the captures go
 * into a graph made by cuGraphCreate (cuStreamBeginCaptureToGraph); the
 * exec is launched on a random stream, after a cuGraphUpload on a random
 * stream now and then, and a quarter of the steps launch it twice, changing
 * a named add's scalar with cuGraphExecKernelNodeSetParams between the
 * launches where the exec was instantiated from this step's graph; a step
 * ends with cuStreamSynchronize, cuEventSynchronize (then cuEventQuery) or
 * cuCtxSynchronize. An update of a graph that holds graph memory succeeds
 * only where the driver gave the same addresses, which is its choice: those
 * updates (and the instantiation after a refusal) are not printed or
 * digested. Mode threads_tl runs mode capture (SEED) and mode extra
 * (SEED + 1) on two threads, both capturing in thread-local mode (no
 * cuCtxSynchronize there).
 *
 * Mode unhooked (round 35's finding, at random) captures as mode capture
 * with calls the library does not hook beside calls that add no node: half
 * the copies are cuMemcpyBatchAsync_v2 of the first 16 x grid words (a
 * memcpy node; a change alters its size), half the memsets a
 * cuStreamBatchMemOp writing v to aux's first word (a batch memory
 * operation node; a change alters v), most of them with a kernel elsewhere
 * in the program made a zero-byte copy or a memset of no element (no node:
 * v even or odd), so that a record holding a node for those would hold as
 * many nodes as the driver's graph while lacking the unhooked ones. Every update that changes an unhooked node must reach
 * the driver.
 *
 * Run with and without the library (test_correctness.sh), the output must
 * be the same; with STABLEGRAPH_AUDIT_RECORDS=1 no record may differ from
 * the driver's graph.
 * Usage: adv_recfuzz SEED [capture|explicit|temps|rotate|threads|wild|extra|threads_tl|unhooked]
 */
#include "adv_common.h"

#ifndef ADV_RECFUZZ_PTDS
#define ADV_RECFUZZ_PTDS 0
#endif

#define N 64
#define NS 3
#define MAXOPS 32
#define STEPS 24

/* TEMP (mode temps only): memset a temporary to v, add v + 7, copy it to aux. */
/* HOSTFN, UPDDEPS (mode wild only): a host function adding v to the stream's
 * host sum; cuStreamUpdateCaptureDependencies adding the dependencies the
 * stream has (a no-op the recorder does not model). */
/* GMEM, MEMSET2D (mode extra only): TEMP through graph memory allocated and
 * freed inside the capture; MEMSET as a 2D memset of two rows. */
/* BCOPY, BWRITE, NOOP (mode unhooked only): COPY of 16 x grid words by
 * cuMemcpyBatchAsync_v2; aux[0] = v by cuStreamBatchMemOp; a copy of zero
 * bytes (v even) or a memset of zero elements (v odd). */
enum { ADD, ADD_EX, ADD_COOP, ADD_AUX, MEMSET, COPY, FORK, CAPINFO, NKINDS, TEMP = NKINDS, HOSTFN, UPDDEPS,
       GMEM, MEMSET2D, BCOPY, BWRITE, NOOP };

typedef struct op {
    int kind, s, s2;          /* s2: the stream that waits (fork) */
    uint32_t v;
    unsigned grid;
    int prio;
    int named;                /* capinfo: names the add before it on s */
    size_t tsize;             /* TEMP: the temporary's bytes */
} op;

typedef struct prog {
    op ops[MAXOPS];
    int n;
} prog;

static __thread uint64_t rng;
static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static CUfunction f_add;
static __thread CUstream st[NS];
static __thread CUevent ev[NS];
#define NSETS 3
static __thread CUdeviceptr sets[NSETS][NS];         /* mode rotate: step s uses set s % nsets */
static __thread uint32_t models[NSETS][NS][2 * N];
static __thread int nsets = 1;
static __thread CUdeviceptr *buf;          /* this step's buffers and their model */
static __thread uint32_t (*model)[2 * N];
static uint64_t nwords = N;
static __thread unsigned long long inst_flags;
static __thread int temps_mode, wild_mode, extra_mode, extra_threaded, unhooked_mode;
static __thread uint64_t hostsum[NS], hostmodel[NS];
static __thread struct hostarg { uint64_t *sum; uint32_t v; } hostargs[MAXOPS];
static __thread CUstreamCaptureMode capture_mode;

/* A random program: every operation on a stream that has joined. */
static void generate(prog *p)
{
    int joined[NS] = { 1, 0, 0 };
    int last_add[NS] = { 0, 0, 0 };   /* the stream's last operation was an add */
    p->n = 4 + (int)rnd(MAXOPS - 8);
    for (int i = 0; i < p->n; i++) {
        op *o = &p->ops[i];
        memset(o, 0, sizeof *o);
        do o->s = (int)rnd(NS); while (!joined[o->s]);
        o->kind = (int)rnd(NKINDS);
        o->v = 1 + rnd(1000);
        o->grid = 1 + rnd(3);
        o->prio = -(int)rnd(2);
        if (o->kind == FORK) {
            o->s2 = (o->s + 1 + (int)rnd(NS - 1)) % NS;
            joined[o->s2] = 1;
            last_add[o->s2] = 0;
        } else if (o->kind == CAPINFO) {
            o->named = last_add[o->s];
        }
        if (o->kind != CAPINFO && o->kind != FORK) last_add[o->s] = o->kind <= ADD_COOP;
    }
    for (int i = 0; temps_mode && i < p->n; i++) {   /* some operations use a temporary instead */
        op *o = &p->ops[i];
        if (o->kind == FORK || o->kind == CAPINFO || rnd(3)) continue;
        o->kind = TEMP;
        o->tsize = N * sizeof(uint32_t) + 256 * rnd(4);
    }
    for (int i = 0; wild_mode && i < p->n; i++) {    /* calls the recorder does not model */
        op *o = &p->ops[i];
        if (o->kind == ADD_AUX && rnd(2)) o->kind = HOSTFN;
        else if (o->kind == CAPINFO && rnd(2)) o->kind = UPDDEPS;
    }
    for (int i = 0; unhooked_mode && i < p->n; i++) {   /* unhooked calls, calls adding no node */
        op *o = &p->ops[i];
        if (o->kind == COPY && rnd(2)) o->kind = BCOPY;
        else if (o->kind == MEMSET && rnd(2)) o->kind = BWRITE;
        else continue;
        /* mostly with a call adding no node elsewhere: the counts of a record
         * that held a node for it would be the driver's */
        if (rnd(8) == 0) continue;
        for (int k = 0, j = (int)rnd((uint32_t)p->n); k < p->n; k++, j = (j + 1) % p->n)
            if (p->ops[j].kind <= ADD_AUX) {
                p->ops[j].kind = NOOP;
                break;
            }
    }
    int gmem = extra_mode && rnd(2);                 /* half the programs hold graph memory */
    for (int i = 0; extra_mode && i < p->n; i++) {   /* graph memory, 2D memsets */
        op *o = &p->ops[i];
        if (o->kind == FORK || o->kind == CAPINFO) continue;
        if (gmem && rnd(3) == 0) {
            o->kind = GMEM;
            o->tsize = N * sizeof(uint32_t) + 256 * rnd(4);
        } else if (o->kind == MEMSET && rnd(2)) {
            o->kind = MEMSET2D;
        }
    }
}

static void CUDA_CB host_add(void *arg)
{
    struct hostarg *a = arg;
    *a->sum += a->v;
}

enum { SAME = -1, NEW = -2 };

/* The next step's program: the same (SAME), one change (the index of the
 * operation changed: its scalar, grid, priority or memset value) or a new
 * one (NEW). */
static int mutate(prog *p)
{
    uint32_t r = rnd(100);
    int i = (int)rnd((uint32_t)p->n);
    op *o = &p->ops[i];
    if (r < 40) return SAME;
    if (r < 88) {                         /* one change, where the drawn operation has it */
        if (r < 60 && (o->kind <= ADD_AUX || o->kind == TEMP || o->kind == HOSTFN || o->kind == GMEM ||
                       o->kind == BWRITE || o->kind == NOOP))
            o->v += 1 + rnd(7);
        else if (r < 68 && (o->kind == ADD || o->kind == BCOPY)) o->grid = 1 + (o->grid % 3);
        else if (r < 76 && o->kind == ADD_EX) o->prio = o->prio ? 0 : -1;
        else if (o->kind == MEMSET || o->kind == MEMSET2D) o->v ^= 0x55;
        else return SAME;
        return i;
    }
    generate(p);
    return NEW;
}

static void launch(const op *o, CUdeviceptr *dst, uint32_t *v)
{
    void *args[] = { dst, v, &nwords };
    if (o->kind == ADD_EX) {
        CUlaunchAttribute at;
        memset(&at, 0, sizeof at);
        at.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
        at.value.priority = o->prio;
        CUlaunchConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.hStream = st[o->s];
        cfg.attrs = &at;
        cfg.numAttrs = 1;
        MUST(cuLaunchKernelEx(&cfg, f_add, args, NULL));
    } else if (o->kind == ADD_COOP) {
        MUST(cuLaunchCooperativeKernel(f_add, 1, 1, 1, 1, 1, 1, 0, st[o->s], args));
    } else {
        MUST(cuLaunchKernel(f_add, o->grid, 1, 1, 1, 1, 1, 0, st[o->s], args, NULL));
    }
}

/* The nodes a capturing stream's next node will depend on (*deps, valid
 * until the next call on the stream): cuStreamGetCaptureInfo. */
static size_t last_nodes(CUstream s, const CUgraphNode **deps)
{
    CUstreamCaptureStatus cs;
    size_t nd = 0;
    *deps = NULL;
    MUST(cuStreamGetCaptureInfo(s, &cs, NULL, NULL, deps, NULL, &nd));
    return nd;
}

/* Captures p; named[i] gets the handle capinfo operation i named (or NULL). */
static __thread CUdeviceptr temp[MAXOPS];           /* mode temps: operation i's temporary this step */

static CUgraph capture(const prog *p, CUgraphNode *named)
{
    static __thread CUdeviceptr dst[MAXOPS];
    static __thread uint32_t vals[MAXOPS];
    int joined[NS] = { 1, 0, 0 };
    CUgraph g;
    if (extra_mode && rnd(2)) {                      /* into a graph of the program's own */
        MUST(cuGraphCreate(&g, 0));
        MUST(cuStreamBeginCaptureToGraph(st[0], g, NULL, NULL, 0, capture_mode));
    } else {
        MUST(cuStreamBeginCapture(st[0], capture_mode));
    }
    for (int i = 0; i < p->n; i++) {
        const op *o = &p->ops[i];
        CUdeviceptr data = buf[o->s], aux = buf[o->s] + N * sizeof(uint32_t);
        named[i] = NULL;
        vals[i] = o->v;
        switch (o->kind) {
        case ADD:
        case ADD_EX:
        case ADD_COOP:
        case ADD_AUX:
            dst[i] = o->kind == ADD_AUX ? aux : data;
            launch(o, &dst[i], &vals[i]);
            break;
        case MEMSET:
            MUST(cuMemsetD32Async(aux, o->v, N, st[o->s]));
            break;
        case MEMSET2D:
            MUST(cuMemsetD2D32Async(aux, N / 2 * sizeof(uint32_t), o->v, N / 2, 2, st[o->s]));
            break;
        case GMEM: {
            static __thread CUdeviceptr gt[MAXOPS];
            static __thread uint32_t gv7[MAXOPS];
            MUST(cuMemAllocAsync(&gt[i], o->tsize, st[o->s]));
            MUST(cuMemsetD32Async(gt[i], o->v, N, st[o->s]));
            gv7[i] = o->v + 7;
            void *args[] = { &gt[i], &gv7[i], &nwords };
            MUST(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, st[o->s], args, NULL));
            MUST(cuMemcpyDtoDAsync(aux, gt[i], N * sizeof(uint32_t), st[o->s]));
            MUST(cuMemFreeAsync(gt[i], st[o->s]));
            break;
        }
        case HOSTFN:
            hostargs[i] = (struct hostarg){ .sum = &hostsum[o->s], .v = o->v };
            MUST(cuLaunchHostFunc(st[o->s], host_add, &hostargs[i]));
            break;
        case UPDDEPS: {
            const CUgraphNode *deps;
            size_t nd = last_nodes(st[o->s], &deps);
            CUgraphNode copy[MAXOPS];
            for (size_t k = 0; k < nd && k < MAXOPS; k++) copy[k] = deps[k];
            MUST(cuStreamUpdateCaptureDependencies(st[o->s], copy, NULL, nd < MAXOPS ? nd : MAXOPS,
                                                   CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
            break;
        }
        case TEMP: {
            static __thread uint32_t v7[MAXOPS];
            MUST(cuMemsetD32Async(temp[i], o->v, N, st[o->s]));
            v7[i] = o->v + 7;
            void *args[] = { &temp[i], &v7[i], &nwords };
            MUST(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, st[o->s], args, NULL));
            MUST(cuMemcpyDtoDAsync(aux, temp[i], N * sizeof(uint32_t), st[o->s]));
            break;
        }
        case COPY:
            MUST(cuMemcpyDtoDAsync(data, aux, N * sizeof(uint32_t), st[o->s]));
            break;
        case BCOPY: {
            CUmemcpyAttributes at;
            size_t idx = 0, bytes = 16 * o->grid * sizeof(uint32_t);
            memset(&at, 0, sizeof at);
            at.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
            MUST(cuMemcpyBatchAsync(&data, &aux, &bytes, 1, &at, &idx, 1, st[o->s]));
            break;
        }
        case BWRITE: {
            CUstreamBatchMemOpParams w;
            memset(&w, 0, sizeof w);
            w.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
            w.writeValue.address = aux;
            w.writeValue.value = o->v;
            MUST(cuStreamBatchMemOp(st[o->s], 1, &w, 0));
            break;
        }
        case NOOP:
            if (o->v % 2) MUST(cuMemsetD32Async(aux, o->v, 0, st[o->s]));
            else MUST(cuMemcpyDtoDAsync(data, aux, 0, st[o->s]));
            break;
        case FORK:
            MUST(cuEventRecord(ev[o->s], st[o->s]));
            MUST(cuStreamWaitEvent(st[o->s2], ev[o->s], 0));
            joined[o->s2] = 1;
            break;
        case CAPINFO: {
            const CUgraphNode *deps;
            size_t nd = last_nodes(st[o->s], &deps);
            if (o->named && nd == 1 && deps) named[i] = deps[0];
            break;
        }
        }
    }
    for (int s = 1; s < NS; s++) {
        if (!joined[s]) continue;
        MUST(cuEventRecord(ev[s], st[s]));
        MUST(cuStreamWaitEvent(st[0], ev[s], 0));
    }
    MUST(cuStreamEndCapture(st[0], &g));
    return g;
}

/* The add that capinfo operation i names: the last operation on its stream
 * before it. */
static op *named_add(prog *p, int i)
{
    for (int j = i - 1; j >= 0; j--)
        if (p->ops[j].s == p->ops[i].s && p->ops[j].kind != CAPINFO) return &p->ops[j];
    return NULL;
}

/* Changes the scalar of the first named add to nv, in p (which the model
 * follows) and in the graph with cuGraphKernelNodeSetParams or, with exec
 * not NULL (mode extra: the exec was instantiated from the graph that holds
 * the node), in the exec with cuGraphExecKernelNodeSetParams. */
static void set_named(prog *p, const CUgraphNode *named, uint32_t nv, CUgraphExec exec)
{
    for (int i = 0; i < p->n; i++) {
        op *a = named[i] ? named_add(p, i) : NULL;
        if (!a || a->kind != ADD) continue;
        static __thread uint32_t v;
        static __thread CUdeviceptr d;
        a->v = nv;
        v = a->v;
        d = buf[a->s];
        void *args[] = { &d, &v, &nwords };
        CUDA_KERNEL_NODE_PARAMS kp;
        memset(&kp, 0, sizeof kp);
        kp.func = f_add;
        kp.gridDimX = a->grid;
        kp.gridDimY = kp.gridDimZ = 1;
        kp.blockDimX = kp.blockDimY = kp.blockDimZ = 1;
        kp.kernelParams = args;
        if (exec) MUST(cuGraphExecKernelNodeSetParams(exec, named[i], &kp));
        else MUST(cuGraphKernelNodeSetParams(named[i], &kp));
        return;
    }
}

/* ------------------------------------------------------------ explicit mode */

static CUcontext ctx;
static __thread CUgraphNode xnode[MAXOPS];           /* the node of each operation (NULL: a fork) */
static __thread CUdeviceptr xdst[MAXOPS];
static __thread uint32_t xval[MAXOPS];

/* Kernel node parameters of add operation i (arguments from xdst, xval). */
static void kparams_of(const prog *p, int i, CUDA_KERNEL_NODE_PARAMS *kp, void **args)
{
    const op *o = &p->ops[i];
    xdst[i] = o->kind == ADD_AUX ? buf[o->s] + N * sizeof(uint32_t) : buf[o->s];
    xval[i] = o->v;
    args[0] = &xdst[i];
    args[1] = &xval[i];
    args[2] = &nwords;
    memset(kp, 0, sizeof *kp);
    kp->func = f_add;
    kp->gridDimX = o->kind == ADD ? o->grid : 1;
    kp->gridDimY = kp->gridDimZ = 1;
    kp->blockDimX = kp->blockDimY = kp->blockDimZ = 1;
    kp->kernelParams = args;
}

/* The same as generic node parameters (cuGraphAddNode, cuGraphNodeSetParams). */
static CUgraphNodeParams generic_of(const CUDA_KERNEL_NODE_PARAMS *kp)
{
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_KERNEL;
    np.kernel.func = kp->func;
    np.kernel.gridDimX = kp->gridDimX;
    np.kernel.gridDimY = kp->gridDimY;
    np.kernel.gridDimZ = kp->gridDimZ;
    np.kernel.blockDimX = kp->blockDimX;
    np.kernel.blockDimY = kp->blockDimY;
    np.kernel.blockDimZ = kp->blockDimZ;
    np.kernel.kernelParams = kp->kernelParams;
    return np;
}

static CUDA_MEMSET_NODE_PARAMS memset_of(const op *o)
{
    return (CUDA_MEMSET_NODE_PARAMS){ .dst = buf[o->s] + N * sizeof(uint32_t), .value = o->v,
                                      .elementSize = 4, .width = N, .height = 1 };
}

/* Sets attribute id of node n to the operation's (priority, cooperative). */
static void set_attr(CUgraphNode n, const op *o)
{
    CUkernelNodeAttrValue v;
    memset(&v, 0, sizeof v);
    if (o->kind == ADD_EX) {
        v.priority = o->prio;
        MUST(cuGraphKernelNodeSetAttribute(n, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v));
    } else {
        v.cooperative = 1;
        MUST(cuGraphKernelNodeSetAttribute(n, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v));
    }
}

/* p built with the graph API, each operation depending on its stream's
 * last nodes (a fork adds the forking stream's to the other's). */
static CUgraph build_explicit(const prog *p)
{
    CUgraph g;
    CUgraphNode last[NS][MAXOPS];
    size_t nlast[NS] = { 0, 0, 0 };
    MUST(cuGraphCreate(&g, 0));
    for (int i = 0; i < p->n; i++) {
        const op *o = &p->ops[i];
        CUgraphNode *d = last[o->s];
        size_t nd = nlast[o->s];
        void *args[3];
        CUDA_KERNEL_NODE_PARAMS kp;
        xnode[i] = NULL;
        switch (o->kind) {
        case ADD:
        case ADD_EX:
        case ADD_COOP:
            kparams_of(p, i, &kp, args);
            MUST(cuGraphAddKernelNode(&xnode[i], g, d, nd, &kp));
            if (o->kind != ADD) set_attr(xnode[i], o);
            break;
        case ADD_AUX: {
            kparams_of(p, i, &kp, args);
            CUgraphNodeParams np = generic_of(&kp);
            MUST(cuGraphAddNode(&xnode[i], g, d, NULL, nd, &np));
            break;
        }
        case MEMSET: {
            CUDA_MEMSET_NODE_PARAMS ms = memset_of(o);
            MUST(cuGraphAddMemsetNode(&xnode[i], g, d, nd, &ms, ctx));
            break;
        }
        case COPY: {
            CUDA_MEMCPY3D c;
            memset(&c, 0, sizeof c);
            c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
            c.srcDevice = buf[o->s] + N * sizeof(uint32_t);
            c.dstDevice = buf[o->s];
            c.WidthInBytes = N * sizeof(uint32_t);
            c.Height = c.Depth = 1;
            MUST(cuGraphAddMemcpyNode(&xnode[i], g, d, nd, &c, ctx));
            break;
        }
        case CAPINFO:
            MUST(cuGraphAddEmptyNode(&xnode[i], g, d, nd));
            break;
        case FORK:
            for (size_t k = 0; k < nlast[o->s]; k++) {
                size_t j = 0;
                while (j < nlast[o->s2] && last[o->s2][j] != last[o->s][k]) j++;
                if (j == nlast[o->s2]) last[o->s2][nlast[o->s2]++] = last[o->s][k];
            }
            continue;
        }
        last[o->s][0] = xnode[i];
        nlast[o->s] = 1;
    }
    return g;
}

/* Change i of p (mutate's) made in graph g in place; with exec not NULL, a
 * kernel's parameters also in exec by cuGraphExecKernelNodeSetParams
 * (returns 1: the exec is up to date). */
static int change_in_place(const prog *p, int i, int step, CUgraphExec exec)
{
    const op *o = &p->ops[i];
    void *args[3];
    CUDA_KERNEL_NODE_PARAMS kp;
    if (o->kind == MEMSET) {
        CUDA_MEMSET_NODE_PARAMS ms = memset_of(o);
        MUST(cuGraphMemsetNodeSetParams(xnode[i], &ms));
        return 0;
    }
    if (o->kind == ADD_EX) set_attr(xnode[i], o);   /* its priority, or the same again */
    kparams_of(p, i, &kp, args);
    if (step % 2) {
        MUST(cuGraphKernelNodeSetParams(xnode[i], &kp));
    } else {
        CUgraphNodeParams np = generic_of(&kp);
        MUST(cuGraphNodeSetParams(xnode[i], &np));
    }
    if (!exec || o->kind == ADD_EX) return 0;       /* an attribute: only an update carries it */
    MUST(cuGraphExecKernelNodeSetParams(exec, xnode[i], &kp));
    return 1;
}

static void model_run(const prog *p)
{
    for (int i = 0; i < p->n; i++) {
        const op *o = &p->ops[i];
        uint32_t *data = model[o->s], *aux = model[o->s] + N;
        if (o->kind == HOSTFN) hostmodel[o->s] += o->v;
        for (int w = 0; w < N; w++) {
            switch (o->kind) {
            case ADD:
            case ADD_EX:
            case ADD_COOP:
                data[w] += o->v;
                break;
            case ADD_AUX:
                aux[w] += o->v;
                break;
            case MEMSET:
            case MEMSET2D:
                aux[w] = o->v;
                break;
            case TEMP:
            case GMEM:
                aux[w] = 2 * o->v + 7;
                break;
            case COPY:
                data[w] = aux[w];
                break;
            case BCOPY:
                if (w < 16 * (int)o->grid) data[w] = aux[w];
                break;
            case BWRITE:
                if (w == 0) aux[w] = o->v;
                break;
            default:
                break;
            }
        }
    }
}

/* Mode temps: the temporaries of p's TEMP operations for this step, in
 * operation order or (seeds with bit 1) the reverse, now and then with a
 * block of another size allocated and freed before one; by cuMemAlloc, or
 * (seeds 0 mod 3) cuMemAllocAsync on stream 0. */
static void temps_alloc(const prog *p, unsigned long seed)
{
    for (int k = 0; k < p->n; k++) {
        int i = seed & 2 ? p->n - 1 - k : k;
        temp[i] = 0;
        if (p->ops[i].kind != TEMP) continue;
        if (rnd(4) == 0) {
            CUdeviceptr x;
            MUST(cuMemAlloc(&x, 64 + 64 * rnd(1024)));
            MUST(cuMemFree(x));
        }
        if (seed % 3 == 0) MUST(cuMemAllocAsync(&temp[i], p->ops[i].tsize, st[0]));
        else MUST(cuMemAlloc(&temp[i], p->ops[i].tsize));
    }
}

/* ... and frees them after the launch: once stream 0 is synchronized, or at
 * once (seeds 4..7 mod 8: cuMemFree synchronizes), or stream-ordered on
 * stream 0 (cuMemAllocAsync's, by cuMemFreeAsync). */
static void temps_free(const prog *p, unsigned long seed)
{
    int how = seed % 3 == 0 ? 2 : (int)((seed / 4) % 2);
    if (how == 0) MUST(cuStreamSynchronize(st[0]));
    for (int i = 0; i < p->n; i++) {
        if (!temp[i]) continue;
        if (how == 2) MUST(cuMemFreeAsync(temp[i], st[0]));
        else MUST(cuMemFree(temp[i]));
    }
}

enum { M_CAPTURE, M_EXPLICIT, M_TEMPS, M_ROTATE, M_THREADS, M_WILD, M_EXTRA, M_THREADS_TL, M_UNHOOKED };
static const char *const modes[] = { "capture", "explicit", "temps", "rotate", "threads", "wild", "extra",
                                     "threads_tl", "unhooked", NULL };

/* Mode extra: a set-up call outside the digest (its count depends on the
 * driver's choice of graph memory addresses), which must succeed. */
#define MUST_QUIET(call)                                                                  \
    do {                                                                                  \
        CUresult r_ = (call);                                                             \
        if (r_ != CUDA_SUCCESS) {                                                         \
            fprintf(ADV_OUT, "L%d %s = %s: giving up\n", __LINE__, #call, adv_err(r_));   \
            fflush(ADV_OUT);                                                              \
            exit(2);                                                                      \
        }                                                                                 \
    } while (0)

static int has_gmem(const prog *p)
{
    for (int i = 0; i < p->n; i++)
        if (p->ops[i].kind == GMEM) return 1;
    return 0;
}

/* One program of the given mode, seed and capture mode, start to end. */
static void run(unsigned long seed, int mode, CUstreamCaptureMode cmode)
{
    int explicit_mode = mode == M_EXPLICIT, rotate_mode = mode == M_ROTATE;
    temps_mode = mode == M_TEMPS;
    wild_mode = mode == M_WILD;
    extra_mode = mode == M_EXTRA;
    unhooked_mode = mode == M_UNHOOKED;
    capture_mode = cmode;
    rng = 0x9e3779b97f4a7c15ull ^ (seed * 0x100000001b3ull);
    buf = sets[0];
    model = models[0];
    if (seed % 2) inst_flags = CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
    if (rotate_mode) nsets = 2 + (int)(seed % 2);
    for (int s = 0; s < NS; s++) {
        if (ADV_RECFUZZ_PTDS && s == 0) st[0] = CU_STREAM_PER_THREAD;   /* adv_recfuzz_ptsz.c */
        else MUST(cuStreamCreate(&st[s], CU_STREAM_NON_BLOCKING));
        MUST(cuEventCreate(&ev[s], CU_EVENT_DISABLE_TIMING));
        for (int r = 0; r < nsets; r++) {
            MUST(cuMemAlloc(&sets[r][s], 2 * N * sizeof(uint32_t)));
            MUST(cuMemsetD32(sets[r][s], 0, 2 * N));
        }
    }
    prog p;
    generate(&p);
    CUgraphExec exec = NULL;
    CUgraphNode named[MAXOPS];
    CUgraph g = NULL;
    for (int step = 0; step < STEPS; step++) {
        int change = step ? mutate(&p) : NEW;
        buf = sets[step % nsets];
        model = models[step % nsets];
        if (seed % 4 == 3 && step == STEPS / 2) {
            CUstreamAttrValue a;
            memset(&a, 0, sizeof a);
            a.priority = -1;
            MUST(cuStreamSetAttribute(st[1], CU_LAUNCH_ATTRIBUTE_PRIORITY, &a));
        }
        int exec_current = 0, fresh = 0;   /* fresh: exec instantiated from g this step */
        CUgraph use;
        if (temps_mode) temps_alloc(&p, seed);
        if (!explicit_mode) {
            g = capture(&p, named);
            if (step % 3 == 2) set_named(&p, named, 5000u + (uint32_t)step, NULL);
            use = g;
        } else {
            if (change == NEW) {
                if (g) MUST(cuGraphDestroy(g));
                g = build_explicit(&p);
            } else if (change >= 0) {
                exec_current = change_in_place(&p, change, step, step % 5 == 4 ? exec : NULL);
            }
            use = g;
            if (step % 7 == 3) MUST(cuGraphClone(&use, g));
        }
        if (exec_current) {
            /* the exec took the change itself */
        } else if (!exec) {
            MUST(cuGraphInstantiateWithFlags(&exec, use, inst_flags));
            fresh = 1;
        } else if (extra_mode && has_gmem(&p)) {
            /* refused unless the driver gave the same addresses: not printed */
            CUgraphExecUpdateResultInfo info;
            if (cuGraphExecUpdate(exec, use, &info) != CUDA_SUCCESS) {
                MUST_QUIET(cuGraphExecDestroy(exec));
                MUST_QUIET(cuGraphInstantiateWithFlags(&exec, g, inst_flags));
            }
        } else {
            CUgraphExecUpdateResultInfo info;
            if (R(cuGraphExecUpdate(exec, use, &info)) != CUDA_SUCCESS) {
                fprintf(ADV_OUT, "step %d: update refused (%d): instantiating again\n", step,
                        (int)info.result);
                MUST(cuGraphExecDestroy(exec));
                /* from g, not a clone: the exec setters name g's nodes */
                MUST(cuGraphInstantiateWithFlags(&exec, g, inst_flags));
                fresh = 1;
            }
        }
        if (extra_mode) {
            int ls = (int)rnd(NS);
            if (rnd(3) == 0) MUST(cuGraphUpload(exec, st[rnd(NS)]));
            MUST(cuGraphLaunch(exec, st[ls]));
            model_run(&p);
            if (rnd(4) == 0) {            /* launched again, after a change in the exec */
                if (fresh && !has_gmem(&p)) set_named(&p, named, 7000u + (uint32_t)step, exec);
                MUST(cuGraphLaunch(exec, st[ls]));
                model_run(&p);
            }
            switch (rnd(extra_threaded ? 2 : 3)) {
            case 0:
                MUST(cuStreamSynchronize(st[ls]));
                break;
            case 1:
                MUST(cuEventRecord(ev[ls], st[ls]));
                MUST(cuEventSynchronize(ev[ls]));
                MUST(cuEventQuery(ev[ls]));
                break;
            default:
                MUST(cuCtxSynchronize());
                break;
            }
            MUST(cuGraphDestroy(g));
        } else {
            MUST(cuGraphLaunch(exec, st[0]));
            if (temps_mode) temps_free(&p, seed);
            MUST(cuStreamSynchronize(st[0]));
            if (use != g) MUST(cuGraphDestroy(use));
            if (!explicit_mode) MUST(cuGraphDestroy(g));
            model_run(&p);
        }
        for (int r = 0; r < nsets; r++)
            for (int s = 0; s < NS; s++) {
                char name[48];
                if (nsets > 1) snprintf(name, sizeof name, "step %d set %d stream %d", step, r, s);
                else snprintf(name, sizeof name, "step %d stream %d", step, s);
                adv_check_words(name, sets[r][s], models[r][s], 2 * N);
            }
        for (int s = 0; wild_mode && s < NS; s++)
            adv_check("host sum", hostsum[s] == hostmodel[s], "step %d stream %d: %llu", step, s,
                      (unsigned long long)hostsum[s]);
    }
    MUST(cuGraphExecDestroy(exec));
    if (explicit_mode) MUST(cuGraphDestroy(g));
}

typedef struct worker {
    unsigned long seed;
    int mode;
    int tl;                   /* mode threads_tl: thread-local captures */
} worker;

/* mode threads: one program (relaxed captures: a thread's allocation during
 * the other's capture is allowed) */
static void work(void *arg)
{
    const worker *w = arg;
    if (w->tl) {
        extra_threaded = 1;
        run(w->seed, w->mode, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
        return;
    }
    run(w->seed, w->mode, CU_STREAM_CAPTURE_MODE_RELAXED);
}

int main(int argc, char **argv)
{
    unsigned long seed;
    int mode = adv_seed_mode(argc, argv, modes, M_CAPTURE, &seed);
    if (mode < 0) return 4;
    CUmodule mod;
    adv_open(&ctx, &mod);
    f_add = adv_fn(mod, "add_u32");
    if (mode == M_EXTRA) {
        static const CUstreamCaptureMode cm[3] = { CU_STREAM_CAPTURE_MODE_GLOBAL,
                                                   CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                                   CU_STREAM_CAPTURE_MODE_RELAXED };
        run(seed, mode, cm[seed % 3]);
        return adv_finish();
    }
    if (mode != M_THREADS && mode != M_THREADS_TL) {
        run(seed, mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
        return adv_finish();
    }
    /* two programs at once, each thread's lines printed after both ended */
    worker w[2] = { { seed, M_CAPTURE, 0 }, { seed + 1, M_TEMPS, 0 } };
    if (mode == M_THREADS_TL) w[1].mode = M_EXTRA, w[0].tl = w[1].tl = 1;
    adv_thread t[2];
    for (int k = 0; k < 2; k++) {
        t[k] = (adv_thread){ .fn = work, .arg = &w[k], .ctx = ctx };
        snprintf(t[k].label, sizeof t[k].label, "thread %d (seed %lu, %s):", k, w[k].seed,
                 modes[w[k].mode]);
    }
    adv_threads(t, 2);
    return adv_finish();
}
