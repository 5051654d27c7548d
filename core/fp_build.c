/*
 * core/fp_build.c: a graph's fingerprint read back through the driver table
 * (fingerprint.h): its nodes, their attributes and its edges; node
 * parameters are described by fp_desc.c; and the node-handle map it uses
 * (sg_fp_map).
 *
 * The build's common case, a kernel node where the hint had one of the same
 * function, goes through fast_run (one out-of-line loop, few values live
 * across the eleven driver calls per node, arguments copied as one block
 * when the driver's kernelParams point into one packed copy, the calls
 * counted once per run). It gives exactly the results of the general code
 * (describe_node): test_fingerprint builds every case both ways.
 *
 * Attributes: all of SG_FP_ATTR_LIST are read and compared. cuda.h's
 * cuGraphExecUpdate documents CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED
 * and limits on the cooperative, priority and device-updatable attributes,
 * so an update may apply or reject a change of any of them; none is
 * documented as one an update never changes, so none was dropped.
 *
 * Nothing here logs: these functions run on the update path.
 */
#include "fp_internal.h"

#include "driver.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(sg_fp_key) == 64 + SG_FP_ATTR_BYTES, "sg_fp_key must have no padding");

/* ------------------------------------------------------------ attributes */

#define SG_FP_ATTR_CHECK_(id, bytes, off) _Static_assert((off) + (bytes) <= SG_FP_ATTR_BYTES && \
    (id) < 32, "SG_FP_ATTR_LIST: offset, size or id out of range");
SG_FP_ATTR_LIST(SG_FP_ATTR_CHECK_)

/* Every attribute bit, the bytes the list covers and where they end. The
 * fast reader writes each attribute's bytes and zeroes only the bytes from
 * SG_FP_ATTR_END on: that needs the list to tile [0, SG_FP_ATTR_END)
 * exactly (checked here for the sum, and byte by byte in the unit test). */
#define SG_FP_ATTR_BIT_(id, bytes, off) | (1u << (id))
#define SG_FP_ATTR_SUM_(id, bytes, off) + (bytes)
enum {
    SG_FP_ATTR_ALL = 0u SG_FP_ATTR_LIST(SG_FP_ATTR_BIT_),
    SG_FP_ATTR_SUM = 0 SG_FP_ATTR_LIST(SG_FP_ATTR_SUM_),
};
#define SG_FP_ATTR_TILE_(id, bytes, off) _Static_assert((off) + (bytes) <= SG_FP_ATTR_SUM, \
    "SG_FP_ATTR_LIST must tile [0, the sum of its sizes)");
SG_FP_ATTR_LIST(SG_FP_ATTR_TILE_)

/* One attribute (unrolled: constant id, size and offset). */
#define SG_FP_ATTR_READ_(id, bytes, off)                                      \
    r = SG_DRIVER_CALL(cuGraphKernelNodeGetAttribute, node, id, &v);          \
    if (r == CUDA_SUCCESS) {                                                  \
        memcpy(n->k.attrs + (off), &v, (bytes));                              \
        n->k.attr_mask |= 1u << (id);                                         \
        if ((id) == CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE &&      \
            v.deviceUpdatableKernelNode.deviceUpdatable)                      \
            updatable = 1;                                                    \
    } else if (r != CUDA_ERROR_NOT_SUPPORTED) {                               \
        failed = 1;                                                           \
    }

/* Reads the attributes of kernel node `node` into n's key (attrs and
 * attr_mask zero on entry). */
static void read_attrs(sg_fp_node *n, CUgraphNode node)
{
    if (!sg_drv.cuGraphKernelNodeGetAttribute) return;
    CUkernelNodeAttrValue v;
    CUresult r;
    int failed = 0, updatable = 0;
    SG_FP_ATTR_LIST(SG_FP_ATTR_READ_)
    if (updatable) n->k.state = SG_FP_UNSUPPORTED;
    else if (failed && n->k.state == SG_FP_OK) n->k.state = SG_FP_NOT_COMPARABLE;
}

