/*
 * tests/e2e/adv_lifefuzz.c: round 44, random object lifecycles. The driver
 * gives the values of destroyed objects to the next ones (last freed first,
 * docs/emulator.md "Reuse of freed handle values"), and the memory the
 * library does not place comes and goes under the graphs that name it.
 * adv_reuse.c and adv_foreign.c try one way each; this program draws many
 * from a seed, so that whatever the library keeps per handle value or per
 * address is met by a new object or a new allocation of the same value.
 *
 * State: three device buffers (cuMemAlloc, kept), four foreign slots of N
 * words (managed memory, cuMemHostAlloc DEVICEMAP, cuMemAllocHost, a VMM
 * mapping the program makes in a reservation of its own), three graph slots,
 * three exec slots, two streams, two events, a created context, the module.
 * A graph is a chain of up to MAXOPS operations, each add_u32 (a kernel),
 * a 32-bit memset or a copy, on ranges of the buffers and foreign slots. The
 * host keeps every slot's words, every graph's and exec's operations.
 *
 * Each step draws 1 to 4 actions:
 *   graph     a graph slot's graph destroyed (if any) and made again: by a
 *             capture on a random stream, by the graph API (kernel, memset
 *             and memcpy nodes in a chain) or by cuGraphClone of another;
 *             its program a copy of an exec's or graph's with one value or
 *             operand changed (an update the driver takes), or new;
 *   gdestroy  a graph destroyed (execs outlive it);
 *   inst      an exec slot's exec destroyed (if any), one instantiated from
 *             a graph;
 *   xdestroy  an exec destroyed;
 *   update    cuGraphExecUpdate of an exec to a graph (printed where
 *             refused; a refused exec is destroyed);
 *   setter    cuGraphExec{Kernel,Memset,Memcpy}NodeSetParams on an exec,
 *             for a node of the graph it was instantiated from (which may
 *             have lost its last node and gained one, which may get the
 *             lost one's value: not the exec's) or of another graph (maybe
 *             on the value of a node of the exec's dead graph): refused
 *             unless the node is the exec's;
 *   node      a graph's last node destroyed (cuGraphDestroyNode) and/or a
 *             node added after the chain, or a node's parameters set in the
 *             graph (cuGraph{Kernel,Memset,Memcpy}NodeSetParams,
 *             cuGraphNodeSetParams);
 *   stream    a stream destroyed and created again; event the same;
 *   memory    a foreign slot freed (cuMemFree, cuMemFreeHost; the VMM slot
 *             unmapped and released) or allocated again (the VMM slot mapped
 *             again at its address: graphs naming it are valid again; the
 *             others are a new generation, graphs naming the old one are
 *             never launched nor used again but destroyed);
 *   module    (not in mode threads) the module unloaded and loaded again:
 *             its function gets the same value; graphs and execs holding the
 *             old one are only destroyed;
 *   context   the created context destroyed (with the exec, stream and
 *             buffer it left), or created and used: a buffer, a stream, a
 *             capture of two memsets, an exec launched and checked, left to
 *             the context's end at random.
 * Then up to two launchable execs (every operand of their current
 * generation and mapped, no function of an unloaded module) are launched on
 * random streams, the second ordered after the first by an event (destroyed
 * at once now and then, while its wait is queued); the last stream is
 * sometimes destroyed with its work queued, and the step waits by an event,
 * the context or the stream; every live slot is read back and checked.
 * Updates, setters and instantiations naming freed foreign memory are made
 * before that memory is allocated again: the driver refuses them, and the
 * library must answer as the driver does.
 *
 * Modes: one (a program), threads (two programs, SEED and SEED + 1, on
 * threads of their own, capturing in thread-local mode, no module action,
 * no cuCtxSynchronize; each thread's lines printed after both ended; with
 * CUDAEMU_DESTROY_DELAY_US one thread's destroys are in flight while the
 * other makes objects of their values).
 * Usage: adv_lifefuzz SEED [one|threads]
 */
#include "adv_common.h"

#define N 64
#define ND 3                  /* device buffers */
#define NF 4                  /* foreign slots */
#define NM (ND + NF)
#define NG 3
#define NX 3
#define NSTR 2
#define NEV 2
#define MAXOPS 6
#define STEPS 40

