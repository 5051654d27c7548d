/*
 * core/stats.c: counters and the exec table (see stats.h for the locks).
 *
 * Live execs are found through a uthash keyed by the CUgraphExec handle; a
 * destroyed exec leaves the hash (the driver may hand the same handle out
 * again) but stays on the creation-order list so the report still shows it.
 */
#include "stats.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* With HASH_NONFATAL_OOM (set by the Makefile) uthash reports a failed
 * allocation here instead of exiting; exec_oom is guarded by exec_lock. */
static int exec_oom;
#define uthash_nonfatal_oom(elt) (exec_oom = 1)
#include "hash.h"

#define SG_REASON_NAME_(s, n) n,
const char *const sg_reason_names[SG_REASON_COUNT] = { SG_REASON_LIST(SG_REASON_NAME_) };

sg_totals sg_total;

void sg_total_max(unsigned long *field, unsigned long v)
{
    unsigned long cur = __atomic_load_n(field, __ATOMIC_RELAXED);
    while (v > cur && !__atomic_compare_exchange_n(field, &cur, v, 1, __ATOMIC_RELAXED,
                                                   __ATOMIC_RELAXED)) {
    }
}

static const char *const *hook_names;
static sg_hook_counter *hook_counters;
static size_t hook_n;

typedef struct sg_exec {
    CUgraphExec exec;        /* key while live */
    sg_exec_info info;
    struct sg_exec *next;    /* creation order */
    UT_hash_handle hh;
} sg_exec;

/* exec_lock guards live_execs, all_head, all_tail, exec_n, next_id. */
static pthread_mutex_t exec_lock = PTHREAD_MUTEX_INITIALIZER;
static sg_exec *live_execs;
static sg_exec *all_head, *all_tail;
static size_t exec_n;
static unsigned long next_id = 1;

void sg_stats_set_hooks(const char *const *names, sg_hook_counter *counters, size_t n)
{
    hook_names = names;
    hook_counters = counters;
    hook_n = n;
}

size_t sg_stats_hook_count(void) { return hook_n; }
const char *sg_stats_hook_name(size_t i) { return i < hook_n ? hook_names[i] : NULL; }

sg_hook_counter sg_stats_hook(size_t i)
{
    sg_hook_counter c = { 0, 0 };
    if (i < hook_n) {
        c.calls = __atomic_load_n(&hook_counters[i].calls, __ATOMIC_RELAXED);
        c.resolved = __atomic_load_n(&hook_counters[i].resolved, __ATOMIC_RELAXED);
    }
    return c;
}

sg_totals sg_stats_totals(void)
{
    sg_totals t;
#define SG_TOTAL_LOAD_(n) t.n = __atomic_load_n(&sg_total.n, __ATOMIC_RELAXED);
    SG_TOTALS_LIST(SG_TOTAL_LOAD_)
    return t;
}

/* Adds a live exec; exec_lock held. Returns NULL if out of memory. */
static sg_exec *exec_add_locked(CUgraphExec exec)
{
    sg_exec *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->exec = exec;
    e->info.id = next_id++;
    exec_oom = 0;
    HASH_ADD_PTR(live_execs, exec, e);
    if (exec_oom) {
        free(e);
        return NULL;
    }
    if (all_tail) all_tail->next = e; else all_head = e;
    all_tail = e;
    exec_n++;
    return e;
}

/* Finds a live exec, adding it if unknown; exec_lock held. */
static sg_exec *exec_get_locked(CUgraphExec exec)
{
    sg_exec *e;
    HASH_FIND_PTR(live_execs, &exec, e);
    return e ? e : exec_add_locked(exec);
}

int sg_exec_created(CUgraphExec exec, size_t nodes, int nodes_known)
{
    sg_exec *e;
    pthread_mutex_lock(&exec_lock);
    HASH_FIND_PTR(live_execs, &exec, e);
    if (e) {  /* a handle we never saw destroyed came back: retire the old entry */
        HASH_DEL(live_execs, e);
        e->info.destroyed = 1;
    }
    e = exec_add_locked(exec);
    if (e) {
        e->info.nodes = nodes;
        e->info.nodes_known = nodes_known;
    }
    pthread_mutex_unlock(&exec_lock);
    return e ? 0 : -1;
}

struct sg_exec *sg_exec_entry(CUgraphExec exec)
{
    pthread_mutex_lock(&exec_lock);
    sg_exec *e = exec_get_locked(exec);
    pthread_mutex_unlock(&exec_lock);
    return e;
}

void sg_exec_entry_launched(struct sg_exec *e)
{
    __atomic_fetch_add(&e->info.launches, 1, __ATOMIC_RELAXED);
}

int sg_exec_launched(CUgraphExec exec)
{
    sg_exec *e = sg_exec_entry(exec);
    if (e) sg_exec_entry_launched(e);
    return e ? 0 : -1;
}

