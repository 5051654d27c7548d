/*
 * core/prof.h: what the files of the profiled policy share (internal to
 * prof_*.c and profiled.c; the interface is profiled.h).
 *
 *   profiled.c       the observer (graphs.h) the policy gives graphs.c: what
 *                    happens to one exec at each event;
 *   prof_observe.c   profiling launches, finding pointers, the decision;
 *   prof_variants.c  exec variants ("generations"): which one holds the
 *                    program's state, making one, choosing one, launching it
 *                    in the program's order;
 *   prof_restore.c   the clone of the exec's graph, bringing a variant or the
 *                    program's own exec to a state, and leaving variants;
 *   prof_alias.c     aliasing (opt-in): which words point into the buffers
 *                    bound to slots, their canonical form, translation;
 *   prof_rent.c      the purchase of variants (ski rental): their price,
 *                    what the updates forwarded meanwhile cost.
 *
 * Terms:
 *   L      the logical state: what the program last asked the exec to hold
 *          (graphs.c's record).
 *   X_g    the driver execs: X_0 is the program's own exec, X_g>0 the
 *          library's, instantiated from a clone of the graph taken when
 *          they are bought (`clone`; what its nodes hold: `clone_st`; its
 *          node handles `clone_nodes`).
 *   group  (aliasing) a set of pointer positions that pointed into the same
 *          own-handle allocation at every profiled launch, and into another
 *          one from launch to launch: one slot per group and generation.
 *   canonical node  a node's payload in which every word that points into a
 *          group's bound allocation (by value, from its base to one past its
 *          end, at any position) is replaced by its offset, with a mask that
 *          says which words those are and for which group. Generation g holds
 *          T_g(L) (aliased words = its slot + offset, everything else raw)
 *          exactly when the canonical nodes it was set from equal L's, node
 *          by node. Without aliasing the canonical node is the raw payload.
 *
 * Thread safety: an sg_prof belongs to one exec record and is used only with
 * that record's lock held (graphs.c). The settings are written at start-up.
 */
#ifndef SG_PROF_H
#define SG_PROF_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "fingerprint.h"
#include "graphs.h"
#include "memory.h"
#include "profiled.h"
#include "slots.h"
#include "stats.h"
#include "streams.h"

/* States of one exec. */
typedef enum {
    SG_PROF_PROFILING,   /* its first profile_steps launches: recorded, forwarded */
    SG_PROF_PLAIN,       /* decided: skip_temp behaviour (forward what is not identical) */
    SG_PROF_RENTING,     /* decided for variants, not bought yet: updates forwarded (as PLAIN)
                          * and charged, until they have cost what the variants would */
    SG_PROF_VARIANTS,    /* decided: lazy updates accepted, each launch picks a variant */
} sg_prof_state;

/* A pointer position while profiling. */
typedef struct ppos {
    uint32_t node, off;
    uint32_t seen;          /* profiled launches at which it pointed into a placed allocation */
    int own_always;         /* into an own-handle allocation of the exec's context every time */
    uint64_t id_first, id_last;
    uint64_t idseq;         /* FNV-1a over the allocation id at each launch (0: none) */
    uint32_t changes;       /* launches at which its allocation differed from the previous */
    size_t max_size;        /* largest allocation it pointed into */
    int32_t group;
} ppos;

/* A group's anchor position (aliasing). */
typedef struct apos {
    uint32_t node, off;
    uint32_t group;
} apos;

/* A node in canonical form (see Terms). mask: sorted word entries
 * (byte offset << 8 | group). */
typedef struct cnode {
    unsigned char *pay;
    uint32_t len, cap;
    uint32_t *mask;
    uint32_t nmask, capmask;
    int known;              /* 0: what the exec holds here is not known (never equal) */
    uint64_t h;             /* a generation's entry: sg_prof_cnode_hash of what it holds
                             * (set by sg_prof_cnode_set), so that most unequal nodes are
                             * told apart without comparing bytes; unused elsewhere */
} cnode;

typedef struct pgen {
    int live;
    int raw;                /* holds raw L (its slots, if any, unused): the program's exec
                             * at first, and any generation whose slots were busy */
    CUgraphExec exec;       /* gen 0: the program's */
    sg_slot_gen *slots;     /* NULL without aliasing (or not made yet) */
    cnode *canon;           /* per node: what the exec was set from */
    unsigned char *eq;      /* per node: canon == L's canonical node */
    size_t mism;            /* nodes with eq == 0 */
    unsigned long last_use;
    uint64_t bytes;         /* g > 0: host memory reserved against the budget (prof_rent.c) */
} pgen;