enum { O_ADD, O_MEMSET, O_COPY };
enum { F_MANAGED, F_HOSTALLOC, F_ALLOCHOST, F_VMM };
static const char *const fname[] = { "managed", "hostalloc", "allochost", "vmm" };
enum { M_ONE, M_THREADS };
static const char *const modes[] = { "one", "threads", NULL };

typedef struct op {
    int kind, d, s;           /* d: destination slot; s: source slot (copy) */
    int dgen, sgen;           /* the slots' generations the addresses are of */
    CUdeviceptr dp, sp;       /* the addresses */
    uint32_t v, n, doff, soff;
} op;

typedef struct mem {
    int live, gen;
    int freed_at;             /* alloc_epoch when freed */
    CUdeviceptr p;
    void *host;
    CUmemGenericAllocationHandle h;
    uint32_t model[N];
} mem;

typedef struct graph {
    int live, serial, nops, modgen, built;  /* built: 0 capture, 1 explicit, 2 clone */
    CUgraph g;
    op ops[MAXOPS];
    CUgraphNode nodes[MAXOPS];
    int birth[MAXOPS];        /* node identity within the graph */
} graph;

typedef struct exec {
    int live, gslot, gserial, nops, modgen;
    CUgraphExec x;
    op ops[MAXOPS];
    int birth[MAXOPS];        /* the origin graph's nodes it was made from */
} exec;

static CUfunction f_add;
static CUmodule mod;
static int modgen;
static CUcontext ctx0;
static size_t vmm_bytes;

static __thread uint64_t rng;
static __thread int threads_mode, next_serial = 1, next_birth = 1;
/* Allocations of this program so far: a freed slot's address may be taken
 * by the next allocation of any kind (the emulator's device, managed and
 * pinned host memory share one heap), so whether the driver still refuses
 * it depends on where the library placed that allocation. Freed memory
 * other than the VMM slot (the program's own reservation) is named only
 * before the next allocation, and never in mode threads (the other thread
 * allocates at any time). */
static __thread int alloc_epoch;
static __thread mem mems[NM];
static __thread graph gs[NG];
static __thread exec xs[NX];
static __thread CUstream strs[NSTR];
static __thread CUevent evs[NEV];
static __thread CUdeviceptr vmm_va;
static __thread struct { int live; CUcontext c; } cx;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

/* ---- memory ---- */

static void mem_upload(int i)
{
    for (int k = 0; k < N; k++) mems[i].model[k] = rnd(1u << 30);
    if (i < ND) MUST(cuMemcpyHtoD(mems[i].p, mems[i].model, N * 4));
    else MUST(cuMemcpy(mems[i].p, (CUdeviceptr)(uintptr_t)mems[i].model, N * 4));
}

static void foreign_alloc(int i)
{
    mem *m = &mems[i];
    switch (i - ND) {
    case F_MANAGED:
        MUST(cuMemAllocManaged(&m->p, N * 4, CU_MEM_ATTACH_GLOBAL));
        break;
    case F_HOSTALLOC:
        MUST(cuMemHostAlloc(&m->host, N * 4, CU_MEMHOSTALLOC_DEVICEMAP));
        MUST(cuMemHostGetDevicePointer(&m->p, m->host, 0));
        break;
    case F_ALLOCHOST:
        MUST(cuMemAllocHost(&m->host, N * 4));
        MUST(cuMemHostGetDevicePointer(&m->p, m->host, 0));
        break;
    default: {
        CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                     .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
        CUmemAccessDesc a = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        MUST(cuMemCreate(&m->h, vmm_bytes, &prop, 0));
        MUST(cuMemMap(vmm_va, vmm_bytes, 0, m->h, 0));
        MUST(cuMemSetAccess(vmm_va, vmm_bytes, &a, 1));
        m->p = vmm_va;
        m->gen--;                             /* same address: the same generation */
    }
    }
    m->gen++;
    m->live = 1;
    alloc_epoch++;
    mem_upload(i);
}

static void foreign_free(int i)
{
    mem *m = &mems[i];
    switch (i - ND) {
    case F_MANAGED:
        MUST(cuMemFree(m->p));
        break;
    case F_HOSTALLOC:
    case F_ALLOCHOST:
        MUST(cuMemFreeHost(m->host));
        break;
    default:
        MUST(cuMemUnmap(vmm_va, vmm_bytes));
        MUST(cuMemRelease(m->h));
    }
    m->live = 0;
    m->freed_at = alloc_epoch;
}

