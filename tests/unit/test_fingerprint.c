/*
 * tests/unit/test_fingerprint.c: core/fingerprint.c against the in-memory
 * fake driver (fake_graph.h): equality of identical graphs, the reason for a
 * change in each field, kernelParams vs extra and v1 vs v2 parameters giving
 * the same canonical bytes, unsupported and not comparable nodes, attributes
 * the driver does not support, the parameter-info cache, the node map.
 */
#include "check.h"
#include "fake_graph.h"
#include "core/fingerprint.h"

#include <stdlib.h>

static const size_t sizes3[] = { 8, 4, 8 };   /* ptr, u32, ptr: a 4-byte gap at 12 */
static ff f_a, f_b;
static CUdeviceptr p_in = FG_DEV_LO + 0x1000, p_out = FG_DEV_LO + 0x2000;
static uint32_t salt = 7;

/* kernel(in, salt, out) -> memcpy -> memset -> empty, chained. */
static void make_graph(fg *g)
{
    fg_make_chain(g, &f_a, &p_in, &salt, &p_out);
    fg_other(g, CU_GRAPH_NODE_TYPE_EMPTY);
    fg_edge(g, 2, 3);
}

static sg_fp fa, fb;
static sg_fp_scratch sa, sb;

/* Fingerprints a and b and compares them. */
static int diff(fg *a, fg *b)
{
    CHECK_EQ(sg_fp_build(&fa, (CUgraph)a, &sa, NULL), 0);
    CHECK_EQ(sg_fp_build(&fb, (CUgraph)b, &sb, &fa), 0);
    return sg_fp_compare(&fa, &fb);
}

static void setup(void)
{
    fg_install();
    f_a = ff_make(3, sizes3);
    f_b = ff_make(3, sizes3);
}

TEST(identical_graphs_compare_equal)
{
    fg a, b;
    make_graph(&a);
    fg_copy(&b, &a);
    CHECK_EQ(diff(&a, &b), -1);
    CHECK_EQ(fa.n, 4);
    CHECK_EQ(fa.nedges, 3);
    CHECK(!fa.unsupported);
    /* canonical argument bytes: the layout of the parameter info, gap zeroed */
    CHECK_EQ(fa.nodes[0].len, 24);
    uint64_t w;
    memcpy(&w, fa.nodes[0].pay, 8);
    CHECK_EQ(w, p_in);
    memcpy(&w, fa.nodes[0].pay + 16, 8);
    CHECK_EQ(w, p_out);
    uint32_t gap;
    memcpy(&gap, fa.nodes[0].pay + 12, 4);
    CHECK_EQ(gap, 0);
    /* the attributes the fake answers are present */
    CHECK(fa.nodes[0].k.attr_mask != 0);
    CHECK_EQ(fa.nodes[0].k.state, SG_FP_OK);
}

