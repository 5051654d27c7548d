/*
 * core/fingerprint.h: the canonical description of a CUDA graph and of one
 * node's parameters (fingerprint.c), built through the driver table, and the
 * comparison that says whether two descriptions would leave a graph exec in
 * the same state, and if not, why (an sg_reason).
 *
 * A graph's fingerprint is its topology (node count; per node its type, in
 * cuGraphGetNodes order, or creation order for a record; edges in
 * cuGraphGetEdges_v2 order, or creation order, with endpoints as node indices
 * and the edge data) plus per node:
 *   kernel: the function (CUfunction; or CUkernel + context when no
 *           CUfunction is set, since CUDA ignores ctx when func is set), grid
 *           and block dimensions, dynamic shared memory, the per-node
 *           attributes of SG_FP_ATTR_LIST that the driver answers, and the
 *           argument bytes in canonical form: the layout cuFuncGetParamInfo /
 *           cuKernelGetParamInfo report (the `extra` buffer layout), gaps
 *           zeroed, whether they came as kernelParams or as `extra`;
 *   memcpy: every field of CUDA_MEMCPY3D (padding zeroed) and the context
 *           given with it (0 = unknown / the current one);
 *   memset: CUDA_MEMSET_NODE_PARAMS and its context (same rule);
 *   empty:  nothing more.
 * Any other node type, a device-updatable kernel node, or a kernel whose
 * arguments cannot be laid out (no parameter info, both kernelParams and
 * extra, an extra buffer whose size is not the layout's) makes the node
 * SG_FP_UNSUPPORTED or SG_FP_NOT_COMPARABLE; such nodes never compare equal.
 *
 * Cost: building reuses the buffers of the sg_fp it fills (no allocation in
 * the steady state) and takes a hint (normally the exec's record): where the
 * hint had a kernel node of the same function, the node is described by a
 * fast path (fingerprint.c: fast_run) that gives the same bytes as the
 * general one; the hint's edges are tried first for the edge endpoints.
 * Comparing is a chunked byte comparison of keys and payloads (AVX2 where
 * the CPU has it); the reason is only worked out when something differs.
 * `make bench` reports the library's instructions per kernel node per skip
 * decision (issue 4's target: at most 200).
 *
 * Files: fp_pinfo.c (the parameter-layout cache), fp_desc.c (one node's
 * description), fp_build.c (building by reading a graph back, the node
 * map), fp_compare.c (comparing, deltas), fp_store.c (storage, copying).
 * Records made while the program builds a graph: record.h.
 *
 * Handles die with their modules: every cuModuleUnload / cuLibraryUnload
 * starts a new cache epoch (sg_fp_cache_epoch_bump); a fingerprint remembers
 * the epoch it was built in, and one from an earlier epoch is neither used as
 * a hint nor trusted as a description (its functions may have been unloaded
 * and their handle values reused).
 *
 * Thread safety: an sg_fp, sg_fp_node or sg_fp_map is owned by its caller
 * (graphs.c holds the exec's mutex). The parameter-info cache is global,
 * guarded by fp_pinfo.c's lock; an entry a build got stays valid while the
 * build runs between sg_fp_cache_enter() and sg_fp_cache_leave().
 */
#ifndef SG_FINGERPRINT_H
#define SG_FINGERPRINT_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "call.h"
#include "stats.h"

/* Node attributes compared, those CUDA documents as "valid for graph nodes":
 * X(attribute id, bytes of its value that carry meaning, offset in
 * sg_fp_key.attrs). Bit `id` of attr_mask says the attribute is present. A
 * driver answering CUDA_ERROR_NOT_SUPPORTED (or lacking
 * cuGraphKernelNodeGetAttribute) leaves the attribute absent; any other
 * error makes the node not comparable. */
#define SG_FP_ATTR_LIST(X)                                                    \
    X(CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, 28, 0)                        \
    X(CU_LAUNCH_ATTRIBUTE_COOPERATIVE, 4, 28)                                 \
    X(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, 12, 32)                          \
    X(CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, 4, 44)        \
    X(CU_LAUNCH_ATTRIBUTE_PRIORITY, 4, 48)                                    \
    X(CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, 2, 52)                         \
    X(CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, 4, 54)                             \
    X(CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION, 12, 58)                \
    X(CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, 4, 70)                \
    X(CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING, 4, 74)
