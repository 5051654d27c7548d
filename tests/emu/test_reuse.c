/*
 * test_reuse.c: the emulated driver reuses freed handle values as a real
 * driver does (its objects come from freed memory, last freed first), so
 * that anything keyed on a handle value that outlives the handle shows:
 *
 *   - CUfunction and CUmodule values of an unloaded module are given to the
 *     functions and modules loaded next (in the same order for a module of
 *     the same layout); a reused CUfunction reports the new function's
 *     parameters; a graph still holding the unloaded function is caught at
 *     launch (a violation), even though its handle value is alive again;
 *   - the value of a destroyed stream is the next cuStreamCreate's, while
 *     the destroyed stream's queued work still runs to completion;
 *   - the value of a destroyed event is the next cuEventCreate's;
 *   - several freed values come back last-freed first;
 *   - graph, node and exec values: a destroyed graph's, node's and exec's
 *     value is the next one's; an exec keeps naming the nodes it was made
 *     from by graph and creation number, so a new node that got an old
 *     node's value is not one of its nodes;
 *   - a created context's value is the next cuCtxCreate's, while the primary
 *     context keeps its value across release, reset and retain;
 *   - a green context's values (it and its converted context) are the next
 *     green context's; the destroyed one's streams still answer
 *     CONTEXT_IS_DESTROYED; a converted context's value may go to a created
 *     context (one pool for both kinds);
 *   - a user object's value, once its destructor ran, and a released
 *     allocation handle's value are the next ones'.
 */
#include "graph_util.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static CUmodule load(const char *name)
{
    char path[PATH_MAX + 64];
    CUmodule m = NULL;
    CHECK_EQ(emu_test_module_path(name, path, sizeof path), 0);
    CHECK_CU(cuModuleLoad(&m, path), CUDA_SUCCESS);
    return m;
}

static const char *const graph_kernels[] = { "fill_u32", "affine_u32", "add_u32", "slow_fill_u32" };

TEST(function_values_reused_after_unload)
{
    CUmodule m = load("mod_graph.so");
    CUfunction f[4], g[4];
    for (int i = 0; i < 4; i++) CHECK_CU(cuModuleGetFunction(&f[i], m, graph_kernels[i]), CUDA_SUCCESS);
    CHECK_CU(cuModuleUnload(m), CUDA_SUCCESS);
    /* The same module again: the same values, in the same order. */
    CUmodule m2 = load("mod_graph.so");
    CHECK(m2 == m);
    for (int i = 0; i < 4; i++) {
        CHECK_CU(cuModuleGetFunction(&g[i], m2, graph_kernels[i]), CUDA_SUCCESS);
        CHECK(g[i] == f[i]);
    }
    CHECK_CU(cuModuleUnload(m2), CUDA_SUCCESS);
    /* Another module: its functions get the freed values, and a reused value
     * describes the new function (fill_u32 of mod_test takes 3 arguments,
     * poke 1, mixed 5). */
    CUmodule t = load("mod_test.so");
    const char *test_kernels[] = { "fill_u32", "inc_u32", "sleep_fill_u32", "mixed", "dims", "poke" };
    int reused = 0;
    for (int i = 0; i < 6; i++) {
        CUfunction h;
        CHECK_CU(cuModuleGetFunction(&h, t, test_kernels[i]), CUDA_SUCCESS);
        for (int j = 0; j < 4; j++) reused += h == f[j];
    }
    CHECK_EQ(reused, 4);
    CUfunction mixed;
    size_t off, size;
    CHECK_CU(cuModuleGetFunction(&mixed, t, "mixed"), CUDA_SUCCESS);
    CHECK(mixed == f[3]);                       /* was slow_fill_u32 (4 arguments) */
    CHECK_CU(cuFuncGetParamInfo(mixed, 4, &off, &size), CUDA_SUCCESS);
    CHECK_EQ(size, 12);
    const char *name = NULL;
    CHECK_CU(cuFuncGetName(&name, mixed), CUDA_SUCCESS);
    CHECK(name && strcmp(name, "mixed") == 0);
    CHECK_CU(cuModuleUnload(t), CUDA_SUCCESS);
}

/* The program: many modules loaded, run and unloaded, then a new
 * version of a kernel; its CUfunction is one of the freed values. */