/* ---- operations and their validity ---- */

static int has_add(const op *o, int n)
{
    for (int k = 0; k < n; k++)
        if (o[k].kind == O_ADD) return 1;
    return 0;
}

/* Every operand of the slot's current generation (mapped or freed, not yet
 * allocated again): the program may hand it to the driver. */
static int nameable(int i, int gen)
{
    const mem *m = &mems[i];
    if (gen != m->gen) return 0;
    if (m->live || i == ND + F_VMM) return 1;
    return !threads_mode && m->freed_at == alloc_epoch;
}

static int current(const op *o, int n)
{
    for (int k = 0; k < n; k++) {
        if (!nameable(o[k].d, o[k].dgen)) return 0;
        if (o[k].kind == O_COPY && !nameable(o[k].s, o[k].sgen)) return 0;
    }
    return 1;
}

/* Every operand mapped: the program may launch it. */
static int mapped(const op *o, int n)
{
    for (int k = 0; k < n; k++)
        if (!mems[o[k].d].live || (o[k].kind == O_COPY && !mems[o[k].s].live)) return 0;
    return current(o, n);
}

static int kernels_ok(const op *o, int n, int mg) { return !has_add(o, n) || mg == modgen; }

static int graph_usable(const graph *g) { return g->live && current(g->ops, g->nops) && kernels_ok(g->ops, g->nops, g->modgen); }

/* A slot for an operand: mostly a mapped one, now and then a freed one. */
static int draw_slot(int not)
{
    for (;;) {
        int i = (int)rnd(NM);
        if (i == not) continue;
        if (mems[i].live || (rnd(6) == 0 && nameable(i, mems[i].gen))) return i;
    }
}

static void set_operands(op *o)
{
    o->dgen = mems[o->d].gen;
    o->dp = mems[o->d].p + 4 * o->doff;
    if (o->kind == O_COPY) {
        o->sgen = mems[o->s].gen;
        o->sp = mems[o->s].p + 4 * o->soff;
    }
}

static void draw_op(op *o)
{
    memset(o, 0, sizeof *o);
    o->kind = (int)rnd(3);
    o->d = draw_slot(-1);
    o->n = 1 + rnd(N);
    o->doff = rnd(N - o->n + 1);
    o->v = 1 + rnd(1000);
    if (o->kind == O_COPY) {
        o->s = draw_slot(o->d);
        o->soff = rnd(N - o->n + 1);
    }
    set_operands(o);
}

/* A program like o[0..n) (same kinds, same order) with stale operands drawn
 * again and one value or operand changed. */
static void vary(op *o, int n)
{
    for (int k = 0; k < n; k++)
        if (!current(&o[k], 1)) {
            int kind = o[k].kind;
            do draw_op(&o[k]); while (o[k].kind != kind);
        }
    op *c = &o[rnd((uint32_t)n)];
    switch (rnd(3)) {
    case 0: c->v = 1 + rnd(1000); break;
    case 1:
        c->d = draw_slot(c->kind == O_COPY ? c->s : -1);
        set_operands(c);
        break;
    default: break;                           /* the same program */
    }
}

static void apply(const op *o, int n)
{
    for (int k = 0; k < n; k++) {
        uint32_t *d = mems[o[k].d].model + o[k].doff;
        if (o[k].kind == O_ADD)
            for (uint32_t i = 0; i < o[k].n; i++) d[i] += o[k].v;
        else if (o[k].kind == O_MEMSET)
            for (uint32_t i = 0; i < o[k].n; i++) d[i] = o[k].v;
        else
            memmove(d, mems[o[k].s].model + o[k].soff, 4 * o[k].n);
    }
}

/* ---- graphs ---- */

static CUDA_MEMSET_NODE_PARAMS memset_params(const op *o)
{
    return (CUDA_MEMSET_NODE_PARAMS){ .dst = o->dp, .value = o->v, .elementSize = 4, .width = o->n,
                                      .height = 1 };
}

