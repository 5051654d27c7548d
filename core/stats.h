/*
 * core/stats.h: what the library counts. Per-hook counters, totals, the
 * per-exec table, and the reasons an update was forwarded to the driver.
 *
 * Bounded by what is alive (issue 14): every live exec has an entry; of the
 * destroyed ones the SG_EXEC_KEEP most interesting keep theirs (the report
 * lists them) and the others are folded into one sum (the report's
 * "execs_folded"). An entry's memory is never freed: a folded entry goes to
 * a free list and is reused by the next exec, so the table holds at most
 * (most execs alive at once + SG_EXEC_KEEP) entries.
 *
 * Locks:
 *   - hook counters and totals are atomics (relaxed); no lock.
 *   - exec_lock (stats.c) guards the live-exec hash (keyed by CUgraphExec),
 *     the list of listed entries (live and kept, in id order), the kept
 *     set, the free list, the folded sum and the id counter. An entry's
 *     launch count is an atomic (the launch path counts without the lock).
 *     Launch and update accounting take the lock for one lookup and a few
 *     increments; a destroy also compares against the SG_EXEC_KEEP kept.
 *   - fork: sg_stats_atfork_{prepare,parent,child} hold exec_lock across
 *     fork so the child never inherits it locked. The child starts from zero
 *     counts: its live execs keep their entries (other modules hold pointers
 *     to them) with their counters zeroed; kept and folded execs, totals and
 *     hook counters are cleared. Nothing is freed (issue 10, item 14).
 */
#ifndef SG_STATS_H
#define SG_STATS_H

#include <cuda.h>
#include <stddef.h>

/* Why an update went to the driver: X(ENUM_SUFFIX, "report name").
 *   topology           node count, node types or edges differ
 *   function_changed   a kernel node's function (or CUkernel and context)
 *   dims_changed       grid, block or dynamic shared memory
 *   attributes_changed a kernel node attribute (priority, cluster dims, ...)
 *   scalar_changed     an argument byte outside any pointer word
 *   pointer_changed    only argument words holding device addresses
 *   pointer_not_aliased  skip_profiled: a library exec variant brought to the
 *                      program's state because a pointer it holds is not
 *                      aliased (no variant held that state)
 *   memcpy_changed, memset_changed   an operand of such a node
 *   unsupported_node   the graph or exec holds a node type the library does
 *                      not model, a device-updatable kernel node, or was
 *                      instantiated for device launch
 *   exec_modified      the exec was changed by a call the library does not
 *                      model (cuGraphExecMemcpyNodeSetParams, ...)
 *   user_objects       the exec or the new graph holds user-object references
 *                      (the driver replaces the exec's: graph_uobj.c)
 *   foreign_memory     a memset / memcpy operand in memory the library did not
 *                      place may have ended since the driver last saw it, and
 *                      the driver does not show it whole (round 41)
 *   untracked_exec     the exec was created before the library saw it
 *   not_comparable     the driver could not describe a node or its arguments
 *   policy             identical, but the policy (always_update) forwards */
#define SG_REASON_LIST(X)                                                     \
    X(TOPOLOGY, "topology")                                                   \
    X(FUNCTION_CHANGED, "function_changed")                                   \
    X(DIMS_CHANGED, "dims_changed")                                           \
    X(ATTRIBUTES_CHANGED, "attributes_changed")                               \
    X(SCALAR_CHANGED, "scalar_changed")                                       \
    X(POINTER_CHANGED, "pointer_changed")                                     \
    X(POINTER_NOT_ALIASED, "pointer_not_aliased")                             \
    X(MEMCPY_CHANGED, "memcpy_changed")                                       \
    X(MEMSET_CHANGED, "memset_changed")                                       \
    X(UNSUPPORTED_NODE, "unsupported_node")                                   \
    X(EXEC_MODIFIED, "exec_modified")                                         \
    X(USER_OBJECTS, "user_objects")                                           \
    X(FOREIGN_MEMORY, "foreign_memory")                                       \
    X(UNTRACKED_EXEC, "untracked_exec")                                       \
    X(NOT_COMPARABLE, "not_comparable")                                       \
    X(POLICY, "policy")
