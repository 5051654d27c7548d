/*
 * core/fp_desc.c: descriptions of one node's parameters (fingerprint.h):
 * a kernel's canonical argument bytes (through the parameter-layout cache),
 * memcpy and memset nodes, and any node-parameter struct a hooked call
 * carries. Used by the read-back (fp_build.c), the records (record.h) and
 * the per-node update decisions (graph_update.c).
 *
 * Nothing here logs: these functions run on the update path.
 */
#include "fp_internal.h"

#include "driver.h"

#include <stdlib.h>
#include <string.h>





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
void sg_fp_key_only(sg_fp_node *n, CUgraphNodeType type, int state)
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

/* Writes the canonical argument bytes of layout pi into n's payload, from
 * kernelParams kp or (if buf) from the `extra` buffer buf (exactly
 * pi->total bytes long). Returns SG_FP_OK, SG_FP_NOT_COMPARABLE (a NULL
 * argument pointer; n->len is then 0) or -1 if out of memory. Inlined into
 * both callers: the argument loop is the hot part of a skip decision. */
static inline __attribute__((always_inline)) int
pack_args(sg_fp_node *n, const sg_fp_pinfo *pi, void *const *kp, const unsigned char *buf)
{
    uint32_t total = pi->total;
    if (__builtin_expect(total > n->cap, 0) && sg_fp_pay_reserve(n, total)) return -1;
    unsigned char *pay = n->pay;      /* locals: the stores into pay must not force reloads */
    if (pi->gaps) memset(pay, 0, SG_FP_PAD32(total));
    else sg_fp_pay_pad(pay, total);
    const sg_fp_parg *a = pi->arg, *end = a + pi->n;
    if (buf) {
        for (; a < end; a++) memcpy(pay + a->off, buf + a->off, a->size);
    } else {
        for (; a < end; a++, kp++) {
            const unsigned char *src = *kp;
            if (__builtin_expect(!src, 0)) { n->len = 0; return SG_FP_NOT_COMPARABLE; }
            if (a->size == 8) memcpy(pay + a->off, src, 8);       /* the common sizes without a call */
            else if (a->size == 4) memcpy(pay + a->off, src, 4);
            else memcpy(pay + a->off, src, a->size);
        }
    }
    n->len = total;
    return SG_FP_OK;
}


/* pack_args for kernelParams, out of line (fast_run's fallback when the
 * arguments are not one packed block). */
__attribute__((noinline)) int sg_fp_pack_args_each(sg_fp_node *n, const sg_fp_pinfo *pi,
                                                     void *const *kp)
{
    return pack_args(n, pi, kp, NULL);
}

/* Starts a kernel node's description: its key with the function (0 if
 * not known yet) and the dimensions, no attributes. */
static inline void kernel_key(sg_fp_node *n, uintptr_t func, const unsigned grid[3],
                              const unsigned block[3], unsigned shmem)
{
    /* every member, zero where not named (the key has no padding), member
     * by member and the attributes in 16-byte stores: a whole-key
     * initializer is a string store of 18 words, then the named members */
    sg_fp_key *k = &n->k;
    k->func = func;
    k->kern = 0;
    k->ctx = 0;
    k->type = CU_GRAPH_NODE_TYPE_KERNEL;
    k->state = SG_FP_OK;
    k->grid[0] = grid[0];
    k->grid[1] = grid[1];
    k->grid[2] = grid[2];
    k->block[0] = block[0];
    k->block[1] = block[1];
    k->block[2] = block[2];
    k->shmem = shmem;
    k->attr_mask = 0;
    _Static_assert(sizeof k->attrs % 16 == 0 && offsetof(sg_fp_key, attrs) + sizeof k->attrs == sizeof *k,
                   "the attributes end the key, in whole 16-byte chunks");
    for (size_t i = 0; i < sizeof k->attrs; i += 16) st16(k->attrs + i, (sg_v16){ 0, 0 });
    n->len = 0;
    n->pi = NULL;
}

/* The arguments of a description begun with layout pi (n->k.func or kern,
 * and n->pi, set): pack_args' result as the description's state. */
