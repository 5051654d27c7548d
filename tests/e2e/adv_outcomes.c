/*
 * tests/e2e/adv_outcomes.c: round 36, the outcome of every update call, the
 * ones the library answers itself (skipped, accepted by variants, refused
 * for a range) and the ones it forwards: the program prints every CUresult
 * and every field of the result info (node handles as their index in the
 * program's list of the nodes of every graph it built, never as pointers),
 * and after each call launches the exec and checks its output against a
 * host model of what the exec holds (a refused update changes nothing; the
 * next accepted one takes effect).
 *
 * The graph (captured each step, a chain):
 *   0 memset   t[i] = v                  (1D, 4-byte elements; or a variant)
 *   1 mad_u32  t[i] = t[i] * 3 + in[k][i]
 *   2 memcpy   out = t                   (1D, device to device)
 * t is the step's temporary: before a step the driver accepts, the exec's
 * temporary is freed and the step's allocated (the library places it at the
 * same address: the update is skippable where nothing else changed); a step
 * the driver refuses allocates a second one and frees it after the update,
 * and the exec's is freed once an accepted update replaced it. Step kinds:
 *   ok       the chain with k and v (identical ones are skippable apart
 *            from the temporary; k rotates over three inputs: variants);
 *   d16      node 0 a 1D memset of 2-byte elements (accepted: a 1D memset's
 *            dimensions may change);
 *   extra    a fourth node (TOPOLOGY_CHANGED, no error node);
 *   type0    node 0 a kernel (NODE_TYPE_CHANGED at node 0);
 *   hostcpy  node 2 copies to host memory (memory type: PARAMETERS_CHANGED);
 *   twod     node 0 a 2D memset (PARAMETERS_CHANGED);
 *   exits    node 2 depends on node 0, not node 1: more exit nodes
 *            (TOPOLOGY_CHANGED, an exit node, no from node);
 *   freed0   node 0 sets a buffer freed before the update (PARAMETERS_CHANGED
 *            at node 0: the library answers this one itself over placed
 *            memory);
 *   freed0_type2  freed0 and node 2 a kernel: the driver refuses node 0
 *            first (nodes are checked in order);
 *   twod_freed2   twod and node 2 copying from a freed buffer: the driver
 *            refuses node 0 first;
 *   null     an update with a NULL graph; gone: with a destroyed graph;
 *   legacy   freed0 by the legacy cuGraphExecUpdate; legacy_null: the same
 *            with a NULL hErrorNode_out; legacy_ok: ok by the legacy call.
 * Cases:
 *   mixed    the step kinds above in a fixed sequence, twice;
 *   setters  an exec fed by rotating inputs by its kernel setter (variants
 *            under skip_profiled), then exec setters the driver refuses (a
 *            memset / host / event / child graph setter on the kernel node,
 *            cuGraphExecNodeSetParams of another type, a node of another
 *            graph, a node added to the graph after instantiation,
 *            cuGraphNodeSetEnabled of a node not in the exec), each followed
 *            by a launch; then exec setters followed by refused updates
 *            (another node count, a node type), then an update from the
 *            graph (accepted; in the last round the graph holds the added
 *            node: refused).
 *   freed    operands freed while an exec or a graph holds them (placed
 *            memory under the library), a plain chain and one whose memset
 *            is in a child graph: the exec's own graph again, a new graph,
 *            exec setters (memset, memcpy, child graph, generic) naming a
 *            freed buffer.
 *   mixed_devlaunch  mixed, the exec instantiated for device launch (the
 *            library forwards its updates but for the freed operands).
 *   devices  a copy whose source rotates over three buffers, one on device 1
 *            (CUDAEMU_DEVICES=2): the driver refuses every update to it.
 * Usage: adv_outcomes mixed|setters|freed|mixed_devlaunch|devices
 */
#include "adv_common.h"

/* The legacy entry point (cuda.h maps the name to the _v2 one). */
#undef cuGraphExecUpdate
CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec, CUgraph, CUgraphNode *, CUgraphExecUpdateResult *);

#define N 64u

static CUcontext ctx;
static CUmodule mod;
static CUstream s, s2;
static CUfunction mad, fill;
static CUdeviceptr in[3], out;
static uint32_t hin[3][N], *hostbuf;
static uint64_t n = N;

/* ------------------------------------------------ the program's node list */

