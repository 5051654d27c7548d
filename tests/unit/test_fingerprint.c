/*
 * tests/unit/test_fingerprint.c: core/fingerprint.c against the in-memory
 * fake driver (fake_graph.h): equality of identical graphs, the reason for a
 * change in each field, kernelParams vs extra and v1 vs v2 parameters giving
 * the same canonical bytes, unsupported and not comparable nodes, attributes
 * the driver does not support, the parameter-info cache, the node map; and
 * the build's fast path (a kernel node where the hint had one of the same
 * function) against the general one: the same bytes, every field's change
 * detected, arguments from a packed block or not, the driver calls counted,
 * both comparison widths; the one-pass comparison that keeps the differing
 * nodes (sg_fp_compare_delta) and applying what it kept, and the room it
 * gives back; copies' payloads in one slab, records' in chunks; the
 * layout-only read-back (sg_fp_build_layout); the blocks of
 * a graph's size (util.h's sg_big_realloc).
 */
#include "check.h"
#include "fake_graph.h"
#include "core/fingerprint.h"
#include "core/fp_internal.h"

#include "core/driver.h"
#include "core/util.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

static const size_t sizes3[] = { 8, 4, 8 };   /* ptr, u32, ptr: a 4-byte gap at 12 */
static const size_t sizes_dense[] = { 8, 8, 4, 4, 4 };   /* 28 bytes back to back */
static ff f_a, f_b, f_d;
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
    f_d = ff_make(5, sizes_dense);
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
    CHECK_EQ(fg_calls.param_info, 8);    /* 3 arguments + the end of the list, twice */
    CHECK_EQ(diff(&a, &b), -1);
    CHECK_EQ(fg_calls.param_info, 8);
}

/* A cuFuncGetParamInfo that fails (answering "end of list" early) must not
 * give a layout cut short, whichever call it starts failing at: the node is
 * then never comparable, so changed arguments are never skipped. */