TEST(each_field_gives_its_reason)
{
    fg a, b;
    make_graph(&a);
    uint32_t other_salt = 8;
    CUdeviceptr moved = FG_DEV_LO + 0x9000, not_dev = 0x1234;

    fg_copy(&b, &a); b.nodes[0].kp.func = (CUfunction)(uintptr_t)&f_b;
    CHECK_EQ(diff(&a, &b), SG_REASON_FUNCTION_CHANGED);
    fg_copy(&b, &a); b.nodes[0].kp.gridDimY = 2;
    CHECK_EQ(diff(&a, &b), SG_REASON_DIMS_CHANGED);
    fg_copy(&b, &a); b.nodes[0].kp.blockDimX = 64;
    CHECK_EQ(diff(&a, &b), SG_REASON_DIMS_CHANGED);
    fg_copy(&b, &a); b.nodes[0].kp.sharedMemBytes = 1024;
    CHECK_EQ(diff(&a, &b), SG_REASON_DIMS_CHANGED);
    fg_copy(&b, &a); b.nodes[0].attr[CU_LAUNCH_ATTRIBUTE_PRIORITY].priority = 1;
    CHECK_EQ(diff(&a, &b), SG_REASON_ATTRIBUTES_CHANGED);
    fg_copy(&b, &a); b.nodes[0].attr[CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION].clusterDim.x = 2;
    CHECK_EQ(diff(&a, &b), SG_REASON_ATTRIBUTES_CHANGED);
    fg_copy(&b, &a); memcpy(b.nodes[0].args[1], &other_salt, 4);
    CHECK_EQ(diff(&a, &b), SG_REASON_SCALAR_CHANGED);
    fg_copy(&b, &a); memcpy(b.nodes[0].args[2], &moved, 8);
    CHECK_EQ(diff(&a, &b), SG_REASON_POINTER_CHANGED);
    fg_copy(&b, &a); memcpy(b.nodes[0].args[2], &not_dev, 8);   /* not a device address */
    CHECK_EQ(diff(&a, &b), SG_REASON_SCALAR_CHANGED);
    fg_copy(&b, &a);   /* pointer and scalar: scalar wins */
    memcpy(b.nodes[0].args[2], &moved, 8);
    memcpy(b.nodes[0].args[1], &other_salt, 4);
    CHECK_EQ(diff(&a, &b), SG_REASON_SCALAR_CHANGED);
    fg_copy(&b, &a); b.nodes[1].cp.WidthInBytes = 32;
    CHECK_EQ(diff(&a, &b), SG_REASON_MEMCPY_CHANGED);
    fg_copy(&b, &a); b.nodes[1].cp.srcDevice = moved;
    CHECK_EQ(diff(&a, &b), SG_REASON_MEMCPY_CHANGED);
    fg_copy(&b, &a); b.nodes[2].ms.value = 9;
    CHECK_EQ(diff(&a, &b), SG_REASON_MEMSET_CHANGED);
    fg_copy(&b, &a); b.to[2] = 2; b.from[2] = 0;                  /* an edge moved */
    CHECK_EQ(diff(&a, &b), SG_REASON_TOPOLOGY);
    fg_copy(&b, &a); b.ne = 2;                                    /* an edge less */
    CHECK_EQ(diff(&a, &b), SG_REASON_TOPOLOGY);
    fg_copy(&b, &a); fg_other(&b, CU_GRAPH_NODE_TYPE_EMPTY);      /* a node more */
    CHECK_EQ(diff(&a, &b), SG_REASON_TOPOLOGY);
    fg_copy(&b, &a); b.nodes[3].type = CU_GRAPH_NODE_TYPE_MEMSET; /* a type changed */
    CHECK_EQ(diff(&a, &b), SG_REASON_TOPOLOGY);
    /* garbage in padding of the driver's structs does not matter */
    fg_copy(&b, &a);
    memset((char *)&b.nodes[1].cp + offsetof(CUDA_MEMCPY3D, srcMemoryType) + 4, 0x5a, 4);
    CHECK_EQ(diff(&a, &b), -1);
}