#define SG_FP_ATTR_BYTES 80   /* the last offset + its bytes, rounded up to 8 */

/* memcmp(a, b, n) == 0 that is also defined when n is 0 and a pointer is
 * NULL (a node without a payload has pay == NULL). */
static inline int sg_bytes_eq(const void *a, const void *b, size_t n)
{
    return n == 0 || memcmp(a, b, n) == 0;
}

/* State of one node's description. */
enum { SG_FP_OK = 0, SG_FP_UNSUPPORTED = 1, SG_FP_NOT_COMPARABLE = 2 };

/* Parameter layout of one function (cached; immutable once made). */
typedef struct sg_fp_pinfo sg_fp_pinfo;

/* The fixed part of a node's description: compared bytewise (as memcmp
 * would), so it has no padding and every byte is written. 16-byte aligned,
 * a multiple of 16 bytes long: fingerprint.c compares keys in aligned
 * 16-byte chunks. */
typedef struct __attribute__((aligned(16))) sg_fp_key {
    uint64_t func, kern, ctx;        /* kernel: function identity; memcpy/memset: ctx only */
    uint32_t type;                   /* CUgraphNodeType */
    uint32_t state;                  /* SG_FP_* */
    uint32_t grid[3], block[3], shmem;
    uint32_t attr_mask;              /* bit id: attribute id of SG_FP_ATTR_LIST present */
    unsigned char attrs[SG_FP_ATTR_BYTES];
} sg_fp_key;

/* One node: the key, plus a payload (canonical argument bytes for kernels,
 * the canonical struct for memcpy / memset): pay holds cap bytes, allocated
 * by fingerprint.c only (cap is then a multiple of 32, and fingerprint.c
 * keeps the bytes from len up to the next multiple of 32 zero so that
 * payloads compare in whole chunks; a payload written elsewhere with other
 * bytes there only loses that fast comparison). The buffer is the node's
 * own, or (lent) a slot of its description's slab: a copy (sg_fp_copy)
 * puts every payload into one slab, so that a graph's description is a few
 * blocks, not one per node; a payload that outgrows its slot moves into a
 * buffer of its own. */
typedef struct sg_fp_node {
    sg_fp_key k;
    unsigned char *pay;
    uint32_t len, cap;
    const sg_fp_pinfo *pi;           /* kernel: parameter layout used (a hint; not compared) */
    uint32_t lent;                   /* pay is a slot lent by its description (sg_fp.slab or
                                      * .chunk, sg_fp_delta.slab), not its own */
} sg_fp_node;

typedef struct sg_fp_edge {
    uint32_t from, to;               /* node indices */
    unsigned char data[8];           /* CUgraphEdgeData: ports, type, reserved */
} sg_fp_edge;

/* Node handle -> index (open addressing; keys NULL when empty). */
typedef struct sg_fp_map {
    CUgraphNode *keys;
    uint32_t *vals;
    size_t cap;                      /* a power of two, or 0 */
} sg_fp_map;

/* Driver query buffers reused from one build to the next. */
typedef struct sg_fp_scratch {
    CUgraphNode *nodes;
    size_t nodes_cap;
    CUgraphNode *from, *to;
    CUgraphEdgeData *edata;
    size_t edges_cap;
    sg_fp_map map;                   /* handle -> index, when the hint's edges do not fit */
} sg_fp_scratch;

/* Where a fingerprint comes from. Two fingerprints compare only if they
 * come from the same place: a record leaves the attributes a captured kernel
 * takes from its stream at their defaults (record.h), where a read-back
 * holds the values the driver reports, and orders nodes by creation. */
enum { SG_FP_READBACK = 0, SG_FP_RECORDED = 1 };

typedef struct sg_fp {
    uint64_t epoch;                  /* the cache epoch it was built in */
    int origin;                      /* SG_FP_READBACK or SG_FP_RECORDED */
    size_t n, nedges;
    sg_fp_node *nodes;
    size_t nodes_cap;
    sg_fp_edge *edges;
    size_t edges_cap;
    int unsupported;                 /* some node is SG_FP_UNSUPPORTED */
    unsigned char *slab;             /* the lent payload slots (sg_fp_copy), slab_cap bytes */
    size_t slab_cap;
    unsigned char *chunk;            /* slots lent node by node (sg_fp_node_lend): the newest
                                      * chunk, which starts with the previous one's address */
    size_t chunk_used, chunk_cap;
} sg_fp;