TEST(param_info_failing_midway)
{
    for (int from = 1; from <= 8; from++) {
        fg a, b;
        ff f_c = ff_make(3, sizes3);
        f_c.fail_from = from;
        make_graph(&a);
        a.nodes[0].kp.func = (CUfunction)(uintptr_t)&f_c;
        fg_copy(&b, &a);
        sg_fp_cache_reset();
        int r = diff(&a, &b);
        if (from <= 7) {
            CHECK(r != -1);                      /* a failing probe: never equal */
            CHECK_EQ(fa.nodes[0].k.state, SG_FP_NOT_COMPARABLE);
        } else {
            CHECK_EQ(r, -1);                     /* both passes done before the failures */
        }
    }
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


/* ------------------------------------------------------------ fast path */

/* Per node of a graph: a packed copy of its arguments (what a driver hands
 * back: kernelParams pointing into one block). */
typedef struct packed_args {
    unsigned char buf[FG_MAX][64];
    void *argv[FG_MAX][8];
} packed_args;

/* Points node i's kernelParams into pa's block, holding its current values. */
static void pack_node(fg *g, int i, packed_args *pa)
{
    fg_node *nd = &g->nodes[i];
    const ff *f = (const ff *)(void *)nd->kp.func;
    memset(pa->buf[i], 0x5c, sizeof pa->buf[i]);   /* bytes past the arguments: garbage */
    for (int a = 0; a < f->n; a++) {
        memcpy(pa->buf[i] + f->off[a], nd->args[a], f->size[a]);
        pa->argv[i][a] = pa->buf[i] + f->off[a];
    }
    nd->kp.kernelParams = pa->argv[i];
}

static CUdeviceptr p_a = FG_DEV_LO + 0x3000, p_b = FG_DEV_LO + 0x4000;
static uint32_t u_1 = 1, u_2 = 2, u_3 = 3;

/* kernel f_d (packed args) -> kernel f_a (gap layout) -> memcpy -> memset ->
 * kernel f_d (separate argument slots), chained. */
static void make_mixed(fg *g, packed_args *pa)
{
    fg_make_chain(g, &f_a, &p_in, &salt, &p_out);   /* 0: f_a, 1: memcpy, 2: memset */
    const void *vals[] = { &p_a, &p_b, &u_1, &u_2, &u_3 };
    fg_kernel(g, &f_d, vals);                       /* 3 */
    fg_kernel(g, &f_d, vals);                       /* 4 */
    fg_edge(g, 2, 3);
    fg_edge(g, 3, 4);
    fg_node *k = &g->nodes[3];
    k->attr[CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW].accessPolicyWindow.num_bytes = 4096;
    k->attr[CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW].accessPolicyWindow.missProp =
        CU_ACCESS_PROPERTY_STREAMING;
    k->attr[CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION].clusterDim.z = 3;
    k->attr[CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION].clusterDim.z = 5;
    k->attr[CU_LAUNCH_ATTRIBUTE_PRIORITY].priority = 2;
    k->attr[CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING].nvlinkUtilCentricScheduling = 1;
    pack_node(g, 3, pa);
}

/* Whether two descriptions are the same bytes: key, length, payload and its
 * zero padding up to the next multiple of 32. */
static int same_bytes(const sg_fp_node *a, const sg_fp_node *b)
{
    if (memcmp(&a->k, &b->k, sizeof a->k) || a->len != b->len) return 0;
    if (!a->len) return 1;
    uint32_t pad = (a->len + 31) & ~31u;
    if (memcmp(a->pay, b->pay, pad)) return 0;
    for (uint32_t i = a->len; i < pad; i++)
        if (a->pay[i] || b->pay[i]) return 0;
    return 1;
}

static sg_fp fc;
static sg_fp_scratch sc;

TEST(fast_path_gives_the_general_bytes)
{
    fg a, b;
    packed_args pa, pb;
    make_mixed(&a, &pa);
    fg_copy(&b, &a);
    pack_node(&b, 3, &pb);
    unsigned long drv_kp = sg_driver_calls[SG_DRV_cuGraphKernelNodeGetParams_v2],
                  drv_attr = sg_driver_calls[SG_DRV_cuGraphKernelNodeGetAttribute],
                  drv_type = sg_driver_calls[SG_DRV_cuGraphNodeGetType];
    int kp0 = fg_calls.kparams, attr0 = fg_calls.attr, type0 = fg_calls.get_type;
    CHECK_EQ(sg_fp_build(&fa, (CUgraph)&a, &sa, NULL), 0);     /* the general path */
    int type_general = fg_calls.get_type - type0;
    type0 = fg_calls.get_type;
    CHECK_EQ(sg_fp_build(&fb, (CUgraph)&b, &sb, &fa), 0);      /* kernels: the fast path */
    CHECK_EQ(fg_calls.get_type - type0, 2);                     /* memcpy, memset only */
    CHECK_EQ(type_general, 5);
    CHECK_EQ(sg_fp_build(&fc, (CUgraph)&a, &sc, &fb), 0);      /* fast again, from a fast one */
    /* every driver call the library made is counted, fast path included */
    CHECK_EQ(sg_driver_calls[SG_DRV_cuGraphKernelNodeGetParams_v2] - drv_kp,
             (unsigned long)(fg_calls.kparams - kp0));
    CHECK_EQ(sg_driver_calls[SG_DRV_cuGraphKernelNodeGetAttribute] - drv_attr,
             (unsigned long)(fg_calls.attr - attr0));
    CHECK_EQ(sg_driver_calls[SG_DRV_cuGraphNodeGetType] - drv_type,
             (unsigned long)(fg_calls.get_type - type0 + type_general));
    int bad = 0;
    for (size_t i = 0; i < fa.n; i++)
        bad += !same_bytes(&fa.nodes[i], &fb.nodes[i]) + !same_bytes(&fa.nodes[i], &fc.nodes[i]);
    CHECK_EQ(bad, 0);
    CHECK_EQ(fa.nodes[3].len, 28);
    CHECK_EQ(fa.nodes[3].k.attr_mask, fa.nodes[0].k.attr_mask);
    CHECK_EQ(sg_fp_compare(&fa, &fb), -1);
    CHECK_EQ(sg_fp_compare(&fb, &fc), -1);
    CHECK_EQ(fa.nedges, fb.nedges);
    CHECK(memcmp(fa.edges, fb.edges, fa.nedges * sizeof *fa.edges) == 0);
}

/* b = a with node `node`'s attribute `id` changed in byte `at` of its value. */
static int attr_change(fg *a, int node, int id, size_t at)
{
    fg b;
    packed_args pa, pb;
    fg_copy(&b, a);
    pack_node(a, 3, &pa);
    pack_node(&b, 3, &pb);
    ((unsigned char *)&b.nodes[node].attr[id])[at] ^= 0x40;
    return diff(a, &b);
}

TEST(fast_path_detects_each_field)
{
    fg a, b;
    packed_args pa, pb;
    make_mixed(&a, &pa);
    /* the meaningful bytes of each attribute's value: first and last */
    static const struct { int id; size_t bytes; } attrs[] = {
#define SG_T_ATTR_(id, bytes, off) { id, bytes },
        SG_FP_ATTR_LIST(SG_T_ATTR_)
    };
    int missed = 0;
    for (size_t j = 0; j < sizeof attrs / sizeof attrs[0]; j++) {
        if (attrs[j].id == CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE) continue;
        for (int node = 0; node < 5; node += 3) {   /* the gap layout, the packed one */
            if (attr_change(&a, node, attrs[j].id, 0) != SG_REASON_ATTRIBUTES_CHANGED) missed++;
            if (attr_change(&a, node, attrs[j].id, attrs[j].bytes - 1) !=
                SG_REASON_ATTRIBUTES_CHANGED)
                missed++;
        }
    }
    CHECK_EQ(missed, 0);
    /* bytes past an attribute's own are not part of it */
    CHECK_EQ(attr_change(&a, 3, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, 12), -1);
    CHECK_EQ(attr_change(&a, 3, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, 40), -1);

    /* parameters of the packed node, each argument, first and last byte */
    uint32_t u_9 = 9;
    CUdeviceptr moved = FG_DEV_LO + 0x9000;
    for (int arg = 0; arg < 5; arg++) {
        for (int end = 0; end < 2; end++) {
            fg_copy(&b, &a);
            b.nodes[3].args[arg][end ? f_d.size[arg] - 1 : 0] ^= 0x10;
            pack_node(&a, 3, &pa);
            pack_node(&b, 3, &pb);
            int r = diff(&a, &b);
            if (r != SG_REASON_SCALAR_CHANGED && r != SG_REASON_POINTER_CHANGED) missed++;
        }
    }
    CHECK_EQ(missed, 0);
    fg_copy(&b, &a); memcpy(b.nodes[3].args[1], &moved, 8);
    pack_node(&a, 3, &pa); pack_node(&b, 3, &pb);
    CHECK_EQ(diff(&a, &b), SG_REASON_POINTER_CHANGED);
    fg_copy(&b, &a); memcpy(b.nodes[3].args[4], &u_9, 4);
    pack_node(&a, 3, &pa); pack_node(&b, 3, &pb);
    CHECK_EQ(diff(&a, &b), SG_REASON_SCALAR_CHANGED);
    fg_copy(&b, &a); b.nodes[3].kp.gridDimZ = 2;
    pack_node(&a, 3, &pa); pack_node(&b, 3, &pb);
    CHECK_EQ(diff(&a, &b), SG_REASON_DIMS_CHANGED);
    fg_copy(&b, &a); b.nodes[3].kp.sharedMemBytes = 16;
    pack_node(&a, 3, &pa); pack_node(&b, 3, &pb);
    CHECK_EQ(diff(&a, &b), SG_REASON_DIMS_CHANGED);
    fg_copy(&b, &a); b.nodes[3].kp.func = (CUfunction)(uintptr_t)&f_a;   /* another layout */
    pack_node(&a, 3, &pa);
    CHECK_EQ(diff(&a, &b), SG_REASON_FUNCTION_CHANGED);
    /* the same values from separate slots (not a packed block): equal */
    fg_copy(&b, &a);
    pack_node(&a, 3, &pa);
    CHECK_EQ(diff(&a, &b), -1);
    CHECK(same_bytes(&fa.nodes[3], &fb.nodes[3]));
    /* a packed block whose pointers are not where the layout says: per argument */
    fg_copy(&b, &a);
    pack_node(&a, 3, &pa);
    pack_node(&b, 3, &pb);
    unsigned char other[8];
    memcpy(other, b.nodes[3].args[2], 4);
    pb.argv[3][2] = other;                    /* same value, elsewhere */
    CHECK_EQ(diff(&a, &b), -1);
    memset(other, 0x77, 4);
    CHECK_EQ(diff(&a, &b), SG_REASON_SCALAR_CHANGED);
    pb.argv[3][2] = NULL;                     /* a NULL argument: not comparable */
    CHECK_EQ(diff(&a, &b), SG_REASON_NOT_COMPARABLE);
}

TEST(fast_path_states)
{
    fg a, b;
    packed_args pa, pb;
    /* NOT_SUPPORTED: absent, on both paths; another error: not comparable */
    make_mixed(&a, &pa);
    a.nodes[3].attr_err[CU_LAUNCH_ATTRIBUTE_PRIORITY] = CUDA_ERROR_NOT_SUPPORTED;
    fg_copy(&b, &a);
    pack_node(&b, 3, &pb);
    CHECK_EQ(diff(&a, &b), -1);
    CHECK(same_bytes(&fa.nodes[3], &fb.nodes[3]));
    CHECK(!(fb.nodes[3].k.attr_mask & (1u << CU_LAUNCH_ATTRIBUTE_PRIORITY)));
    CHECK_EQ(fb.nodes[3].k.state, SG_FP_OK);
    b.nodes[3].attr_err[CU_LAUNCH_ATTRIBUTE_PRIORITY] = CUDA_ERROR_INVALID_VALUE;
    CHECK_EQ(diff(&a, &b), SG_REASON_NOT_COMPARABLE);
    CHECK_EQ(fb.nodes[3].k.state, SG_FP_NOT_COMPARABLE);
    /* device-updatable, found on the fast path */
    make_mixed(&a, &pa);
    fg_copy(&b, &a);
    pack_node(&b, 3, &pb);
    b.nodes[3].attr[CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE].deviceUpdatableKernelNode
        .deviceUpdatable = 1;
    CHECK_EQ(diff(&a, &b), SG_REASON_UNSUPPORTED_NODE);
    CHECK(fb.unsupported);
    CHECK_EQ(fb.nodes[3].k.state, SG_FP_UNSUPPORTED);
    CHECK(!fa.unsupported);
    /* a node that is no longer a kernel node, or a kernel given by `extra` */
    make_mixed(&a, &pa);
    fg_copy(&b, &a);
    b.nodes[3].type = CU_GRAPH_NODE_TYPE_EMPTY;
    CHECK_EQ(diff(&a, &b), SG_REASON_TOPOLOGY);
    CHECK_EQ(fb.nodes[3].k.type, CU_GRAPH_NODE_TYPE_EMPTY);
    unsigned char buf[28];
    size_t bsize = sizeof buf;
    memcpy(buf, &p_a, 8); memcpy(buf + 8, &p_b, 8);
    memcpy(buf + 16, &u_1, 4); memcpy(buf + 20, &u_2, 4); memcpy(buf + 24, &u_3, 4);
    void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &bsize,
                      CU_LAUNCH_PARAM_END };
    fg_copy(&b, &a);
    b.nodes[3].kp.kernelParams = NULL;
    b.nodes[3].kp.extra = extra;
    pack_node(&a, 3, &pa);
    CHECK_EQ(diff(&a, &b), -1);
    CHECK(same_bytes(&fa.nodes[3], &fb.nodes[3]));
}