TEST(many_modules_then_a_new_kernel)
{
    CUfunction old[64 * 4];
    CUmodule mods[64];
    for (int i = 0; i < 64; i++) {
        mods[i] = load("mod_graph.so");
        for (int k = 0; k < 4; k++)
            CHECK_CU(cuModuleGetFunction(&old[4 * i + k], mods[i], graph_kernels[k]), CUDA_SUCCESS);
    }
    for (int i = 0; i < 64; i++) CHECK_CU(cuModuleUnload(mods[i]), CUDA_SUCCESS);
    CUmodule t = load("mod_test.so");
    CUfunction sf;
    CHECK_CU(cuModuleGetFunction(&sf, t, "sleep_fill_u32"), CUDA_SUCCESS);
    int hit = 0;
    for (int i = 0; i < 64 * 4; i++) hit |= sf == old[i];
    CHECK(hit);
    size_t off, size;
    CHECK_CU(cuFuncGetParamInfo(sf, 3, &off, &size), CUDA_SUCCESS);   /* the 4th argument */
    CHECK_EQ(size, 4);
    CHECK_CU(cuModuleUnload(t), CUDA_SUCCESS);
}

/* A graph built with a function whose module was unloaded and whose value
 * was given to a new function: launching it is caught. */
TEST(stale_function_in_graph_is_caught)
{
    CUmodule m = load("mod_graph.so");
    CUfunction fill;
    CHECK_CU(cuModuleGetFunction(&fill, m, "fill_u32"), CUDA_SUCCESS);
    CUdeviceptr a = gu_alloc();
    gu_args args;
    gu_kp_fill(&args, a, 3);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(fill, &args);
    CUgraph g;
    CUgraphNode n;
    CUgraphExec e;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddKernelNode(&n, g, NULL, 0, &kp), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuModuleUnload(m), CUDA_SUCCESS);
    CUmodule m2 = load("mod_graph.so");
    CUfunction fill2;
    CHECK_CU(cuModuleGetFunction(&fill2, m2, "fill_u32"), CUDA_SUCCESS);
    CHECK(fill2 == fill);                       /* the value is alive again */
    emu_test_stderr_begin();
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_ERROR_INVALID_HANDLE);
    CHECK_EQ(emu_test_violations(), 1);
    /* Built anew with the new function, it runs. */
    CUgraphExecUpdateResultInfo info;
    CUgraph g2;
    CUgraphNode n2;
    kp.func = fill2;
    CHECK_CU(cuGraphCreate(&g2, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddKernelNode(&n2, g2, NULL, 0, &kp), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate(e, g2, &info), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(gu_all(a, 3));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g2), CUDA_SUCCESS);
    CHECK_CU(cuModuleUnload(m2), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
}

TEST(stream_value_reused_while_old_work_runs)
{
    CUstream s, s2;
    CUevent done;
    CUdeviceptr a = gu_alloc(), b = gu_alloc();
    CHECK_CU(cuMemsetD32(a, 0, N_ELEMS), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    gu_args slow;
    gu_kp_slow(&slow, a, 8, 100000);
    CHECK_CU(gu_launch(k_slow, s, &slow), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(done, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);      /* work still queued */
    CHECK_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK(s2 == s);
    /* The new stream is a new stream: empty, independent of the old work. */
    CHECK_CU(cuStreamQuery(s2), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32Async(b, 4, N_ELEMS, s2), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s2), CUDA_SUCCESS);
    CHECK(gu_all(b, 4));
    /* the old kernel still sleeps (an event, not a read of the memory it is
     * about to write: that would be a data race) */
    CHECK_CU(cuEventQuery(done), CUDA_ERROR_NOT_READY);
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK_CU(cuEventQuery(done), CUDA_SUCCESS);
    CHECK(gu_all(a, 8));                            /* and completed */
    CHECK_CU(cuEventDestroy(done), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s2), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(b), CUDA_SUCCESS);
}