/* read_attrs for the build loop, giving the same key. Every attribute's
 * bytes are written, so the key needs no clearing first, and the answers of
 * the ten driver calls are only OR-ed together: if any was not
 * CUDA_SUCCESS, the attributes are read again by read_attrs_again, with the
 * exact rules of read_attrs (absent on CUDA_ERROR_NOT_SUPPORTED, else not
 * comparable), so the values copied after a failed call never count. With
 * only k, node, get_attr and the OR live across the calls, each costs about
 * seven instructions. The caller counts the SG_FP_ATTR_COUNT calls.
 *
 * Attributes are written in list order, which tiles [0, SG_FP_ATTR_SUM) in
 * ascending offsets (checked by the unit test), so an attribute may write
 * past its own bytes: a later one overwrites them. Hence a value is copied
 * in whole machine moves (SG_FP_ATTR_CW_: a 12-byte one as one 16-byte move)
 * while that stays below SG_FP_ATTR_SUM, and an attribute at an 8-byte
 * aligned offset whose whole CUkernelNodeAttrValue (what the driver writes)
 * fits in attrs is written there by the driver itself (SG_FP_ATTR_DIRECT_:
 * the access policy window, at 0). attrs is 16-byte aligned (the key is). */
#define SG_FP_ATTR_CW_(bytes, off)                                            \
    ((bytes) <= 4 ? (bytes) : (bytes) <= 8 ? ((off) + 8 <= SG_FP_ATTR_SUM ? 8 : (bytes))     \
     : (bytes) <= 16 ? ((off) + 16 <= SG_FP_ATTR_SUM ? 16 : (bytes)) : (bytes))
#define SG_FP_ATTR_DIRECT_(off) \
    ((off) % 8 == 0 && (off) + sizeof(CUkernelNodeAttrValue) <= SG_FP_ATTR_BYTES)
#define SG_FP_ATTR_FAST_(id, bytes, off)                                      \
    if (SG_FP_ATTR_DIRECT_(off)) {                                            \
        any |= get_attr(*node, id, (CUkernelNodeAttrValue *)(void *)(k->attrs + (off))); \
    } else {                                                                  \
        any |= get_attr(*node, id, &v);                                       \
        memcpy(k->attrs + (off), &v, SG_FP_ATTR_CW_(bytes, off));             \
    }
#define SG_FP_ATTR_ONE_(id, bytes, off) + 1
#define SG_FP_ATTR_DU_(id, bytes, off) \
    + ((id) == CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE ? (off) + 1 : 0)
enum {
    SG_FP_ATTR_COUNT = 0 SG_FP_ATTR_LIST(SG_FP_ATTR_ONE_),
    SG_FP_ATTR_DU_OFF = -1 SG_FP_ATTR_LIST(SG_FP_ATTR_DU_),   /* where deviceUpdatable is */
};
_Static_assert(SG_FP_ATTR_DU_OFF >= 0, "SG_FP_ATTR_LIST has the device-updatable attribute");

typedef CUresult (*sg_get_attr_fn)(CUgraphNode, CUkernelNodeAttrID, CUkernelNodeAttrValue *);

/* The fast reader's way out: some attribute query did not succeed, or the
 * node is device-updatable. Reads them all again as read_attrs does (its
 * calls counted there). Returns 1 if the node is now SG_FP_UNSUPPORTED. */
static __attribute__((noinline, cold)) int read_attrs_again(sg_fp_key *k, CUgraphNode node)
{
    sg_fp_node tmp;
    tmp.k = *k;
    tmp.k.attr_mask = 0;
    memset(tmp.k.attrs, 0, sizeof tmp.k.attrs);
    read_attrs(&tmp, node);
    k->attr_mask = tmp.k.attr_mask;
    memcpy(k->attrs, tmp.k.attrs, sizeof k->attrs);
    k->state = tmp.k.state;
    return k->state == SG_FP_UNSUPPORTED;
}

/* Sets k's attributes from *node's and updates k->state (set before: as
 * read_attrs does). Returns 1 if that made the node SG_FP_UNSUPPORTED. (The
 * handle is read through its pointer at each call: one instruction either
 * way, and one register fewer held across the calls.) */
