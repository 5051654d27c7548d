/*
 * core/fingerprint.c: builds and compares the canonical descriptions of
 * graphs and node parameters declared in fingerprint.h, through the driver
 * table only.
 *
 * Parameter-info cache: one uthash per handle kind (CUfunction, CUkernel),
 * guarded by pinfo_lock. An entry is made by probing cuFuncGetParamInfo /
 * cuKernelGetParamInfo with indices 0, 1, ... until CUDA_ERROR_INVALID_VALUE
 * (outside the lock), then added under it; entries never change afterwards
 * and are freed only by sg_fp_cache_reset(). Probing failures other than the
 * end of the list are not cached (the handle may be bad now and valid later):
 * the node is then not comparable.
 *
 * Nothing here logs: these functions run on the update path.
 */
#include "fingerprint.h"

#include "driver.h"
#include "memory.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Set by uthash when an add runs out of memory (pinfo_lock held). */
static int pinfo_oom;
#define uthash_nonfatal_oom(elt) (pinfo_oom = 1)
#include <uthash.h>

_Static_assert(sizeof(sg_fp_key) == 64 + SG_FP_ATTR_BYTES, "sg_fp_key must have no padding");

/* Most parameters a kernel can have (CUDA allows 32764 bytes of them). */
#define SG_FP_MAX_PARAMS 8192

struct sg_fp_pinfo {
    const void *h;                   /* CUfunction or CUkernel */
    int ok;                          /* 0: no layout (the node is not comparable) */
    int gaps;                        /* the layout has bytes no argument covers */
    uint32_t n, total;               /* arguments; bytes of the canonical form */
    uint32_t *off, *size;            /* n each, in the same allocation */
    UT_hash_handle hh;
};

/* pinfo_lock guards pinfo_cache[] (0: CUfunction, 1: CUkernel). */
static pthread_mutex_t pinfo_lock = PTHREAD_MUTEX_INITIALIZER;
static sg_fp_pinfo *pinfo_cache[2];
static const sg_fp_pinfo pinfo_none = { .ok = 0 };

/* ------------------------------------------------------------ param info */

/* Asks the driver for parameter i of h. */
static CUresult pinfo_query(int is_kern, const void *h, size_t i, size_t *off, size_t *size)
{
    if (is_kern)
        return SG_DRIVER_CALL(cuKernelGetParamInfo, (CUkernel)(uintptr_t)h, i, off, size);
    return SG_DRIVER_CALL(cuFuncGetParamInfo, (CUfunction)(uintptr_t)h, i, off, size);
}

/* Probes the layout of h. Returns a new entry, &pinfo_none if the driver
 * cannot tell, or NULL if out of memory. */
static sg_fp_pinfo *pinfo_probe(int is_kern, const void *h)
{
    if (is_kern ? !sg_drv.cuKernelGetParamInfo : !sg_drv.cuFuncGetParamInfo)
        return (sg_fp_pinfo *)&pinfo_none;
    size_t cap = 16, n = 0;
    uint32_t *tmp = malloc(2 * cap * sizeof *tmp);
    if (!tmp) return NULL;
    for (;; n++) {
        size_t off = 0, size = 0;
        CUresult r = pinfo_query(is_kern, h, n, &off, &size);
        if (r == CUDA_ERROR_INVALID_VALUE) break;
        if (r != CUDA_SUCCESS || n >= SG_FP_MAX_PARAMS || off > UINT32_MAX / 2 ||
            size > UINT32_MAX / 2) {
            free(tmp);
            return (sg_fp_pinfo *)&pinfo_none;
        }
        if (n == cap) {
            uint32_t *t = realloc(tmp, 4 * cap * sizeof *tmp);
            if (!t) { free(tmp); return NULL; }
            tmp = t;
            cap *= 2;
        }
        tmp[2 * n] = (uint32_t)off;
        tmp[2 * n + 1] = (uint32_t)size;
    }
    sg_fp_pinfo *e = calloc(1, sizeof *e + 2 * (n ? n : 1) * sizeof(uint32_t));
    if (!e) { free(tmp); return NULL; }
    e->h = h;
    e->ok = 1;
    e->n = (uint32_t)n;
    e->off = (uint32_t *)(e + 1);
    e->size = e->off + n;
    uint64_t covered = 0;
    for (size_t i = 0; i < n; i++) {
        e->off[i] = tmp[2 * i];
        e->size[i] = tmp[2 * i + 1];
        if (e->off[i] + e->size[i] > e->total) e->total = e->off[i] + e->size[i];
        covered += e->size[i];
    }
    e->gaps = covered != e->total;   /* overlapping arguments also count as gaps */
    free(tmp);
    return e;
}