TEST(attribute_list_tiles_in_order)
{
    /* fingerprint.c writes attributes in list order and lets one write past
     * its own bytes into the next: the list must cover [0, sum of sizes)
     * exactly, in ascending offsets */
    static const struct { size_t bytes, off; } l[] = {
#define SG_T_TILE_(id, bytes, off) { bytes, off },
        SG_FP_ATTR_LIST(SG_T_TILE_)
    };
    size_t end = 0;
    int bad = 0;
    for (size_t j = 0; j < sizeof l / sizeof l[0]; j++) {
        bad += l[j].off != end;
        end = l[j].off + l[j].bytes;
    }
    CHECK_EQ(bad, 0);
    CHECK(end <= SG_FP_ATTR_BYTES);
}

TEST(compare_widths_and_payload_sizes)
{
    /* payloads of 8 (one chunk), 28 and 40 bytes (a loop), both widths */
    static const size_t s1[] = { 8 }, s5[] = { 8, 8, 8, 8, 8 };
    ff f1 = ff_make(1, s1), f5 = ff_make(5, s5);
    CUdeviceptr v[5] = { p_a, p_b, p_in, p_out, p_a };
    const void *vals[] = { &v[0], &v[1], &v[2], &v[3], &v[4] };
    int widths[2] = { 16, sg_fp_scan_width(0) };
    for (int w = 0; w < 2; w++) {
        CHECK_EQ(sg_fp_scan_width(widths[w]), widths[w]);
        fg a, b;
        packed_args pa, pb;
        make_mixed(&a, &pa);
        fg_kernel(&a, &f1, vals);   /* 5 */
        fg_kernel(&a, &f5, vals);   /* 6 */
        fg_edge(&a, 4, 5);
        fg_edge(&a, 5, 6);
        fg_copy(&b, &a);
        pack_node(&a, 3, &pa);
        pack_node(&b, 3, &pb);
        CHECK_EQ(diff(&a, &b), -1);
        CHECK_EQ(fb.nodes[6].len, 40);
        int missed = 0;
        for (int node = 5; node <= 6; node++) {
            const ff *f = node == 5 ? &f1 : &f5;
            for (int arg = 0; arg < f->n; arg++) {
                fg_copy(&b, &a);
                pack_node(&b, 3, &pb);
                b.nodes[node].args[arg][7] ^= 1;      /* the last byte of each argument */
                missed += diff(&a, &b) != SG_REASON_SCALAR_CHANGED;
            }
        }
        CHECK_EQ(missed, 0);
        /* every key byte: a change anywhere in it is seen */
        fg_copy(&b, &a);
        pack_node(&b, 3, &pb);
        CHECK_EQ(diff(&a, &b), -1);
        for (size_t at = 0; at < sizeof(sg_fp_key); at++) {
            sg_fp_node save = fb.nodes[3];
            ((unsigned char *)&fb.nodes[3].k)[at] ^= 1;
            missed += sg_fp_compare(&fa, &fb) == -1;
            fb.nodes[3] = save;
        }
        CHECK_EQ(missed, 0);
        CHECK_EQ(sg_fp_compare(&fa, &fb), -1);
        /* padding that differs only costs the exact comparison */
        fb.nodes[3].pay[29] = 1;
        CHECK_EQ(sg_fp_compare(&fa, &fb), -1);
        fb.nodes[3].pay[29] = 0;
    }
    sg_fp_scan_width(widths[1]);
}