static inline __attribute__((always_inline)) int read_attrs_fast(sg_fp_key *k,
                                                                 const CUgraphNode *node,
                                                                 sg_get_attr_fn get_attr)
{
    CUkernelNodeAttrValue v;
    unsigned any = 0;                /* the answers OR-ed: 0 if all were CUDA_SUCCESS */
    k->attr_mask = SG_FP_ATTR_ALL;
    SG_FP_ATTR_LIST(SG_FP_ATTR_FAST_)
    if (__builtin_expect(any != CUDA_SUCCESS, 0)) return read_attrs_again(k, *node);
    /* a device-updatable node (deviceUpdatableKernelNode.deviceUpdatable
     * != 0) also takes the way out: read_attrs makes it SG_FP_UNSUPPORTED */
    int updatable;
    memcpy(&updatable, k->attrs + SG_FP_ATTR_DU_OFF, sizeof updatable);
    if (__builtin_expect(updatable != 0, 0)) return read_attrs_again(k, *node);
    /* attrs bytes from SG_FP_ATTR_SUM on: never written by this function,
     * and zero in every description (every writer zeroes them or copies
     * them from another description): nothing to do */
    return 0;
}

/* ------------------------------------------------------------ graphs */

static int grow(void **buf, size_t *cap, size_t n, size_t elem)
{
    if (n <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < n) c *= 2;
    unsigned char *p = sg_big_realloc(*buf, c * elem);
    if (!p) return -1;
    memset(p + *cap * elem, 0, (c - *cap) * elem);
    *buf = p;
    *cap = c;
    return 0;
}

/* Makes room for n edges in the three query arrays of s. */
static int edges_reserve(sg_fp_scratch *s, size_t n)
{
    if (n <= s->edges_cap) return 0;
    size_t cap = s->edges_cap ? s->edges_cap : 16;
    while (cap < n) cap *= 2;
    CUgraphNode *from = realloc(s->from, cap * sizeof *from);
    if (from) s->from = from;
    CUgraphNode *to = realloc(s->to, cap * sizeof *to);
    if (to) s->to = to;
    CUgraphEdgeData *ed = realloc(s->edata, cap * sizeof *ed);
    if (ed) s->edata = ed;
    if (!from || !to || !ed) return -1;   /* the ones that grew stay grown */
    s->edges_cap = cap;
    return 0;
}

/* Describes node `node` into n. p: its kernel parameters if the caller has
 * them already, else NULL; tried: whether the caller asked for them (and
 * the driver refused: not a kernel node). A hint means the node at this
 * place was a kernel node: then the parameters are asked for first (only
 * kernel nodes answer cuGraphKernelNodeGetParams), which saves asking for the
 * type. Returns 0, or -1 if the driver cannot say what the node is or memory
 * ran out. */
static __attribute__((noinline)) int describe_node(sg_fp_node *n, CUgraphNode node,
                                                  const sg_fp_pinfo *hint,
                                                  const CUDA_KERNEL_NODE_PARAMS *have, int tried,
                                                  int attrs)
{
    CUgraphNodeType t;
    CUDA_KERNEL_NODE_PARAMS p;
    if (have) {
        p = *have;
    } else if (!tried && hint && sg_drv.cuGraphKernelNodeGetParams_v2 &&
               SG_DRIVER_CALL(cuGraphKernelNodeGetParams_v2, node, &p) == CUDA_SUCCESS) {
        have = &p;
    }
    if (have) t = CU_GRAPH_NODE_TYPE_KERNEL;
    else if (SG_DRIVER_CALL(cuGraphNodeGetType, node, &t) != CUDA_SUCCESS) return -1;
    switch (t) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        if (!have &&
            (!sg_drv.cuGraphKernelNodeGetParams_v2 ||
             SG_DRIVER_CALL(cuGraphKernelNodeGetParams_v2, node, &p) != CUDA_SUCCESS)) {
            sg_fp_key_only(n, t, SG_FP_NOT_COMPARABLE);
            return 0;
        }
        sg_fp_kin k = SG_FP_KIN_V2(&p);
        if (sg_fp_kernel_desc(n, &k, hint) < 0) return -1;
        if (attrs) read_attrs(n, node);
        return 0;
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
        CUDA_MEMCPY3D c;
        if (sg_drv.cuGraphMemcpyNodeGetParams &&
            SG_DRIVER_CALL(cuGraphMemcpyNodeGetParams, node, &c) == CUDA_SUCCESS)
            return sg_fp_memcpy_desc(n, &c, NULL);
        break;
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS m;
        if (sg_drv.cuGraphMemsetNodeGetParams &&
            SG_DRIVER_CALL(cuGraphMemsetNodeGetParams, node, &m) == CUDA_SUCCESS)
            return sg_fp_memset_desc(n, &m, NULL);
        break;
    }
    case CU_GRAPH_NODE_TYPE_EMPTY:
        sg_fp_key_only(n, t, SG_FP_OK);
        return 0;
    default:
        sg_fp_key_only(n, t, SG_FP_UNSUPPORTED);
        return 0;
    }
    sg_fp_key_only(n, t, SG_FP_NOT_COMPARABLE);   /* a memcpy / memset node the driver did not describe */
    return 0;
}