/* The layout of h from the cache, probing on a miss. NULL if out of memory. */
static const sg_fp_pinfo *pinfo_get(int is_kern, const void *h)
{
    sg_fp_pinfo *e;
    pthread_mutex_lock(&pinfo_lock);
    HASH_FIND_PTR(pinfo_cache[is_kern], &h, e);
    pthread_mutex_unlock(&pinfo_lock);
    if (e) return e;
    sg_fp_pinfo *made = pinfo_probe(is_kern, h);
    if (!made || made == &pinfo_none) return made;
    pthread_mutex_lock(&pinfo_lock);
    HASH_FIND_PTR(pinfo_cache[is_kern], &h, e);   /* another thread may have added it */
    if (!e) {
        pinfo_oom = 0;
        HASH_ADD_PTR(pinfo_cache[is_kern], h, made);
        if (pinfo_oom) {
            pthread_mutex_unlock(&pinfo_lock);
            free(made);
            return NULL;
        }
        e = made;
        made = NULL;
    }
    pthread_mutex_unlock(&pinfo_lock);
    free(made);
    return e;
}

void sg_fp_cache_reset(void)
{
    pthread_mutex_lock(&pinfo_lock);
    for (int k = 0; k < 2; k++) {
        sg_fp_pinfo *e, *t;
        HASH_ITER(hh, pinfo_cache[k], e, t) {
            HASH_DEL(pinfo_cache[k], e);
            free(e);
        }
    }
    pthread_mutex_unlock(&pinfo_lock);
}

/* ------------------------------------------------------------ node descriptions */

/* Makes room for `len` payload bytes. Returns 0, or -1 if out of memory. */
static int pay_reserve(sg_fp_node *n, uint32_t len)
{
    if (len <= n->cap) return 0;
    uint32_t cap = n->cap ? n->cap : 64;
    while (cap < len) cap *= 2;
    unsigned char *p = realloc(n->pay, cap);
    if (!p) return -1;
    n->pay = p;
    n->cap = cap;
    return 0;
}

/* The argument buffer and its size from an `extra` array; 0 if malformed. */
static int extra_buffer(void **extra, const unsigned char **buf, size_t *size)
{
    int have_size = 0;
    *buf = NULL;
    *size = 0;
    for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (i >= 32) return 0;
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
            *buf = extra[i + 1];
        } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1]) {
            *size = *(const size_t *)extra[i + 1];
            have_size = 1;
        } else {
            return 0;
        }
    }
    return *buf && have_size;
}

/* A description made of the key alone: type and state. */
static void key_only(sg_fp_node *n, CUgraphNodeType type, int state)
{
    memset(&n->k, 0, sizeof n->k);
    n->k.type = type;
    n->k.state = (uint32_t)state;
    n->len = 0;
    n->pi = NULL;
}

static int kernel_fail(sg_fp_node *n, int state)
{
    n->k.state = (uint32_t)state;
    n->len = 0;
    return state;
}

