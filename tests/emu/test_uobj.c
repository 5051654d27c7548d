/*
 * test_uobj.c: user objects of the emulated driver (docs/emulator.md, "User
 * objects"): the reference rules of the programming guide's "CUDA User
 * Objects" (a graph, its clones, a child graph node's graph, an exec and
 * its pending launches hold references; cuGraphExecUpdate replaces an
 * exec's), the asynchronous destructor, the documented error codes, and the
 * violations for references the program does not own.
 *
 * A destructor counts its runs. A launch is held pending by a host node that
 * waits for a gate the test opens: a destructor that runs while the gate is
 * shut ran early; one that has not run 2 s after the last reference went
 * never ran; a count above 1 ran twice.
 */
#include "graph_util.h"

#include <stdatomic.h>
#include <time.h>

static atomic_int gate_open;

static void gate(void *arg)
{
    (void)arg;
    while (!atomic_load(&gate_open)) usleep(1000);
}

static void dtor(void *p) { atomic_fetch_add((atomic_int *)p, 1); }

static void sleep_ms(int ms) { usleep((useconds_t)ms * 1000); }

/* Waits up to 2 s for *c to reach want; returns its value. */
static int wait_count(atomic_int *c, int want)
{
    for (int i = 0; i < 2000 && atomic_load(c) < want; i++) sleep_ms(1);
    return atomic_load(c);
}

static CUuserObject uobj(atomic_int *c, unsigned refs)
{
    CUuserObject o = NULL;
    CHECK_CU(cuUserObjectCreate(&o, c, dtor, refs, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC), CUDA_SUCCESS);
    return o;
}

/* A graph: host node gate() then a memset of p to v; the program's
 * reference of o (if any) moved into it. */
static CUgraph gated_graph(CUdeviceptr p, uint32_t v, CUuserObject o)
{
    CUgraph g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CUDA_HOST_NODE_PARAMS hp = { .fn = gate, .userData = NULL };
    CUgraphNode h, m;
    CHECK_CU(cuGraphAddHostNode(&h, g, NULL, 0, &hp), CUDA_SUCCESS);
    CUDA_MEMSET_NODE_PARAMS ms = gu_set_1d(p, v);
    CHECK_CU(cuGraphAddMemsetNode(&m, g, &h, 1, &ms, g_ctx), CUDA_SUCCESS);
    if (o) CHECK_CU(cuGraphRetainUserObject(g, o, 1, CU_GRAPH_USER_OBJECT_MOVE), CUDA_SUCCESS);
    return g;
}

