/*
 * tests/unit/test_graphs.c: core/graphs.c through sg_core_call() against the
 * in-memory fake driver (fake_graph.h): the skip / forward decision for
 * cuGraphExecUpdate (v2 and legacy) and the per-node updates, how the result
 * info is filled, the reasons counted, the record replaced only after a
 * successful forward, exec_modified handling, unsupported and untracked
 * execs, would_skip under always_update, and execs of graphs holding
 * user-object references.
 */
#include "check.h"
#include "fake_graph.h"
#include "core/fingerprint.h"
#include "core/lock.h"
#include "core/stats.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

typedef struct fwd {
    int calls;
    CUresult result;
    CUgraphExec make;              /* INSTANTIATE: the exec handed out */
    CUgraphExec *out;
} fwd;

static CUresult fake_forward(const void *p)
{
    fwd *a = (fwd *)p;
    a->calls++;
    if (a->out) *a->out = a->make;
    return a->result;
}

static const size_t sizes3[] = { 8, 4, 8 };
static ff f_k;
static CUdeviceptr p_in = FG_DEV_LO + 0x1000, p_out = FG_DEV_LO + 0x2000, p_other = FG_DEV_LO + 0x3000;
static uint32_t salt = 7;

/* kernel(in, salt, out) -> memcpy -> memset, plus an optional extra node. */
static void make_graph(fg *g, int extra_type)
{
    fg_make_chain(g, &f_k, &p_in, &salt, &p_out);
    if (extra_type >= 0) fg_other(g, (CUgraphNodeType)extra_type);
}

static void set_policy(sg_policy p)
{
    sg_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.policy = p;
    sg_core_reset();
    sg_core_init(&cfg);
    fg_install();
}

/* made: g is first made by a cuGraphCreate through core/ (fg_made); 0 for a
 * graph already made (a clone). */
static CUgraphExec instantiate_made(fg *g, uintptr_t handle, int made)
{
    if (made) fg_made(g);
    CUgraphExec got = NULL;
    fwd f = { 0, CUDA_SUCCESS, (CUgraphExec)handle, &got };
    sg_call c = { .kind = SG_CALL_INSTANTIATE, .forward = fake_forward, .args = &f,
                  .u.inst = { .out = &got, .graph = (CUgraph)g } };
    CHECK_CU(sg_core_call(&c), CUDA_SUCCESS);
    CHECK_EQ(f.calls, 1);
    return got;
}

static CUgraphExec instantiate(fg *g, uintptr_t handle) { return instantiate_made(g, handle, 1); }

/* cuGraphExecUpdate_v2(exec, g, info) with the driver answering `result`;
 * returns what the program got, *calls = whether the driver was called. */
static CUresult update_v2(CUgraphExec e, fg *g, CUgraphExecUpdateResultInfo *info, CUresult result,
                          int *calls)
{
    fwd f = { 0, result, NULL, NULL };
    sg_call c = { .kind = SG_CALL_UPDATE_GRAPH, .forward = fake_forward, .args = &f,
                  .u.update = { .exec = e, .graph = (CUgraph)g, .info = info } };
    CUresult r = sg_core_call(&c);
    *calls = f.calls;
    return r;
}

/* cuGraphExecKernelNodeSetParams_v2 (or the v1 if v1 != NULL). */
static CUresult update_kernel(CUgraphExec e, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *p,
                              const CUDA_KERNEL_NODE_PARAMS_v1 *v1, CUresult result, int *calls)
{
    fwd f = { 0, result, NULL, NULL };
    sg_call c = { .kind = SG_CALL_UPDATE_NODE, .forward = fake_forward, .args = &f,
                  .u.node_update = { .exec = e, .node = node,
                                     .kind = v1 ? SG_NODE_KERNEL_V1 : SG_NODE_KERNEL,
                                     .params = v1 ? (const void *)v1 : (const void *)p } };
    CUresult r = sg_core_call(&c);
    *calls = f.calls;
    return r;
}