int sg_fp_kernel_desc(sg_fp_node *n, const sg_fp_kin *k, const sg_fp_pinfo *hint)
{
    memset(&n->k, 0, sizeof n->k);
    n->k.type = CU_GRAPH_NODE_TYPE_KERNEL;
    n->k.grid[0] = k->grid[0]; n->k.grid[1] = k->grid[1]; n->k.grid[2] = k->grid[2];
    n->k.block[0] = k->block[0]; n->k.block[1] = k->block[1]; n->k.block[2] = k->block[2];
    n->k.shmem = k->shmem;
    n->len = 0;
    n->pi = NULL;
    int is_kern = !k->func;
    const void *h;
    if (!is_kern) {
        h = k->func;                 /* CUDA ignores ctx when func is set */
        n->k.func = (uintptr_t)h;
    } else {
        CUcontext ctx = k->ctx;
        h = k->kern;
        if (!h) return kernel_fail(n, SG_FP_NOT_COMPARABLE);
        if (!ctx && (!sg_drv.cuCtxGetCurrent || SG_DRIVER_CALL(cuCtxGetCurrent, &ctx) != CUDA_SUCCESS))
            return kernel_fail(n, SG_FP_NOT_COMPARABLE);
        n->k.kern = (uintptr_t)h;
        n->k.ctx = (uintptr_t)ctx;
    }
    const sg_fp_pinfo *pi = hint && hint->h == h && hint->ok ? hint : pinfo_get(is_kern, h);
    if (!pi) return -1;
    if (!pi->ok || (k->kernelParams && k->extra)) return kernel_fail(n, SG_FP_NOT_COMPARABLE);
    n->pi = pi;
    const unsigned char *buf = NULL;
    if (k->extra) {
        size_t size;
        if (!extra_buffer(k->extra, &buf, &size) || size < pi->total)
            return kernel_fail(n, SG_FP_NOT_COMPARABLE);
    } else if (!k->kernelParams && pi->n) {
        return kernel_fail(n, SG_FP_NOT_COMPARABLE);
    }
    if (pay_reserve(n, pi->total)) return -1;
    if (pi->gaps) memset(n->pay, 0, pi->total);
    /* locals, so the stores into the payload do not force reloads of pi */
    const uint32_t *off = pi->off, *size = pi->size;
    unsigned char *pay = n->pay;
    void **kp = k->kernelParams;
    for (uint32_t i = 0, cnt = pi->n; i < cnt; i++) {
        const void *src = buf ? buf + off[i] : kp[i];
        if (!src) return kernel_fail(n, SG_FP_NOT_COMPARABLE);
        uint32_t sz = size[i];
        if (sz == 8) memcpy(pay + off[i], src, 8);       /* the common sizes without a call */
        else if (sz == 4) memcpy(pay + off[i], src, 4);
        else memcpy(pay + off[i], src, sz);
    }
    n->len = pi->total;
    return SG_FP_OK;
}

#define SG_MEMCPY3D_FIELDS(X)                                                 \
    X(srcXInBytes) X(srcY) X(srcZ) X(srcLOD) X(srcMemoryType) X(srcHost)      \
    X(srcDevice) X(srcArray) X(reserved0) X(srcPitch) X(srcHeight)            \
    X(dstXInBytes) X(dstY) X(dstZ) X(dstLOD) X(dstMemoryType) X(dstHost)      \
    X(dstDevice) X(dstArray) X(reserved1) X(dstPitch) X(dstHeight)            \
    X(WidthInBytes) X(Height) X(Depth)
#define SG_MEMSET_FIELDS(X) X(dst) X(pitch) X(value) X(elementSize) X(width) X(height)
#define SG_COPY_FIELD_(f) out->f = in->f;

/* Starts a memcpy / memset description: key, ctx, a zeroed payload of `len`. */
static int copy_desc_begin(sg_fp_node *n, CUgraphNodeType type, CUcontext ctx, uint32_t len)
{
    memset(&n->k, 0, sizeof n->k);
    n->k.type = type;
    n->k.ctx = (uintptr_t)ctx;
    n->pi = NULL;
    n->len = 0;
    if (pay_reserve(n, len)) return -1;
    memset(n->pay, 0, len);          /* padding inside the struct stays zero */
    n->len = len;
    return 0;
}