TEST(event_value_reused)
{
    CUevent e, e2;
    CHECK_CU(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    CHECK_CU(cuEventRecord(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuEventSynchronize(e), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuEventCreate(&e2, 0), CUDA_SUCCESS);
    CHECK(e2 == e);
    /* A new event: never recorded, timing enabled. */
    float ms;
    CHECK_CU(cuEventQuery(e2), CUDA_SUCCESS);
    CHECK_CU(cuEventElapsedTime(&ms, e2, e2), CUDA_ERROR_INVALID_HANDLE);   /* never recorded */
    CHECK_CU(cuEventRecord(e2, NULL), CUDA_SUCCESS);
    CHECK_CU(cuEventSynchronize(e2), CUDA_SUCCESS);
    CHECK_CU(cuEventElapsedTime(&ms, e2, e2), CUDA_SUCCESS);
    CHECK_CU(cuEventDestroy(e2), CUDA_SUCCESS);
}

TEST(last_freed_first)
{
    CUstream s[3], t[3];
    CUevent e[3], f[3];
    for (int i = 0; i < 3; i++) {
        CHECK_CU(cuStreamCreate(&s[i], 0), CUDA_SUCCESS);
        CHECK_CU(cuEventCreate(&e[i], 0), CUDA_SUCCESS);
    }
    for (int i = 0; i < 3; i++) {
        CHECK_CU(cuStreamDestroy(s[i]), CUDA_SUCCESS);
        CHECK_CU(cuEventDestroy(e[i]), CUDA_SUCCESS);
    }
    for (int i = 0; i < 3; i++) {
        CHECK_CU(cuStreamCreate(&t[i], 0), CUDA_SUCCESS);
        CHECK_CU(cuEventCreate(&f[i], 0), CUDA_SUCCESS);
        CHECK(t[i] == s[2 - i]);
        CHECK(f[i] == e[2 - i]);
    }
    for (int i = 0; i < 3; i++) {
        CHECK_CU(cuStreamDestroy(t[i]), CUDA_SUCCESS);
        CHECK_CU(cuEventDestroy(f[i]), CUDA_SUCCESS);
    }
}

/* A kernel node filling a with v, added to g. */
static CUgraphNode add_fill(CUgraph g, CUdeviceptr a, uint32_t v, gu_args *args)
{
    gu_kp_fill(args, a, v);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_fill, args);
    CUgraphNode n;
    CHECK_CU(cuGraphAddKernelNode(&n, g, NULL, 0, &kp), CUDA_SUCCESS);
    return n;
}

TEST(graph_node_exec_values_reused)
{
    CUdeviceptr a = gu_alloc();
    gu_args args;
    CUgraph g, g2;
    CUgraphExec e, e2;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CUgraphNode n = add_fill(g, a, 1, &args);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuGraphCreate(&g2, 0), CUDA_SUCCESS);
    CHECK(g2 == g);
    size_t count = 9;
    CHECK_CU(cuGraphGetNodes(g2, NULL, &count), CUDA_SUCCESS);
    CHECK_EQ(count, 0);                             /* a new, empty graph */
    CUgraphNode n2 = add_fill(g2, a, 2, &args);
    CHECK(n2 == n);
    CHECK_CU(cuGraphInstantiateWithFlags(&e2, g2, 0), CUDA_SUCCESS);
    CHECK(e2 == e);
    CHECK_CU(cuGraphLaunch(e2, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(gu_all(a, 2));
    CHECK_CU(cuGraphExecDestroy(e2), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g2), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
}

/* An exec names its nodes by their graph and creation number: a node that got
 * the value of one of them (its graph destroyed, or the node itself) is not
 * one of the exec's nodes, and setting its parameters in the exec fails. */
TEST(exec_does_not_take_a_reused_node_for_its_own)
{
    CUdeviceptr a = gu_alloc();
    gu_args args;
    CUgraph g, g2;
    CUgraphExec e;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CUgraphNode n = add_fill(g, a, 1, &args);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    /* the node destroyed, a new one in the same graph gets its value */
    CHECK_CU(cuGraphDestroyNode(n), CUDA_SUCCESS);
    CUgraphNode n2 = add_fill(g, a, 2, &args);
    CHECK(n2 == n);
    gu_kp_fill(&args, a, 3);
    CUDA_KERNEL_NODE_PARAMS kp = gu_knode(k_fill, &args);
    CHECK_CU(cuGraphExecKernelNodeSetParams(e, n2, &kp), CUDA_ERROR_INVALID_VALUE);
    /* the graph destroyed, a new graph and node get the values */
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuGraphCreate(&g2, 0), CUDA_SUCCESS);
    CHECK(g2 == g);
    CUgraphNode n3 = add_fill(g2, a, 4, &args);
    CHECK(n3 == n);
    CHECK_CU(cuGraphExecKernelNodeSetParams(e, n3, &kp), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);  /* the exec still runs its own node */
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(gu_all(a, 1));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g2), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
}