static inline int kernel_args(sg_fp_node *n, const sg_fp_pinfo *pi, void *const *kp,
                              const unsigned char *buf)
{
    int st = pack_args(n, pi, kp, buf);
    if (st < 0) return -1;
    if (st != SG_FP_OK) return kernel_fail(n, st);
    return SG_FP_OK;
}

/* kernel_args from kernelParams, out of line: sg_fp_launch_desc's general
 * case (a layout not made of 4- and 8-byte words, a payload to grow). */
static __attribute__((noinline)) int kernel_args_each(sg_fp_node *n, const sg_fp_pinfo *pi,
                                                      void *const *kp)
{
    return kernel_args(n, pi, kp, NULL);
}

int sg_fp_launch_desc(sg_fp_node *n, CUfunction f, const unsigned grid[3], const unsigned block[3],
                      unsigned shmem, void *const *kp, const sg_fp_pinfo *pi)
{
    kernel_key(n, (uintptr_t)f, grid, block, shmem);
    n->pi = pi;
    /* "no parameters" with an argument array: sg_fp_kernel_desc's rule */
    if (!pi->n) return kernel_fail(n, SG_FP_NOT_COMPARABLE);
    uint32_t words = pi->words_n, total = pi->total;
    if (__builtin_expect(!words || total > n->cap, 0)) return kernel_args_each(n, pi, kp);
    /* The usual layout (pointers and 4-byte scalars back to back): the
     * bytes pack_args writes, in its order (padding first, then argument by
     * argument, stopping at a NULL one), with no call and no look-up of the
     * arguments' offsets and sizes. */
    unsigned char *d = n->pay;
    sg_fp_pay_pad(d, total);
    uint64_t w8 = pi->words8;
    for (void *const *end = kp + words; kp < end; kp++, w8 >>= 1) {
        const unsigned char *src = *kp;
        if (__builtin_expect(!src, 0)) return kernel_fail(n, SG_FP_NOT_COMPARABLE);
        if (w8 & 1) {
            memcpy(d, src, 8);
            d += 8;
        } else {
            memcpy(d, src, 4);
            d += 4;
        }
    }
    n->len = total;
    return SG_FP_OK;
}

/* cuKernelGetFunction with ctx current, the thread's context restored (as
 * vmm.c's sg_vmm_ctx_enter, not linked here). */
CUfunction sg_fp_kern_function(CUkernel kern, CUcontext ctx)
{
    CUfunction f = NULL;
    CUcontext prev;
    if (!ctx || !sg_drv.cuKernelGetFunction || !sg_drv.cuCtxGetCurrent || !sg_drv.cuCtxSetCurrent ||
        SG_DRIVER_CALL(cuCtxGetCurrent, &prev) != CUDA_SUCCESS)
        return NULL;
    if (prev != ctx && SG_DRIVER_CALL(cuCtxSetCurrent, ctx) != CUDA_SUCCESS) return NULL;
    if (SG_DRIVER_CALL(cuKernelGetFunction, &f, kern) != CUDA_SUCCESS) f = NULL;
    if (prev != ctx) SG_DRIVER_CALL(cuCtxSetCurrent, prev);
    return f;
}