static CUgraphNode reg[4096];
static int nreg;

/* Appends the nodes of g (in cuGraphGetNodes order) to the list. */
static void reg_graph(CUgraph g)
{
    size_t k = 0;
    MUST(cuGraphGetNodes(g, NULL, &k));
    if (k > 64 || nreg + (int)k > (int)(sizeof reg / sizeof reg[0])) {
        printf("too many nodes\n");
        exit(2);
    }
    CUgraphNode v[64];
    MUST(cuGraphGetNodes(g, v, &k));
    for (size_t i = 0; i < k; i++) reg[nreg++] = v[i];
}

/* A node as the program knows it: "NULL", "n<index>" (its latest entry: a
 * destroyed node's handle may be reused) or "unknown". */
static const char *nid(CUgraphNode h, char *buf)
{
    if (!h) return "NULL";
    for (int i = nreg - 1; i >= 0; i--)
        if (reg[i] == h) {
            sprintf(buf, "n%d", i);
            return buf;
        }
    return "unknown";
}

static void print_info(const char *what, CUresult r, const CUgraphExecUpdateResultInfo *info)
{
    char a[16], b[16];
    printf("%s: %s, result %d, errorNode %s, errorFromNode %s\n", what, adv_err(r), (int)info->result,
           nid(info->errorNode, a), nid(info->errorFromNode, b));
}

/* ------------------------------------------------------------- the model */

/* What an exec holds (the last accepted state). */
typedef struct state { int k, d16; uint32_t v; } state;

/* Launches the exec and checks out against what st computes. */
static void run_check(CUgraphExec e, state st, const char *what)
{
    R(cuGraphLaunch(e, s));
    R(cuStreamSynchronize(s));
    uint32_t want[N];
    for (uint32_t i = 0; i < N; i++) {
        uint32_t t = st.d16 ? (st.v & 0xffffu) * 0x10001u : st.v;
        want[i] = t * 3u + hin[st.k][i];
    }
    adv_check_words(what, out, want, N);
}

/* ---------------------------------------------------------------- mixed */

enum { K_OK, K_D16, K_EXTRA, K_TYPE0, K_HOSTCPY, K_TWOD, K_EXITS, K_FREED0, K_FREED0_TYPE2, K_TWOD_FREED2,
       K_NULL, K_GONE, K_LEGACY, K_LEGACY_NULL, K_LEGACY_OK };
static const char *const kind_names[] = { "ok", "d16", "extra", "type0", "hostcpy", "twod", "exits", "freed0",
                                          "freed0_type2", "twod_freed2", "null", "gone", "legacy",
                                          "legacy_null", "legacy_ok" };

typedef struct step { int kind, k; uint32_t v; } step;

/* Captures the step's graph over temporary t (2 N words) and, for the freed
 * kinds, the buffer f (freed by the caller before the update). */
static CUgraph capture(step st, CUdeviceptr t, CUdeviceptr f)
{
    CUgraph g;
    CUevent e1, e2;
    void *margs[] = { &in[st.k], &t, &n };
    MUST(cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
    MUST(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    /* node 0 */
    CUdeviceptr t0 = st.kind == K_FREED0 || st.kind == K_FREED0_TYPE2 || st.kind == K_LEGACY ||
                             st.kind == K_LEGACY_NULL ? f : t;
    if (st.kind == K_TYPE0) {
        void *fargs[] = { &t, &st.v, &n };
        MUST(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, fargs, NULL));
    } else if (st.kind == K_D16) {
        MUST(cuMemsetD16Async(t, (unsigned short)st.v, 2 * N, s));
    } else if (st.kind == K_TWOD || st.kind == K_TWOD_FREED2) {
        MUST(cuMemsetD2D32Async(t, N * 4, st.v, N / 2, 2, s));
    } else {
        MUST(cuMemsetD32Async(t0, st.v, N, s));
    }
    /* node 1 */
    if (st.kind == K_EXITS) {
        MUST(cuEventRecord(e1, s));
        MUST(cuStreamWaitEvent(s2, e1, 0));
        MUST(cuLaunchKernel(mad, 1, 1, 1, 1, 1, 1, 0, s2, margs, NULL));
    } else {
        MUST(cuLaunchKernel(mad, 1, 1, 1, 1, 1, 1, 0, s, margs, NULL));
    }
    /* node 2 */
    if (st.kind == K_HOSTCPY) {
        MUST(cuMemcpyDtoHAsync(hostbuf, t, N * 4, s));
    } else if (st.kind == K_FREED0_TYPE2) {
        void *fargs[] = { &out, &st.v, &n };
        MUST(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, fargs, NULL));
    } else {
        MUST(cuMemcpyDtoDAsync(out, st.kind == K_TWOD_FREED2 ? f : t, N * 4, s));
    }
    if (st.kind == K_EXTRA) MUST(cuMemsetD32Async(t + N * 4, 1, N, s));
    if (st.kind == K_EXITS) {
        MUST(cuEventRecord(e2, s2));
        MUST(cuStreamWaitEvent(s, e2, 0));
    }
    MUST(cuStreamEndCapture(s, &g));
    MUST(cuEventDestroy(e1));
    MUST(cuEventDestroy(e2));
    reg_graph(g);
    return g;
}