static CUresult add_node(CUgraph g, const CUgraphNode *dep, CUgraphNode *out, const op *o)
{
    if (o->kind == O_ADD) {
        CUdeviceptr p = o->dp;
        uint32_t v = o->v;
        uint64_t n = o->n;
        void *args[] = { &p, &v, &n };
        CUDA_KERNEL_NODE_PARAMS kp = adv_kernel_params(f_add, args);
        return R(cuGraphAddKernelNode(out, g, dep, dep ? 1 : 0, &kp));
    }
    if (o->kind == O_MEMSET) {
        CUDA_MEMSET_NODE_PARAMS mp = memset_params(o);
        return R(cuGraphAddMemsetNode(out, g, dep, dep ? 1 : 0, &mp, ctx0));
    }
    CUDA_MEMCPY3D cp = adv_copy_1d(o->dp, o->sp, 4 * o->n);
    return R(cuGraphAddMemcpyNode(out, g, dep, dep ? 1 : 0, &cp, ctx0));
}

static CUresult capture_op(CUstream s, const op *o)
{
    if (o->kind == O_ADD) {
        CUdeviceptr p = o->dp;
        uint32_t v = o->v;
        uint64_t n = o->n;
        void *args[] = { &p, &v, &n };
        return R(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    }
    if (o->kind == O_MEMSET) return R(cuMemsetD32Async(o->dp, o->v, o->n, s));
    return R(cuMemcpyAsync(o->dp, o->sp, 4 * o->n, s));
}

static void graph_destroy(int i)
{
    MUST(cuGraphDestroy(gs[i].g));
    gs[i].live = 0;
}

static void act_graph(int step)
{
    int i = (int)rnd(NG);
    graph ng = { .live = 1, .serial = next_serial++, .modgen = modgen, .built = (int)rnd(3) };
    /* the program */
    int from = (int)rnd(4);
    const op *src = NULL;
    int srcn = 0;
    if (from == 0) {
        exec *x = &xs[rnd(NX)];
        if (x->live && kernels_ok(x->ops, x->nops, x->modgen)) src = x->ops, srcn = x->nops;
    } else if (from == 1) {
        graph *g = &gs[rnd(NG)];
        if (g->live && kernels_ok(g->ops, g->nops, g->modgen)) src = g->ops, srcn = g->nops;
    }
    if (src) {
        memcpy(ng.ops, src, sizeof ng.ops);
        ng.nops = srcn;
        vary(ng.ops, ng.nops);
    } else {
        ng.nops = 1 + (int)rnd(MAXOPS);
        for (int k = 0; k < ng.nops; k++) draw_op(&ng.ops[k]);
    }
    if (ng.built == 2) {                      /* a clone of a usable graph */
        int j = (int)rnd(NG);
        if (!graph_usable(&gs[j])) {
            ng.built = 1;
        } else {
            memcpy(ng.ops, gs[j].ops, sizeof ng.ops);
            ng.nops = gs[j].nops;
            if (R(cuGraphClone(&ng.g, gs[j].g)) != CUDA_SUCCESS) return;
            adv_chain_nodes(ng.g, ng.nodes, (size_t)ng.nops);
        }
    }
    if (gs[i].live) graph_destroy(i);
    if (ng.built == 0) {
        CUstream s = strs[rnd(NSTR)];
        MUST(cuStreamBeginCapture(s, threads_mode ? CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
                                                  : CU_STREAM_CAPTURE_MODE_GLOBAL));
        for (int k = 0; k < ng.nops; k++) capture_op(s, &ng.ops[k]);
        if (R(cuStreamEndCapture(s, &ng.g)) != CUDA_SUCCESS || !ng.g) {
            adv_line("step %d: capture failed", step);
            return;
        }
        size_t n = 0;
        MUST(cuGraphGetNodes(ng.g, NULL, &n));
        if (n != (size_t)ng.nops) {             /* a refused operation made no node */
            adv_line("step %d: capture of %d operations made %zu nodes", step, ng.nops, n);
            MUST(cuGraphDestroy(ng.g));
            return;
        }
        adv_chain_nodes(ng.g, ng.nodes, n);
    } else if (ng.built == 1) {
        MUST(cuGraphCreate(&ng.g, 0));
        for (int k = 0; k < ng.nops; k++)
            if (add_node(ng.g, k ? &ng.nodes[k - 1] : NULL, &ng.nodes[k], &ng.ops[k]) != CUDA_SUCCESS) {
                adv_line("step %d: graph of %d nodes stops at %d (kind %d, slots %d %d, %s %s)", step, ng.nops, k,
                     ng.ops[k].kind, ng.ops[k].d, ng.ops[k].s, mems[ng.ops[k].d].live ? "live" : "freed",
                     mems[ng.ops[k].s].live ? "live" : "freed");
                ng.nops = k;
                break;
            }
        if (!ng.nops) {
            MUST(cuGraphDestroy(ng.g));
            return;
        }
    }
    for (int k = 0; k < ng.nops; k++) ng.birth[k] = next_birth++;
    gs[i] = ng;
}

static void exec_destroy(int i)
{
    MUST(cuGraphExecDestroy(xs[i].x));
    xs[i].live = 0;
}

static void exec_from(exec *x, const graph *g)
{
    memcpy(x->ops, g->ops, sizeof x->ops);
    x->nops = g->nops;
    x->modgen = g->modgen;
}

static void act_inst(int step)
{
    int i = (int)rnd(NX), j = (int)rnd(NG);
    if (xs[i].live) exec_destroy(i);
    if (!graph_usable(&gs[j])) return;
    exec *x = &xs[i];
    if (R(cuGraphInstantiateWithFlags(&x->x, gs[j].g, 0)) != CUDA_SUCCESS) {
        adv_line("step %d: exec %d not instantiated from graph %d", step, i, j);
        return;
    }
    x->live = 1;
    x->gslot = j;
    x->gserial = gs[j].serial;
    exec_from(x, &gs[j]);
    memcpy(x->birth, gs[j].birth, sizeof x->birth);
}

static void act_update(int step)
{
    int i = (int)rnd(NX), j = (int)rnd(NG);
    exec *x = &xs[i];
    if (!x->live || !kernels_ok(x->ops, x->nops, x->modgen) || !graph_usable(&gs[j])) return;
    CUgraphExecUpdateResultInfo info;
    if (R(cuGraphExecUpdate_v2(x->x, gs[j].g, &info)) != CUDA_SUCCESS) {
        adv_line("step %d: exec %d to graph %d refused, result %d", step, i, j, (int)info.result);
        exec_destroy(i);
        return;
    }
    exec_from(x, &gs[j]);
}

/* A node's exec setter with o's parameters. */
static CUresult set_node(CUgraphExec x, CUgraphNode node, const op *o)
{
    if (o->kind == O_ADD) {
        CUdeviceptr p = o->dp;
        uint32_t v = o->v;
        uint64_t n = o->n;
        void *args[] = { &p, &v, &n };
        return ADV_SET_KERNEL(x, node, f_add, args);
    }
    if (o->kind == O_MEMSET) {
        CUDA_MEMSET_NODE_PARAMS mp = memset_params(o);
        return R(cuGraphExecMemsetNodeSetParams(x, node, &mp, ctx0));
    }
    CUDA_MEMCPY3D cp = adv_copy_1d(o->dp, o->sp, 4 * o->n);
    return R(cuGraphExecMemcpyNodeSetParams(x, node, &cp, ctx0));
}

static void act_setter(int step)
{
    int i = (int)rnd(NX);
    exec *x = &xs[i];
    if (!x->live || !kernels_ok(x->ops, x->nops, x->modgen)) return;
    int j = rnd(4) ? x->gslot : (int)rnd(NG);   /* its graph, or another */
    graph *g = &gs[j];
    if (!g->live || !kernels_ok(g->ops, g->nops, g->modgen)) return;
    int k = (int)rnd((uint32_t)g->nops);
    /* the node's exec counterpart: same graph, same node */
    int e = -1;
    for (int m = 0; m < x->nops && g->serial == x->gserial; m++)
        if (x->birth[m] == g->birth[k]) e = m;
    op o = e >= 0 ? x->ops[e] : g->ops[k];
    if (e >= 0 && o.kind != g->ops[k].kind) return;
    o.kind = g->ops[k].kind;
    /* stale operands drawn again, then maybe a change */
    if (!current(&o, 1) || rnd(2)) {
        int kind = o.kind;
        uint32_t n = o.n, doff = o.doff, soff = o.soff;
        do draw_op(&o); while (o.kind != kind);
        if (rnd(2) && kind != O_ADD) {          /* the same shape, another place */
            o.n = n, o.doff = doff, o.soff = soff;
            set_operands(&o);
        }
    } else {
        o.v = 1 + rnd(1000);
    }
    if (set_node(x->x, g->nodes[k], &o) != CUDA_SUCCESS) return;
    if (e < 0) {
        adv_line("step %d: exec %d took a node it does not have (graph %d node %d)", step, i, j, k);
        exec_destroy(i);                        /* its contents unknown */
        return;
    }
    x->ops[e] = o;
}

/* A graph node's parameters changed in the graph (cuGraph*NodeSetParams, or
 * cuGraphNodeSetParams for a kernel now and then): same kind, new value or
 * operands. */
static void node_set(int step, int j, graph *g)
{
    int k = (int)rnd((uint32_t)g->nops);
    op o = g->ops[k];
    if (rnd(2)) {
        do draw_op(&o); while (o.kind != g->ops[k].kind);
    } else {
        o.v = 1 + rnd(1000);
    }
    CUresult r;
    if (o.kind == O_ADD) {
        CUdeviceptr p = o.dp;
        uint32_t v = o.v;
        uint64_t n = o.n;
        void *args[] = { &p, &v, &n };
        CUDA_KERNEL_NODE_PARAMS kp = adv_kernel_params(f_add, args);
        if (rnd(2)) {
            r = R(cuGraphKernelNodeSetParams(g->nodes[k], &kp));
        } else {
            CUgraphNodeParams np = { .type = CU_GRAPH_NODE_TYPE_KERNEL,
                                     .kernel = { .func = f_add, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                                 .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1,
                                                 .kernelParams = args } };
            r = R(cuGraphNodeSetParams(g->nodes[k], &np));
        }
    } else if (o.kind == O_MEMSET) {
        CUDA_MEMSET_NODE_PARAMS mp = memset_params(&o);
        r = R(cuGraphMemsetNodeSetParams(g->nodes[k], &mp));
    } else {
        CUDA_MEMCPY3D cp = adv_copy_1d(o.dp, o.sp, 4 * o.n);
        r = R(cuGraphMemcpyNodeSetParams(g->nodes[k], &cp));
    }
    if (r != CUDA_SUCCESS) {
        adv_line("step %d: graph %d node %d keeps its parameters", step, j, k);
        return;
    }
    g->ops[k] = o;
}

/* The last node destroyed and/or a node added after the chain, or a node's
 * parameters changed. */
static void act_node(int step)
{
    int j = (int)rnd(NG);
    graph *g = &gs[j];
    if (!graph_usable(g)) return;
    if (rnd(2)) {
        node_set(step, j, g);
        return;
    }
    uint32_t r = rnd(3);
    if (r != 1 && g->nops > 1) {
        MUST(cuGraphDestroyNode(g->nodes[g->nops - 1]));
        g->nops--;
    }
    if (r != 0 && g->nops < MAXOPS) {
        op o;
        draw_op(&o);
        if (o.kind == O_ADD) g->modgen = modgen;
        if (add_node(g->g, &g->nodes[g->nops - 1], &g->nodes[g->nops], &o) != CUDA_SUCCESS) {
            adv_line("step %d: node refused in graph %d", step, j);
            return;
        }
        g->ops[g->nops] = o;
        g->birth[g->nops++] = next_birth++;
    }
}

static void act_memory(int step)
{
    int i = ND + (int)rnd(NF);
    if (mems[i].live) foreign_free(i);
    else foreign_alloc(i);
    adv_line("step %d: %s %s", step, fname[i - ND], mems[i].live ? "allocated" : "freed");
    /* graphs of a generation that will not come back: destroyed now and then */
    for (int j = 0; j < NG; j++)
        if (gs[j].live && !current(gs[j].ops, gs[j].nops) && rnd(2)) graph_destroy(j);
}

static void act_module(int step)
{
    MUST(cuModuleUnload(mod));
    char path[PATH_MAX + 64];
    adv_path("adv_kernels.so", path, sizeof path);
    MUST(cuModuleLoad(&mod, path));
    f_add = adv_fn(mod, "add_u32");
    modgen++;
    alloc_epoch++;                            /* a module may take device memory */
    adv_line("step %d: module loaded again", step);
    for (int j = 0; j < NG; j++)
        if (gs[j].live && !kernels_ok(gs[j].ops, gs[j].nops, gs[j].modgen) && rnd(2)) graph_destroy(j);
    for (int j = 0; j < NX; j++)
        if (xs[j].live && !kernels_ok(xs[j].ops, xs[j].nops, xs[j].modgen) && rnd(2)) exec_destroy(j);
}

/* The created context: destroyed (with what it left), or created and used. */
static void act_context(int step)
{
    if (cx.live && rnd(2)) {
        MUST(cuCtxDestroy(cx.c));
        cx.live = 0;
        MUST(cuCtxSetCurrent(ctx0));
        adv_line("step %d: context destroyed", step);
        return;
    }
    if (!cx.live) MUST(cuCtxCreate(&cx.c, NULL, 0, 0));
    else MUST(cuCtxSetCurrent(cx.c));
    cx.live = 1;
    CUdeviceptr b;
    CUstream s;
    CUgraph g;
    CUgraphExec x;
    uint32_t v1 = rnd(1000), v2 = rnd(1000), h = 1 + rnd(N - 1), want[N];
    MUST(cuMemAlloc(&b, N * 4));
    alloc_epoch++;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamBeginCapture(s, threads_mode ? CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
                                              : CU_STREAM_CAPTURE_MODE_GLOBAL));
    R(cuMemsetD32Async(b, v1, N, s));
    R(cuMemsetD32Async(b, v2, h, s));
    MUST(cuStreamEndCapture(s, &g));
    MUST(cuGraphInstantiateWithFlags(&x, g, 0));
    MUST(cuGraphDestroy(g));
    MUST(cuGraphLaunch(x, s));
    MUST(cuStreamSynchronize(s));
    for (uint32_t k = 0; k < N; k++) want[k] = k < h ? v2 : v1;
    char name[48];
    snprintf(name, sizeof name, "step%d_context", step);
    adv_check_words(name, b, want, N);
    if (rnd(2)) {                               /* else left to the context's end */
        MUST(cuGraphExecDestroy(x));
        MUST(cuStreamDestroy(s));
        MUST(cuMemFree(b));
    }
    MUST(cuCtxSetCurrent(ctx0));
}