TEST(kernel_without_parameters)
{
    /* no parameters: kernelParams may point at nothing (here: NULL, then an
     * empty array the library must not read) */
    ff f0 = ff_make(0, NULL);
    fg a, b;
    packed_args pa;
    make_mixed(&a, &pa);
    a.nodes[4].kp.func = (CUfunction)(uintptr_t)&f0;
    a.nodes[4].kp.kernelParams = NULL;
    fg_copy(&b, &a);
    pack_node(&b, 3, &pa);
    CHECK_EQ(diff(&a, &b), -1);
    CHECK_EQ(fb.nodes[4].len, 0);
    CHECK_EQ(fb.nodes[4].k.state, SG_FP_OK);
    /* An argument array with "no parameters" cannot be told from a probe that
     * failed at its first call: such a node never compares equal (and the
     * array is not read: ASan sees any read of it). */
    void **none = malloc(1);
    b.nodes[4].kp.kernelParams = none;
    CHECK_EQ(sg_fp_build(&fc, (CUgraph)&b, &sc, &fb), 0);
    CHECK_EQ(fc.nodes[4].k.state, SG_FP_NOT_COMPARABLE);
    CHECK(sg_fp_compare(&fb, &fc) != -1);
    free(none);
}

TEST(hint_of_another_size)
{
    /* a hint with fewer or more nodes: its edges are not used, its layouts
     * are for the places both have */
    fg a, b;
    packed_args pa, pb;
    make_mixed(&a, &pa);
    fg_copy(&b, &a);
    pack_node(&b, 3, &pb);
    fg_other(&b, CU_GRAPH_NODE_TYPE_EMPTY);
    fg_edge(&b, 4, 5);
    CHECK_EQ(diff(&a, &b), SG_REASON_TOPOLOGY);
    CHECK_EQ(fb.n, 6);
    CHECK_EQ(fb.edges[4].from, 4);
    CHECK_EQ(fb.edges[4].to, 5);
    CHECK(same_bytes(&fa.nodes[3], &fb.nodes[3]));
    CHECK_EQ(sg_fp_build(&fc, (CUgraph)&a, &sc, &fb), 0);   /* hint larger */
    CHECK_EQ(sg_fp_compare(&fa, &fc), -1);
}

