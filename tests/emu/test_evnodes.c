/*
 * test_evnodes.c: event record and wait nodes of the emulated driver
 * (docs/emulator.md, "Event record and wait nodes"): a record node records
 * its event where the graph reaches it ("Each launch of the graph will
 * record event to capture execution of the node's dependencies"), so another
 * stream or the host waiting on the event sees the work before it and no
 * more; a wait node makes its dependents wait for the event's most recent
 * record at the launch; the exec setters and cuGraphExecUpdate change the
 * event ("Unrestricted") and no other node type; external records and waits
 * during stream capture add these nodes ("This flag is invalid outside of
 * stream capture"); a node holds its event, so clones and destroyed events
 * leak nothing (AddressSanitizer's leak check in the sanitizer build) and a
 * destroyed event is refused at launch, loudly.
 *
 * The kernels are order-sensitive (affine_u32: p = p * mul + add) or slow
 * (slow_fill_u32 sleeps, then fills), so a missing wait gives another number.
 */
#include "graph_util.h"

#include <pthread.h>

#define SLOW_US 30000u

static gu_args args[16];
static int nargs;

/* A graph: slow fill of p with v, then a record node of ev (*rec). */
static CUgraph slow_then_record(CUdeviceptr p, uint32_t v, CUevent ev, CUgraphNode *rec)
{
    CUgraph g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    gu_args *a = &args[nargs++ % 16];
    gu_kp_slow(a, p, v, SLOW_US);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_slow, a);
    CUgraphNode k;
    CHECK_CU(cuGraphAddKernelNode(&k, g, NULL, 0, &kp), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddEventRecordNode(rec, g, &k, 1, ev), CUDA_SUCCESS);
    return g;
}

static CUstream stream_nb(void)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    return s;
}

/* Launches e on s behind a hold (gu_hold): none of the launch runs before
 * release_sync, so what a check sees right after the launch does not depend
 * on timing. */
static uint32_t *launch_held(CUgraphExec e, CUstream s)
{
    uint32_t *flag = gu_hold(s);
    CHECK_CU(cuGraphLaunch(e, s), CUDA_SUCCESS);
    return flag;
}

static void release_sync(uint32_t *flag, CUstream s)
{
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeHost(flag), CUDA_SUCCESS);
}

/* Launches g (whose launch fills p with 7, then records ev) held on s1,
 * while s2 waits on ev, then runs p = p * 2 + 1: 15 (without the record,
 * s2 would run first, and the fill come last: 7). The event is pending
 * until the graph reaches the node. Destroys g. */
static void second_stream_waits_for_record(CUgraph g, CUevent ev, CUdeviceptr p)
{
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CUstream s1 = stream_nb(), s2 = stream_nb();
    uint32_t *h = launch_held(e, s1);
    CHECK_CU(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
    CHECK_CU(cuStreamWaitEvent(s2, ev, 0), CUDA_SUCCESS);
    gu_args a;
    gu_kp_affine(&a, p, 2, 1);
    CHECK_CU(gu_launch(k_affine, s2, &a), CUDA_SUCCESS);
    release_sync(h, s1);
    CHECK_CU(cuStreamSynchronize(s2), CUDA_SUCCESS);
    CHECK(gu_all(p, 15));
    CHECK_CU(cuEventQuery(ev), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s1), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s2), CUDA_SUCCESS);
}

/* Another stream waits on the event a record node records; node type and
 * event queries. */