#define SG_REASON_ITEM_(s, n) SG_REASON_##s,
typedef enum { SG_REASON_LIST(SG_REASON_ITEM_) SG_REASON_COUNT } sg_reason;
extern const char *const sg_reason_names[SG_REASON_COUNT];

typedef struct sg_hook_counter {
    unsigned long calls;     /* atomic: calls of the wrapper */
    unsigned long resolved;  /* atomic: wrapper handed out by dlsym or cuGetProcAddress */
} sg_hook_counter;

/* Totals. bytes_requested and bytes_mapped are PEAKS (high-water marks, set
 * with SG_TOTAL_MAX), not sums: bytes_requested is the most bytes the
 * program held at once in live allocations (placed or forwarded; counted
 * from a successful allocation until its free); bytes_mapped is the most
 * physical memory the library itself had mapped at once in its arenas
 * (memory.c). The memory target compares the two. bytes_given_back sums
 * the unused placed memory trims gave back to the driver (under pressure
 * or to keep the headroom: mem_arena.c), headroom_trims counts the trims
 * made for the headroom. The other totals are counts. */
#define SG_TOTALS_LIST(X)                                                     \
    X(launches) X(updates_seen) X(updates_forwarded) X(updates_skipped)       \
    X(bytes_requested) X(bytes_mapped) X(bytes_given_back) X(headroom_trims)
#define SG_TOTALS_FIELD_(n) unsigned long n;
typedef struct sg_totals { SG_TOTALS_LIST(SG_TOTALS_FIELD_) } sg_totals;

/* skip_profiled's decision about one exec (core/profiled.c), for the
 * report's "profile" object and the info log. */
typedef struct sg_exec_profile {
    int decided;               /* 0: still profiling (no "profile" in the report) */
    int generations;           /* 1: GENERATIONS mode; 0: PLAIN (as skip_temp) */
    unsigned positions;        /* pointer positions seen */
    unsigned varying_positions;
    unsigned varying_scalar_bytes;
    unsigned aliased_slots;    /* groups aliased into slots */
    unsigned generations_allowed;
    unsigned long long update_ns_per_step;  /* measured, forwarded updates */
    unsigned long long remap_ns_per_step;   /* estimated for the aliased slots */
    const char *why;           /* static text: why this mode (or the fallback) */
    /* The purchase of variants (ski rental, prof_rent.c): */
    int renting;               /* 1: variants would serve, not bought yet: updates forwarded */
    int measured;              /* forwarded_ns from the library's timings (else the table's) */
    unsigned variants_priced;  /* instantiations the price counts */
    unsigned long decided_at;  /* the exec's launch at which it was decided (1, 2, ...) */
    unsigned long bought_at;   /* the launch at which variants were bought; 0: not (yet) */
    unsigned long rent_launch; /* the launch before the latest update forwarded while renting */
    unsigned long rented_updates;     /* updates forwarded while renting */
    unsigned long long variant_ns;    /* modeled cost of buying the variants */
    unsigned long long forwarded_ns;  /* what the updates forwarded while renting cost */
    /* Host memory (prof_rent.c): the variants' estimate, and what the budget
     * (STABLEGRAPH_VARIANT_MEMORY) had free at the decision; both 0 when no
     * variant was considered. */
    unsigned long long variant_host_bytes;
    unsigned long long variant_memory_free;
} sg_exec_profile;

/* Per-exec skip_profiled events (sg_exec_event). */
typedef enum {
    SG_EXEC_EV_VARIANT,        /* a library exec variant was instantiated */
    SG_EXEC_EV_DEMOTION,       /* GENERATIONS -> PROFILING (or PLAIN) */
    SG_EXEC_EV_LIB_UPDATE,     /* an update the library made to restore / translate an exec */
    SG_EXEC_EV_WOULD_SKIP_PROFILED,  /* always_update: skip_profiled would have skipped it */
} sg_exec_ev;

/* The counters of an exec (sg_exec_info fields), in report order; the
 * folded sum has the same ones. */
#define SG_EXEC_COUNTS_LIST(X)                                                \
    X(launches) X(updates_seen) X(updates_forwarded) X(updates_skipped)       \
    X(would_skip) X(would_skip_profiled) X(variants) X(demotions)             \
    X(library_updates)

/* Destroyed execs listed one by one in the report (the most interesting:
 * most forwarded updates, then most skip_profiled events, then most updates
 * the policy would have skipped, then most updates, then most launches). */