static CUresult update_node(CUgraphExec e, CUgraphNode node, CUgraphNodeParams *p, int *calls)
{
    fwd f = { 0, CUDA_SUCCESS, NULL, NULL };
    sg_call c = { .kind = SG_CALL_UPDATE_NODE, .forward = fake_forward, .args = &f,
                  .u.node_update = { .exec = e, .node = node, .kind = SG_NODE_GENERIC, .params = p } };
    CUresult r = sg_core_call(&c);
    *calls = f.calls;
    return r;
}

static void simple_call(sg_call_kind kind, CUgraphExec e)
{
    fwd f = { 0, CUDA_SUCCESS, NULL, NULL };
    sg_call c = { .kind = kind, .forward = fake_forward, .args = &f };
    if (kind == SG_CALL_LAUNCH) c.u.launch.exec = e;
    else c.u.exec.exec = e;
    CHECK_CU(sg_core_call(&c), CUDA_SUCCESS);
    CHECK_EQ(f.calls, 1);
}

/* The report's view of the exec with report id `id`. */
typedef struct { unsigned long id; sg_exec_info info; } find_ctx;
static void find_exec(const sg_exec_info *e, void *p)
{
    find_ctx *f = p;
    if (e->id == f->id) f->info = *e;
}
static sg_exec_info exec_info(unsigned long id)
{
    find_ctx f;
    memset(&f, 0, sizeof f);
    f.id = id;
    sg_exec_foreach(find_exec, &f);
    return f.info;
}