/* What a comparison found different (sg_fp_compare_delta): b's nodes that
 * differ from a's, so that a with them copied in describes what b does
 * (valid; then a and b have the same origin, nodes and edges, and neither
 * holds an unsupported node). The buffers are reused from one comparison to
 * the next; room for many more nodes than the last comparisons used is
 * given back. */
typedef struct sg_fp_delta {
    int valid;
    uint64_t epoch;                  /* b's */
    size_t n, cap;
    unsigned small;                  /* comparisons in a row that used < cap / 4 */
    unsigned char *slab;             /* the nodes' payloads, lent, in order: slab_used bytes */
    size_t slab_cap, slab_used;
    uint32_t *idx;                   /* the differing nodes' indices, ascending */
    signed char *why;                /* for each, the sg_reason its comparison gave */
    sg_fp_node *nodes;               /* copies of b's nodes at those indices */
} sg_fp_delta;

/* Whether delta node k differs from old, a's node it was compared with,
 * only in a kernel's argument bytes of the same length (a pointer or a
 * scalar changed: the same function, context, dimensions, attributes and
 * states). Read from the comparison's reason: no second comparison. */
static inline int sg_fp_delta_args_only(const sg_fp_delta *d, size_t k, const sg_fp_node *old)
{
    return old->k.type == CU_GRAPH_NODE_TYPE_KERNEL &&
           (d->why[k] == SG_REASON_POINTER_CHANGED || d->why[k] == SG_REASON_SCALAR_CHANGED) &&
           old->len == d->nodes[k].len;
}

/* A kernel node's parameters, from any CUDA_KERNEL_NODE_PARAMS version. */
typedef struct sg_fp_kin {
    CUfunction func;
    CUkernel kern;
    CUcontext ctx;
    unsigned grid[3], block[3], shmem;
    void **kernelParams, **extra;
} sg_fp_kin;

/* Fills an sg_fp_kin from a v1 struct (no kern, no ctx) ... */
#define SG_FP_KIN_V1(p) ((sg_fp_kin){ .func = (p)->func,                              \
    .grid = { (p)->gridDimX, (p)->gridDimY, (p)->gridDimZ },                           \
    .block = { (p)->blockDimX, (p)->blockDimY, (p)->blockDimZ },                       \
    .shmem = (p)->sharedMemBytes, .kernelParams = (p)->kernelParams, .extra = (p)->extra })
/* ... and from a v2 or v3 struct (with kern and ctx). */
#define SG_FP_KIN_V2(p) ((sg_fp_kin){ .func = (p)->func, .kern = (p)->kern, .ctx = (p)->ctx, \
    .grid = { (p)->gridDimX, (p)->gridDimY, (p)->gridDimZ },                           \
    .block = { (p)->blockDimX, (p)->blockDimY, (p)->blockDimZ },                       \
    .shmem = (p)->sharedMemBytes, .kernelParams = (p)->kernelParams, .extra = (p)->extra })

/* Builds the fingerprint of graph g into fp (its buffers reused). hint, if
 * not NULL, is an earlier fingerprint whose node i's parameter layout is
 * reused for node i when the function is the same, and its edges are tried
 * first when mapping edge endpoints to indices (so it must be a fingerprint
 * that sg_fp_build completed: its edge indices are trusted when it has as
 * many nodes as g). Afterwards s->nodes holds g's
 * node handles in order (s->map is scratch). Returns 0, or -1 if
 * the driver could not describe the graph or memory ran out (fp is then
 * incomplete and must not be compared). */
int sg_fp_build(sg_fp *fp, CUgraph g, sg_fp_scratch *s, const sg_fp *hint);
/* sg_fp_build without a hint and without asking for any node's attributes
 * (attr_mask 0, so a device-updatable or unreadable node is not marked
 * UNSUPPORTED / NOT_COMPARABLE for them): 2 driver calls per node instead of
 * 12. Only for telling whether a graph holds the same nodes in the same
 * order as a description (sg_fp_same_order, which compares no attribute);
 * never compared as a description. */
int sg_fp_build_layout(sg_fp *fp, CUgraph g, sg_fp_scratch *s);

/* Describes a kernel node's parameters (not its attributes: n->k.attrs and
 * attr_mask are zeroed) into n, reusing n's payload buffer; hint as above
 * (may be NULL). Sets and returns n->k.state; -1 if out of memory. */