/* The one-pass comparison (sg_fp_compare_delta): the same reason as
 * sg_fp_compare, and exactly b's differing nodes, so that a with them
 * applied compares equal to b; no delta when the topology differs or a
 * node is unsupported. */
TEST(compare_delta_holds_exactly_the_differing_nodes)
{
    fg a, b;
    CUdeviceptr moved = FG_DEV_LO + 0x9000;
    uint32_t other_salt = 8;
    sg_fp_delta d = { 0 };
    make_graph(&a);
    enum { SALT, PTR, MEMCPY, MEMSET_AND_PTR, TYPE, ATTR, SAME, EDGE, MORE, HOST, NCASES };
    for (int cs = 0; cs < NCASES; cs++) {
        fg_copy(&b, &a);
        size_t want_n = 1;
        switch (cs) {
        case SALT: memcpy(b.nodes[0].args[1], &other_salt, 4); break;
        case PTR: memcpy(b.nodes[0].args[2], &moved, 8); break;
        case MEMCPY: b.nodes[1].cp.srcDevice = moved; break;
        case MEMSET_AND_PTR: b.nodes[2].ms.value = 9; memcpy(b.nodes[0].args[2], &moved, 8); want_n = 2; break;
        case TYPE: b.nodes[3].type = CU_GRAPH_NODE_TYPE_MEMSET; break;
        case ATTR: b.nodes[0].attr[CU_LAUNCH_ATTRIBUTE_PRIORITY].priority = 1; break;
        case SAME: want_n = 0; break;
        case EDGE: b.to[2] = 2; b.from[2] = 0; break;
        case MORE: fg_other(&b, CU_GRAPH_NODE_TYPE_EMPTY); break;
        case HOST: b.nodes[3].type = CU_GRAPH_NODE_TYPE_HOST; break;
        }
        int want = diff(&a, &b);
        CHECK_EQ(sg_fp_compare_delta(&fa, &fb, &d), want);
        if (cs == EDGE || cs == MORE || cs == HOST) {
            CHECK(!d.valid);                          /* b is needed whole */
            continue;
        }
        CHECK(d.valid);
        CHECK_EQ(d.n, want_n);
        for (size_t k = 1; k < d.n; k++) CHECK(d.idx[k - 1] < d.idx[k]);
        CHECK_EQ(sg_fp_copy(&fc, &fa), 0);
        CHECK_EQ(sg_fp_delta_apply(&fc, &d), 0);
        CHECK_EQ(sg_fp_compare(&fc, &fb), -1);
        for (size_t i = 0; i < fb.n; i++) CHECK(same_bytes(&fc.nodes[i], &fb.nodes[i]));
    }
    sg_fp_delta_free(&d);
}

/* sg_fp_build_layout (the clone's read-back when variants are bought): no
 * attribute asked for, the same nodes and order as a full build
 * (sg_fp_same_order), and a node that its attributes make UNSUPPORTED or NOT
 * COMPARABLE in the full description does not match the layout's: no
 * mapping then, never a wrong one. */
TEST(layout_build_reads_no_attribute)
{
    fg a;
    make_graph(&a);
    sg_fp layout = { 0 };
    CHECK_EQ(sg_fp_build(&fa, (CUgraph)&a, &sa, NULL), 0);
    unsigned long attr_before = fg_calls.attr;
    CHECK_EQ(sg_fp_build_layout(&layout, (CUgraph)&a, &sb), 0);
    CHECK_EQ(fg_calls.attr, attr_before);
    CHECK_EQ(layout.n, fa.n);
    CHECK_EQ(layout.nodes[0].k.attr_mask, 0);
    CHECK(sg_fp_same_order(&layout, &fa));
    CHECK(sg_fp_same_order(&fa, &layout));

    /* another argument value: not the same order */
    fg b;
    fg_copy(&b, &a);
    uint32_t other = salt + 1;
    memcpy(b.nodes[0].args[1], &other, 4);
    CHECK_EQ(sg_fp_build_layout(&layout, (CUgraph)&b, &sb), 0);
    CHECK(!sg_fp_same_order(&layout, &fa));

    a.nodes[0].attr[CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE].deviceUpdatableKernelNode
        .deviceUpdatable = 1;
    CHECK_EQ(sg_fp_build(&fa, (CUgraph)&a, &sa, NULL), 0);
    CHECK_EQ(sg_fp_build_layout(&layout, (CUgraph)&a, &sb), 0);
    CHECK_EQ(fa.nodes[0].k.state, SG_FP_UNSUPPORTED);
    CHECK(!sg_fp_same_order(&layout, &fa));

    make_graph(&a);
    a.nodes[0].attr_err[CU_LAUNCH_ATTRIBUTE_PRIORITY] = CUDA_ERROR_INVALID_VALUE;
    CHECK_EQ(sg_fp_build(&fa, (CUgraph)&a, &sa, NULL), 0);
    CHECK_EQ(sg_fp_build_layout(&layout, (CUgraph)&a, &sb), 0);
    CHECK_EQ(fa.nodes[0].k.state, SG_FP_NOT_COMPARABLE);
    CHECK(!sg_fp_same_order(&layout, &fa));
    sg_fp_free(&layout);
}