_Static_assert(CU_GRAPH_NODE_TYPE_KERNEL == 0 && SG_FP_OK == 0,
               "fast_run writes type and state as zero bytes");
/* The kernel node fields the fast path copies as one block. */
_Static_assert(offsetof(CUDA_KERNEL_NODE_PARAMS, gridDimY) == offsetof(CUDA_KERNEL_NODE_PARAMS, gridDimX) + 4 &&
               offsetof(CUDA_KERNEL_NODE_PARAMS, gridDimZ) == offsetof(CUDA_KERNEL_NODE_PARAMS, gridDimX) + 8 &&
               offsetof(CUDA_KERNEL_NODE_PARAMS, blockDimX) == offsetof(CUDA_KERNEL_NODE_PARAMS, gridDimX) + 12 &&
               offsetof(CUDA_KERNEL_NODE_PARAMS, blockDimY) == offsetof(CUDA_KERNEL_NODE_PARAMS, gridDimX) + 16 &&
               offsetof(CUDA_KERNEL_NODE_PARAMS, blockDimZ) == offsetof(CUDA_KERNEL_NODE_PARAMS, gridDimX) + 20 &&
               offsetof(CUDA_KERNEL_NODE_PARAMS, sharedMemBytes) == offsetof(CUDA_KERNEL_NODE_PARAMS, gridDimX) + 24 &&
               offsetof(sg_fp_key, block) == offsetof(sg_fp_key, grid) + 12 &&
               offsetof(sg_fp_key, shmem) == offsetof(sg_fp_key, grid) + 24,
               "grid, block and shared memory are copied as 28 contiguous bytes");

#define SG_KP_CHECK_(i) \
    check_##i: if ((uintptr_t)kp[i] - (uintptr_t)base != off[i]) goto by_argument;

/* Where fast_run stopped. */
enum { FR_END = 0, FR_PARAMS = 1, FR_NOT_KERNEL = 2, FR_OOM = -1 };
typedef struct fast_run_st {
    CUDA_KERNEL_NODE_PARAMS p;       /* FR_PARAMS: the parameters of the node it stopped at */
    int stop;                        /* FR_* */
    int unsupported;                 /* some node it described is SG_FP_UNSUPPORTED */
} fast_run_st;

/* The build loop's common case, for nodes i, i + 1, ... below nh: a node
 * at a place where the hint had a kernel node of layout h (usable, for
 * function h->h). Asks for its parameters; if it is a kernel node of
 * function h->h given by kernelParams, describes it completely, as
 * describe_node would. Returns the index of the first node it did not
 * describe, and why in st->stop: FR_END (nh reached, or no layout in the
 * hint there: the driver was not asked), FR_PARAMS (the parameters are in
 * st->p: not this function, or not by kernelParams), FR_NOT_KERNEL (the
 * driver refused them) or FR_OOM (out of memory). Driver calls made: one
 * per node described or stopped at with FR_PARAMS, FR_NOT_KERNEL or
 * FR_OOM, plus SG_FP_ATTR_COUNT per node described; the caller counts them.
 * Not inlined, with cursors instead of indices, so that little is live
 * across the driver calls and each costs only its own setup. Needs
 * cuGraphKernelNodeGetParams_v2 and cuGraphKernelNodeGetAttribute. */