TEST(context_values)
{
    CUcontext c, c2, p, p2, cur;
    CUdevice dev;
    CHECK_CU(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    CHECK_CU(cuCtxCreate(&c, NULL, 0, dev), CUDA_SUCCESS);
    CUdeviceptr a;
    CHECK_CU(cuMemAlloc(&a, 4096), CUDA_SUCCESS);
    size_t st;
    CHECK_CU(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096), CUDA_SUCCESS);
    CHECK_CU(cuCtxDestroy(c), CUDA_SUCCESS);
    CHECK_CU(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    CHECK(cur == g_ctx);                            /* popped */
    CHECK_CU(cuCtxCreate(&c2, NULL, CU_CTX_SCHED_YIELD, dev), CUDA_SUCCESS);
    CHECK(c2 == c);
    /* a new context: its own flags, default limits, none of the old memory */
    unsigned flags;
    CHECK_CU(cuCtxGetFlags(&flags), CUDA_SUCCESS);
    CHECK_EQ(flags & CU_CTX_SCHED_MASK, CU_CTX_SCHED_YIELD);
    CHECK_CU(cuCtxGetLimit(&st, CU_LIMIT_STACK_SIZE), CUDA_SUCCESS);
    CHECK(st != 4096);
    CHECK_CU(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuCtxDestroy(c2), CUDA_SUCCESS);
    /* The primary context keeps its value: released to zero, reset, retained. */
    CHECK_CU(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);   /* gu_setup's retain */
    CHECK_CU(cuDevicePrimaryCtxReset(dev), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxRetain(&p, dev), CUDA_SUCCESS);
    CHECK(p == g_ctx);
    CHECK_CU(cuDevicePrimaryCtxRelease(dev), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxRetain(&p2, dev), CUDA_SUCCESS);
    CHECK(p2 == p);
    CHECK_CU(cuCtxSetCurrent(p2), CUDA_SUCCESS);
    gu_setup();                                     /* the reset unloaded the module */
}

static CUgreenCtx make_green(void)
{
    CUdevResource dev, grp;
    unsigned n = 1;
    CUdevResourceDesc desc = NULL;
    CUgreenCtx g = NULL;
    CHECK_CU(cuDeviceGetDevResource(0, &dev, CU_DEV_RESOURCE_TYPE_SM), CUDA_SUCCESS);
    CHECK_CU(cuDevSmResourceSplitByCount(&grp, &n, &dev, NULL, 0, 8), CUDA_SUCCESS);
    CHECK_CU(cuDevResourceGenerateDesc(&desc, &grp, 1), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxCreate(&g, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM), CUDA_SUCCESS);
    return g;
}

TEST(green_context_values)
{
    CUgreenCtx g = make_green(), g2;
    CUcontext cc, cc2;
    CUstream s, s2;
    unsigned long long id, id2;
    CHECK_CU(cuCtxFromGreenCtx(&cc, g), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxGetId(g, &id), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxStreamCreate(&s, g, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamQuery(s), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    g2 = make_green();
    CHECK(g2 == g);
    CHECK_CU(cuCtxFromGreenCtx(&cc2, g2), CUDA_SUCCESS);
    CHECK(cc2 == cc);
    CHECK_CU(cuGreenCtxGetId(g2, &id2), CUDA_SUCCESS);
    CHECK(id2 != id);                               /* a new green context */
    /* the old green context's stream is still its, not the new one's */
    CHECK_CU(cuStreamQuery(s), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    CHECK_CU(cuGreenCtxStreamCreate(&s2, g2, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamQuery(s2), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s2), CUDA_SUCCESS);
    CHECK_CU(cuGreenCtxDestroy(g2), CUDA_SUCCESS);
    /* contexts of both kinds share values: the converted context's goes to a
     * created context, which is a created context (cuCtxDestroy takes it) */
    CUcontext c;
    CUdevice dev;
    CHECK_CU(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    CHECK_CU(cuCtxCreate(&c, NULL, 0, dev), CUDA_SUCCESS);
    CHECK(c == cc);
    CHECK_CU(cuGreenCtxGetId(NULL, &id2), CUDA_ERROR_INVALID_CONTEXT);   /* not a green one */
    CHECK_CU(cuCtxDestroy(c), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(g_ctx), CUDA_SUCCESS);
}

static atomic_int dtors;
static void count_dtor(void *p) { (void)p; atomic_fetch_add(&dtors, 1); }

TEST(user_object_and_allocation_handle_values)
{
    CUuserObject o, o2;
    CHECK_CU(cuUserObjectCreate(&o, NULL, count_dtor, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC), CUDA_SUCCESS);
    CHECK_CU(cuUserObjectRelease(o, 1), CUDA_SUCCESS);
    for (int i = 0; i < 2000 && atomic_load(&dtors) == 0; i++) usleep(1000);
    CHECK_EQ(atomic_load(&dtors), 1);
    usleep(20000);                  /* the destructor thread gives the value back after the call */
    CHECK_CU(cuUserObjectCreate(&o2, NULL, count_dtor, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC), CUDA_SUCCESS);
    CHECK(o2 == o);
    CHECK_CU(cuUserObjectRelease(o2, 1), CUDA_SUCCESS);

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    size_t gran;
    CHECK_CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    CUmemGenericAllocationHandle h, h2, h3;
    CHECK_CU(cuMemCreate(&h, gran, &prop, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemCreate(&h2, gran, &prop, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_CU(cuMemCreate(&h3, 2 * gran, &prop, 0), CUDA_SUCCESS);
    CHECK(h3 == h);
    CUmemAllocationProp got;
    CHECK_CU(cuMemGetAllocationPropertiesFromHandle(&got, h3), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(h3), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(h2), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(h3), CUDA_ERROR_INVALID_VALUE);   /* released: unknown again */
}

/* cuemuDestroyDelay (an export of the emulator only): a destroy held in
 * flight gives its value to a create made meanwhile, and returns as soon as
 * the delay is set again, not at the end of the delay set before it. */
static CUgraph held_graph;
static atomic_int held_state;            /* 1 destroying, 2 returned */
static void *held_destroy(void *arg)
{
    (void)arg;
    atomic_store(&held_state, 1);
    CUresult rc = cuGraphDestroy(held_graph);
    atomic_store(&held_state, rc == CUDA_SUCCESS ? 2 : 3);
    return NULL;
}

TEST(destroy_held_in_flight)
{
    CUresult (*delay)(unsigned long long) =
        (CUresult(*)(unsigned long long))dlsym(RTLD_DEFAULT, "cuemuDestroyDelay");
    CHECK(delay != NULL);
    if (!delay) return;
    CHECK_CU(delay(10000001ULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(delay(10000000ULL), CUDA_SUCCESS);   /* 10 s, unless ended */
    CHECK_CU(cuGraphCreate(&held_graph, 0), CUDA_SUCCESS);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, held_destroy, NULL), 0);
    while (atomic_load(&held_state) == 0) usleep(100);
    usleep(50000);
    CHECK_EQ(atomic_load(&held_state), 1);        /* still in flight */
    CUgraph g2;
    CHECK_CU(cuGraphCreate(&g2, 0), CUDA_SUCCESS);
    CHECK(g2 == held_graph);                      /* its value already given back */
    CHECK_CU(delay(0), CUDA_SUCCESS);             /* ends the wait */
    pthread_join(t, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK_EQ(atomic_load(&held_state), 2);
    CHECK(t1.tv_sec - t0.tv_sec < 5);             /* not the 10 s set before */
    CHECK_CU(cuGraphDestroy(g2), CUDA_SUCCESS);   /* delay 0: at once */
}

int main(void)
{
    gu_setup();
    RUN(function_values_reused_after_unload);
    RUN(many_modules_then_a_new_kernel);
    RUN(stale_function_in_graph_is_caught);
    RUN(stream_value_reused_while_old_work_runs);
    RUN(event_value_reused);
    RUN(last_freed_first);
    RUN(graph_node_exec_values_reused);
    RUN(exec_does_not_take_a_reused_node_for_its_own);
    RUN(context_values);
    RUN(green_context_values);
    RUN(user_object_and_allocation_handle_values);
    RUN(destroy_held_in_flight);
    return check_done();
}