int sg_fp_memcpy_desc(sg_fp_node *n, const CUDA_MEMCPY3D *in, CUcontext ctx)
{
    if (copy_desc_begin(n, CU_GRAPH_NODE_TYPE_MEMCPY, ctx, sizeof *in)) return -1;
    CUDA_MEMCPY3D *out = (CUDA_MEMCPY3D *)(void *)n->pay;
    SG_MEMCPY3D_FIELDS(SG_COPY_FIELD_)
    return 0;
}

int sg_fp_memset_desc(sg_fp_node *n, const CUDA_MEMSET_NODE_PARAMS *in, CUcontext ctx)
{
    if (copy_desc_begin(n, CU_GRAPH_NODE_TYPE_MEMSET, ctx, sizeof *in)) return -1;
    CUDA_MEMSET_NODE_PARAMS *out = (CUDA_MEMSET_NODE_PARAMS *)(void *)n->pay;
    SG_MEMSET_FIELDS(SG_COPY_FIELD_)
    return 0;
}

/* ------------------------------------------------------------ attributes */

#define SG_FP_ATTR_END_(id, bytes, off) _Static_assert((off) + (bytes) <= SG_FP_ATTR_BYTES && \
    (id) < 32, "SG_FP_ATTR_LIST: offset, size or id out of range");
SG_FP_ATTR_LIST(SG_FP_ATTR_END_)

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

/* Reads the attributes of kernel node `node` into n's key. */
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

/* ------------------------------------------------------------ graphs */

/* Grows *buf (element size `elem`) to hold n; new elements zeroed. */
static int grow(void **buf, size_t *cap, size_t n, size_t elem)
{
    if (n <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < n) c *= 2;
    unsigned char *p = realloc(*buf, c * elem);
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

/* Describes node `node` into n. Returns 0, or -1 if the driver cannot say
 * what the node is or memory ran out. */
static int describe_node(sg_fp_node *n, CUgraphNode node, const sg_fp_pinfo *hint)
{
    CUgraphNodeType t;
    CUDA_KERNEL_NODE_PARAMS p;
    /* A hint means the node at this place was a kernel node: try that first
     * (only kernel nodes answer cuGraphKernelNodeGetParams) and save asking
     * for the type. */
    int have_params = hint && sg_drv.cuGraphKernelNodeGetParams_v2 &&
                      SG_DRIVER_CALL(cuGraphKernelNodeGetParams_v2, node, &p) == CUDA_SUCCESS;
    if (have_params) t = CU_GRAPH_NODE_TYPE_KERNEL;
    else if (SG_DRIVER_CALL(cuGraphNodeGetType, node, &t) != CUDA_SUCCESS) return -1;
    switch (t) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        if (!have_params &&
            (!sg_drv.cuGraphKernelNodeGetParams_v2 ||
             SG_DRIVER_CALL(cuGraphKernelNodeGetParams_v2, node, &p) != CUDA_SUCCESS)) {
            key_only(n, t, SG_FP_NOT_COMPARABLE);
            return 0;
        }
        sg_fp_kin k = SG_FP_KIN_V2(&p);
        if (sg_fp_kernel_desc(n, &k, hint) < 0) return -1;
        read_attrs(n, node);
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
        key_only(n, t, SG_FP_OK);
        return 0;
    default:
        key_only(n, t, SG_FP_UNSUPPORTED);
        return 0;
    }
    key_only(n, t, SG_FP_NOT_COMPARABLE);   /* a memcpy / memset node the driver did not describe */
    return 0;
}