TEST(kernel_params_and_extra_give_the_same_bytes)
{
    CUdeviceptr x = FG_DEV_LO + 0x40, y = FG_DEV_LO + 0x80;
    uint32_t s = 99;
    void *kp[] = { &x, &s, &y };
    unsigned char buf[24];
    memset(buf, 0xab, sizeof buf);          /* the gap holds garbage */
    memcpy(buf, &x, 8);
    memcpy(buf + 8, &s, 4);
    memcpy(buf + 16, &y, 8);
    size_t bsize = sizeof buf;
    void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &bsize,
                      CU_LAUNCH_PARAM_END };
    CUDA_KERNEL_NODE_PARAMS p2;
    memset(&p2, 0, sizeof p2);
    p2.func = (CUfunction)(uintptr_t)&f_a;
    p2.gridDimX = p2.gridDimY = p2.gridDimZ = 1;
    p2.blockDimX = p2.blockDimY = p2.blockDimZ = 32;
    p2.kernelParams = kp;
    sg_fp_node a = { 0 }, b = { 0 }, c = { 0 };
    sg_fp_kin k = SG_FP_KIN_V2(&p2);
    CHECK_EQ(sg_fp_kernel_desc(&a, &k, NULL), SG_FP_OK);
    p2.kernelParams = NULL;
    p2.extra = extra;
    k = SG_FP_KIN_V2(&p2);
    CHECK_EQ(sg_fp_kernel_desc(&b, &k, NULL), SG_FP_OK);
    CHECK_EQ(a.len, 24);
    CHECK_EQ(b.len, 24);
    CHECK(memcmp(a.pay, b.pay, 24) == 0);
    CHECK_EQ(sg_fp_node_compare(&a, &b, 0), -1);

    /* v1 and v2 of the same parameters; ctx is ignored when func is set */
    CUDA_KERNEL_NODE_PARAMS_v1 p1;
    memset(&p1, 0, sizeof p1);
    p1.func = p2.func;
    p1.gridDimX = p1.gridDimY = p1.gridDimZ = 1;
    p1.blockDimX = p1.blockDimY = p1.blockDimZ = 32;
    p1.kernelParams = kp;
    k = SG_FP_KIN_V1(&p1);
    CHECK_EQ(sg_fp_kernel_desc(&c, &k, NULL), SG_FP_OK);
    CHECK_EQ(sg_fp_node_compare(&a, &c, 0), -1);
    p2.extra = NULL;
    p2.kernelParams = kp;
    p2.ctx = (CUcontext)(uintptr_t)0x1111;
    k = SG_FP_KIN_V2(&p2);
    CHECK_EQ(sg_fp_kernel_desc(&c, &k, a.pi), SG_FP_OK);
    CHECK_EQ(sg_fp_node_compare(&a, &c, 0), -1);

    /* a CUkernel node: function identity is kern + ctx (NULL: the current one) */
    p2.func = NULL;
    p2.kern = (CUkernel)(uintptr_t)&f_a;
    p2.ctx = NULL;
    k = SG_FP_KIN_V2(&p2);
    CHECK_EQ(sg_fp_kernel_desc(&c, &k, NULL), SG_FP_OK);
    CHECK_EQ(c.k.ctx, 0xc7c7);
    CHECK_EQ(sg_fp_node_compare(&a, &c, 0), SG_REASON_FUNCTION_CHANGED);
    CHECK(memcmp(a.pay, c.pay, 24) == 0);

    /* not comparable: both kernelParams and extra, a short extra buffer, a
     * malformed extra, missing kernelParams */
    p2.func = (CUfunction)(uintptr_t)&f_a;
    p2.extra = extra;
    k = SG_FP_KIN_V2(&p2);
    CHECK_EQ(sg_fp_kernel_desc(&c, &k, NULL), SG_FP_NOT_COMPARABLE);
    CHECK_EQ(sg_fp_node_compare(&c, &c, 0), SG_REASON_NOT_COMPARABLE);
    p2.kernelParams = NULL;
    bsize = 20;
    k = SG_FP_KIN_V2(&p2);
    CHECK_EQ(sg_fp_kernel_desc(&c, &k, NULL), SG_FP_NOT_COMPARABLE);
    bsize = 24;
    extra[2] = (void *)(uintptr_t)7;
    CHECK_EQ(sg_fp_kernel_desc(&c, &k, NULL), SG_FP_NOT_COMPARABLE);
    p2.extra = NULL;
    k = SG_FP_KIN_V2(&p2);
    CHECK_EQ(sg_fp_kernel_desc(&c, &k, NULL), SG_FP_NOT_COMPARABLE);
    sg_fp_node_free(&a);
    sg_fp_node_free(&b);
    sg_fp_node_free(&c);
}