struct sg_prof {
    CUgraphExec exec;
    int sim;                /* always_update: decide and count, never act */
    sg_prof_state state;
    int final_plain;        /* PLAIN for good (a failure, or state no variant carries) */
    CUcontext ctx;
    CUdevice dev;
    unsigned long long inst_flags;
    /* the clone (prof_restore.c: taken when variants are bought) */
    CUgraph clone;
    CUgraphNode *clone_nodes;
    sg_fp clone_st;         /* what each clone node holds (keys and payloads); L as
                             * instantiated until the clone is taken */
    CUgraph src;            /* the graph the exec was instantiated from (may be gone:
                             * sg_exec_view nodes says) */
    CUgraph rent_graph;     /* the graph of the whole-graph update being forwarded
                             * while RENTING (rent: the clone's source if it pays) */
    int clone_src;          /* a whole-graph update paid the due rent: the clone was
                             * taken from it (always_update: would have been) */
    /* X_0 (prof_restore.c) */
    sg_fp x0_st;            /* what X_0 holds, raw, while x0_known */
    int x0_known;
    int x0_stale;           /* X_0 does not hold L: nothing may launch it before it is restored */
    size_t n;               /* node count (of the clone / L while VARIANTS) */
    /* profiling (prof_observe.c) */
    int launches;
    uint64_t update_ns;
    sg_fp base;             /* L at the first profiled launch */
    unsigned char *varied;  /* bit per payload byte of base: differed at some launch
                             * (node i's bits from vbit[i]; one block, not one per node) */
    size_t *vbit;
    size_t nvaried;
    ppos *pos;
    size_t npos, cappos;
    ppos *tmp;              /* merge buffer */
    size_t captmp;
    sg_exec_profile prof;
    /* the purchase (prof_rent.c): distinct states seen while profiling (FNV-1a
     * of every payload, at most max_variants kept), the launches seen, and
     * the modeled cost of the update being forwarded (rent_pending: set by
     * accept, paid by forwarded, cleared by the next launch) */
    uint64_t state_hash[SG_MAX_GENERATIONS_MAX];
    unsigned nstates;
    unsigned long nlaunch;
    uint64_t rent_pending;
    int pending;
    /* aliasing (prof_alias.c) */
    size_t ngroups;
    size_t *slot_size;      /* per group */
    apos *ap;               /* every position of every group (the anchors) */
    size_t nap;
    sg_slot_bind *want;     /* per group: what L points into now */
    sg_alloc_info *galloc;  /* per group: that allocation */
    cnode *lc;              /* per node: L's canonical form (aliasing only) */
    /* generations (prof_variants.c) */
    unsigned char *dirty;
    uint32_t *dirty_list;
    size_t ndirty;
    pgen gens[SG_MAX_GENERATIONS_MAX];
    int cur;                /* last generation launched */
    int hit;                /* the launch fast path's generation, or -1 (set_hit) */
    unsigned long tick;
    unsigned char *scratch; /* a translated payload */
    size_t scratch_cap;
    /* the program's launch order (prof_variants.c) */
    int last_gen;           /* generation of the latest launch; -1 before the first */
    sg_stream_id last_stream;
    CUevent order_ev;       /* recorded after the latest launch when order_valid */
    CUcontext order_ctx;    /* the context order_ev was created in: the stream's it is
                             * recorded on (prof_order.c) */
    CUstream order_stream;  /* the named stream it was last recorded on (NULL: none) */
    int order_valid;
    int multi;              /* launches went to several streams: record order_ev at each */
};

/* ------------------------------------------------------------ prof_util.c */

/* Settings (written once by sg_prof_init, or by a unit test's seams). */
extern sg_caps sg_prof_caps;
extern const sg_prof_slot_ops *sg_prof_slots;
extern sg_prof_find_fn sg_prof_find_hook;

/* Copies src into dst (dst's buffers reused). 0, or -1 if out of memory. */
int sg_prof_fp_copy(sg_fp *dst, const sg_fp *src);
/* Whether a and b have the same topology and node keys (payload lengths
 * included). */
int sg_prof_same_shape(const sg_fp *a, const sg_fp *b);
/* Forgets the profile (not the decision). */
void sg_prof_profile_reset(sg_prof *p);
/* The same, and frees what profiling held (the base state, the positions). */
void sg_prof_profile_free(sg_prof *p);

/* Many lookups in a row: a memory view (placed blocks; under always_update,
 * where nothing is placed, the allocations forwarded to the driver, which are
 * those placing would have placed), or the tests' hook. No driver call: a
 * scan costs always_update what it costs skip_temp (issue 11). */
typedef struct sg_prof_finder {
    const sg_mem_view *v;
} sg_prof_finder;
void sg_prof_finder_begin(sg_prof_finder *f);
void sg_prof_finder_end(sg_prof_finder *f);
int sg_prof_finder_find(sg_prof_finder *f, uint64_t v, sg_alloc_info *ai);
/* The allocation that ends exactly at v (one-past-the-end pointers). */
int sg_prof_finder_find_end(const sg_prof_finder *f, uint64_t v, sg_alloc_info *ai);