int sg_fp_build(sg_fp *fp, CUgraph g, sg_fp_scratch *s, const sg_fp *hint)
{
    size_t n = 0, n2, ne = 0, ne2;
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
    for (size_t i = 0; i < n; i++) {
        const sg_fp_pinfo *h = hint && i < hint->n ? hint->nodes[i].pi : NULL;
        if (describe_node(&fp->nodes[i], s->nodes[i], h)) return -1;
        if (fp->nodes[i].k.state == SG_FP_UNSUPPORTED) fp->unsupported = 1;
    }
    fp->n = n;
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
     * (one comparison each); the node map is built only when it does not. */
    int mapped = 0;
    for (size_t i = 0; i < ne; i++) {
        long a = -1, b = -1;
        if (hint && i < hint->nedges) {
            a = hint->edges[i].from;
            b = hint->edges[i].to;
            if ((size_t)a >= n || s->nodes[a] != s->from[i]) a = -1;
            if ((size_t)b >= n || s->nodes[b] != s->to[i]) b = -1;
        }
        if (a < 0 || b < 0) {
            if (!mapped && sg_fp_map_build(&s->map, s->nodes, n)) return -1;
            mapped = 1;
            a = sg_fp_map_find(&s->map, s->from[i]);
            b = sg_fp_map_find(&s->map, s->to[i]);
            if (a < 0 || b < 0) return -1;
        }
        fp->edges[i].from = (uint32_t)a;
        fp->edges[i].to = (uint32_t)b;
        memcpy(fp->edges[i].data, &s->edata[i], sizeof fp->edges[i].data);
    }
    fp->nedges = ne;
    return 0;
}

/* ------------------------------------------------------------ comparison */

static int reason_rank(int r)
{
    switch (r) {
    case SG_REASON_TOPOLOGY: return 10;
    case SG_REASON_UNSUPPORTED_NODE: return 9;
    case SG_REASON_NOT_COMPARABLE: return 8;
    case SG_REASON_FUNCTION_CHANGED: return 7;
    case SG_REASON_DIMS_CHANGED: return 6;
    case SG_REASON_ATTRIBUTES_CHANGED: return 5;
    case SG_REASON_MEMCPY_CHANGED:
    case SG_REASON_MEMSET_CHANGED: return 4;
    case SG_REASON_SCALAR_CHANGED: return 3;
    case SG_REASON_POINTER_CHANGED: return 2;
    default: return r < 0 ? 0 : 1;
    }
}

/* Whether v is an address inside a live allocation: one the library placed
 * (sg_mem_find) or one the driver knows (its allocation range). */
static int is_device_ptr(uint64_t v)
{
    sg_alloc_info ai;
    CUdeviceptr start;
    if (!v) return 0;
    if (sg_mem_find((CUdeviceptr)v, &ai)) return 1;
    return sg_drv.cuPointerGetAttribute &&
           SG_DRIVER_CALL(cuPointerGetAttribute, &start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                          (CUdeviceptr)v) == CUDA_SUCCESS;
}

/* Why two argument blocks of the same layout differ: scalar_changed unless
 * every differing byte lies in an 8-byte word (aligned to its argument's
 * start) whose new value is a device address. Old values are not checked:
 * the program may have freed them already. */
static int args_reason(const sg_fp_node *old, const sg_fp_node *nw)
{
    const sg_fp_pinfo *pi = nw->pi;
    if (!pi || old->len != nw->len) return SG_REASON_SCALAR_CHANGED;
    for (uint32_t i = 0; i < pi->n; i++) {
        const unsigned char *a = old->pay + pi->off[i], *b = nw->pay + pi->off[i];
        uint32_t size = pi->size[i], w;
        if (!memcmp(a, b, size)) continue;
        for (w = 0; w + 8 <= size; w += 8) {
            uint64_t va, vb;
            memcpy(&va, a + w, 8);
            memcpy(&vb, b + w, 8);
            if (va != vb && !is_device_ptr(vb)) return SG_REASON_SCALAR_CHANGED;
        }
        if (w < size && memcmp(a + w, b + w, size - w)) return SG_REASON_SCALAR_CHANGED;
    }
    if (pi->gaps && memcmp(old->pay, nw->pay, nw->len)) {
        /* only reachable if overlapping arguments hid a difference: be conservative */
        for (uint32_t i = 0; i < pi->n; i++)
            if (memcmp(old->pay + pi->off[i], nw->pay + pi->off[i], pi->size[i]))
                return SG_REASON_POINTER_CHANGED;
        return SG_REASON_SCALAR_CHANGED;
    }
    return SG_REASON_POINTER_CHANGED;
}