/* ---- launches and checks ---- */

static int launchable(int i)
{
    exec *x = &xs[i];
    return x->live && mapped(x->ops, x->nops) && kernels_ok(x->ops, x->nops, x->modgen);
}

static void check_all(int step)
{
    for (int i = 0; i < NM; i++) {
        if (!mems[i].live) continue;
        uint32_t got[N];
        CUresult r = i < ND ? R(cuMemcpyDtoH(got, mems[i].p, N * 4))
                            : R(cuMemcpy((CUdeviceptr)(uintptr_t)got, mems[i].p, N * 4));
        int bad = 0, first = -1;
        for (int k = 0; k < N; k++)
            if (r != CUDA_SUCCESS || got[k] != mems[i].model[k]) {
                if (first < 0) first = k;
                bad++;
            }
        if (!bad)
            adv_check("slot", 1, "step %d, slot %d: fnv %016llx", step, i,
                      (unsigned long long)adv_fnv(mems[i].model, N * 4));
        else
            adv_check("slot", 0, "step %d, slot %d: %d words differ, first at %d", step, i, bad, first);
    }
}

/* A launchable exec from a random start (-1: none). */
static int pick_launchable(void)
{
    int s = (int)rnd(NX);
    for (int k = 0; k < NX; k++)
        if (launchable((s + k) % NX)) return (s + k) % NX;
    return -1;
}