TEST(record_node_orders_another_stream)
{
    CUdeviceptr p = gu_alloc();
    CUevent ev;
    CHECK_CU(cuEventCreate(&ev, 0), CUDA_SUCCESS);
    CUgraphNode rec;
    CUgraph g = slow_then_record(p, 7, ev, &rec);
    CUgraphNodeType t;
    CHECK_CU(cuGraphNodeGetType(rec, &t), CUDA_SUCCESS);
    CHECK_EQ(t, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
    CUevent got = NULL;
    CHECK_CU(cuGraphEventRecordNodeGetEvent(rec, &got), CUDA_SUCCESS);
    CHECK(got == ev);
    CHECK_CU(cuGraphEventWaitNodeGetEvent(rec, &got), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphEventRecordNodeGetEvent(rec, NULL), CUDA_ERROR_INVALID_VALUE);
    second_stream_waits_for_record(g, ev, p);
    CHECK_CU(cuEventDestroy(ev), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* Event nodes in a child graph (cuGraphAddChildGraphNode refuses only
 * "allocation nodes, free nodes, or conditional nodes") run in the child's
 * place: the parent's launch records the child's event. */
TEST(record_node_in_a_child_graph)
{
    CUdeviceptr p = gu_alloc();
    CUevent ev;
    CHECK_CU(cuEventCreate(&ev, 0), CUDA_SUCCESS);
    CUgraphNode rec, cn;
    CUgraph child = slow_then_record(p, 7, ev, &rec), g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddChildGraphNode(&cn, g, NULL, 0, child), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(child), CUDA_SUCCESS);      /* the node holds a clone */
    second_stream_waits_for_record(g, ev, p);
    CHECK_CU(cuEventDestroy(ev), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* The event completes where the graph reaches the record node, not when the
 * launch ends: a host node after it waits for the host, which first
 * synchronizes the event (a record done only at the launch's end would
 * leave both waiting: the host node gives up after 5 s). */
static int host_go, host_gave_up;

static void host_wait_go(void *u)
{
    (void)u;
    for (int i = 0; i < 5000 && !__atomic_load_n(&host_go, __ATOMIC_ACQUIRE); i++) usleep(1000);
    if (!__atomic_load_n(&host_go, __ATOMIC_ACQUIRE)) host_gave_up = 1;
}

TEST(record_node_completes_at_its_point)
{
    CUdeviceptr p = gu_alloc();
    CUevent ev;
    CHECK_CU(cuEventCreate(&ev, 0), CUDA_SUCCESS);
    CUgraphNode rec, hn;
    CUgraph g = slow_then_record(p, 4, ev, &rec);
    CUDA_HOST_NODE_PARAMS hp = { .fn = host_wait_go, .userData = NULL };
    CHECK_CU(cuGraphAddHostNode(&hn, g, &rec, 1, &hp), CUDA_SUCCESS);
    gu_add_affine(g, &hn, 1, p, 3, 0);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CUstream s = stream_nb();
    host_go = host_gave_up = 0;
    CHECK_CU(cuGraphLaunch(e, s), CUDA_SUCCESS);
    CHECK_CU(cuEventSynchronize(ev), CUDA_SUCCESS);
    CHECK_CU(cuStreamQuery(s), CUDA_ERROR_NOT_READY);         /* the host node still waits */
    CHECK(gu_all(p, 4));
    __atomic_store_n(&host_go, 1, __ATOMIC_RELEASE);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(host_gave_up, 0);
    CHECK(gu_all(p, 12));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(ev), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* A wait node holds its dependents until the event's record completes (a
 * slow fill of 5 on another stream, then the graph's affine: 5 * 3 = 15;
 * without the wait: the fill comes last, 5), and waits for the record that
 * was the most recent at the launch: a record made after the launch, behind
 * work only the host releases, does not hold the graph. */
TEST(wait_node_waits_for_the_record_at_launch)
{
    CUdeviceptr p = gu_alloc();
    CHECK_CU(cuMemsetD32(p, 1, N_ELEMS), CUDA_SUCCESS);
    CUevent ev;
    CHECK_CU(cuEventCreate(&ev, 0), CUDA_SUCCESS);
    CUgraph g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CUgraphNode wn;
    CHECK_CU(cuGraphAddEventWaitNode(&wn, g, NULL, 0, ev), CUDA_SUCCESS);
    gu_add_affine(g, &wn, 1, p, 3, 0);
    CUgraphNodeType t;
    CHECK_CU(cuGraphNodeGetType(wn, &t), CUDA_SUCCESS);
    CHECK_EQ(t, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
    CUevent got = NULL;
    CHECK_CU(cuGraphEventWaitNodeGetEvent(wn, &got), CUDA_SUCCESS);
    CHECK(got == ev);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CUstream s1 = stream_nb(), s2 = stream_nb(), s3 = stream_nb();
    gu_args a;
    gu_kp_slow(&a, p, 5, SLOW_US);
    CHECK_CU(gu_launch(k_slow, s2, &a), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(ev, s2), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, s1), CUDA_SUCCESS);
    uint32_t *flag = gu_hold(s3);
    CHECK_CU(cuEventRecord(ev, s3), CUDA_SUCCESS);          /* after the launch */
    CHECK_CU(cuStreamSynchronize(s1), CUDA_SUCCESS);
    CHECK(gu_all(p, 15));
    CHECK_CU(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    CHECK_CU(cuStreamSynchronize(s3), CUDA_SUCCESS);
    /* never recorded: "an event represents an empty set of work" */
    CUevent fresh;
    CHECK_CU(cuEventCreate(&fresh, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecEventWaitNodeSetEvent(e, wn, fresh), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, s1), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s1), CUDA_SUCCESS);
    CHECK(gu_all(p, 45));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(ev), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(fresh), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeHost(flag), CUDA_SUCCESS);
    CUstream all[] = { s1, s2, s3 };
    for (int i = 0; i < 3; i++) CHECK_CU(cuStreamDestroy(all[i]), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* cuGraphExecEventRecordNodeSetEvent: later launches record the new event,
 * not the old one (which stays never recorded: complete at once); the node
 * itself keeps its event. cuGraphExecUpdate from a graph whose record node
 * names another event: SUCCESS, and the exec records that one; from a graph
 * whose node is a wait node or a kernel: NODE_TYPE_CHANGED, the exec
 * unchanged. cuGraphExecNodeSetParams sets the event too. Setters refuse
 * nodes of another type and NULL events. */
TEST(exec_set_event_and_update)
{
    CUdeviceptr p = gu_alloc();
    CUevent e1, e2, e3;
    CHECK_CU(cuEventCreate(&e1, 0), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&e2, 0), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&e3, 0), CUDA_SUCCESS);
    CUgraphNode rec, rec3;
    CUgraph g = slow_then_record(p, 1, e1, &rec), g3 = slow_then_record(p, 1, e3, &rec3);
    CUgraphExec x;
    CHECK_CU(cuGraphInstantiateWithFlags(&x, g, 0), CUDA_SUCCESS);
    CUstream s = stream_nb();
    CHECK_CU(cuGraphExecEventRecordNodeSetEvent(x, rec, e2), CUDA_SUCCESS);
    uint32_t *h = launch_held(x, s);
    CHECK_CU(cuEventQuery(e2), CUDA_ERROR_NOT_READY);
    CHECK_CU(cuEventQuery(e1), CUDA_SUCCESS);
    release_sync(h, s);
    CUevent got;
    CHECK_CU(cuGraphEventRecordNodeGetEvent(rec, &got), CUDA_SUCCESS);
    CHECK(got == e1);
    CHECK_CU(cuGraphExecEventWaitNodeSetEvent(x, rec, e2), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExecEventRecordNodeSetEvent(x, rec, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExecEventRecordNodeSetEvent(x, rec3, e2), CUDA_ERROR_INVALID_VALUE); /* other graph */

    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphExecUpdate_v2(x, g3, &info), CUDA_SUCCESS);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    h = launch_held(x, s);
    CHECK_CU(cuEventQuery(e3), CUDA_ERROR_NOT_READY);
    CHECK_CU(cuEventQuery(e2), CUDA_SUCCESS);
    release_sync(h, s);

    /* a wait node where the exec has a record node; a kernel there */
    CUgraph gw, gk;
    CUgraphNode k, wn;
    CHECK_CU(cuGraphCreate(&gw, 0), CUDA_SUCCESS);
    k = gu_add_affine(gw, NULL, 0, p, 1, 0);
    CHECK_CU(cuGraphAddEventWaitNode(&wn, gw, &k, 1, e3), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate_v2(x, gw, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
    CHECK(info.errorNode == wn);
    CHECK_CU(cuGraphCreate(&gk, 0), CUDA_SUCCESS);
    k = gu_add_affine(gk, NULL, 0, p, 1, 0);
    CUgraphNode k2 = gu_add_affine(gk, &k, 1, p, 1, 0);
    CHECK_CU(cuGraphExecUpdate_v2(x, gk, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
    CHECK(info.errorNode == k2);

    /* the generic exec setter */
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
    np.eventRecord.event = e1;
    CHECK_CU(cuGraphExecNodeSetParams(x, rec, &np), CUDA_SUCCESS);
    h = launch_held(x, s);
    CHECK_CU(cuEventQuery(e1), CUDA_ERROR_NOT_READY);
    release_sync(h, s);

    CHECK_CU(cuGraphExecDestroy(x), CUDA_SUCCESS);
    CUgraph graphs[] = { g, g3, gw, gk };
    for (int i = 0; i < 4; i++) CHECK_CU(cuGraphDestroy(graphs[i]), CUDA_SUCCESS);
    CUevent evs[] = { e1, e2, e3 };
    for (int i = 0; i < 3; i++) CHECK_CU(cuEventDestroy(evs[i]), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* During capture, cuEventRecordWithFlags(CU_EVENT_RECORD_EXTERNAL) and
 * cuStreamWaitEvent(CU_EVENT_WAIT_EXTERNAL) add a record and a wait node in
 * stream order (the event's state is not touched by the capture); outside
 * capture both flags are invalid. The captured graph, launched, records. */
TEST(capture_external_record_and_wait)
{
    CUdeviceptr p = gu_alloc();
    CHECK_CU(cuMemsetD32(p, 1, N_ELEMS), CUDA_SUCCESS);
    CUevent er, ew;
    CHECK_CU(cuEventCreate(&er, 0), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&ew, 0), CUDA_SUCCESS);
    CUstream s = stream_nb();
    CHECK_CU(cuEventRecordWithFlags(er, s, CU_EVENT_RECORD_EXTERNAL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamWaitEvent(s, ew, CU_EVENT_WAIT_EXTERNAL), CUDA_ERROR_INVALID_VALUE);
    gu_args a, b;
    gu_kp_affine(&a, p, 2, 0);
    gu_kp_affine(&b, p, 1, 3);
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(gu_launch(k_affine, s, &a), CUDA_SUCCESS);
    CHECK_CU(cuEventRecordWithFlags(er, s, CU_EVENT_RECORD_EXTERNAL), CUDA_SUCCESS);
    CHECK_CU(cuStreamWaitEvent(s, ew, CU_EVENT_WAIT_EXTERNAL), CUDA_SUCCESS);
    CHECK_CU(gu_launch(k_affine, s, &b), CUDA_SUCCESS);
    CHECK_CU(cuEventQuery(er), CUDA_SUCCESS);                 /* nothing recorded by the capture */
    CUgraph g = NULL;
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CUgraphNode nodes[4];
    size_t n = 4;
    CHECK_CU(cuGraphGetNodes(g, nodes, &n), CUDA_SUCCESS);
    CHECK_EQ(n, 4);
    static const CUgraphNodeType want[] = { CU_GRAPH_NODE_TYPE_KERNEL, CU_GRAPH_NODE_TYPE_EVENT_RECORD,
                                            CU_GRAPH_NODE_TYPE_WAIT_EVENT, CU_GRAPH_NODE_TYPE_KERNEL };
    for (size_t i = 0; i < n && i < 4; i++) {
        CUgraphNodeType t;
        CHECK_CU(cuGraphNodeGetType(nodes[i], &t), CUDA_SUCCESS);
        CHECK_EQ(t, want[i]);
        size_t nd = 0;
        CHECK_CU(cuGraphNodeGetDependencies(nodes[i], NULL, NULL, &nd), CUDA_SUCCESS);
        CHECK_EQ(nd, i ? 1u : 0u);                            /* a chain, in stream order */
    }
    CUevent got;
    CHECK_CU(cuGraphEventRecordNodeGetEvent(nodes[1], &got), CUDA_SUCCESS);
    CHECK(got == er);
    CHECK_CU(cuGraphEventWaitNodeGetEvent(nodes[2], &got), CUDA_SUCCESS);
    CHECK(got == ew);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CUstream s2 = stream_nb();
    uint32_t *h = gu_hold(s2);                                /* s2 fills 10, then records ew */
    gu_args fill;
    gu_kp_fill(&fill, p, 10);
    CHECK_CU(gu_launch(k_fill, s2, &fill), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(ew, s2), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, s), CUDA_SUCCESS);
    CUresult q = CUDA_ERROR_NOT_READY;                        /* the graph reaches its record... */
    for (int i = 0; i < 5000 && (q = cuEventQuery(er)) == CUDA_ERROR_NOT_READY; i++) usleep(1000);
    CHECK_CU(q, CUDA_SUCCESS);
    CHECK(gu_all(p, 2));
    CHECK_CU(cuStreamQuery(s), CUDA_ERROR_NOT_READY);         /* ...and waits for s2's record */
    release_sync(h, s2);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(gu_all(p, 13));                                     /* 1 * 2, then 10 (waited for), + 3 */
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(er), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(ew), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s2), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* A node holds its event: after cuEventDestroy the node still names it, the
 * value is not given to the next event, and a launch of an exec naming it is
 * refused (CUDA_ERROR_INVALID_HANDLE, a violation). Clones hold their own
 * references (cuGraphClone, cuGraphNodeFindInClone); the generic
 * cuGraphAddNode and cuGraphNodeSetParams make and set event nodes; one event
 * in two event nodes of a launch is refused (CUDA_ERROR_NOT_SUPPORTED); a
 * graph holding event nodes cannot be instantiated for device launch.
 * Destroying everything leaks nothing (AddressSanitizer). */
TEST(node_holds_its_event)
{
    CUevent ev, other;
    CHECK_CU(cuEventCreate(&ev, 0), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&other, 0), CUDA_SUCCESS);
    CUgraph g;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_WAIT_EVENT;
    np.eventWait.event = ev;
    CUgraphNode wn, cwn;
    CHECK_CU(cuGraphAddNode(&wn, g, NULL, NULL, 0, &np), CUDA_SUCCESS);
    CUgraph cl;
    CHECK_CU(cuGraphClone(&cl, g), CUDA_SUCCESS);
    CHECK_CU(cuGraphNodeFindInClone(&cwn, wn, cl), CUDA_SUCCESS);
    CUgraphExec x;
    CHECK_CU(cuGraphInstantiateWithFlags(&x, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(ev), CUDA_SUCCESS);
    CUevent next;
    CHECK_CU(cuEventCreate(&next, 0), CUDA_SUCCESS);
    CHECK(next != ev);                                        /* the nodes keep the value */
    CUevent got;
    CHECK_CU(cuGraphEventWaitNodeGetEvent(cwn, &got), CUDA_SUCCESS);
    CHECK(got == ev);
    emu_test_stderr_begin();
    CHECK_CU(cuGraphLaunch(x, NULL), CUDA_ERROR_INVALID_HANDLE);
    CHECK_EQ(emu_test_violations(), 1);
    CHECK_CU(cuGraphEventWaitNodeSetEvent(wn, ev), CUDA_ERROR_INVALID_HANDLE);
    CUgraphNode bad = NULL;
    CHECK_CU(cuGraphAddEventWaitNode(&bad, g, NULL, 0, ev), CUDA_ERROR_INVALID_VALUE);
    CHECK(bad == NULL);
    np.eventWait.event = next;
    CHECK_CU(cuGraphNodeSetParams(wn, &np), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate_v2(x, g, &(CUgraphExecUpdateResultInfo){ 0 }), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(x, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);

    /* one event twice in a launch */
    CUgraphNode rn;
    CHECK_CU(cuGraphAddEventRecordNode(&rn, g, &wn, 1, next), CUDA_SUCCESS);
    CUgraphExec x2;
    CHECK_CU(cuGraphInstantiateWithFlags(&x2, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(x2, NULL), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cuGraphExecEventRecordNodeSetEvent(x2, rn, other), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(x2, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CUgraphExec xd = NULL;
    CHECK_CU(cuGraphInstantiateWithFlags(&xd, g, CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExecDestroy(x2), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(x), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(cl), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(next), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(other), CUDA_SUCCESS);
}

int main(void)
{
    gu_setup();
    RUN(record_node_orders_another_stream);
    RUN(record_node_in_a_child_graph);
    RUN(record_node_completes_at_its_point);
    RUN(wait_node_waits_for_the_record_at_launch);
    RUN(exec_set_event_and_update);
    RUN(capture_external_record_and_wait);
    RUN(node_holds_its_event);
    return check_done();
}
