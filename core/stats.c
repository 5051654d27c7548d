/*
 * core/stats.c: counters and the exec table (see stats.h for the locks).
 *
 * Live execs are found through a uthash keyed by the CUgraphExec handle; a
 * destroyed exec leaves the hash (the driver may hand the same handle out
 * again). It stays on the id-ordered list if it is among the SG_EXEC_KEEP
 * most interesting destroyed ones; otherwise its counters are added to the
 * folded sum and its entry goes to the free list for the next exec (never
 * freed: see stats.h).
 */
#include "stats.h"

#include <pthread.h>
#include <stddef.h>
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
    struct sg_exec *prev, *next;   /* listed: id order; on the free list: next only */
    UT_hash_handle hh;
} sg_exec;

/* exec_lock guards everything below (see stats.h). */
static pthread_mutex_t exec_lock = PTHREAD_MUTEX_INITIALIZER;
static sg_exec *live_execs;            /* hash of live execs */
static sg_exec *list_head, *list_tail; /* listed: live and kept, in id order */
static sg_exec *kept[SG_EXEC_KEEP];    /* destroyed execs still listed */
static size_t kept_n;
static sg_exec *free_list;             /* folded entries, reused by new execs */
static sg_exec_info folded;            /* summed counters of the folded execs */
static unsigned long folded_n;
static size_t exec_n;                  /* execs seen (listed + folded) */
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

static void list_unlink(sg_exec *e)
{
    if (e->prev) e->prev->next = e->next; else list_head = e->next;
    if (e->next) e->next->prev = e->prev; else list_tail = e->prev;
    e->prev = e->next = NULL;
}

/* Adds a live exec; exec_lock held. Returns NULL if out of memory. */
static sg_exec *exec_add_locked(CUgraphExec exec)
{
    sg_exec *e = free_list;
    if (e) {
        free_list = e->next;
        memset(e, 0, sizeof *e);
    } else if (!(e = calloc(1, sizeof *e))) {
        return NULL;
    }
    e->exec = exec;
    e->info.id = next_id++;
    exec_oom = 0;
    HASH_ADD_PTR(live_execs, exec, e);
    if (exec_oom) {
        e->next = free_list;
        free_list = e;
        return NULL;
    }
    e->prev = list_tail;
    if (list_tail) list_tail->next = e; else list_head = e;
    list_tail = e;
    exec_n++;
    return e;
}

/* Zeroes the counters of i (SG_EXEC_COUNTS_LIST and reasons). */
static void counts_clear(sg_exec_info *i)
{
#define SG_COUNT_CLEAR_(n) __atomic_store_n(&i->n, 0, __ATOMIC_RELAXED);
    SG_EXEC_COUNTS_LIST(SG_COUNT_CLEAR_)
    memset(i->reasons, 0, sizeof i->reasons);
}

/* Adds the counters of i to sum. */
static void counts_add(sg_exec_info *sum, const sg_exec_info *i)
{
#define SG_COUNT_ADD_(n) sum->n += __atomic_load_n(&i->n, __ATOMIC_RELAXED);
    SG_EXEC_COUNTS_LIST(SG_COUNT_ADD_)
    for (int r = 0; r < SG_REASON_COUNT; r++) sum->reasons[r] += i->reasons[r];
}

/* Nonzero if a is more interesting than b (the order of stats.h). */
static int more_interesting(const sg_exec_info *a, const sg_exec_info *b)
{
    unsigned long ka[] = { a->updates_forwarded, a->variants + a->demotions + a->library_updates,
                           a->would_skip + a->would_skip_profiled, a->updates_seen,
                           __atomic_load_n(&a->launches, __ATOMIC_RELAXED) };
    unsigned long kb[] = { b->updates_forwarded, b->variants + b->demotions + b->library_updates,
                           b->would_skip + b->would_skip_profiled, b->updates_seen,
                           __atomic_load_n(&b->launches, __ATOMIC_RELAXED) };
    for (size_t k = 0; k < sizeof ka / sizeof ka[0]; k++)
        if (ka[k] != kb[k]) return ka[k] > kb[k];
    return 0;
}

/* Folds a listed, non-live entry into the sum and recycles it; exec_lock held. */
static void fold_locked(sg_exec *e)
{
    counts_add(&folded, &e->info);
    folded_n++;
    list_unlink(e);
    e->next = free_list;
    free_list = e;
}