static void launch_phase(int step)
{
    int a = pick_launchable(), b = pick_launchable();
    if (a < 0) return;
    int sa = (int)rnd(NSTR), sb = (int)rnd(NSTR), last = sa;
    if (R(cuGraphLaunch(xs[a].x, strs[sa])) != CUDA_SUCCESS) return;
    apply(xs[a].ops, xs[a].nops);
    if (b >= 0 && rnd(2)) {
        int e = (int)rnd(NEV);
        MUST(cuEventRecord(evs[e], strs[sa]));
        MUST(cuStreamWaitEvent(strs[sb], evs[e], 0));
        if (rnd(3) == 0) {                      /* destroyed with its wait queued */
            MUST(cuEventDestroy(evs[e]));
            MUST(cuEventCreate(&evs[e], CU_EVENT_DISABLE_TIMING));
        }
        if (R(cuGraphLaunch(xs[b].x, strs[sb])) == CUDA_SUCCESS) apply(xs[b].ops, xs[b].nops);
        last = sb;
    }
    CUevent fin;
    MUST(cuEventCreate(&fin, CU_EVENT_DISABLE_TIMING));
    MUST(cuEventRecord(fin, strs[last]));
    int gone = rnd(3) == 0;
    if (gone) {                                 /* destroyed with its work queued */
        MUST(cuStreamDestroy(strs[last]));
        MUST(cuStreamCreate(&strs[last], CU_STREAM_NON_BLOCKING));
    }
    uint32_t w = rnd(3);
    if (w == 0 || (w == 1 && threads_mode) || (w == 2 && gone)) MUST(cuEventSynchronize(fin));
    else if (w == 1) MUST(cuCtxSynchronize());
    else MUST(cuStreamSynchronize(strs[last]));
    MUST(cuEventDestroy(fin));
    check_all(step);
}