/* memsets of value v[i] (v NULL: all 0) at node i, chained: big enough
 * (2,048 nodes) that its arrays and a whole delta are mapped blocks. */
enum { BIG_N = 2048 };
static void memset_chain_lent(sg_fp *fp, const unsigned *v, int lend)
{
    sg_fp_free(fp);
    fp->origin = SG_FP_RECORDED;
    for (size_t i = 0; i < BIG_N; i++) {
        CUDA_MEMSET_NODE_PARAMS m = { .dst = FG_DEV_LO + 0x100 * i, .value = v ? v[i] : 0,
                                      .elementSize = 1, .width = 16, .height = 1 };
        sg_fp_node *n = sg_fp_push_node(fp);
        CHECK(n != NULL);
        if (lend) sg_fp_node_lend(fp, n);
        CHECK_EQ(sg_fp_memset_desc(n, &m, NULL), 0);
        if (i) CHECK_EQ(sg_fp_push_edge(fp, (uint32_t)i - 1, (uint32_t)i, NULL), 0);
    }
}

static void memset_chain(sg_fp *fp, const unsigned *v) { memset_chain_lent(fp, v, 0); }

/* A delta holds its copies' payloads in a slab of its own, and gives back
 * the room of a whole-graph change once comparisons have used less than a
 * quarter of it 8 times in a row (an exec whose first updates changed every
 * node), and keeps it while whole-graph changes come back within that (no
 * reallocation each time); what it holds stays exact throughout. */
TEST(delta_gives_back_unused_room)
{
    static unsigned all[BIG_N], one[BIG_N];
    for (size_t i = 0; i < BIG_N; i++) all[i] = 1;
    one[5] = 3;
    sg_fp a = { 0 }, b_all = { 0 }, b_one = { 0 }, c = { 0 };
    sg_fp_delta d = { 0 };
    memset_chain(&a, NULL);
    memset_chain(&b_all, all);
    memset_chain(&b_one, one);
    for (int round = 0; round < 3; round++) {         /* whole, then 7 small: kept */
        CHECK_EQ(sg_fp_compare_delta(&a, &b_all, &d), SG_REASON_MEMSET_CHANGED);
        CHECK(d.valid);
        CHECK_EQ(d.n, BIG_N);
        int in_slab = 1;                              /* copies in the delta's own slab */
        for (size_t k = 0; k < d.n; k++)
            in_slab &= d.nodes[k].lent && d.nodes[k].pay >= d.slab &&
                       d.nodes[k].pay + d.nodes[k].cap <= d.slab + d.slab_used;
        CHECK(in_slab);
        for (int k = 0; k < 7; k++) {
            CHECK_EQ(sg_fp_compare_delta(&a, &b_one, &d), SG_REASON_MEMSET_CHANGED);
            CHECK_EQ(d.n, 1);
            CHECK_EQ(d.cap, BIG_N);
        }
    }
    CHECK_EQ(sg_fp_compare_delta(&a, &b_one, &d), SG_REASON_MEMSET_CHANGED);   /* the 8th */
    CHECK(d.valid);
    CHECK_EQ(d.n, 1);
    CHECK(d.cap <= 8);
    CHECK(d.slab_cap <= 4096);
    CHECK_EQ(d.idx[0], 5);
    CHECK_EQ(sg_fp_copy(&c, &a), 0);
    CHECK_EQ(sg_fp_delta_apply(&c, &d), 0);
    CHECK_EQ(sg_fp_compare(&c, &b_one), -1);
    CHECK_EQ(sg_fp_compare_delta(&a, &b_all, &d), SG_REASON_MEMSET_CHANGED);   /* grows again */
    CHECK_EQ(d.n, BIG_N);
    CHECK_EQ(sg_fp_copy(&c, &a), 0);
    CHECK_EQ(sg_fp_delta_apply(&c, &d), 0);
    CHECK_EQ(sg_fp_compare(&c, &b_all), -1);
    sg_fp_delta_free(&d);
    sg_fp_free(&a);
    sg_fp_free(&b_all);
    sg_fp_free(&b_one);
    sg_fp_free(&c);
}

/* Node like's key with a 200-byte payload: longer than any slot lent to a
 * memset node. */
static sg_fp_node longer_node(const sg_fp_node *like)
{
    sg_fp_node x = { .k = like->k };
    CHECK_EQ(sg_fp_pay_reserve(&x, 200), 0);
    for (int i = 0; i < 200; i++) x.pay[i] = (unsigned char)(i + 1);
    x.len = 200;
    return x;
}

/* A copy (sg_fp_copy) puts every payload into one slab (fingerprint.h),
 * reused by the next copy; a node written with a longer payload than its
 * slot moves to a buffer of its own without touching its neighbours'
 * slots; the copy compares as the original throughout. */