int sg_fp_kernel_desc(sg_fp_node *n, const sg_fp_kin *k, const sg_fp_pinfo *hint)
{
    kernel_key(n, 0, k->grid, k->block, k->shmem);
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
        /* The driver's node holds kern's function in ctx and reads back as
         * that function (func set): a node set by kern + ctx is described
         * as it, so that a record made from such a setter (rec_graph.c) is
         * the same as the driver's graph, and equal to the read-back of an
         * exec holding that function. Described by (kern, ctx) instead, every
         * such record failed the audit (round 30, tests/e2e/adv_setters.c
         * kern: "the capture-time record differs from the driver's graph")
         * and its updates were all forwarded. Kept as (kern, ctx) only if
         * the function cannot be had (the driver then judges the call). */
        CUfunction f = sg_fp_kern_function((CUkernel)(uintptr_t)h, ctx);
        if (f) {
            h = f;
            is_kern = 0;
            n->k.func = (uintptr_t)f;
        } else {
            n->k.kern = (uintptr_t)h;
            n->k.ctx = (uintptr_t)ctx;
        }
    }
    const sg_fp_pinfo *pi = hint && hint->h == h && hint->ok ? hint : sg_fp_pinfo_get(is_kern, h);
    if (!pi) return -1;
    if (!pi->ok || (k->kernelParams && k->extra)) return kernel_fail(n, SG_FP_NOT_COMPARABLE);
    n->pi = pi;
    const unsigned char *buf = NULL;
    if (k->extra) {
        /* A buffer of another size than the layout's is the driver's to
         * judge (it may refuse it: answering an identical one ourselves
         * turned its CUDA_ERROR_INVALID_VALUE into CUDA_SUCCESS), and a
         * larger one is also what a layout cut short looks like (a probe
         * answered CUDA_ERROR_INVALID_VALUE early, at its first call for
         * "no parameters"): its bytes past the layout would never be
         * compared. Round 11, adv_args extra_size and sizes_update_extra. */
        size_t size;
        if (!extra_buffer(k->extra, &buf, &size) || size != pi->total)
            return kernel_fail(n, SG_FP_NOT_COMPARABLE);
    } else if (!k->kernelParams && pi->n) {
        return kernel_fail(n, SG_FP_NOT_COMPARABLE);
    } else if (k->kernelParams && !pi->n) {
        /* "No parameters" with an argument array present cannot be told from
         * a probe that failed at its first call: never compare equal. */
        return kernel_fail(n, SG_FP_NOT_COMPARABLE);
    }
    return kernel_args(n, pi, k->kernelParams, buf);
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
    if (sg_fp_pay_reserve(n, len)) return -1;
    memset(n->pay, 0, SG_FP_PAD32(len));   /* padding inside the struct stays zero */
    n->len = len;
    return 0;
}

/* A copy naming a CUDA array (CU_MEMORYTYPE_ARRAY on either side) is never
 * compared equal (round 46): its handle is all the description holds, and
 * the driver gives a destroyed array's value to the next array it makes
 * (of any shape), which the exec does not name until an update or setter
 * gives it; the library sees neither the destroy nor the create. And the
 * exec setter's rule for arrays ("Both the instantiation-time memory
 * operands and the memory operands ... must be 1-dimensional", which a 2D
 * array is not, whatever the copy's shape) is the driver's to apply. So
 * such a node's updates and setters go to the driver (not_comparable). */
int sg_fp_memcpy_desc(sg_fp_node *n, const CUDA_MEMCPY3D *in, CUcontext ctx)
{
    if (copy_desc_begin(n, CU_GRAPH_NODE_TYPE_MEMCPY, ctx, sizeof *in)) return -1;
    CUDA_MEMCPY3D *out = (CUDA_MEMCPY3D *)(void *)n->pay;
    SG_MEMCPY3D_FIELDS(SG_COPY_FIELD_)
    if (in->srcMemoryType == CU_MEMORYTYPE_ARRAY || in->dstMemoryType == CU_MEMORYTYPE_ARRAY)
        n->k.state = SG_FP_NOT_COMPARABLE;
    return 0;
}

int sg_fp_memset_desc(sg_fp_node *n, const CUDA_MEMSET_NODE_PARAMS *in, CUcontext ctx)
{
    if (copy_desc_begin(n, CU_GRAPH_NODE_TYPE_MEMSET, ctx, sizeof *in)) return -1;
    CUDA_MEMSET_NODE_PARAMS *out = (CUDA_MEMSET_NODE_PARAMS *)(void *)n->pay;
    SG_MEMSET_FIELDS(SG_COPY_FIELD_)
    return 0;
}