/* A node's payload; never NULL (a payload of length 0 may have no buffer). */
const unsigned char *sg_prof_pay(const sg_fp_node *n);
uint64_t sg_prof_word(const unsigned char *pay, uint32_t off);
void sg_prof_word_put(unsigned char *pay, uint32_t off, uint64_t v);
/* The address words of a memcpy / memset payload (up to 2 offsets). */
int sg_prof_address_words(const sg_fp_node *n, uint32_t offs[2]);

void sg_prof_cnode_free(cnode *c);
/* A hash of c's bytes and mask (not of `known`): equal nodes hash equal. */
uint64_t sg_prof_cnode_hash(const cnode *c);
/* Copies src into dst (dst's buffers reused), its hash in dst->h. -1 if out
 * of memory. */
int sg_prof_cnode_set(cnode *dst, const cnode *src);
/* Whether a and b are known and hold the same bytes and mask. */
static inline int sg_prof_cnode_eq(const cnode *a, const cnode *b)
{
    return a->known && b->known && a->len == b->len && a->nmask == b->nmask &&
           sg_bytes_eq(a->pay, b->pay, a->len) &&
           sg_bytes_eq(a->mask, b->mask, a->nmask * sizeof *a->mask);
}
/* Node i must be brought up to date in every generation. */
void sg_prof_mark_dirty(sg_prof *p, size_t i);

/* ------------------------------------------------------------ prof_observe.c */

/* Records L at a profiled launch. -1 if out of memory (profiling restarts). */
int sg_prof_observe(sg_prof *p, const sg_fp *L);
/* The decision, at the launch after the last profiled one: p->state PLAIN or
 * VARIANTS, p->prof filled in. */
void sg_prof_decide(sg_prof *p, const sg_fp *L);
/* After the decision (and sg_prof_gens_start): logs it and gives it to the
 * report. */
void sg_prof_decided(sg_prof *p);
void sg_prof_log_decision(const sg_prof *p);

/* ------------------------------------------------------------ prof_rent.c */

/* Counts L's state among those seen while profiling (profiling restarts:
 * sg_prof_profile_reset forgets them). */
void sg_prof_count_state(sg_prof *p, const sg_fp *L);
/* Decided for variants: prices them into p->prof (variant_ns,
 * variants_priced, variant_host_bytes) and enters RENTING: 0; or -1 (p->prof's
 * why set, the state left PLAIN) if their host memory would not fit in what
 * STABLEGRAPH_VARIANT_MEMORY has free. */
int sg_prof_rent_start(sg_prof *p, const sg_fp *L, size_t ngroups);
/* Host memory of one variant of an exec holding L (its exec, the table's
 * figure, and the library's record of it), as estimated. */
uint64_t sg_prof_variant_bytes(const sg_fp *L);
/* Takes bytes from the budget (0), or -1 if they do not fit; gives them
 * back (what is free: sg_prof_mem_free, profiled.h). */
int sg_prof_mem_reserve(uint64_t bytes);
void sg_prof_mem_release(uint64_t bytes);
/* The modeled cost of update u of an exec holding L (changed nodes charged
 * at the table's figures). */
uint64_t sg_prof_rent_of(const sg_fp *L, const sg_update *u);
/* An update forwarded while renting cost ns (measured; 0 if not timed). */
void sg_prof_rent_paid(sg_prof *p, uint64_t ns);
/* Whether the forwarded updates have cost as much as the variants would. */
int sg_prof_rent_due(const sg_prof *p);
/* Buys: RENTING -> VARIANTS (before sg_prof_gens_start). */
void sg_prof_buy(sg_prof *p);
/* An update variants would not carry while renting: back to PROFILING. */
void sg_prof_rent_end(sg_prof *p);

/* ------------------------------------------------------------ prof_alias.c */

/* Finds what every group points into now (want, galloc) and, if that
 * changed, marks every node dirty. -1 if a group cannot be aliased now (*why
 * says why: not in one own-handle allocation of the context, bigger than its
 * slot, or a word that could be the end of an aliased buffer or the start of
 * another). */
int sg_prof_alias_resolve(sg_prof *p, const sg_fp *L, const char **why);
/* Computes L's canonical node i into p->lc[i]. -1 if out of memory. */
int sg_prof_alias_canon(sg_prof *p, const sg_fp *L, size_t i);
/* Writes T_g(L) of node i (g < 0: raw L) into p->scratch; returns it, or NULL
 * if out of memory. */
const unsigned char *sg_prof_translate(sg_prof *p, const sg_fp *L, int g, size_t i);
void sg_prof_alias_free(sg_prof *p);