int sg_fp_kernel_desc(sg_fp_node *n, const sg_fp_kin *k, const sg_fp_pinfo *hint);
/* The function of kern in context ctx (the one a node or launch of kern
 * there holds), or NULL if ctx is NULL or the driver cannot tell. */
CUfunction sg_fp_kern_function(CUkernel kern, CUcontext ctx);
/* sg_fp_kernel_desc of a launch of function f with kernelParams kp (not
 * NULL) and no `extra`, whose layout pi (ok, pi->h == f) is known: the
 * same description, without the lookups. */
int sg_fp_launch_desc(sg_fp_node *n, CUfunction f, const unsigned grid[3], const unsigned block[3],
                      unsigned shmem, void *const *kp, const sg_fp_pinfo *pi);
/* Describes a memcpy or memset node (ctx: the context given with it, NULL if
 * none). Returns 0, or -1 if out of memory. */
int sg_fp_memcpy_desc(sg_fp_node *n, const CUDA_MEMCPY3D *c, CUcontext ctx);
int sg_fp_memset_desc(sg_fp_node *n, const CUDA_MEMSET_NODE_PARAMS *m, CUcontext ctx);

/* Describes node parameters as a hooked call carries them (call.h's
 * sg_node_params_kind; ctx for memcpy / memset). 0, 1 for a node type the
 * library does not model, -1 if they cannot be described. */
int sg_fp_params_desc(sg_fp_node *n, sg_node_params_kind kind, const void *params, CUcontext ctx,
                      const sg_fp_pinfo *hint);

/* Sets attribute id of a kernel node's key to *v (a device-updatable node
 * becomes SG_FP_UNSUPPORTED). -1 if id is not one of SG_FP_ATTR_LIST. */
int sg_fp_attr_set(sg_fp_key *k, CUkernelNodeAttrID id, const CUkernelNodeAttrValue *v);

/* -1 if a and b describe the same exec state; else why not (the most
 * telling reason: topology > unsupported_node > not_comparable >
 * function_changed > dims_changed > attributes_changed > memcpy_changed /
 * memset_changed > scalar_changed > pointer_changed). */
int sg_fp_compare(const sg_fp *a, const sg_fp *b);
/* sg_fp_compare, in one pass, also filling d with b's differing nodes (d
 * is left invalid if the topologies differ, a fingerprint holds an
 * unsupported node, or memory runs out: the caller then needs b whole). */
int sg_fp_compare_delta(const sg_fp *a, const sg_fp *b, sg_fp_delta *d);
/* Copies d's nodes into a (d valid, made against a). 0, or -1 if out of
 * memory (a is then partly updated and must not be trusted). */
int sg_fp_delta_apply(sg_fp *a, const sg_fp_delta *d);
void sg_fp_delta_free(sg_fp_delta *d);
/* The same for one node; params_only ignores the attributes (per-node exec
 * updates do not change them). */
int sg_fp_node_compare(const sg_fp_node *old, const sg_fp_node *nw, int params_only);
/* Whether a per-node exec setter (cuGraphExecMemcpyNodeSetParams,
 * cuGraphExecNodeSetParams) changing old into nw is refused by the driver
 * for a reason no comparison shows: "Both the instantiation-time memory
 * operands and the memory operands in copyParams must be 1-dimensional.
 * Zero-length operations are not supported." (cuda.h), even for identical
 * parameters. Such a call must go to the driver. */
int sg_fp_setter_refused(const sg_fp_node *old, const sg_fp_node *nw);
/* Whether cuGraphExecUpdate refuses to change exec node old (as it was
 * instantiated or last updated) into nw of the same type for a documented
 * rule of the parameters, whatever memory they name
 * (CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED): a memcpy's source or
 * destination memory type changed ("Changing either the source or
 * destination memory type ... is not supported"), a 2D memset (before or
 * after) whose width, height, pitch or element size changed ("For 2d
 * memsets, only address and assigned value may be updated"). 0 where the
 * driver accepts the change or may refuse it (a 1D memset's dimensions:
 * "may fail"; a kernel's function: its context). */
int sg_fp_update_refused(const sg_fp_node *old, const sg_fp_node *nw);

/* Copies src's description into dst (payload into dst's buffer). Returns 0,
 * or -1 if out of memory (dst unchanged). */
int sg_fp_node_copy(sg_fp_node *dst, const sg_fp_node *src);