static void run(unsigned long seed, int thr)
{
    threads_mode = thr;
    rng = 0x9e3779b97f4a7c15ull ^ ((seed + 1) * 0x100000001b3ull);
    for (int k = 0; k < 5; k++) rnd(2);
    MUST(cuMemAddressReserve(&vmm_va, vmm_bytes, 0, 0, 0));
    for (int i = 0; i < ND; i++) {
        MUST(cuMemAlloc(&mems[i].p, N * 4));
        mems[i].live = 1;
        mem_upload(i);
    }
    for (int i = ND; i < NM; i++) foreign_alloc(i);
    for (int s = 0; s < NSTR; s++) MUST(cuStreamCreate(&strs[s], CU_STREAM_NON_BLOCKING));
    for (int e = 0; e < NEV; e++) MUST(cuEventCreate(&evs[e], CU_EVENT_DISABLE_TIMING));
    for (int step = 0; step < STEPS; step++) {
        int nact = 1 + (int)rnd(4);
        for (int k = 0; k < nact; k++) {
            uint32_t r = rnd(100);
            if (r < 22) act_graph(step);
            else if (r < 28) { int j = (int)rnd(NG); if (gs[j].live) graph_destroy(j); }
            else if (r < 42) act_inst(step);
            else if (r < 46) { int j = (int)rnd(NX); if (xs[j].live) exec_destroy(j); }
            else if (r < 62) act_update(step);
            else if (r < 70) act_setter(step);
            else if (r < 78) act_node(step);
            else if (r < 82) {
                int s = (int)rnd(NSTR);
                MUST(cuStreamDestroy(strs[s]));
                MUST(cuStreamCreate(&strs[s], CU_STREAM_NON_BLOCKING));
            } else if (r < 85) {
                int e = (int)rnd(NEV);
                MUST(cuEventDestroy(evs[e]));
                MUST(cuEventCreate(&evs[e], CU_EVENT_DISABLE_TIMING));
            } else if (r < 93) act_memory(step);
            else if (r < 94 && !threads_mode) act_module(step);
            else if (r < 98) act_context(step);
        }
        launch_phase(step);
    }
    /* a last launch of every exec that may run, then the end of everything */
    for (int i = 0; i < NX; i++)
        if (launchable(i)) {
            MUST(cuGraphLaunch(xs[i].x, strs[0]));
            apply(xs[i].ops, xs[i].nops);
        }
    MUST(cuStreamSynchronize(strs[0]));
    check_all(STEPS);
    for (int i = 0; i < NX; i++)
        if (xs[i].live) exec_destroy(i);
    for (int j = 0; j < NG; j++)
        if (gs[j].live) graph_destroy(j);
    if (cx.live) MUST(cuCtxDestroy(cx.c));
    MUST(cuCtxSetCurrent(ctx0));
    for (int s = 0; s < NSTR; s++) MUST(cuStreamDestroy(strs[s]));
    for (int e = 0; e < NEV; e++) MUST(cuEventDestroy(evs[e]));
    for (int i = ND; i < NM; i++)
        if (mems[i].live) foreign_free(i);
    for (int i = 0; i < ND; i++) MUST(cuMemFree(mems[i].p));
    MUST(cuMemAddressFree(vmm_va, vmm_bytes));
}

static void work(void *arg) { run(*(unsigned long *)arg, 1); }

int main(int argc, char **argv)
{
    unsigned long seed;
    int mode = adv_seed_mode(argc, argv, modes, M_ONE, &seed);
    if (mode < 0) return 4;
    adv_open(&ctx0, &mod);
    f_add = adv_fn(mod, "add_u32");
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    MUST(cuMemGetAllocationGranularity(&vmm_bytes, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (mode == M_ONE) {
        run(seed, 0);
    } else {
        adv_seed_pair(work, seed, ctx0);
    }
    return adv_finish();
}