#define SG_EXEC_KEEP 64

/* A snapshot of one exec, for the report. */
typedef struct sg_exec_info {
    unsigned long id;          /* 1, 2, ... in instantiation order */
    size_t nodes;              /* node count at instantiation (0 if unknown) */
    int nodes_known;
    int destroyed;
    unsigned long launches, updates_seen, updates_forwarded, updates_skipped;
    unsigned long would_skip;  /* forwarded although identical (always_update) */
    unsigned long would_skip_profiled;  /* forwarded, but skip_profiled would not have (always_update) */
    unsigned long variants, demotions, library_updates;   /* skip_profiled (sg_exec_ev) */
    sg_exec_profile profile;
    unsigned long reasons[SG_REASON_COUNT];
} sg_exec_info;

/* Hook names and counters are owned by interpose/; registered once at init
 * (before any concurrent use). */
void sg_stats_set_hooks(const char *const *names, sg_hook_counter *counters, size_t n);
size_t sg_stats_hook_count(void);
const char *sg_stats_hook_name(size_t i);
sg_hook_counter sg_stats_hook(size_t i);

/* Totals (atomic adds). */
extern sg_totals sg_total;
#define SG_TOTAL_ADD(field, n) __atomic_fetch_add(&sg_total.field, (n), __ATOMIC_RELAXED)
/* Raises a total to v if v is larger (for high-water marks). */
void sg_total_max(unsigned long *field, unsigned long v);
#define SG_TOTAL_MAX(field, v) sg_total_max(&sg_total.field, (v))
sg_totals sg_stats_totals(void);

/* Exec table. Each returns 0, or -1 if out of memory (nothing changed). */
int sg_exec_created(CUgraphExec exec, size_t nodes, int nodes_known);
/* Unknown execs (created before the library saw them) are added on first use. */
int sg_exec_launched(CUgraphExec exec);
/* The launch path's shortcut: an exec's entry (found or added; NULL if out of
 * memory), and a lock-free launch count on it. The entry's memory is never
 * freed, but once the exec is destroyed it may be reused for another exec:
 * drop the pointer when the exec is destroyed (a launch counted through a
 * stale pointer goes to whichever exec reuses the entry; nothing breaks). */
struct sg_exec;
struct sg_exec *sg_exec_entry(CUgraphExec exec);
void sg_exec_entry_launched(struct sg_exec *e);
int sg_exec_update(CUgraphExec exec, int forwarded, sg_reason reason);
/* An update skip_temp would have skipped went to the driver (always_update). */
int sg_exec_would_skip(CUgraphExec exec);
/* Sum of would_skip over every exec ever seen. */
unsigned long sg_exec_would_skip_total(void);
/* Counts one skip_profiled event for exec; sum of one kind over every exec. */
int sg_exec_event(CUgraphExec exec, sg_exec_ev ev);
unsigned long sg_exec_event_total(sg_exec_ev ev);
/* The report id of a live exec (0 if unknown). */
unsigned long sg_exec_id(CUgraphExec exec);
/* Records skip_profiled's decision about exec (copied). */
int sg_exec_set_profile(CUgraphExec exec, const sg_exec_profile *p);
void sg_exec_destroyed(CUgraphExec exec);

/* Calls fn for every listed exec (live ones and the kept destroyed ones), in
 * creation order, under exec_lock (fn must not call back into the exec
 * table). */
void sg_exec_foreach(void (*fn)(const sg_exec_info *e, void *ctx), void *ctx);
/* Execs seen since start-up (or since fork, in a child): listed or folded. */
size_t sg_exec_count(void);
/* The destroyed execs folded out of the list: returns how many, and fills
 * *sum with their summed counters (SG_EXEC_COUNTS_LIST and reasons; the
 * other fields are zero). */
unsigned long sg_exec_folded(sg_exec_info *sum);

/* Fork handlers (see the header comment). */
void sg_stats_atfork_prepare(void);
void sg_stats_atfork_parent(void);
void sg_stats_atfork_child(void);

/* Forgets every exec and zeroes every counter (tests). Entries go to the
 * free list (never freed), so a pointer another module still holds stays
 * valid memory. */
void sg_stats_reset(void);

#endif /* SG_STATS_H */