int sg_fp_params_desc(sg_fp_node *n, sg_node_params_kind kind, const void *p, CUcontext ctx,
                      const sg_fp_pinfo *hint)
{
    sg_fp_kin k;
    if (!p) return -1;
    switch (kind) {
    case SG_NODE_KERNEL:
        k = SG_FP_KIN_V2((const CUDA_KERNEL_NODE_PARAMS *)p);
        return sg_fp_kernel_desc(n, &k, hint) < 0 ? -1 : 0;
    case SG_NODE_KERNEL_V1:
        k = SG_FP_KIN_V1((const CUDA_KERNEL_NODE_PARAMS_v1 *)p);
        return sg_fp_kernel_desc(n, &k, hint) < 0 ? -1 : 0;
    case SG_NODE_MEMCPY:
        return sg_fp_memcpy_desc(n, p, ctx);
    case SG_NODE_MEMSET:
        return sg_fp_memset_desc(n, p, ctx);
    case SG_NODE_GENERIC:
        break;
    }
    const CUgraphNodeParams *g = p;
    if (g->reserved0[0] || g->reserved0[1] || g->reserved0[2] || g->reserved2) return -1;
    switch (g->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        k = SG_FP_KIN_V2(&g->kernel);
        return sg_fp_kernel_desc(n, &k, hint) < 0 ? -1 : 0;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        if (g->memcpy.flags || g->memcpy.reserved) return -1;
        return sg_fp_memcpy_desc(n, &g->memcpy.copyParams, g->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        const CUDA_MEMSET_NODE_PARAMS_v2 *m = &g->memset;
        CUDA_MEMSET_NODE_PARAMS s = { .dst = m->dst, .pitch = m->pitch, .value = m->value,
                                      .elementSize = m->elementSize, .width = m->width,
                                      .height = m->height };
        return sg_fp_memset_desc(n, &s, m->ctx);
    }
    default:
        return 1;
    }
}


#define SG_FP_ATTR_SET_(aid, bytes, off)                                      \
    case aid:                                                                 \
        memcpy(k->attrs + (off), v, (bytes));                                 \
        k->attr_mask |= 1u << (aid);                                          \
        if ((aid) == CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE &&     \
            v->deviceUpdatableKernelNode.deviceUpdatable)                     \
            k->state = SG_FP_UNSUPPORTED;                                     \
        return 0;

int sg_fp_attr_set(sg_fp_key *k, CUkernelNodeAttrID id, const CUkernelNodeAttrValue *v)
{
    switch ((int)id) {
    SG_FP_ATTR_LIST(SG_FP_ATTR_SET_)
    default:
        return -1;
    }
}

/* The setter rule of cuGraphExecMemcpyNodeSetParams (fingerprint.h). */
static int copy_1d(const sg_fp_node *n)
{
    if (n->len < sizeof(CUDA_MEMCPY3D)) return 0;
    CUDA_MEMCPY3D c;
    memcpy(&c, n->pay, sizeof c);
    return c.Height <= 1 && c.Depth <= 1 && c.WidthInBytes > 0;
}

int sg_fp_setter_refused(const sg_fp_node *old, const sg_fp_node *nw)
{
    return old->k.type == CU_GRAPH_NODE_TYPE_MEMCPY && (!copy_1d(old) || !copy_1d(nw));
}

int sg_fp_update_refused(const sg_fp_node *old, const sg_fp_node *nw)
{
    if (old->k.type != nw->k.type) return 0;
    if (old->k.type == CU_GRAPH_NODE_TYPE_MEMCPY && old->len >= sizeof(CUDA_MEMCPY3D) &&
        nw->len >= sizeof(CUDA_MEMCPY3D)) {
        CUDA_MEMCPY3D a, b;
        memcpy(&a, old->pay, sizeof a);
        memcpy(&b, nw->pay, sizeof b);
        return a.srcMemoryType != b.srcMemoryType || a.dstMemoryType != b.dstMemoryType;
    }
    if (old->k.type == CU_GRAPH_NODE_TYPE_MEMSET && old->len >= sizeof(CUDA_MEMSET_NODE_PARAMS) &&
        nw->len >= sizeof(CUDA_MEMSET_NODE_PARAMS)) {
        CUDA_MEMSET_NODE_PARAMS a, b;
        memcpy(&a, old->pay, sizeof a);
        memcpy(&b, nw->pay, sizeof b);
        return (a.height > 1 || b.height > 1) &&
               (a.width != b.width || a.height != b.height || a.pitch != b.pitch || a.elementSize != b.elementSize);
    }
    return 0;
}