/* ------------------------------------------------------------ prof_variants.c */

/* L's canonical node i (its own buffer without aliasing). */
cnode sg_prof_lc_of(const sg_prof *p, const sg_fp *L, size_t i);
int sg_prof_gens_setup(sg_prof *p, const sg_fp *L);
/* After a decision for VARIANTS: sets the generations up, or (out of
 * memory) goes back to PLAIN with that reason; -1 then. */
int sg_prof_gens_start(sg_prof *p, const sg_fp *L);
void sg_prof_gens_free(sg_prof *p);
void sg_prof_gen_destroy(sg_prof *p, int g, int ctx_gone);
int sg_prof_reconcile(sg_prof *p, const sg_fp *L);
void sg_prof_set_hit(sg_prof *p);
/* Records that generation g now holds T_g(L). -1 if out of memory. */
int sg_prof_gen_holds(sg_prof *p, const sg_fp *L, int g);
/* Launches for the program in VARIANTS mode. */
CUresult sg_prof_launch_variants(sg_prof *p, const sg_exec_view *x, const sg_call *c);
/* Launches generation g (0: the program's exec) in the program's order. */
CUresult sg_prof_launch_ordered(sg_prof *p, const sg_exec_view *x, int g, const sg_call *c);

/* ------------------------------------------------------------ prof_order.c */

/* Records the order event on stream s (the _ptsz flavour if per_thread);
 * p->order_valid says whether it was. */
void sg_prof_order_record(sg_prof *p, CUstream s, int per_thread);
/* Records it behind the previous launch, on its stream, when that stream
 * can be named (a per-thread default stream only from its thread with its
 * context current; the legacy one with its context made current). */
void sg_prof_order_record_last(sg_prof *p);
/* Makes the stream of launch or upload c wait for the order event. */
CUresult sg_prof_order_wait(sg_prof *p, const sg_call *c);
/* Forwards an upload of the program's exec (cuGraphUpload, which the driver
 * orders behind the exec's previous launches) behind the latest launch,
 * whichever generation served it. */
CUresult sg_prof_upload_ordered(sg_prof *p, const sg_call *c);
/* The exec stops using generation last_gen > 0 for good: records the order
 * event after its latest launch (if it has none) so the next launch elsewhere
 * still follows it. */
void sg_prof_order_hand_over(sg_prof *p);
/* A stream is being destroyed. */
void sg_prof_order_stream_gone(sg_prof *p, sg_stream_id s);
void sg_prof_order_free(sg_prof *p, int ctx_gone);
/* Leaves VARIANTS mode: X_0 holds raw L again, generations destroyed.
 * final: PLAIN for good. */
CUresult sg_prof_leave(sg_prof *p, const sg_exec_view *x, int final, const char *why);

/* ------------------------------------------------------------ prof_restore.c */

/* Makes the clone hold T_g(L) (g < 0: raw L). */
CUresult sg_prof_clone_sync(sg_prof *p, const sg_fp *L, int g);
/* Brings exec e to T_g(L) with one whole-graph update from the clone. */
CUresult sg_prof_exec_to(sg_prof *p, const sg_fp *L, int g, CUgraphExec e);
/* Brings X_0 to raw L (three independent paths); clears x0_stale. */
CUresult sg_prof_x0_restore(sg_prof *p, const sg_exec_view *x);
/* After a failed restore: tries again; on success X_0 leaves generations. */
CUresult sg_prof_x0_recover(sg_prof *p, const sg_exec_view *x);
/* The error a program's call gets when X_0 could not be restored. */
CUresult sg_prof_plausible(CUresult rc);
/* Takes the clone from graph g, whose description (of L's origin) is state:
 * refused (-1) unless its attributes are those clone_st holds (the exec's, at
 * instantiation); then clone_st describes the clone. 0 also if a clone
 * exists. */
int sg_prof_clone_take(sg_prof *p, CUgraph g, const sg_fp *state);
/* Takes it from the graph the exec was instantiated from, if that graph and
 * its nodes still exist (x->nodes), described now (its record, or read
 * back). 0, or -1. */
int sg_prof_clone_from_source(sg_prof *p, const sg_exec_view *x);
/* The clone's node handles, in the order of clone_st: taken without them
 * (one cuGraphClone), they are read back once, when variants are bought, and
 * checked node for node against what the clone was made from. 0, or -1
 * (then the clone is gone: no variants). */
int sg_prof_clone_map(sg_prof *p);
void sg_prof_clone_free(sg_prof *p);
/* A PLAIN exec (for good: nothing leaves PLAIN) gives its clone back,
 * unless the program's exec still waits to be restored from it. */
void sg_prof_plain_for_good(sg_prof *p);

#endif /* SG_PROF_H */