/* The documented argument checks: CUDA_ERROR_INVALID_VALUE, nothing made. */
TEST(api_errors)
{
    atomic_int c = 0;
    CUuserObject o = NULL;
    CHECK_CU(cuUserObjectCreate(&o, &c, dtor, 1, 0), CUDA_ERROR_INVALID_VALUE);   /* the flag is required */
    CHECK_CU(cuUserObjectCreate(&o, &c, dtor, 1, 2), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuUserObjectCreate(&o, &c, NULL, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuUserObjectCreate(&o, &c, dtor, 0, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuUserObjectCreate(&o, &c, dtor, (unsigned)INT_MAX + 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuUserObjectCreate(NULL, &c, dtor, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC), CUDA_ERROR_INVALID_VALUE);
    o = uobj(&c, 1);
    CUgraph g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CHECK_CU(cuUserObjectRetain(o, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuUserObjectRelease(o, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphRetainUserObject(g, o, 1, 2), CUDA_ERROR_INVALID_VALUE);       /* an unknown flag */
    CHECK_CU(cuGraphRetainUserObject(g, o, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphRetainUserObject(NULL, o, 1, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphReleaseUserObject(g, o, 1), CUDA_ERROR_INVALID_VALUE);        /* g holds none */
    /* New references (flags 0) add to the count: the program's one remains. */
    CHECK_CU(cuGraphRetainUserObject(g, o, 3, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphReleaseUserObject(g, o, 4), CUDA_ERROR_INVALID_VALUE);        /* more than g holds */
    CHECK_CU(cuGraphReleaseUserObject(g, o, 3), CUDA_SUCCESS);
    sleep_ms(20);
    CHECK_EQ(atomic_load(&c), 0);
    /* A release of references the program does not own, a move of more
     * than it owns: undefined, refused as violations, nothing changed. */
    emu_test_stderr_begin();
    CHECK_CU(cuUserObjectRelease(o, 2), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphRetainUserObject(g, o, 2, CU_GRAPH_USER_OBJECT_MOVE), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(emu_test_violations(), 2);
    CHECK_CU(cuUserObjectRetain(o, 2), CUDA_SUCCESS);
    CHECK_CU(cuUserObjectRelease(o, 3), CUDA_SUCCESS);                             /* all of them */
    CHECK_EQ(wait_count(&c, 1), 1);
    /* The handle is dead: its use is a violation. */
    emu_test_stderr_begin();
    CHECK_CU(cuUserObjectRetain(o, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(emu_test_violations(), 1);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    sleep_ms(20);
    CHECK_EQ(atomic_load(&c), 1);
}

/* A clone holds copies of its graph's references: the destructor waits for
 * the last of the two. */
TEST(graph_and_clone)
{
    atomic_int c = 0;
    CUdeviceptr p = gu_alloc();
    CUgraph g = gated_graph(p, 1, uobj(&c, 1)), k;
    CHECK_CU(cuGraphClone(&k, g), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&c), 0);
    CHECK_CU(cuGraphDestroy(k), CUDA_SUCCESS);
    CHECK_EQ(wait_count(&c, 1), 1);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&c), 1);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* The programming guide's example: graph destroyed after instantiation, exec
 * destroyed while its launch runs; the destructor runs after the launch. */
TEST(exec_destroyed_while_launch_pending)
{
    atomic_int c = 0;
    CUdeviceptr p = gu_alloc();
    CUgraph g = gated_graph(p, 7, uobj(&c, 1));
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    atomic_store(&gate_open, 0);
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    sleep_ms(100);
    CHECK_EQ(atomic_load(&c), 0);                   /* the launch still runs */
    atomic_store(&gate_open, 1);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(gu_all(p, 7));
    CHECK_EQ(wait_count(&c, 1), 1);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&c), 1);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* cuGraphExecUpdate: the new graph's references replace the exec's; the
 * released ones are held until the pending launch finishes. */
TEST(update_replaces_references)
{
    atomic_int c1 = 0, c2 = 0;
    CUdeviceptr p = gu_alloc();
    CUgraph g1 = gated_graph(p, 1, uobj(&c1, 1)), g2 = gated_graph(p, 2, uobj(&c2, 1));
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g1, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g1), CUDA_SUCCESS);
    atomic_store(&gate_open, 0);
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphExecUpdate(e, g2, &info), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g2), CUDA_SUCCESS);
    sleep_ms(100);
    CHECK_EQ(atomic_load(&c1), 0);                  /* its launch is pending */
    CHECK_EQ(atomic_load(&c2), 0);                  /* the exec holds it */
    atomic_store(&gate_open, 1);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(gu_all(p, 1));
    CHECK_EQ(wait_count(&c1, 1), 1);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&c2), 0);
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(gu_all(p, 2));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_EQ(wait_count(&c2, 1), 1);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&c1), 1);
    CHECK_EQ(atomic_load(&c2), 1);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* A child graph node's graph (a clone of the child) holds the child's
 * references, and so does the exec's instance of it; a child node update
 * replaces that instance's. */
TEST(child_graph)
{
    atomic_int c = 0, c2 = 0;
    CUdeviceptr p = gu_alloc();
    CUgraph child = gated_graph(p, 3, uobj(&c, 1)), parent;
    CHECK_CU(cuGraphCreate(&parent, 0), CUDA_SUCCESS);
    CUgraphNode cn;
    CHECK_CU(cuGraphAddChildGraphNode(&cn, parent, NULL, 0, child), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(child), CUDA_SUCCESS);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, parent, 0), CUDA_SUCCESS);
    atomic_store(&gate_open, 1);
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(gu_all(p, 3));
    CUgraph other = gated_graph(p, 4, uobj(&c2, 1));
    CHECK_CU(cuGraphExecChildGraphNodeSetParams(e, cn, other), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(other), CUDA_SUCCESS);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&c), 0);                   /* the parent's node holds it */
    CHECK_CU(cuGraphDestroy(parent), CUDA_SUCCESS); /* the exec's instance no longer does */
    CHECK_EQ(wait_count(&c, 1), 1);
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(gu_all(p, 4));
    sleep_ms(50);
    CHECK_EQ(atomic_load(&c2), 0);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_EQ(wait_count(&c2, 1), 1);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* A reference moved into the graph of a capture in progress
 * (cuStreamGetCaptureInfo) belongs to the captured graph; an invalidated
 * capture's graph is destroyed with its references. */