/* Copies src into dst (dst's buffers reused). Returns 0, or -1 if out of
 * memory (dst is then incomplete). */
int sg_fp_copy(sg_fp *dst, const sg_fp *src);
/* A new last node of fp (payload buffer kept, length 0; its key is the
 * caller's to write in full: the sg_fp_*_desc functions do), or NULL if out
 * of memory. Inline while fp has room (every node of a record). */
sg_fp_node *sg_fp_push_node_grow(sg_fp *fp);
static inline sg_fp_node *sg_fp_push_node(sg_fp *fp)
{
    if (__builtin_expect(fp->n >= fp->nodes_cap, 0)) return sg_fp_push_node_grow(fp);
    sg_fp_node *n = &fp->nodes[fp->n++];
    n->len = 0;
    n->pi = NULL;
    return n;
}
/* Gives node n of fp, which has no payload buffer, a slot of SG_FP_LEND_BYTES
 * from fp's chunks (a description built node by node, as a record is: its
 * payloads then take a few blocks, not one each, and are never on the C
 * library's heap among the program's blocks). A payload that outgrows the
 * slot moves to a buffer of its own. Out of memory: n is left without one
 * (describing it allocates one as before). */
#define SG_FP_LEND_BYTES 64u
void sg_fp_node_lend_new(sg_fp *fp, sg_fp_node *n);
static inline void sg_fp_node_lend(sg_fp *fp, sg_fp_node *n)
{
    if (!n->pay) sg_fp_node_lend_new(fp, n);   /* (a node reused keeps its buffer) */
}
/* Appends an edge (data8 NULL: a default edge's zero bytes). Returns 0, or
 * -1 if out of memory. Inline while fp has room. */
int sg_fp_push_edge_grow(sg_fp *fp, uint32_t from, uint32_t to, const void *data8);
static inline int sg_fp_push_edge(sg_fp *fp, uint32_t from, uint32_t to, const void *data8)
{
    if (__builtin_expect(fp->nedges >= fp->edges_cap, 0))
        return sg_fp_push_edge_grow(fp, from, to, data8);
    sg_fp_edge *e = &fp->edges[fp->nedges++];
    e->from = from;
    e->to = to;
    if (data8) memcpy(e->data, data8, sizeof e->data);
    else memset(e->data, 0, sizeof e->data);
    return 0;
}
/* Gives back the room past fp's nodes and edges, and the lent slots of
 * nodes it no longer has (a fingerprint that is done growing: a finished
 * record). */
void sg_fp_shrink(sg_fp *fp);
/* Whether a and b describe the same nodes and edges in the same order,
 * whatever their origins and kernel attributes (the node handles of one can
 * name the nodes of the other). */
int sg_fp_same_order(const sg_fp *a, const sg_fp *b);

/* Exchanges two fingerprints (buffers included). */
void sg_fp_swap(sg_fp *a, sg_fp *b);
void sg_fp_free(sg_fp *fp);
void sg_fp_node_free(sg_fp_node *n);
void sg_fp_scratch_free(sg_fp_scratch *s);

/* Fills m with nodes[i] -> i (NULL entries left out). Returns 0, or -1 if out
 * of memory. */
int sg_fp_map_build(sg_fp_map *m, const CUgraphNode *nodes, size_t n);
/* The index of node, or -1. */
long sg_fp_map_find(const sg_fp_map *m, CUgraphNode node);
void sg_fp_map_free(sg_fp_map *m);

/* The cache epoch now (see the header comment). */
uint64_t sg_fp_epoch(void);
/* Around every build or description: entries handed out inside stay valid
 * until the matching leave, even if an unload starts a new epoch. */
void sg_fp_cache_enter(void);
void sg_fp_cache_leave(void);
/* A module or library was unloaded: the layouts known so far are dropped. */
void sg_fp_cache_epoch_bump(void);
/* Fork: 0 prepare (lock), 1 parent, 2 child (unlock). */
void sg_fp_cache_atfork(int phase);

/* Frees the parameter-info cache (tests; no fingerprint may still point into it). */
void sg_fp_cache_reset(void);

/* Tests: the width in bytes of the chunks sg_fp_compare compares, 16
 * (SSE2) or 32 (AVX2, where the CPU has it); force 16 or 32 to choose
 * (32 only where the CPU has AVX2), 0 to leave it. Returns the width now. */
int sg_fp_scan_width(int force);

#endif /* SG_FINGERPRINT_H */