static __attribute__((noinline)) size_t fast_run(sg_fp_node *nodes_out, const sg_fp_node *hint_nodes,
                                                 const CUgraphNode *nodes, size_t i, size_t nh,
                                                 fast_run_st *st)
{
    static const void *const check_from[10] = {   /* [0]: not used (dense_n checked) */
        &&by_argument, &&check_0, &&check_1, &&check_2, &&check_3, &&check_4, &&check_5,
        &&check_6, &&check_7, &&check_more,
    };
    sg_get_attr_fn get_attr = sg_drv.cuGraphKernelNodeGetAttribute;
    sg_fp_node *n = nodes_out + i;
    const sg_fp_node *hp = hint_nodes + i, *hend = hint_nodes + nh;
    const CUgraphNode *np = nodes + i;
    int stop = FR_END;
    CUDA_KERNEL_NODE_PARAMS p;
    for (; hp < hend; n++, hp++, np++) {
        if (!hp->pi) break;
        if (sg_drv.cuGraphKernelNodeGetParams_v2(*np, &p) != CUDA_SUCCESS) {
            stop = FR_NOT_KERNEL;
            break;
        }
        const sg_fp_pinfo *h = hp->pi;
        /* (no parameters: the general path decides whether that can be trusted) */
        if (__builtin_expect(h->h != (const void *)p.func || p.extra || !p.kernelParams || !h->n, 0)) {
            st->p = p;
            stop = FR_PARAMS;
            break;
        }
        sg_fp_key *k = &n->k;
        k->func = (uintptr_t)p.func;     /* h->h is never NULL */
        /* kern and ctx 0 (CUDA ignores ctx when func is set), type kernel, state OK */
        memset(&k->kern, 0, offsetof(sg_fp_key, grid) - offsetof(sg_fp_key, kern));
        memcpy(k->grid, &p.gridDimX, 28);
        n->pi = h;
        /* The arguments. When the layout is dense and kp[i] == kp[0] + the
         * offset of argument i for every i (the driver hands back pointers
         * into its own packed copy of the arguments), the bytes from kp[0]
         * on are exactly the canonical form, copied as one block; any other
         * kp goes argument by argument (pack_args). The same result either
         * way. The checks start at kp[dense_n - 1] (a computed goto:
         * dense_n <= 9 by construction, no bounds check). */
        void *const *kp = p.kernelParams;
        uint32_t dense_n = h->dense_n, total = h->total;
        if (!dense_n) goto by_argument;  /* not dense, or no parameters: kp[0] may not exist */
        const unsigned char *base = kp[0];
        const uint64_t *off = h->off64;  /* off[0] == 0: dense */
        if (!base) goto by_argument;
        goto *check_from[dense_n];
    check_more:
        for (uint32_t j = h->n - 1; j >= 8; j--)
            if ((uintptr_t)kp[j] - (uintptr_t)base != off[j]) goto by_argument;
        SG_KP_CHECK_(7) SG_KP_CHECK_(6) SG_KP_CHECK_(5) SG_KP_CHECK_(4) SG_KP_CHECK_(3)
        SG_KP_CHECK_(2) SG_KP_CHECK_(1)
    check_0:
        if (__builtin_expect(total > n->cap, 0) && sg_fp_pay_reserve(n, total)) goto oom;
        unsigned char *pay = n->pay;
        if (total - 17u <= 15u) {        /* 16 < total <= 32, the usual: two moves, padding first */
            st16(pay + 16, (sg_v16){ 0, 0 });
            st16(pay, ld16(base));
            st16(pay + total - 16, ld16(base + total - 16));
        } else {
            sg_fp_pay_pad(pay, total);
            sg_fp_copy_block(pay, base, total);
        }
        n->len = total;
        goto packed;
    by_argument:;
        int ps = sg_fp_pack_args_each(n, h, kp);
        if (__builtin_expect(ps != SG_FP_OK, 0)) {
            if (ps < 0) goto oom;
            k->state = (uint32_t)ps;
        }
    packed:
        if (__builtin_expect(read_attrs_fast(k, np, get_attr), 0)) st->unsupported = 1;
    }
    if (0) {
    oom:
        stop = FR_OOM;
    }
    st->stop = stop;
    return (size_t)(hp - hint_nodes);
}

/* The nodes of g (s->nodes, n of them) into fp. The common case, a kernel
 * node at a place where the hint had a kernel node with the same function,
 * given by kernelParams, is described inline (fast_run: the same bytes as
 * describe_node; test_fingerprint checks both paths against each other);
 * anything else goes through describe_node. The fast path's driver calls are
 * counted once, at the end. 0, or -1. */