TEST(capture)
{
    atomic_int c = 0, c2 = 0;
    CUdeviceptr p = gu_alloc();
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CUstreamCaptureStatus st;
    CUgraph cg = NULL, g = NULL;
    CHECK_CU(cuStreamGetCaptureInfo(s, &st, NULL, &cg, NULL, NULL, NULL), CUDA_SUCCESS);
    CHECK_CU(cuGraphRetainUserObject(cg, uobj(&c, 1), 1, CU_GRAPH_USER_OBJECT_MOVE), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32Async(p, 5, N_ELEMS, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CHECK(g == cg);
    sleep_ms(50);
    CHECK_EQ(atomic_load(&c), 0);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_EQ(wait_count(&c, 1), 1);
    /* invalidated: a synchronous call on the capturing stream */
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuStreamGetCaptureInfo(s, &st, NULL, &cg, NULL, NULL, NULL), CUDA_SUCCESS);
    CHECK_CU(cuGraphRetainUserObject(cg, uobj(&c2, 1), 1, CU_GRAPH_USER_OBJECT_MOVE), CUDA_SUCCESS);
    CHECK(cuStreamSynchronize(s) != CUDA_SUCCESS);
    CHECK(cuStreamEndCapture(s, &g) != CUDA_SUCCESS);
    CHECK_EQ(wait_count(&c2, 1), 1);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* A graph: an IF node with an ELSE body (default value 0: the ELSE body
 * runs) whose ELSE body memsets p to v and holds o (moved in). */
static CUgraph ifelse_graph(CUdeviceptr p, uint32_t v, CUuserObject o)
{
    CUgraph g, body[2];
    CUgraphConditionalHandle h;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphConditionalHandleCreate(&h, g, g_ctx, 0, CU_GRAPH_COND_ASSIGN_DEFAULT), CUDA_SUCCESS);
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    np.conditional.handle = h;
    np.conditional.type = CU_GRAPH_COND_TYPE_IF;
    np.conditional.size = 2;
    np.conditional.phGraph_out = body;
    np.conditional.ctx = g_ctx;
    CUgraphNode cn, m;
    CHECK_CU(cuGraphAddNode(&cn, g, NULL, NULL, 0, &np), CUDA_SUCCESS);
    CUDA_MEMSET_NODE_PARAMS ms = gu_set_1d(p, v);
    CHECK_CU(cuGraphAddMemsetNode(&m, body[1], NULL, 0, &ms, g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuGraphRetainUserObject(body[1], o, 1, CU_GRAPH_USER_OBJECT_MOVE), CUDA_SUCCESS);
    return g;
}

/* A conditional node's body holds its references as a child graph does,
 * and so does the exec's instance of that body; an update replaces the
 * instance's with the new graph's body of the same index (round 37's bodies
 * with round 34's references). */
TEST(conditional_body)
{
    atomic_int c1 = 0, c2 = 0;
    CUdeviceptr p = gu_alloc();
    CUgraph g1 = ifelse_graph(p, 6, uobj(&c1, 1)), g2 = ifelse_graph(p, 7, uobj(&c2, 1));
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g1, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g1), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(gu_all(p, 6));
    sleep_ms(50);
    CHECK_EQ(atomic_load(&c1), 0);                  /* the exec's ELSE instance holds it */
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphExecUpdate(e, g2, &info), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g2), CUDA_SUCCESS);
    CHECK_EQ(wait_count(&c1, 1), 1);                /* replaced by the update */
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(gu_all(p, 7));
    sleep_ms(50);
    CHECK_EQ(atomic_load(&c2), 0);                  /* now the instance's */
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_EQ(wait_count(&c2, 1), 1);
    CHECK_EQ(atomic_load(&c1), 1);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

int main(void)
{
    gu_setup();
    RUN(api_errors);
    RUN(graph_and_clone);
    RUN(exec_destroyed_while_launch_pending);
    RUN(update_replaces_references);
    RUN(child_graph);
    RUN(capture);
    RUN(conditional_body);
    return check_done();
}