static int freed_kind(int kind)
{
    return kind == K_FREED0 || kind == K_FREED0_TYPE2 || kind == K_TWOD_FREED2 || kind == K_LEGACY ||
           kind == K_LEGACY_NULL;
}

static void mixed(unsigned long long flags)
{
    static const step seq[] = {
        /* rotating inputs (variants under skip_profiled), one repeat */
        { K_OK, 0, 5 }, { K_OK, 0, 5 }, { K_OK, 1, 5 }, { K_OK, 2, 5 }, { K_OK, 0, 5 }, { K_OK, 1, 5 },
        { K_OK, 2, 5 }, { K_OK, 0, 5 }, { K_OK, 1, 5 }, { K_OK, 2, 5 },
        /* each refusal followed by the state the exec holds (skippable) and
         * a rotation */
        { K_EXTRA, 1, 5 }, { K_OK, 2, 5 }, { K_OK, 0, 5 }, { K_TYPE0, 2, 5 }, { K_OK, 0, 5 }, { K_OK, 1, 5 },
        { K_HOSTCPY, 0, 5 }, { K_OK, 1, 5 }, { K_OK, 2, 5 }, { K_TWOD, 1, 5 }, { K_OK, 2, 5 },
        { K_D16, 2, 7 }, { K_D16, 2, 7 }, { K_OK, 0, 5 }, { K_EXITS, 0, 5 }, { K_OK, 0, 5 }, { K_OK, 1, 5 },
        { K_FREED0, 1, 5 }, { K_OK, 1, 5 }, { K_OK, 2, 5 }, { K_FREED0_TYPE2, 2, 5 }, { K_OK, 2, 5 },
        { K_OK, 0, 5 }, { K_TWOD_FREED2, 0, 5 }, { K_OK, 0, 5 }, { K_OK, 1, 5 }, { K_NULL, 0, 5 },
        { K_OK, 1, 5 }, { K_OK, 2, 6 }, { K_GONE, 1, 5 }, { K_OK, 2, 6 }, { K_OK, 0, 5 }, { K_LEGACY, 2, 5 },
        { K_OK, 0, 5 }, { K_OK, 1, 5 }, { K_LEGACY_NULL, 0, 5 }, { K_OK, 1, 5 }, { K_OK, 2, 5 },
        { K_LEGACY_OK, 2, 5 }, { K_LEGACY_OK, 0, 5 },
    };
    const int nseq = (int)(sizeof seq / sizeof seq[0]);
    CUdeviceptr tcur;
    MUST(cuMemAlloc(&tcur, 2 * N * 4));
    CUgraph g0 = capture(seq[0], tcur, 0);
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g0, flags));
    state es = { 0, 0, 5 };
    run_check(e, es, "instantiated");
    CUgraph keep[2 * 64];
    int nkeep = 0;
    keep[nkeep++] = g0;
    for (int round = 0; round < 2; round++)
        for (int i = 1; i < nseq; i++) {
            step st = seq[i];
            char what[96];
            snprintf(what, sizeof what, "round %d step %d %s k%d v%u", round, i, kind_names[st.kind], st.k,
                     st.v);
            CUdeviceptr t, f = 0;
            /* a step the driver accepts gives its temporary back first (the
             * exec is not launched until the update: the next one may reuse
             * the address); a refused one's is a second buffer */
            int accepted = st.kind == K_OK || st.kind == K_D16 || st.kind == K_LEGACY_OK;
            if (accepted) MUST(cuMemFree(tcur));
            MUST(cuMemAlloc(&t, 2 * N * 4));
            if (freed_kind(st.kind)) MUST(cuMemAlloc(&f, 2 * N * 4));
            CUgraph g = NULL;
            if (st.kind != K_NULL) g = capture(st, t, f);
            if (f) MUST(cuMemFree(f));
            CUgraphExecUpdateResultInfo info = { .result = (CUgraphExecUpdateResult)99 };
            CUresult r;
            if (st.kind == K_GONE) {
                MUST(cuGraphDestroy(g));
                r = R(cuGraphExecUpdate_v2(e, g, &info));
                g = NULL;
                print_info(what, r, &info);
            } else if (st.kind == K_LEGACY || st.kind == K_LEGACY_NULL || st.kind == K_LEGACY_OK) {
                CUgraphNode en = (CUgraphNode)(uintptr_t)1;
                CUgraphExecUpdateResult ur = (CUgraphExecUpdateResult)99;
                int outs = st.kind != K_LEGACY_NULL;
                r = outs ? R(cuGraphExecUpdate(e, g, &en, &ur)) : R(cuGraphExecUpdate(e, g, NULL, &ur));
                char a[16];
                printf("%s: %s, result %d, errorNode %s\n", what, adv_err(r), (int)ur, outs ? nid(en, a) : "-");
            } else {
                r = R(cuGraphExecUpdate_v2(e, g, &info));
                print_info(what, r, &info);
            }
            if (r == CUDA_SUCCESS) {
                es = (state){ st.k, st.kind == K_D16, st.v };
                run_check(e, es, what);
                if (!accepted) MUST(cuMemFree(tcur));
                tcur = t;
            } else if (accepted) {
                /* (the exec holds a freed buffer: not launched; the output differs) */
                printf("%s: refused, the exec holds a freed temporary\n", what);
                tcur = t;
            } else {
                MUST(cuMemFree(t));
                run_check(e, es, what);
            }
            if (g) keep[nkeep++] = g;
        }
    R(cuGraphExecDestroy(e));
    for (int i = 0; i < nkeep; i++) R(cuGraphDestroy(keep[i]));
    R(cuMemFree(tcur));
}