TEST(copies_lend_payload_slots_from_one_slab)
{
    sg_fp a = { 0 }, c = { 0 };
    memset_chain(&a, NULL);
    CHECK_EQ(sg_fp_copy(&c, &a), 0);
    CHECK(c.slab != NULL);
    int lent = 1;
    for (size_t i = 0; i < c.n; i++)
        lent &= c.nodes[i].lent && c.nodes[i].pay >= c.slab &&
                c.nodes[i].pay + c.nodes[i].cap <= c.slab + c.slab_cap;
    CHECK(lent);
    CHECK_EQ(sg_fp_compare(&c, &a), -1);

    sg_fp_node longer = longer_node(&a.nodes[3]);
    CHECK_EQ(sg_fp_node_copy(&c.nodes[3], &longer), 0);
    CHECK(!c.nodes[3].lent);
    CHECK(c.nodes[3].cap >= 200);
    CHECK(!memcmp(c.nodes[3].pay, longer.pay, 200));
    CHECK_EQ(sg_fp_node_compare(&a.nodes[2], &c.nodes[2], 0), -1);   /* neighbours intact */
    CHECK_EQ(sg_fp_node_compare(&a.nodes[4], &c.nodes[4], 0), -1);
    CHECK(sg_fp_compare(&c, &a) >= 0);

    unsigned char *slab = c.slab;
    CHECK_EQ(sg_fp_copy(&c, &a), 0);                     /* the slab reused */
    CHECK(c.slab == slab);
    CHECK(c.nodes[3].lent);
    CHECK_EQ(sg_fp_compare(&c, &a), -1);
    sg_fp_node_free(&longer);
    sg_fp_free(&a);
    sg_fp_free(&c);
}

/* A description built node by node with slots lent from its chunks (as a
 * record is: sg_fp_node_lend) describes the same as one with a buffer per
 * node; a node given a longer payload moves to a buffer of its own without
 * touching its neighbours' slots; done growing (sg_fp_shrink), its slots are
 * in one chunk, which stays bounded when the description is reused for
 * graphs of other sizes. */
TEST(records_lend_payload_slots_from_chunks)
{
    sg_fp a = { 0 }, r = { 0 };
    memset_chain(&a, NULL);
    memset_chain_lent(&r, NULL, 1);
    CHECK(r.chunk != NULL);
    int lent = 1;
    for (size_t i = 0; i < r.n; i++) lent &= r.nodes[i].lent && r.nodes[i].cap == SG_FP_LEND_BYTES;
    CHECK(lent);
    CHECK(r.chunk_cap > 4096);                           /* more than one chunk */
    CHECK_EQ(sg_fp_compare(&a, &r), -1);
    sg_fp_node longer = longer_node(&a.nodes[7]);
    CHECK_EQ(sg_fp_node_copy(&r.nodes[7], &longer), 0);
    CHECK(!r.nodes[7].lent);
    CHECK(!memcmp(r.nodes[7].pay, longer.pay, 200));
    CHECK_EQ(sg_fp_node_compare(&a.nodes[6], &r.nodes[6], 0), -1);
    CHECK_EQ(sg_fp_node_compare(&a.nodes[8], &r.nodes[8], 0), -1);
    sg_fp_node_lend(&r, &r.nodes[7]);                    /* has a buffer: unchanged */
    CHECK(!r.nodes[7].lent);
    CHECK_EQ(sg_fp_node_copy(&r.nodes[7], &a.nodes[7]), 0);

    /* done growing: one chunk; reused for graphs of other sizes (a record
     * from the pool), its chunks stay bounded */
    sg_fp_shrink(&r);
    unsigned char *prev;
    memcpy(&prev, r.chunk, sizeof prev);
    CHECK(prev == NULL);
    CHECK_EQ(sg_fp_compare(&a, &r), -1);
    int bounded = 1, equal = 1;
    for (int round = 0; round < 40; round++) {
        size_t n = round % 2 ? BIG_N : BIG_N / 3;
        r.n = r.nedges = 0;
        for (size_t i = 0; i < n; i++) {
            sg_fp_node *x = sg_fp_push_node(&r);
            CHECK(x != NULL);
            sg_fp_node_lend(&r, x);
            CHECK_EQ(sg_fp_node_copy(x, &a.nodes[i]), 0);
            if (i) CHECK_EQ(sg_fp_push_edge(&r, (uint32_t)i - 1, (uint32_t)i, NULL), 0);
        }
        sg_fp_shrink(&r);
        memcpy(&prev, r.chunk, sizeof prev);
        bounded &= prev == NULL && r.chunk_cap <= 2 * (32 + n * SG_FP_LEND_BYTES);
        for (size_t i = 0; i < n; i++) equal &= sg_fp_node_compare(&a.nodes[i], &r.nodes[i], 0) == -1;
    }
    CHECK(bounded);
    CHECK(equal);
    sg_fp_node_free(&longer);
    sg_fp_free(&a);
    sg_fp_free(&r);
}

/* A record done growing whose nodes hold no lent slot (their payloads have
 * buffers of their own: a graph of memcpy nodes, say) keeps no chunk; reused
 * from the pool for a graph of kernels, it lends every new node a slot inside
 * a chunk. (It kept a 32-byte chunk, the next was twice that, 64 bytes, and
 * the slot lent at 32 ran past its end: a heap overflow a random program of
 * adv_recfuzz found.) */