TEST(unsupported_and_not_comparable_nodes)
{
    fg a, b;
    make_graph(&a);
    fg_other(&a, CU_GRAPH_NODE_TYPE_HOST);
    fg_copy(&b, &a);
    CHECK_EQ(diff(&a, &b), SG_REASON_UNSUPPORTED_NODE);   /* never equal */
    CHECK(fa.unsupported);
    CHECK_EQ(fa.nodes[4].k.state, SG_FP_UNSUPPORTED);

    make_graph(&a);
    a.nodes[0].attr[CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE].deviceUpdatableKernelNode
        .deviceUpdatable = 1;
    fg_copy(&b, &a);
    CHECK_EQ(diff(&a, &b), SG_REASON_UNSUPPORTED_NODE);
    CHECK(fa.unsupported);

    /* an attribute the driver does not support is absent on both sides */
    make_graph(&a);
    a.nodes[0].attr_err[CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION] = CUDA_ERROR_NOT_SUPPORTED;
    fg_copy(&b, &a);
    CHECK_EQ(diff(&a, &b), -1);
    CHECK(fa.nodes[0].k.attr_mask != 0);
    /* ... any other error makes the node not comparable */
    a.nodes[0].attr_err[CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION] = CUDA_ERROR_INVALID_VALUE;
    fg_copy(&b, &a);
    CHECK_EQ(diff(&a, &b), SG_REASON_NOT_COMPARABLE);

    /* no parameter info for a function */
    ff f_noinfo = ff_make(3, sizes3);
    f_noinfo.info_error = CUDA_ERROR_NOT_SUPPORTED;
    make_graph(&a);
    a.nodes[0].kp.func = (CUfunction)(uintptr_t)&f_noinfo;
    fg_copy(&b, &a);
    CHECK_EQ(diff(&a, &b), SG_REASON_NOT_COMPARABLE);
    CHECK_EQ(fa.nodes[0].k.state, SG_FP_NOT_COMPARABLE);
}

TEST(param_info_is_cached)
{
    fg a, b;
    ff f_c = ff_make(3, sizes3);
    make_graph(&a);
    a.nodes[0].kp.func = (CUfunction)(uintptr_t)&f_c;
    fg_copy(&b, &a);
    fg_calls.param_info = 0;
    CHECK_EQ(diff(&a, &b), -1);
    CHECK_EQ(fg_calls.param_info, 4);    /* 3 arguments + the end of the list, once */
    CHECK_EQ(diff(&a, &b), -1);
    CHECK_EQ(fg_calls.param_info, 4);
}

TEST(node_map)
{
    sg_fp_map m = { 0 };
    CUgraphNode nodes[100];
    for (int i = 0; i < 100; i++) nodes[i] = (CUgraphNode)(uintptr_t)(0x1000 + 0x40 * i);
    CHECK_EQ(sg_fp_map_build(&m, nodes, 100), 0);
    int bad = 0;
    for (int i = 0; i < 100; i++) bad += sg_fp_map_find(&m, nodes[i]) != i;
    CHECK_EQ(bad, 0);
    CHECK_EQ(sg_fp_map_find(&m, (CUgraphNode)(uintptr_t)0x1001), -1);
    CHECK_EQ(sg_fp_map_find(&m, NULL), -1);
    CHECK_EQ(sg_fp_map_build(&m, nodes, 3), 0);   /* rebuilt smaller: old keys gone */
    CHECK_EQ(sg_fp_map_find(&m, nodes[50]), -1);
    CHECK_EQ(sg_fp_map_find(&m, nodes[2]), 2);
    sg_fp_map_free(&m);
}

int main(void)
{
    setup();
    RUN(identical_graphs_compare_equal);
    RUN(each_field_gives_its_reason);
    RUN(kernel_params_and_extra_give_the_same_bytes);
    RUN(unsupported_and_not_comparable_nodes);
    RUN(param_info_is_cached);
    RUN(node_map);
    sg_fp_free(&fa);
    sg_fp_free(&fb);
    sg_fp_scratch_free(&sa);
    sg_fp_scratch_free(&sb);
    sg_fp_cache_reset();
    return check_done();
}