/* A live exec was destroyed (or its handle came back without a destroy):
 * it leaves the hash, and stays listed if it is among the SG_EXEC_KEEP most
 * interesting destroyed ones (else it, or the least interesting kept one,
 * is folded). exec_lock held. */
static void retire_locked(sg_exec *e)
{
    HASH_DEL(live_execs, e);
    e->info.destroyed = 1;
    if (kept_n < SG_EXEC_KEEP) {
        kept[kept_n++] = e;
        return;
    }
    size_t least = 0;
    for (size_t k = 1; k < kept_n; k++)
        if (more_interesting(&kept[least]->info, &kept[k]->info)) least = k;
    sg_exec *victim = e;
    if (more_interesting(&e->info, &kept[least]->info)) {
        victim = kept[least];
        kept[least] = e;
    }
    fold_locked(victim);
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
    if (e) retire_locked(e);  /* a handle we never saw destroyed came back */
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
    pthread_mutex_lock(&exec_lock);
    unsigned long n = folded.would_skip;
    for (sg_exec *e = list_head; e; e = e->next) n += e->info.would_skip;
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
    pthread_mutex_lock(&exec_lock);
    unsigned long n = *event_field(&folded, ev);
    for (sg_exec *e = list_head; e; e = e->next) n += *event_field(&e->info, ev);
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
    if (e) retire_locked(e);
    pthread_mutex_unlock(&exec_lock);
}

/* e's counters (exec_lock held); launches, which a launch counts without the
 * lock, read atomically and not copied with the rest: a plain copy of it
 * raced with another thread's launch (the exit report while a thread kept
 * launching: ThreadSanitizer, tests/e2e/adv_exit.c busy). */
static void info_copy(sg_exec_info *out, const sg_exec *e)
{
    const size_t at = offsetof(sg_exec_info, launches), after = at + sizeof out->launches;
    memcpy(out, &e->info, at);
    out->launches = __atomic_load_n(&e->info.launches, __ATOMIC_RELAXED);
    memcpy((char *)out + after, (const char *)&e->info + after, sizeof *out - after);
}

void sg_exec_foreach(void (*fn)(const sg_exec_info *e, void *ctx), void *ctx)
{
    pthread_mutex_lock(&exec_lock);
    for (sg_exec *e = list_head; e; e = e->next) {
        sg_exec_info info;
        info_copy(&info, e);
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

unsigned long sg_exec_folded(sg_exec_info *sum)
{
    pthread_mutex_lock(&exec_lock);
    *sum = folded;
    unsigned long n = folded_n;
    pthread_mutex_unlock(&exec_lock);
    return n;
}

/* Zeroes the totals and the hook counters. */
static void totals_clear(void)
{
    memset(&sg_total, 0, sizeof sg_total);
    for (size_t i = 0; i < hook_n; i++) memset(&hook_counters[i], 0, sizeof hook_counters[i]);
}

/* Drops the kept destroyed execs and the folded sum; exec_lock held. The
 * entries go to the free list. */
static void forget_destroyed_locked(void)
{
    for (size_t k = 0; k < kept_n; k++) {
        list_unlink(kept[k]);
        kept[k]->next = free_list;
        free_list = kept[k];
    }
    kept_n = 0;
    memset(&folded, 0, sizeof folded);
    folded_n = 0;
}

void sg_stats_reset(void)
{
    pthread_mutex_lock(&exec_lock);
    forget_destroyed_locked();
    HASH_CLEAR(hh, live_execs);
    while (list_head) {
        sg_exec *e = list_head;
        list_unlink(e);
        e->next = free_list;
        free_list = e;
    }
    exec_n = 0;
    next_id = 1;
    pthread_mutex_unlock(&exec_lock);
    totals_clear();
}

void sg_stats_atfork_prepare(void) { pthread_mutex_lock(&exec_lock); }
void sg_stats_atfork_parent(void) { pthread_mutex_unlock(&exec_lock); }

/* exec_lock is held (taken by the prepare handler before fork). The live
 * execs stay listed under their ids, with zero counts. */
void sg_stats_atfork_child(void)
{
    forget_destroyed_locked();
    exec_n = 0;
    for (sg_exec *e = list_head; e; e = e->next) {
        counts_clear(&e->info);
        exec_n++;
    }
    pthread_mutex_unlock(&exec_lock);
    totals_clear();
}