TEST(record_reused_after_a_shrink_without_slots)
{
    sg_fp a = { 0 }, r = { 0 };
    memset_chain(&a, NULL);
    r.origin = SG_FP_RECORDED;
    sg_fp_node *x = sg_fp_push_node(&r);
    CHECK(x != NULL);
    sg_fp_node_lend(&r, x);
    sg_fp_node longer = longer_node(&a.nodes[0]);
    CHECK_EQ(sg_fp_node_copy(x, &longer), 0);           /* its own buffer */
    CHECK(!x->lent);
    sg_fp_shrink(&r);
    CHECK(r.chunk == NULL);
    CHECK_EQ(r.chunk_cap, 0);
    r.n = 0;
    int inside = 1;
    for (size_t i = 0; i < 100; i++) {
        x = sg_fp_push_node(&r);
        CHECK(x != NULL);
        if (i == 0) CHECK_EQ(sg_fp_node_copy(x, &a.nodes[0]), 0);   /* the old buffer, kept */
        sg_fp_node_lend(&r, x);
        inside &= r.chunk_used <= r.chunk_cap;
        if (i) {
            CHECK_EQ(sg_fp_node_copy(x, &a.nodes[i]), 0);
            inside &= x->lent && x->pay >= r.chunk + 32 && x->pay + x->cap <= r.chunk + r.chunk_cap;
        }
    }
    CHECK(inside);
    int equal = 1;
    for (size_t i = 0; i < 100; i++) equal &= sg_fp_node_compare(&a.nodes[i], &r.nodes[i], 0) == -1;
    CHECK(equal);
    sg_fp_node_free(&longer);
    sg_fp_free(&a);
    sg_fp_free(&r);
}

/* sg_big_realloc keeps the bytes across the heap / mapping boundary both
 * ways; from SG_BIG_BYTES up a block is a mapping of its own (16 bytes past
 * a page boundary), which freeing unmaps (not under AddressSanitizer, where
 * every block stays on the heap for it to check). */
TEST(big_blocks_keep_their_bytes_and_give_memory_back)
{
#if defined(__SANITIZE_ADDRESS__)
    const int mapped = 0;
#else
    const int mapped = 1;
#endif
    unsigned char *p = sg_big_realloc(NULL, 100);
    CHECK(p != NULL);
    for (int i = 0; i < 100; i++) p[i] = (unsigned char)i;
    size_t big = SG_BIG_BYTES + 5000;
    p = sg_big_realloc(p, big);
    CHECK(p != NULL);
    int kept = 1;
    for (int i = 0; i < 100; i++) kept &= p[i] == (unsigned char)i;
    CHECK(kept);
    if (mapped) CHECK_EQ((uintptr_t)p % 4096, 16);
    p[big - 1] = 0xab;
    p = sg_big_realloc(p, 2 * big);                      /* mapping to mapping */
    CHECK(p != NULL);
    CHECK_EQ(p[big - 1], 0xab);
    for (int i = 0; i < 100; i++) kept &= p[i] == (unsigned char)i;
    CHECK(kept);
    unsigned char *page = p - 16, vec;
    p = sg_big_realloc(p, 50);                           /* back onto the heap */
    CHECK(p != NULL);
    for (int i = 0; i < 50; i++) kept &= p[i] == (unsigned char)i;
    CHECK(kept);
    if (mapped) {                                        /* the mapping is gone */
        errno = 0;
        CHECK_EQ(mincore(page, 4096, &vec), -1);
        CHECK_EQ(errno, ENOMEM);
    }
    sg_big_free(p);
    unsigned char *q = sg_big_realloc(NULL, big);        /* new, and freed, mapped */
    CHECK(q != NULL);
    q[0] = 1;
    sg_big_free(q);
    if (mapped) {
        errno = 0;
        CHECK_EQ(mincore(q - 16, 4096, &vec), -1);
        CHECK_EQ(errno, ENOMEM);
    }
    sg_big_free(NULL);
}

int main(void)
{
    setup();
    RUN(identical_graphs_compare_equal);
    RUN(each_field_gives_its_reason);
    RUN(kernel_params_and_extra_give_the_same_bytes);
    RUN(unsupported_and_not_comparable_nodes);
    RUN(param_info_is_cached);
    RUN(param_info_failing_midway);
    RUN(node_map);
    RUN(fast_path_gives_the_general_bytes);
    RUN(fast_path_detects_each_field);
    RUN(fast_path_states);
    RUN(attribute_list_tiles_in_order);
    RUN(compare_widths_and_payload_sizes);
    RUN(kernel_without_parameters);
    RUN(hint_of_another_size);
    RUN(compare_delta_holds_exactly_the_differing_nodes);
    RUN(layout_build_reads_no_attribute);
    RUN(delta_gives_back_unused_room);
    RUN(copies_lend_payload_slots_from_one_slab);
    RUN(records_lend_payload_slots_from_chunks);
    RUN(record_reused_after_a_shrink_without_slots);
    RUN(big_blocks_keep_their_bytes_and_give_memory_back);
    sg_fp_free(&fa);
    sg_fp_free(&fb);
    sg_fp_free(&fc);
    sg_fp_scratch_free(&sa);
    sg_fp_scratch_free(&sb);
    sg_fp_scratch_free(&sc);
    sg_fp_cache_reset();
    return check_done();
}