/* -------------------------------------------------------------- setters */

static void CUDA_CB host_fn(void *arg) { (void)arg; }

/* The chain memset(acc = v) -> mad(in[k], acc) -> memcpy(out = acc), built
 * with explicit calls; *nodes gets its three nodes. */
static CUgraph build_chain(CUdeviceptr acc, int k, uint32_t v, CUgraphNode *nodes)
{
    CUgraph g;
    MUST(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS m = { .dst = acc, .pitch = N * 4, .value = v, .elementSize = 4, .width = N,
                                  .height = 1 };
    MUST(cuGraphAddMemsetNode(&nodes[0], g, NULL, 0, &m, ctx));
    void *margs[] = { &in[k], &acc, &n };
    nodes[1] = adv_add_kernel(g, &nodes[0], 1, mad, margs);
    CUDA_MEMCPY3D c = adv_copy_1d(out, acc, N * 4);
    MUST(cuGraphAddMemcpyNode(&nodes[2], g, &nodes[1], 1, &c, ctx));
    reg_graph(g);
    return g;
}

static void setters(void)
{
    CUdeviceptr acc;
    MUST(cuMemAlloc(&acc, N * 4));
    CUgraphNode nd[3], od[3];
    CUgraph g = build_chain(acc, 0, 5, nd);
    CUgraph other = build_chain(acc, 1, 5, od);
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    state es = { 0, 0, 5 };
    CUevent ev;
    MUST(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CUgraph child;
    MUST(cuGraphCreate(&child, 0));
    CUgraphNode cn;
    MUST(cuGraphAddEmptyNode(&cn, child, NULL, 0));
    reg_graph(child);
    void *margs[3][3];
    for (int k = 0; k < 3; k++) {
        margs[k][0] = &in[k];
        margs[k][1] = &acc;
        margs[k][2] = &n;
    }
    for (int round = 0; round < 3; round++) {
        /* rotating inputs: variants under skip_profiled */
        for (int i = 0; i < 9; i++) {
            int k = (i + round) % 3;
            char what[64];
            snprintf(what, sizeof what, "round %d rotate %d", round, i);
            CUresult r = ADV_SET_KERNEL(e, nd[1], mad, margs[k]);
            printf("%s: kernel setter k%d: %s\n", what, k, adv_err(r));
            if (r == CUDA_SUCCESS) es.k = k;
            run_check(e, es, what);
        }
        char what[64];
        CUresult r;
        /* setters the driver refuses */
        CUDA_MEMSET_NODE_PARAMS m = { .dst = acc, .pitch = N * 4, .value = 9, .elementSize = 4, .width = N,
                                      .height = 1 };
        r = R(cuGraphExecMemsetNodeSetParams(e, nd[1], &m, ctx));
        printf("round %d memset setter on the kernel node: %s\n", round, adv_err(r));
        run_check(e, es, "after the memset setter on the kernel node");
        CUDA_HOST_NODE_PARAMS hp = { .fn = host_fn, .userData = NULL };
        r = R(cuGraphExecHostNodeSetParams(e, nd[1], &hp));
        printf("round %d host setter on the kernel node: %s\n", round, adv_err(r));
        r = R(cuGraphExecEventRecordNodeSetEvent(e, nd[1], ev));
        printf("round %d event record setter on the kernel node: %s\n", round, adv_err(r));
        r = R(cuGraphExecChildGraphNodeSetParams(e, nd[1], child));
        printf("round %d child graph setter on the kernel node: %s\n", round, adv_err(r));
        CUgraphNodeParams np;
        memset(&np, 0, sizeof np);
        np.type = CU_GRAPH_NODE_TYPE_MEMSET;
        np.memset.dst = acc;
        np.memset.pitch = N * 4;
        np.memset.value = 9;
        np.memset.elementSize = 4;
        np.memset.width = N;
        np.memset.height = 1;
        np.memset.ctx = ctx;
        r = R(cuGraphExecNodeSetParams(e, nd[1], &np));
        printf("round %d generic memset on the kernel node: %s\n", round, adv_err(r));
        r = R(cuGraphNodeSetEnabled(e, od[1], 0));
        printf("round %d disable a node of another graph: %s\n", round, adv_err(r));
        r = ADV_SET_KERNEL(e, od[1], mad, margs[2]);
        printf("round %d kernel setter naming a node of another graph: %s\n", round, adv_err(r));
        if (r == CUDA_SUCCESS) es.k = 2;
        run_check(e, es, "after the setter naming a node of another graph");
        if (round == 2) {
            /* (last: the graph keeps the node, its next update is refused) */
            CUgraphNode added = adv_add_kernel(g, &nd[2], 1, mad, margs[1]);
            reg_graph(g);
            r = ADV_SET_KERNEL(e, added, mad, margs[1]);
            printf("round %d kernel setter naming a node added after instantiation: %s\n", round, adv_err(r));
            if (r == CUDA_SUCCESS) es.k = 1;
            run_check(e, es, "after the setter naming an added node");
        }
        /* exec setters, then a refused update (another topology), then an
         * accepted one from the graph (which holds k0 v5 then v6) */
        r = ADV_SET_KERNEL(e, nd[1], mad, margs[(round + 1) % 3]);
        if (r == CUDA_SUCCESS) es.k = (round + 1) % 3;
        m.value = 8;
        r = R(cuGraphExecMemsetNodeSetParams(e, nd[0], &m, ctx));
        if (r == CUDA_SUCCESS) es.v = 8;
        run_check(e, es, "after the setters");
        CUgraphNode extra[3];
        CUgraph bad = build_chain(acc, 0, 5, extra);
        adv_add_kernel(bad, &extra[2], 1, mad, margs[0]);
        reg_graph(bad);
        CUgraphExecUpdateResultInfo info = { .result = (CUgraphExecUpdateResult)99 };
        snprintf(what, sizeof what, "round %d refused update after setters", round);
        r = R(cuGraphExecUpdate_v2(e, bad, &info));
        print_info(what, r, &info);
        run_check(e, es, what);
        CUgraph typed;
        MUST(cuGraphCreate(&typed, 0));
        CUgraphNode t0, t1, t2;
        MUST(cuGraphAddMemsetNode(&t0, typed, NULL, 0, &m, ctx));
        MUST(cuGraphAddMemsetNode(&t1, typed, &t0, 1, &m, ctx));
        CUDA_MEMCPY3D c = adv_copy_1d(out, acc, N * 4);
        MUST(cuGraphAddMemcpyNode(&t2, typed, &t1, 1, &c, ctx));
        reg_graph(typed);
        snprintf(what, sizeof what, "round %d type-changed update after setters", round);
        r = R(cuGraphExecUpdate_v2(e, typed, &info));
        print_info(what, r, &info);
        run_check(e, es, what);
        snprintf(what, sizeof what, "round %d update from the graph", round);
        r = R(cuGraphExecUpdate_v2(e, g, &info));
        print_info(what, r, &info);
        if (r == CUDA_SUCCESS) es = (state){ 0, 0, 5 + (uint32_t)(round > 0) };
        run_check(e, es, what);
        /* the graph's memset value becomes 6 for the next rounds */
        CUDA_MEMSET_NODE_PARAMS m6 = { .dst = acc, .pitch = N * 4, .value = 6, .elementSize = 4, .width = N,
                                       .height = 1 };
        MUST(cuGraphMemsetNodeSetParams(nd[0], &m6));
        R(cuGraphDestroy(bad));
        R(cuGraphDestroy(typed));
    }
    R(cuGraphExecDestroy(e));
    R(cuGraphDestroy(g));
    R(cuGraphDestroy(other));
    R(cuGraphDestroy(child));
    R(cuEventDestroy(ev));
    R(cuMemFree(acc));
}

/* ---------------------------------------------------------------- freed */

/* The chain memset(b) -> mad(in[0], b) -> memcpy(out = b) in a new graph,
 * its memset in a child graph where child is set; *nodes its top-level
 * nodes. */
static CUgraph build_maybe_child(CUdeviceptr b, uint32_t v, int child, CUgraphNode *nodes)
{
    CUgraph g, c = NULL;
    MUST(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS m = { .dst = b, .pitch = N * 4, .value = v, .elementSize = 4, .width = N,
                                  .height = 1 };
    if (child) {
        CUgraphNode cm;
        MUST(cuGraphCreate(&c, 0));
        MUST(cuGraphAddMemsetNode(&cm, c, NULL, 0, &m, ctx));
        reg_graph(c);
        MUST(cuGraphAddChildGraphNode(&nodes[0], g, NULL, 0, c));
    } else {
        MUST(cuGraphAddMemsetNode(&nodes[0], g, NULL, 0, &m, ctx));
    }
    void *margs[] = { &in[0], &b, &n };
    nodes[1] = adv_add_kernel(g, &nodes[0], 1, mad, margs);
    CUDA_MEMCPY3D cp = adv_copy_1d(out, b, N * 4);
    MUST(cuGraphAddMemcpyNode(&nodes[2], g, &nodes[1], 1, &cp, ctx));
    if (c) MUST(cuGraphDestroy(c));
    reg_graph(g);
    return g;
}

/* An update from g, which names a freed buffer: printed; the exec, if
 * the update was refused, launched and checked against es. */
static void update_freed(CUgraphExec e, CUgraph g, state es, const char *what)
{
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    CUresult r = R(cuGraphExecUpdate_v2(e, g, &info));
    print_info(what, r, &info);
    if (r == CUDA_SUCCESS) printf("%s: accepted, the exec holds a freed buffer\n", what);
    else run_check(e, es, what);
}

/* Operands freed while an exec or a graph holds them (every buffer here is
 * placed under the library: the driver, seeing the reservation mapped,
 * would accept them). For a plain chain and one whose memset is in a child
 * graph: the exec updated from its own graph after the memset's buffer was
 * freed (identical: skippable, were it not for the freed buffer), from a
 * new graph whose child / memset names a freed buffer, exec setters naming
 * a freed buffer (memset, memcpy, the generic one); after each refusal the
 * exec runs what it held (from a live buffer) and an accepted update
 * follows. */
static void freed(void)
{
    for (int child = 0; child < 2; child++) {
        CUdeviceptr b, x;
        CUgraphNode nd[3], xd[3];
        char what[96];
        CUgraphExecUpdateResultInfo info;
        CUresult r;
        MUST(cuMemAlloc(&b, N * 4));
        CUgraph g = build_maybe_child(b, 5, child, nd);
        CUgraphExec e;
        MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        state es = { 0, 0, 5 };
        run_check(e, es, "instantiated");
        /* the exec's own graph, its memset's buffer freed */
        MUST(cuMemFree(b));
        memset(&info, 0, sizeof info);
        snprintf(what, sizeof what, "child %d: own graph, operand freed", child);
        r = R(cuGraphExecUpdate_v2(e, g, &info));
        print_info(what, r, &info);
        /* a new graph over a live buffer (accepted), then one over a freed one */
        MUST(cuMemAlloc(&b, N * 4));
        CUgraph g2 = build_maybe_child(b, 6, child, xd);
        snprintf(what, sizeof what, "child %d: live operand", child);
        r = R(cuGraphExecUpdate_v2(e, g2, &info));
        print_info(what, r, &info);
        if (r == CUDA_SUCCESS) es.v = 6;
        run_check(e, es, what);
        MUST(cuMemAlloc(&x, N * 4));
        CUgraph g3 = build_maybe_child(x, 7, child, xd);
        MUST(cuMemFree(x));
        snprintf(what, sizeof what, "child %d: new graph, operand freed", child);
        update_freed(e, g3, es, what);
        /* only the memset (in the child graph) names a freed buffer */
        CUgraph g4 = build_maybe_child(b, 8, child, xd);
        CUgraphNode m4 = xd[0];
        if (child) {
            CUgraph c4;
            size_t one = 1;
            MUST(cuGraphChildGraphNodeGetGraph(xd[0], &c4));
            MUST(cuGraphGetNodes(c4, &m4, &one));
        }
        MUST(cuMemAlloc(&x, N * 4));
        CUDA_MEMSET_NODE_PARAMS mx = { .dst = x, .pitch = N * 4, .value = 8, .elementSize = 4, .width = N,
                                       .height = 1 };
        MUST(cuGraphMemsetNodeSetParams(m4, &mx));
        MUST(cuMemFree(x));
        snprintf(what, sizeof what, "child %d: only the memset's buffer freed", child);
        update_freed(e, g4, es, what);
        /* exec setters naming a freed buffer (the top-level memset node,
         * or the kernel node where it is a child graph node) */
        MUST(cuMemAlloc(&x, N * 4));
        MUST(cuMemFree(x));
        CUDA_MEMSET_NODE_PARAMS m = { .dst = x, .pitch = N * 4, .value = 9, .elementSize = 4, .width = N,
                                      .height = 1 };
        int took = 0;
        r = R(cuGraphExecMemsetNodeSetParams(e, nd[child], &m, ctx));
        printf("child %d: memset setter, freed buffer: %s\n", child, adv_err(r));
        took += r == CUDA_SUCCESS;
        CUDA_MEMCPY3D cp = adv_copy_1d(out, x, N * 4);
        r = R(cuGraphExecMemcpyNodeSetParams(e, nd[2], &cp, ctx));
        printf("child %d: memcpy setter, freed source: %s\n", child, adv_err(r));
        took += r == CUDA_SUCCESS;
        CUgraphNodeParams np;
        memset(&np, 0, sizeof np);
        np.type = CU_GRAPH_NODE_TYPE_MEMCPY;
        np.memcpy.copyCtx = ctx;
        np.memcpy.copyParams = cp;
        r = R(cuGraphExecNodeSetParams(e, nd[2], &np));
        printf("child %d: generic memcpy setter, freed source: %s\n", child, adv_err(r));
        took += r == CUDA_SUCCESS;
        /* child graph setters (node 0: a memset node where child is 0) with
         * a child graph whose memset names a freed buffer */
        CUgraph cf;
        CUgraphNode cfm;
        MUST(cuGraphCreate(&cf, 0));
        MUST(cuMemAlloc(&x, N * 4));
        m.dst = x;
        MUST(cuGraphAddMemsetNode(&cfm, cf, NULL, 0, &m, ctx));
        MUST(cuMemFree(x));
        reg_graph(cf);
        r = R(cuGraphExecChildGraphNodeSetParams(e, nd[0], cf));
        printf("child %d: child graph setter, freed buffer: %s\n", child, adv_err(r));
        took += r == CUDA_SUCCESS;
        memset(&np, 0, sizeof np);
        np.type = CU_GRAPH_NODE_TYPE_GRAPH;
        np.graph.graph = cf;
        r = R(cuGraphExecNodeSetParams(e, nd[0], &np));
        printf("child %d: generic child graph setter, freed buffer: %s\n", child, adv_err(r));
        took += r == CUDA_SUCCESS;
        R(cuGraphDestroy(cf));
        if (took) printf("child %d: %d setters took a freed buffer\n", child, took);
        else run_check(e, es, "after the setters naming a freed buffer");
        R(cuGraphExecDestroy(e));
        R(cuGraphDestroy(g));
        R(cuGraphDestroy(g2));
        R(cuGraphDestroy(g3));
        R(cuGraphDestroy(g4));
        R(cuMemFree(b));
    }
}

/* -------------------------------------------------------------- devices */

/* A copy node out = src[k] whose source rotates over three buffers, the
 * second on device 1 (peer access on): the driver refuses an update that
 * moves a memcpy operand to another device ("The CUDA device(s) to which
 * the operand(s) was allocated/mapped cannot change"), so the exec keeps
 * the device 0 sources while every update to the device 1 one is refused,
 * and neither variants nor a skip may accept it. Needs CUDAEMU_DEVICES=2. */
static void devices(void)
{
    CUdevice d1;
    CUcontext c1;
    int n_dev = 0;
    MUST(cuDeviceGetCount(&n_dev));
    if (n_dev < 2) {
        printf("needs two devices\n");
        exit(2);
    }
    MUST(cuDeviceGet(&d1, 1));
    MUST(cuDevicePrimaryCtxRetain(&c1, d1));
    MUST(cuCtxSetCurrent(c1));
    CUdeviceptr b1;
    MUST(cuMemAlloc(&b1, N * 4));
    uint32_t h1[N];
    for (uint32_t i = 0; i < N; i++) h1[i] = 0x9000u + i;
    MUST(cuMemcpyHtoD(b1, h1, sizeof h1));
    MUST(cuCtxEnablePeerAccess(ctx, 0));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuCtxEnablePeerAccess(c1, 0));
    CUdeviceptr src[3] = { in[0], b1, in[2] };
    const uint32_t *hsrc[3] = { hin[0], h1, hin[2] };
    CUgraphExec e = NULL;
    int held = 0;
    for (int step = 0; step < 30; step++) {
        int k = step % 3;
        CUgraph g;
        MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        MUST(cuMemcpyDtoDAsync(out, src[k], N * 4, s));
        MUST(cuStreamEndCapture(s, &g));
        reg_graph(g);
        char what[64];
        snprintf(what, sizeof what, "step %d source %d", step, k);
        if (!e) {
            MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        } else {
            CUgraphExecUpdateResultInfo info = { .result = (CUgraphExecUpdateResult)99 };
            CUresult r = R(cuGraphExecUpdate_v2(e, g, &info));
            print_info(what, r, &info);
            if (r == CUDA_SUCCESS) held = k;
        }
        R(cuGraphLaunch(e, s));
        R(cuStreamSynchronize(s));
        adv_check_words(what, out, hsrc[held], N);
        R(cuGraphDestroy(g));
    }
    R(cuGraphExecDestroy(e));
    R(cuMemFree(b1));
}

int main(int argc, char **argv)
{
    static const char *const cases[] = { "mixed", "setters", "freed", "mixed_devlaunch", "devices", NULL };
    int which = adv_case(argc, argv, cases);
    adv_open(&ctx, &mod);
    mad = adv_fn(mod, "mad_u32");
    fill = adv_fn(mod, "fill_u32");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAllocHost((void **)&hostbuf, N * 4));
    for (int k = 0; k < 3; k++) {
        MUST(cuMemAlloc(&in[k], N * 4));
        for (uint32_t i = 0; i < N; i++) hin[k][i] = 0x100u * (uint32_t)(k + 1) + 7u * i;
        MUST(cuMemcpyHtoD(in[k], hin[k], sizeof hin[k]));
    }
    MUST(cuMemAlloc(&out, N * 4));
    if (which == 0) mixed(0);
    else if (which == 1) setters();
    else if (which == 2) freed();
    else if (which == 3) mixed(CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH);
    else devices();
    for (int k = 0; k < 3; k++) R(cuMemFree(in[k]));
    R(cuMemFree(out));
    R(cuMemFreeHost(hostbuf));
    R(cuStreamDestroy(s));
    R(cuStreamDestroy(s2));
    return adv_finish();
}