TEST(identical_update_is_skipped_and_filled)
{
    set_policy(SG_POLICY_SKIP_TEMP);
    fg a, b;
    make_graph(&a, -1);
    CUgraphExec e = instantiate(&a, 0xe001);
    fg_copy(&b, &a);
    int calls;
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0x5a, sizeof info);
    CHECK_CU(update_v2(e, &b, &info, CUDA_ERROR_UNKNOWN, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 0);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    CHECK(info.errorNode == NULL && info.errorFromNode == NULL);

    /* legacy cuGraphExecUpdate */
    CUgraphNode err = (CUgraphNode)1;
    CUgraphExecUpdateResult res = CU_GRAPH_EXEC_UPDATE_ERROR;
    fwd f = { 0, CUDA_ERROR_UNKNOWN, NULL, NULL };
    sg_call c = { .kind = SG_CALL_UPDATE_GRAPH, .forward = fake_forward, .args = &f,
                  .u.update = { .exec = e, .graph = (CUgraph)&b, .error_node = &err, .result = &res } };
    CHECK_CU(sg_core_call(&c), CUDA_SUCCESS);
    CHECK_EQ(f.calls, 0);
    CHECK(err == NULL);
    CHECK_EQ(res, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    /* NULL out-pointers: the driver gives its own error */
    c.u.update.error_node = NULL;
    CHECK_CU(sg_core_call(&c), CUDA_ERROR_UNKNOWN);
    CHECK_EQ(f.calls, 1);
    CHECK_CU(update_v2(e, &b, NULL, CUDA_ERROR_INVALID_VALUE, &calls), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(calls, 1);

    sg_totals t = sg_stats_totals();
    CHECK_EQ(t.updates_seen, 4);
    CHECK_EQ(t.updates_skipped, 2);
    CHECK_EQ(t.updates_forwarded, 2);
    sg_exec_info x = exec_info(1);
    CHECK_EQ(x.updates_skipped, 2);
    CHECK_EQ(x.nodes, 3);
    simple_call(SG_CALL_EXEC_DESTROY, e);
}

TEST(record_replaced_only_after_successful_forward)
{
    set_policy(SG_POLICY_SKIP_TEMP);
    fg a, b, changed;
    make_graph(&a, -1);
    CUgraphExec e = instantiate(&a, 0xe002);
    fg_copy(&b, &a);
    fg_copy(&changed, &a);
    uint32_t s2 = 8;
    memcpy(changed.nodes[0].args[1], &s2, 4);
    int calls;
    CUgraphExecUpdateResultInfo info;
    /* a failed update leaves the exec as it was: the original still skips */
    CHECK_CU(update_v2(e, &changed, &info, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, &calls),
             CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(calls, 1);
    CHECK_CU(update_v2(e, &b, &info, CUDA_ERROR_UNKNOWN, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 0);
    /* a successful one replaces the record */
    CHECK_CU(update_v2(e, &changed, &info, CUDA_SUCCESS, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    CHECK_CU(update_v2(e, &changed, &info, CUDA_ERROR_UNKNOWN, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 0);
    CHECK_CU(update_v2(e, &b, &info, CUDA_SUCCESS, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    /* a pointer-only change, a topology change */
    fg_copy(&changed, &a);
    memcpy(changed.nodes[0].args[2], &p_other, 8);
    CHECK_CU(update_v2(e, &changed, &info, CUDA_SUCCESS, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    fg_copy(&changed, &a);
    changed.ne = 1;
    CHECK_CU(update_v2(e, &changed, &info, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, &calls),
             CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    sg_exec_info x = exec_info(1);
    CHECK_EQ(x.updates_seen, 7);
    CHECK_EQ(x.updates_skipped, 2);
    CHECK_EQ(x.reasons[SG_REASON_SCALAR_CHANGED], 3);
    CHECK_EQ(x.reasons[SG_REASON_POINTER_CHANGED], 1);
    CHECK_EQ(x.reasons[SG_REASON_TOPOLOGY], 1);
    simple_call(SG_CALL_EXEC_DESTROY, e);
}

TEST(kernel_node_updates)
{
    set_policy(SG_POLICY_SKIP_TEMP);
    fg a;
    make_graph(&a, -1);
    CUgraphExec e = instantiate(&a, 0xe003);
    CUgraphNode kn = (CUgraphNode)&a.nodes[0];
    CUDA_KERNEL_NODE_PARAMS p = a.nodes[0].kp;   /* same values, other storage */
    unsigned char args[3][8];
    void *argv[3] = { args[0], args[1], args[2] };
    memcpy(args[0], &p_in, 8);
    memcpy(args[1], &salt, 4);
    memcpy(args[2], &p_out, 8);
    p.kernelParams = argv;
    int calls;
    CHECK_CU(update_kernel(e, kn, &p, NULL, CUDA_ERROR_UNKNOWN, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 0);
    CUDA_KERNEL_NODE_PARAMS_v1 v1 = { .func = p.func, .gridDimX = p.gridDimX, .gridDimY = p.gridDimY,
        .gridDimZ = p.gridDimZ, .blockDimX = p.blockDimX, .blockDimY = p.blockDimY,
        .blockDimZ = p.blockDimZ, .kernelParams = argv };
    CHECK_CU(update_kernel(e, kn, NULL, &v1, CUDA_ERROR_UNKNOWN, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 0);
    /* a scalar change: forwarded; failed -> record kept; succeeded -> new record */
    uint32_t s2 = 99;
    memcpy(args[1], &s2, 4);
    CHECK_CU(update_kernel(e, kn, &p, NULL, CUDA_ERROR_INVALID_VALUE, &calls),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(calls, 1);
    CHECK_CU(update_kernel(e, kn, &p, NULL, CUDA_SUCCESS, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    CHECK_CU(update_kernel(e, kn, &p, NULL, CUDA_ERROR_UNKNOWN, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 0);
    /* the graph now differs from the exec: the whole-graph update is forwarded */
    fg b;
    fg_copy(&b, &a);
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(update_v2(e, &b, &info, CUDA_SUCCESS, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    /* dims changed; an unknown node */
    p.gridDimX = 8;
    CHECK_CU(update_kernel(e, kn, &p, NULL, CUDA_SUCCESS, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    CHECK_CU(update_kernel(e, (CUgraphNode)&b.nodes[0], &p, NULL, CUDA_ERROR_INVALID_VALUE, &calls),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(calls, 1);
    sg_exec_info x = exec_info(1);
    CHECK_EQ(x.updates_skipped, 3);
    CHECK_EQ(x.reasons[SG_REASON_SCALAR_CHANGED], 3);
    CHECK_EQ(x.reasons[SG_REASON_DIMS_CHANGED], 1);
    CHECK_EQ(x.reasons[SG_REASON_NOT_COMPARABLE], 1);

    /* memcpy and memset through cuGraphExecNodeSetParams */
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEMCPY;
    np.memcpy.copyParams = a.nodes[1].cp;
    CHECK_CU(update_node(e, (CUgraphNode)&a.nodes[1], &np, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 0);
    np.memcpy.copyParams.WidthInBytes = 8;
    CHECK_CU(update_node(e, (CUgraphNode)&a.nodes[1], &np, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEMSET;
    np.memset.dst = a.nodes[2].ms.dst;
    np.memset.elementSize = 4;
    np.memset.width = 16;
    np.memset.height = 1;
    CHECK_CU(update_node(e, (CUgraphNode)&a.nodes[2], &np, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 0);
    np.memset.value = 3;
    CHECK_CU(update_node(e, (CUgraphNode)&a.nodes[2], &np, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    /* another node type: forwarded, and the record no longer trusted */
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_HOST;
    CHECK_CU(update_node(e, (CUgraphNode)&a.nodes[2], &np, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    np.type = CU_GRAPH_NODE_TYPE_MEMSET;
    np.memset.dst = a.nodes[2].ms.dst;
    np.memset.elementSize = 4;
    np.memset.width = 16;
    np.memset.height = 1;
    np.memset.value = 3;
    CHECK_CU(update_node(e, (CUgraphNode)&a.nodes[2], &np, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    x = exec_info(1);
    CHECK_EQ(x.reasons[SG_REASON_MEMCPY_CHANGED], 1);
    CHECK_EQ(x.reasons[SG_REASON_MEMSET_CHANGED], 1);
    CHECK_EQ(x.reasons[SG_REASON_UNSUPPORTED_NODE], 1);
    CHECK_EQ(x.reasons[SG_REASON_EXEC_MODIFIED], 1);
    simple_call(SG_CALL_EXEC_DESTROY, e);
}

TEST(exec_modified_then_rebuilt)
{
    set_policy(SG_POLICY_SKIP_TEMP);
    fg a, b;
    make_graph(&a, -1);
    fg_copy(&b, &a);
    CUgraphExec e = instantiate(&a, 0xe004);
    simple_call(SG_CALL_EXEC_DIRTY, e);
    int calls;
    CUgraphExecUpdateResultInfo info;
    CUDA_KERNEL_NODE_PARAMS p = a.nodes[0].kp;
    CHECK_CU(update_kernel(e, (CUgraphNode)&a.nodes[0], &p, NULL, CUDA_SUCCESS, &calls),
             CUDA_SUCCESS);
    CHECK_EQ(calls, 1);                   /* stale: forwarded although identical */
    CHECK_CU(update_v2(e, &b, &info, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, &calls),
             CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(calls, 1);                   /* failed: still stale */
    CHECK_CU(update_v2(e, &b, &info, CUDA_SUCCESS, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);                   /* succeeded: rebuilt from b */
    CHECK_CU(update_v2(e, &b, &info, CUDA_ERROR_UNKNOWN, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 0);
    CHECK_CU(update_kernel(e, (CUgraphNode)&a.nodes[0], &p, NULL, CUDA_ERROR_UNKNOWN, &calls),
             CUDA_SUCCESS);
    CHECK_EQ(calls, 0);                   /* nodes still named by the original graph */
    sg_exec_info x = exec_info(1);
    CHECK_EQ(x.reasons[SG_REASON_EXEC_MODIFIED], 3);
    CHECK_EQ(x.updates_skipped, 2);
    simple_call(SG_CALL_EXEC_DESTROY, e);
}

TEST(unsupported_and_untracked_execs)
{
    set_policy(SG_POLICY_SKIP_TEMP);
    fg a, b;
    int calls;
    CUgraphExecUpdateResultInfo info;
    make_graph(&a, CU_GRAPH_NODE_TYPE_HOST);
    fg_copy(&b, &a);
    CUgraphExec e = instantiate(&a, 0xe005);
    CHECK_CU(update_v2(e, &b, &info, CUDA_SUCCESS, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    CHECK_CU(update_kernel(e, (CUgraphNode)&a.nodes[0], &a.nodes[0].kp, NULL, CUDA_SUCCESS, &calls),
             CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    CHECK_EQ(exec_info(1).reasons[SG_REASON_UNSUPPORTED_NODE], 2);
    simple_call(SG_CALL_EXEC_DESTROY, e);

    /* instantiated for device launch */
    make_graph(&a, -1);
    fg_copy(&b, &a);
    fg_exec_flags = CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
    e = instantiate(&a, 0xe006);
    fg_exec_flags = 0;
    CHECK_CU(update_v2(e, &b, &info, CUDA_SUCCESS, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    CHECK_EQ(exec_info(2).reasons[SG_REASON_UNSUPPORTED_NODE], 1);
    simple_call(SG_CALL_EXEC_DESTROY, e);

    /* an exec never seen instantiated: forwarded until an update tells its content */
    e = (CUgraphExec)(uintptr_t)0xe007;
    CHECK_CU(update_kernel(e, (CUgraphNode)&a.nodes[0], &a.nodes[0].kp, NULL, CUDA_SUCCESS, &calls),
             CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    CHECK_CU(update_v2(e, &b, &info, CUDA_SUCCESS, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    CHECK_CU(update_v2(e, &b, &info, CUDA_ERROR_UNKNOWN, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 0);
    CHECK_CU(update_kernel(e, (CUgraphNode)&a.nodes[0], &a.nodes[0].kp, NULL, CUDA_SUCCESS, &calls),
             CUDA_SUCCESS);
    CHECK_EQ(calls, 1);                   /* its node names are unknown */
    sg_exec_info x = exec_info(3);
    CHECK_EQ(x.reasons[SG_REASON_UNTRACKED_EXEC], 3);
    CHECK_EQ(x.updates_skipped, 1);
    /* destroyed: the record goes, the same handle is untracked again */
    simple_call(SG_CALL_EXEC_DESTROY, e);
    CHECK_CU(update_v2(e, &b, &info, CUDA_SUCCESS, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    simple_call(SG_CALL_EXEC_DESTROY, e);
}

/* A graph call (retain of user-object references, clone, destroy) the
 * driver answers with `result`. */
static void graph_call(sg_call_kind kind, fg *g, CUgraph *out, CUresult result)
{
    fwd f = { 0, result, NULL, NULL };
    sg_call c = { .kind = kind, .forward = fake_forward, .args = &f };
    if (kind == SG_CALL_GRAPH_CLONE) c.u.clone = (typeof(c.u.clone)){ .out = out, .orig = (CUgraph)g };
    else c.u.graph.graph = (CUgraph)g;
    CHECK_CU(sg_core_call(&c), result);
    CHECK_EQ(f.calls, 1);
}

/* Graphs holding user-object references (core/graph_uobj.c): an exec made or
 * updated from one forwards every whole-graph update, identical ones too
 * (the driver replaces its references), for good; per-node updates are still
 * compared; a clone of a marked graph is marked; a destroy unmarks; a retain
 * the driver refused marks nothing. */
TEST(user_object_graphs)
{
    set_policy(SG_POLICY_SKIP_TEMP);
    fg a, b, k, d;
    int calls;
    CUgraphExecUpdateResultInfo info;
    make_graph(&a, -1);
    fg_copy(&b, &a);
    fg_copy(&k, &a);
    fg_copy(&d, &a);
    CUgraphExec e = instantiate(&a, 0xe101);
    graph_call(SG_CALL_GRAPH_UOBJ, &b, NULL, CUDA_SUCCESS);
    CHECK_CU(update_v2(e, &b, &info, CUDA_SUCCESS, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);                   /* identical, but b holds references */
    CHECK_CU(update_v2(e, &a, &info, CUDA_SUCCESS, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);                   /* the exec held b's: forwarded for good */
    CHECK_CU(update_kernel(e, (CUgraphNode)&a.nodes[0], &a.nodes[0].kp, NULL, CUDA_ERROR_UNKNOWN, &calls),
             CUDA_SUCCESS);
    CHECK_EQ(calls, 0);                   /* a per-node update moves no reference */
    CHECK_EQ(exec_info(1).reasons[SG_REASON_USER_OBJECTS], 2);
    simple_call(SG_CALL_EXEC_DESTROY, e);

    /* instantiated from a clone of b: marked from the start */
    CUgraph out = (CUgraph)&k;
    graph_call(SG_CALL_GRAPH_CLONE, &b, &out, CUDA_SUCCESS);
    e = instantiate_made(&k, 0xe102, 0);
    CHECK_CU(update_v2(e, &a, &info, CUDA_SUCCESS, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    CHECK_EQ(exec_info(2).reasons[SG_REASON_USER_OBJECTS], 1);
    simple_call(SG_CALL_EXEC_DESTROY, e);

    /* b and k destroyed: their handles are no longer marked; a retain the
     * driver refused marks nothing */
    graph_call(SG_CALL_GRAPH_DESTROY, &b, NULL, CUDA_SUCCESS);
    graph_call(SG_CALL_GRAPH_DESTROY, &k, NULL, CUDA_SUCCESS);
    graph_call(SG_CALL_GRAPH_UOBJ, &d, NULL, CUDA_ERROR_INVALID_VALUE);
    e = instantiate(&k, 0xe103);
    CHECK_CU(update_v2(e, &b, &info, CUDA_ERROR_UNKNOWN, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 0);
    CHECK_CU(update_v2(e, &d, &info, CUDA_ERROR_UNKNOWN, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 0);
    simple_call(SG_CALL_EXEC_DESTROY, e);
}

TEST(always_update_counts_would_skip)
{
    set_policy(SG_POLICY_ALWAYS_UPDATE);
    fg a, b, changed;
    make_graph(&a, -1);
    fg_copy(&b, &a);
    fg_copy(&changed, &a);
    changed.nodes[0].kp.blockDimX = 64;
    CUgraphExec e = instantiate(&a, 0xe008);
    int calls;
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(update_v2(e, &b, &info, CUDA_SUCCESS, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    CHECK_CU(update_kernel(e, (CUgraphNode)&a.nodes[0], &a.nodes[0].kp, NULL, CUDA_SUCCESS, &calls),
             CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    CHECK_CU(update_v2(e, &changed, &info, CUDA_SUCCESS, &calls), CUDA_SUCCESS);
    CHECK_EQ(calls, 1);
    sg_exec_info x = exec_info(1);
    CHECK_EQ(x.would_skip, 2);
    CHECK_EQ(x.updates_forwarded, 3);
    CHECK_EQ(x.updates_skipped, 0);
    CHECK_EQ(x.reasons[SG_REASON_POLICY], 2);
    CHECK_EQ(x.reasons[SG_REASON_DIMS_CHANGED], 1);
    CHECK_EQ(sg_exec_would_skip_total(), 2);
    simple_call(SG_CALL_LAUNCH, e);
    CHECK_EQ(sg_stats_totals().launches, 1);
    simple_call(SG_CALL_EXEC_DESTROY, e);
}

/* core/lock.h, the exec records' lock: mutual exclusion under contention
 * (the futex wait and wake paths), with a counter only the lock guards. */
#define LOCK_THREADS 4
#define LOCK_ROUNDS 200000
static sg_lock lk;
static unsigned long guarded;
static void *lock_worker(void *u)
{
    (void)u;
    for (int i = 0; i < LOCK_ROUNDS; i++) {
        sg_lock_take(&lk);
        unsigned long v = guarded;
        if ((i & 1023) == 0) sched_yield();   /* held across a yield: others wait */
        guarded = v + 1;
        sg_lock_drop(&lk);
    }
    return NULL;
}

TEST(record_lock_excludes)
{
    pthread_t t[LOCK_THREADS];
    for (int i = 0; i < LOCK_THREADS; i++) CHECK_EQ(pthread_create(&t[i], NULL, lock_worker, NULL), 0);
    for (int i = 0; i < LOCK_THREADS; i++) pthread_join(t[i], NULL);
    CHECK_EQ(guarded, (unsigned long)LOCK_THREADS * LOCK_ROUNDS);
    CHECK_EQ(lk.v, 0);                         /* left free, no waiter mark */
}

int main(void)
{
    f_k = ff_make(3, sizes3);
    RUN(record_lock_excludes);
    RUN(identical_update_is_skipped_and_filled);
    RUN(record_replaced_only_after_successful_forward);
    RUN(kernel_node_updates);
    RUN(exec_modified_then_rebuilt);
    RUN(unsupported_and_untracked_execs);
    RUN(always_update_counts_would_skip);
    RUN(user_object_graphs);
    return check_done();
}