static int build_nodes(sg_fp *fp, sg_fp_scratch *s, size_t n, const sg_fp *hint, int attrs)
{
    /* nodes [0, nh) have a place in the hint (and the fast path its calls) */
    size_t nh = hint && sg_drv.cuGraphKernelNodeGetParams_v2 &&
                sg_drv.cuGraphKernelNodeGetAttribute ? (hint->n < n ? hint->n : n) : 0;
    const sg_fp_node *hn = hint ? hint->nodes : NULL;
    size_t hcount = hint ? hint->n : 0;
    unsigned long tried = 0, fast = 0;   /* GetParams calls of fast_run; nodes it described */
    int rc = -1;
    const CUgraphNode *nodes = s->nodes;
    fast_run_st st;
    st.unsupported = 0;
    for (size_t i = 0; i < n; i++) {
        const sg_fp_pinfo *h = i < hcount ? hn[i].pi : NULL;
        int stop = FR_END;
        if (h && i < nh) {               /* a kernel node here last time */
            size_t j = fast_run(fp->nodes, hn, nodes, i, nh, &st);
            fast += j - i;
            tried += j - i;
            i = j;
            stop = st.stop;
            if (stop != FR_END) tried++;
            if (stop == FR_OOM) goto out;
            if (i == n) break;
            h = i < hcount ? hn[i].pi : NULL;
        }
        if (describe_node(&fp->nodes[i], nodes[i], h, stop == FR_PARAMS ? &st.p : NULL,
                          stop != FR_END, attrs))
            goto out;
        st.unsupported |= fp->nodes[i].k.state == SG_FP_UNSUPPORTED;
    }
    fp->n = n;
    fp->unsupported = st.unsupported;
    rc = 0;
out:
    if (tried)
        __atomic_fetch_add(&sg_driver_calls[SG_DRV_cuGraphKernelNodeGetParams_v2], tried,
                           __ATOMIC_RELAXED);
    if (fast)
        __atomic_fetch_add(&sg_driver_calls[SG_DRV_cuGraphKernelNodeGetAttribute],
                           fast * SG_FP_ATTR_COUNT, __ATOMIC_RELAXED);
    return rc;
}

/* The edges of g into fp, endpoints as node indices (s->nodes holds the n
 * node handles). 0, or -1. */
static int build_edges(sg_fp *fp, CUgraph g, sg_fp_scratch *s, size_t n, const sg_fp *hint)
{
    size_t ne = 0, ne2;
    if (SG_DRIVER_CALL(cuGraphGetEdges_v2, g, NULL, NULL, NULL, &ne) != CUDA_SUCCESS ||
        ne > UINT32_MAX)
        return -1;
    if (edges_reserve(s, ne)) return -1;
    if (grow((void **)&fp->edges, &fp->edges_cap, ne, sizeof *fp->edges)) return -1;
    ne2 = ne;
    if (ne && (SG_DRIVER_CALL(cuGraphGetEdges_v2, g, s->from, s->to, s->edata, &ne2) !=
                   CUDA_SUCCESS || ne2 != ne))
        return -1;
    /* Endpoints to indices: the hint's edge i usually names the same indices
     * (two comparisons each); the node map is built only when it does not.
     * The hint's indices are below hint->n (sg_fp_build made them), so with
     * hint->n == n they index s->nodes without a bounds check. */
    size_t i = 0, m = hint && hint->n == n ? (hint->nedges < ne ? hint->nedges : ne) : 0;
    const sg_fp_edge *he = hint ? hint->edges : NULL;
    const CUgraphNode *nodes = s->nodes, *from = s->from, *to = s->to;
    sg_fp_edge *oe = fp->edges;
    const CUgraphEdgeData *ed = s->edata;
#pragma GCC unroll 4
    for (; i < m; i++) {
        uint64_t ab;                     /* from | to << 32, as the hint has them */
        memcpy(&ab, &he[i], sizeof ab);
        if (nodes[(uint32_t)ab] != from[i] || nodes[ab >> 32] != to[i]) break;
        memcpy(&oe[i], &ab, sizeof ab);
        memcpy(oe[i].data, &ed[i], sizeof oe[i].data);
    }
    if (i < ne && sg_fp_map_build(&s->map, nodes, n)) return -1;
    for (; i < ne; i++) {
        long a = sg_fp_map_find(&s->map, from[i]), b = sg_fp_map_find(&s->map, to[i]);
        if (a < 0 || b < 0) return -1;
        oe[i].from = (uint32_t)a;
        oe[i].to = (uint32_t)b;
        memcpy(oe[i].data, &s->edata[i], sizeof oe[i].data);
    }
    fp->nedges = ne;
    return 0;
}