int sg_fp_node_compare(const sg_fp_node *old, const sg_fp_node *nw, int params_only)
{
    const sg_fp_key *a = &old->k, *b = &nw->k;
    if (a->type != b->type) return SG_REASON_TOPOLOGY;
    if (a->state == SG_FP_UNSUPPORTED || b->state == SG_FP_UNSUPPORTED)
        return SG_REASON_UNSUPPORTED_NODE;
    if (a->state != SG_FP_OK || b->state != SG_FP_OK) return SG_REASON_NOT_COMPARABLE;
    int payload_reason;
    switch (a->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        if (a->func != b->func || a->kern != b->kern || a->ctx != b->ctx)
            return SG_REASON_FUNCTION_CHANGED;
        if (memcmp(a->grid, b->grid, sizeof a->grid) || memcmp(a->block, b->block, sizeof a->block) ||
            a->shmem != b->shmem)
            return SG_REASON_DIMS_CHANGED;
        if (!params_only && (a->attr_mask != b->attr_mask || memcmp(a->attrs, b->attrs, sizeof a->attrs)))
            return SG_REASON_ATTRIBUTES_CHANGED;
        if (old->len == nw->len && !memcmp(old->pay, nw->pay, nw->len)) return -1;
        return args_reason(old, nw);
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        payload_reason = SG_REASON_MEMCPY_CHANGED;
        break;
    case CU_GRAPH_NODE_TYPE_MEMSET:
        payload_reason = SG_REASON_MEMSET_CHANGED;
        break;
    default:
        return -1;   /* empty */
    }
    if (a->ctx != b->ctx || old->len != nw->len || memcmp(old->pay, nw->pay, nw->len))
        return payload_reason;
    return -1;
}

int sg_fp_compare(const sg_fp *a, const sg_fp *b)
{
    if (a->n != b->n || a->nedges != b->nedges ||
        memcmp(a->edges, b->edges, a->nedges * sizeof *a->edges))
        return SG_REASON_TOPOLOGY;
    int worst = -1;
    for (size_t i = 0; i < a->n; i++) {
        const sg_fp_node *x = &a->nodes[i], *y = &b->nodes[i];
        if (x->k.state == SG_FP_OK && x->len == y->len && !memcmp(&x->k, &y->k, sizeof x->k) &&
            !memcmp(x->pay, y->pay, x->len))
            continue;
        int r = sg_fp_node_compare(x, y, 0);
        if (reason_rank(r) > reason_rank(worst)) worst = r;
        if (worst == SG_REASON_TOPOLOGY) break;
    }
    return worst;
}

/* ------------------------------------------------------------ ownership */

int sg_fp_node_copy(sg_fp_node *dst, const sg_fp_node *src)
{
    if (pay_reserve(dst, src->len)) return -1;
    if (src->len) memcpy(dst->pay, src->pay, src->len);
    dst->k = src->k;
    dst->len = src->len;
    dst->pi = src->pi;
    return 0;
}

void sg_fp_swap(sg_fp *a, sg_fp *b)
{
    sg_fp t = *a;
    *a = *b;
    *b = t;
}

void sg_fp_node_free(sg_fp_node *n)
{
    free(n->pay);
    memset(n, 0, sizeof *n);
}

void sg_fp_free(sg_fp *fp)
{
    for (size_t i = 0; i < fp->nodes_cap; i++) free(fp->nodes[i].pay);
    free(fp->nodes);
    free(fp->edges);
    memset(fp, 0, sizeof *fp);
}

void sg_fp_scratch_free(sg_fp_scratch *s)
{
    free(s->nodes);
    free(s->from);
    free(s->to);
    free(s->edata);
    sg_fp_map_free(&s->map);
    memset(s, 0, sizeof *s);
}

/* ------------------------------------------------------------ node map */

static size_t map_slot(const sg_fp_map *m, CUgraphNode node)
{
    uint64_t h = (uint64_t)(uintptr_t)node * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (m->cap - 1);
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