int sg_exec_update(CUgraphExec exec, int forwarded, sg_reason reason)
{
    pthread_mutex_lock(&exec_lock);
    sg_exec *e = exec_get_locked(exec);
    if (e) {
        e->info.updates_seen++;
        if (forwarded) {
            e->info.updates_forwarded++;
            e->info.reasons[reason]++;
        } else {
            e->info.updates_skipped++;
        }
    }
    pthread_mutex_unlock(&exec_lock);
    return e ? 0 : -1;
}

int sg_exec_would_skip(CUgraphExec exec)
{
    pthread_mutex_lock(&exec_lock);
    sg_exec *e = exec_get_locked(exec);
    if (e) e->info.would_skip++;
    pthread_mutex_unlock(&exec_lock);
    return e ? 0 : -1;
}

unsigned long sg_exec_would_skip_total(void)
{
    unsigned long n = 0;
    pthread_mutex_lock(&exec_lock);
    for (sg_exec *e = all_head; e; e = e->next) n += e->info.would_skip;
    pthread_mutex_unlock(&exec_lock);
    return n;
}

/* The counter of ev in i. */
static unsigned long *event_field(sg_exec_info *i, sg_exec_ev ev)
{
    switch (ev) {
    case SG_EXEC_EV_VARIANT: return &i->variants;
    case SG_EXEC_EV_DEMOTION: return &i->demotions;
    case SG_EXEC_EV_LIB_UPDATE: return &i->library_updates;
    case SG_EXEC_EV_WOULD_SKIP_PROFILED: break;
    }
    return &i->would_skip_profiled;
}

int sg_exec_event(CUgraphExec exec, sg_exec_ev ev)
{
    pthread_mutex_lock(&exec_lock);
    sg_exec *e = exec_get_locked(exec);
    if (e) (*event_field(&e->info, ev))++;
    pthread_mutex_unlock(&exec_lock);
    return e ? 0 : -1;
}

unsigned long sg_exec_event_total(sg_exec_ev ev)
{
    unsigned long n = 0;
    pthread_mutex_lock(&exec_lock);
    for (sg_exec *e = all_head; e; e = e->next) n += *event_field(&e->info, ev);
    pthread_mutex_unlock(&exec_lock);
    return n;
}

unsigned long sg_exec_id(CUgraphExec exec)
{
    sg_exec *e;
    pthread_mutex_lock(&exec_lock);
    HASH_FIND_PTR(live_execs, &exec, e);
    unsigned long id = e ? e->info.id : 0;
    pthread_mutex_unlock(&exec_lock);
    return id;
}

int sg_exec_set_profile(CUgraphExec exec, const sg_exec_profile *p)
{
    pthread_mutex_lock(&exec_lock);
    sg_exec *e = exec_get_locked(exec);
    if (e) e->info.profile = *p;
    pthread_mutex_unlock(&exec_lock);
    return e ? 0 : -1;
}

void sg_exec_destroyed(CUgraphExec exec)
{
    sg_exec *e;
    pthread_mutex_lock(&exec_lock);
    HASH_FIND_PTR(live_execs, &exec, e);
    if (e) {
        HASH_DEL(live_execs, e);
        e->info.destroyed = 1;
    }
    pthread_mutex_unlock(&exec_lock);
}

void sg_exec_foreach(void (*fn)(const sg_exec_info *e, void *ctx), void *ctx)
{
    pthread_mutex_lock(&exec_lock);
    for (sg_exec *e = all_head; e; e = e->next) {
        sg_exec_info info = e->info;
        info.launches = __atomic_load_n(&e->info.launches, __ATOMIC_RELAXED);
        fn(&info, ctx);
    }
    pthread_mutex_unlock(&exec_lock);
}

size_t sg_exec_count(void)
{
    pthread_mutex_lock(&exec_lock);
    size_t n = exec_n;
    pthread_mutex_unlock(&exec_lock);
    return n;
}

void sg_stats_reset(void)
{
    pthread_mutex_lock(&exec_lock);
    HASH_CLEAR(hh, live_execs);
    while (all_head) {
        sg_exec *next = all_head->next;
        free(all_head);
        all_head = next;
    }
    all_tail = NULL;
    exec_n = 0;
    next_id = 1;
    pthread_mutex_unlock(&exec_lock);
    memset(&sg_total, 0, sizeof sg_total);
    for (size_t i = 0; i < hook_n; i++) memset(&hook_counters[i], 0, sizeof hook_counters[i]);
}

void sg_stats_atfork_prepare(void) { pthread_mutex_lock(&exec_lock); }
void sg_stats_atfork_parent(void) { pthread_mutex_unlock(&exec_lock); }

void sg_stats_atfork_child(void)
{
    pthread_mutex_unlock(&exec_lock);
    sg_stats_reset();
}