/* sg_fp_build, or with attrs 0 sg_fp_build_layout (no hint then). */
static int build(sg_fp *fp, CUgraph g, sg_fp_scratch *s, const sg_fp *hint, int attrs)
{
    size_t n = 0, n2;
    fp->epoch = sg_fp_epoch();
    fp->origin = SG_FP_READBACK;
    /* a hint's layouts may be of unloaded functions; a record's node and
     * edge order need not be the driver's */
    if (hint && (hint->epoch != fp->epoch || hint->origin != SG_FP_READBACK)) hint = NULL;
    fp->n = fp->nedges = 0;
    fp->unsupported = 0;
    if (!sg_drv.cuGraphGetNodes || !sg_drv.cuGraphNodeGetType || !sg_drv.cuGraphGetEdges_v2 ||
        SG_DRIVER_CALL(cuGraphGetNodes, g, NULL, &n) != CUDA_SUCCESS || n > UINT32_MAX)
        return -1;
    if (grow((void **)&s->nodes, &s->nodes_cap, n, sizeof *s->nodes) ||
        grow((void **)&fp->nodes, &fp->nodes_cap, n, sizeof *fp->nodes))
        return -1;
    n2 = n;
    if (n && (SG_DRIVER_CALL(cuGraphGetNodes, g, s->nodes, &n2) != CUDA_SUCCESS || n2 != n))
        return -1;
    return build_nodes(fp, s, n, hint, attrs) == 0 && build_edges(fp, g, s, n, hint) == 0 ? 0 : -1;
}

int sg_fp_build(sg_fp *fp, CUgraph g, sg_fp_scratch *s, const sg_fp *hint)
{
    return build(fp, g, s, hint, 1);
}

int sg_fp_build_layout(sg_fp *fp, CUgraph g, sg_fp_scratch *s)
{
    return build(fp, g, s, NULL, 0);
}

int sg_fp_same_order(const sg_fp *a, const sg_fp *b)
{
    if (a->n != b->n || a->nedges != b->nedges ||
        !sg_bytes_eq(a->edges, b->edges, a->nedges * sizeof *a->edges))
        return 0;
    for (size_t i = 0; i < a->n; i++) {
        const sg_fp_node *x = &a->nodes[i], *y = &b->nodes[i];
        if (x->k.func != y->k.func || x->k.kern != y->k.kern || x->k.type != y->k.type ||
            x->k.state != y->k.state || memcmp(x->k.grid, y->k.grid, sizeof x->k.grid) ||
            memcmp(x->k.block, y->k.block, sizeof x->k.block) || x->k.shmem != y->k.shmem ||
            x->len != y->len || !sg_bytes_eq(x->pay, y->pay, x->len))
            return 0;
    }
    return 1;
}

void sg_fp_scratch_free(sg_fp_scratch *s)
{
    sg_big_free(s->nodes);
    free(s->from);
    free(s->to);
    free(s->edata);
    sg_fp_map_free(&s->map);
    memset(s, 0, sizeof *s);
}

/* ------------------------------------------------------------ node map */

static size_t map_slot(const sg_fp_map *m, CUgraphNode node)
{
    return (size_t)sg_hash8(&node) & (m->cap - 1);
}

int sg_fp_map_build(sg_fp_map *m, const CUgraphNode *nodes, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    if (cap != m->cap) {
        CUgraphNode *k = realloc(m->keys, cap * sizeof *k);
        if (k) m->keys = k;
        uint32_t *v = realloc(m->vals, cap * sizeof *v);
        if (v) m->vals = v;
        if (!k || !v) { sg_fp_map_free(m); return -1; }
        m->cap = cap;
    }
    memset(m->keys, 0, cap * sizeof *m->keys);
    for (size_t i = 0; i < n; i++) {
        if (!nodes[i]) continue;                 /* a node whose handle is not known */
        size_t j = map_slot(m, nodes[i]);
        while (m->keys[j] && m->keys[j] != nodes[i]) j = (j + 1) & (cap - 1);
        m->keys[j] = nodes[i];
        m->vals[j] = (uint32_t)i;
    }
    return 0;
}

long sg_fp_map_find(const sg_fp_map *m, CUgraphNode node)
{
    if (!m->cap || !node) return -1;
    for (size_t j = map_slot(m, node);; j = (j + 1) & (m->cap - 1)) {
        if (m->keys[j] == node) return (long)m->vals[j];
        if (!m->keys[j]) return -1;
    }
}

void sg_fp_map_free(sg_fp_map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}
