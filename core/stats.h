/*
 * core/stats.h: what the library counts. Per-hook counters, totals, the
 * per-exec table, and the reasons an update was forwarded to the driver.
 *
 * Locks:
 *   - hook counters and totals are atomics (relaxed); no lock.
 *   - the exec table (live execs, a uthash keyed by CUgraphExec) and the list
 *     of every exec ever seen (creation order, also destroyed ones) are
 *     guarded by one mutex, exec_lock in stats.c. Launch and update
 *     accounting take it for one lookup and a few increments.
 *   - fork: sg_stats_atfork_{prepare,parent,child} hold exec_lock across
 *     fork so the child never inherits it locked; the child starts from
 *     zero counters and an empty exec table.
 */
#ifndef SG_STATS_H
#define SG_STATS_H

#include <cuda.h>
#include <stddef.h>

/* Why an update went to the driver: X(ENUM_SUFFIX, "report name"). */
#define SG_REASON_LIST(X)                                                     \
    X(TOPOLOGY, "topology")                                                   \
    X(SCALAR_CHANGED, "scalar_changed")                                       \
    X(POINTER_NOT_TRACKED, "pointer_not_tracked")                             \
    X(UNSUPPORTED_NODE, "unsupported_node")                                   \
    X(POLICY, "policy")
#define SG_REASON_ITEM_(s, n) SG_REASON_##s,
typedef enum { SG_REASON_LIST(SG_REASON_ITEM_) SG_REASON_COUNT } sg_reason;
extern const char *const sg_reason_names[SG_REASON_COUNT];

typedef struct sg_hook_counter {
    unsigned long calls;     /* atomic: calls of the wrapper */
    unsigned long resolved;  /* atomic: wrapper handed out by dlsym or cuGetProcAddress */
} sg_hook_counter;

#define SG_TOTALS_LIST(X)                                                     \
    X(launches) X(updates_seen) X(updates_forwarded) X(updates_skipped)       \
    X(bytes_requested) X(bytes_mapped)
#define SG_TOTALS_FIELD_(n) unsigned long n;
typedef struct sg_totals { SG_TOTALS_LIST(SG_TOTALS_FIELD_) } sg_totals;

/* A snapshot of one exec, for the report. */
typedef struct sg_exec_info {
    unsigned long id;          /* 1, 2, ... in instantiation order */
    size_t nodes;              /* node count at instantiation (0 if unknown) */
    int nodes_known;
    int destroyed;
    unsigned long launches, updates_seen, updates_forwarded, updates_skipped;
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
sg_totals sg_stats_totals(void);

/* Exec table. Each returns 0, or -1 if out of memory (nothing changed). */
int sg_exec_created(CUgraphExec exec, size_t nodes, int nodes_known);
/* Unknown execs (created before the library saw them) are added on first use. */
int sg_exec_launched(CUgraphExec exec);
int sg_exec_update(CUgraphExec exec, int forwarded, sg_reason reason);
void sg_exec_destroyed(CUgraphExec exec);

/* Calls fn for every exec ever seen, in creation order, under exec_lock
 * (fn must not call back into the exec table). */
void sg_exec_foreach(void (*fn)(const sg_exec_info *e, void *ctx), void *ctx);
size_t sg_exec_count(void);

/* Fork handlers (see the header comment). */
void sg_stats_atfork_prepare(void);
void sg_stats_atfork_parent(void);
void sg_stats_atfork_child(void);

/* Frees the exec table and zeroes every counter (tests). */
void sg_stats_reset(void);

#endif /* SG_STATS_H */
