/*
 * emu_stream.c: streams and their worker threads, the in-flight work
 * registry, submitting work (capture or queue), host functions and stream
 * callbacks, the fault handler of the emulated CUDA driver. Events are in
 * emu_event.c, copies, memsets and stream memory operations in emu_copy.c,
 * stream-ordered allocation in emu_pool.c, modules and kernel launches in
 * emu_module.c; what they share with this file is in emu_stream.h.
 *
 * Streams. Every stream (user streams, the legacy default stream of each
 * context, the per-thread default stream of each (thread, context)) owns a
 * worker thread that runs its queue of emu_work in order. `submitted` counts
 * the work ever queued, `completed` the work finished; the work with sequence
 * number N is done once completed >= N, which is also what an event is: a
 * (stream, seq) pair. Cross-stream ordering (the legacy stream's implicit
 * synchronization, cuStreamWaitEvent) is a "wait" work item queued in front
 * of the work: it blocks the worker, never the caller, until the streams it
 * depends on reached the recorded sequence numbers. Dependencies only ever
 * name work already submitted, so they cannot form a cycle.
 *
 * In-flight registry. Work is "in flight" from enqueue until it completed: it
 * stays at the head of its stream's queue while it runs. emu_inflight_check
 * scans the queues of every stream for ranges overlapping the range being
 * freed, unmapped or remapped.
 *
 * Locks, in the order they nest (never take an earlier one while holding a
 * later one):
 *   emu_ev_lock        the fields of every event (struct CUevent_st); event
 *                  reference counts are atomics.
 *   ctx->lock      (emu_core.c) ctx->legacy; held here only to create the
 *                  legacy stream.
 *   streams_lock   the list of live streams (`all_streams`, emu_stream.next)
 *                  and streams_cond; this is the in-flight registry's lock.
 *   s->lock        one stream's queue (head/tail, emu_work.next, seq),
 *                  submitted/completed/exiting/worker_alive, s->cond.
 * Stream refcounts and the capture pointer are atomics. Nothing here calls
 * into emu_mem.c or the graph files while holding one of these locks, so those
 * parts may call emu_inflight_check and emu_stream_capture under their own
 * locks. No lock is held while work runs.
 */
#include "emu_stream.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>

/* ------------------------------------------------------------------------
 * Types and globals (struct emu_stream, stream_slot: emu_stream.h)
 * ---------------------------------------------------------------------- */
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t streams_cond = PTHREAD_COND_INITIALIZER;
static emu_stream *all_streams;

/* What the current thread runs, for the fault handler and device checks. */
static __thread emu_stream *tls_stream;
__thread const char *volatile emu_tls_kernel;

static pthread_once_t stream_once = PTHREAD_ONCE_INIT;
static pthread_key_t pt_key;        /* set on threads owning per-thread streams */
static struct sigaction old_segv, old_bus;

void *emu_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p) {
        emu_log("out of host memory");
        abort();
    }
    return p;
}

/* ------------------------------------------------------------------------
 * Fault handler: a kernel that touches unmapped memory is an illegal-address
 * fault. Signal dispositions are process-wide; the handler only claims faults
 * raised while a kernel runs on this thread and hands any other fault back to
 * the disposition that was there before (by restoring it and returning, so
 * the faulting instruction runs again under it).
 * ---------------------------------------------------------------------- */
static size_t put_str(char *buf, size_t at, size_t cap, const char *s)
{
    while (*s && at + 1 < cap) buf[at++] = *s++;
    return at;
}

static size_t put_hex(char *buf, size_t at, size_t cap, uintptr_t v)
{
    char tmp[2 + 2 * sizeof v];
    int n = 0;
    do { tmp[n++] = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
    at = put_str(buf, at, cap, "0x");
    while (n && at + 1 < cap) buf[at++] = tmp[--n];
    return at;
}

static void fault_handler(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    const char *k = emu_tls_kernel;
    if (!k) {
        sigaction(sig, sig == SIGBUS ? &old_bus : &old_segv, NULL);
        return;
    }
    char buf[512];
    size_t n = 0;
    n = put_str(buf, n, sizeof buf, "cudaemu: illegal address fault in kernel ");
    n = put_str(buf, n, sizeof buf, k);
    n = put_str(buf, n, sizeof buf, " on stream ");
    n = put_hex(buf, n, sizeof buf, (uintptr_t)tls_stream);
    n = put_str(buf, n, sizeof buf, " (address ");
    n = put_hex(buf, n, sizeof buf, (uintptr_t)si->si_addr);
    n = put_str(buf, n, sizeof buf, ")\n");
    ssize_t wr = write(2, buf, n);
    (void)wr;
    abort();
}

/* ------------------------------------------------------------------------
 * Stream lifetime
 * ---------------------------------------------------------------------- */
void emu_stream_ref(emu_stream *s) { __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED); }

void emu_stream_unref(emu_stream *s)
{
    if (__atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->attr_lock);
    pthread_cond_destroy(&s->cond);
    free(s);
}

void emu_work_release(emu_work *w)
{
    free(w->ranges);
    w->ranges = NULL;
    if (w->release) w->release(w);
    else free(w);
}

static void *stream_worker(void *arg);

static void start_worker(emu_stream *s)
{
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    s->worker_alive = 1;
    if (pthread_create(&t, &a, stream_worker, s) != 0) {
        emu_log("cannot start a stream worker thread: %s", strerror(errno));
        abort();
    }
    pthread_attr_destroy(&a);
}

/* fork(): keep every lock consistent, then give the child's streams new
 * workers (the child has only the forking thread). Work that was running at
 * the fork runs again from its start in the child. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&emu_ev_lock);
    pthread_mutex_lock(&streams_lock);
    for (emu_stream *s = all_streams; s; s = s->next) pthread_mutex_lock(&s->lock);
    emu_leaf_locks_fork(0);
}

static void fork_parent(void)
{
    emu_leaf_locks_fork(1);
    for (emu_stream *s = all_streams; s; s = s->next) pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&streams_lock);
    pthread_mutex_unlock(&emu_ev_lock);
}

/* Work items a worker was releasing when the process forked: in the child
 * nobody finishes that release (it may be half done, so it is not done
 * again); they are kept here, reachable, rather than lost. */
static emu_work **fork_orphans;
static size_t n_fork_orphans;

static void keep_orphan(emu_work *w)
{
    emu_work **grown = realloc(fork_orphans, (n_fork_orphans + 1) * sizeof *grown);
    if (!grown) return;
    fork_orphans = grown;
    fork_orphans[n_fork_orphans++] = w;
}

static void fork_child(void)
{
    emu_leaf_locks_fork(2);
    pthread_cond_init(&streams_cond, NULL);
    for (emu_stream *s = all_streams; s; s = s->next) {
        pthread_cond_init(&s->cond, NULL);
        if (s->retiring) keep_orphan(s->retiring);
        s->retiring = NULL;
        if (s->worker_alive) start_worker(s);   /* inherits the lost worker's reference */
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&streams_lock);
    pthread_mutex_unlock(&emu_ev_lock);
}

static void stream_retire(emu_stream *s);
static void stream_destroy(emu_stream *s, int del);

/* Thread exit: retire the per-thread streams the thread owned. */
static void pt_destructor(void *v)
{
    (void)v;
    pthread_t self = pthread_self();
    for (;;) {
        emu_stream *found = NULL;
        pthread_mutex_lock(&streams_lock);
        for (emu_stream *s = all_streams; s; s = s->next) {
            pthread_mutex_lock(&s->lock);
            int mine = s->kind == S_PER_THREAD && !s->exiting && pthread_equal(s->owner, self);
            pthread_mutex_unlock(&s->lock);
            if (mine) { found = s; break; }
        }
        pthread_mutex_unlock(&streams_lock);
        if (!found) break;
        stream_retire(found);
    }
}

static void stream_init_once(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fault_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    pthread_key_create(&pt_key, pt_destructor);
}

/* The fork handlers are registered when the driver is loaded, not at its
 * first stream: prepare handlers run in the reverse order of registration,
 * so the interposer, which calls the driver under its own locks and whose
 * constructor runs after the driver's when the program links the driver,
 * takes its locks first at fork (the order of its own calls) and the
 * driver's leaf locks come last. Registered at the first stream, the
 * driver's prepare ran first and held its handle lock while the
 * interposer's prepare waited for a lock another thread may hold across a
 * driver call: a lock-order inversion (ThreadSanitizer, test_lifecycle.sh
 * fork). A driver loaded by dlopen after the interposer (the CUDA runtime
 * does that) still registers after it. */
__attribute__((constructor)) static void stream_fork_handlers(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* 1 if s belongs to a green context that was destroyed (its struct may hold
 * a newer green context now: then its id differs). */
static int stream_green_gone(const emu_stream *s)
{
    return s->green && (__atomic_load_n(&s->green->destroyed, __ATOMIC_ACQUIRE) ||
                        __atomic_load_n(&s->green->id, __ATOMIC_RELAXED) != s->green_id);
}

/* Creates a stream and its worker; the caller gets one reference. */
static emu_stream *stream_new(CUcontext ctx, enum stream_kind kind, unsigned flags, int priority,
                              struct CUgreenCtx_st *green)
{
    pthread_once(&stream_once, stream_init_once);
    emu_stream *s = emu_xcalloc(1, sizeof *s);
    s->ctx = ctx;
    s->green = green;
    s->green_id = green ? green->id : 0;
    s->device = ctx->device;
    s->kind = kind;
    s->flags = flags;
    s->priority = priority;
    pthread_mutex_init(&s->attr_lock, NULL);
    s->sync = CU_SYNC_POLICY_AUTO;
    s->owner = pthread_self();
    s->refs = 2;                    /* the caller's and the worker's */
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    pthread_mutex_lock(&streams_lock);
    pthread_mutex_lock(&s->lock);
    start_worker(s);
    s->next = all_streams;
    all_streams = s;
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&streams_lock);
    if (kind == S_PER_THREAD) pthread_setspecific(pt_key, s);
    return s;
}

/* No more work for s: the worker finishes what is queued, then exits. Drops
 * the caller's reference. */
static void stream_retire(emu_stream *s)
{
    pthread_mutex_lock(&s->lock);
    s->exiting = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    emu_stream_unref(s);
}

static void *stream_worker(void *arg)
{
    emu_stream *s = arg;
    tls_stream = s;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->exiting) pthread_cond_wait(&s->cond, &s->lock);
        emu_work *w = s->head;
        if (!w) break;
        pthread_mutex_unlock(&s->lock);
        /* A context with a sticky error runs no more work: it completes
         * at once (cuLaunchHostFunc: "the function will not be called in
         * the event of an error in the CUDA context"); stream callbacks run,
         * given the error. */
        if (w->runs_when_sticky || emu_sticky_now(s->ctx) == CUDA_SUCCESS) w->run(w, s);
        pthread_mutex_lock(&s->lock);
        s->head = w->next;
        if (!s->head) s->tail = NULL;
        if (w->complete) w->complete(w);
        s->completed = w->seq;
        s->retiring = w;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        emu_work_release(w);
        pthread_mutex_lock(&s->lock);
        s->retiring = NULL;
    }
    s->worker_alive = 0;
    pthread_mutex_unlock(&s->lock);

    pthread_mutex_lock(&streams_lock);
    for (emu_stream **pp = &all_streams; *pp; pp = &(*pp)->next) {
        if (*pp == s) { *pp = s->next; break; }
    }
    pthread_cond_broadcast(&streams_cond);
    pthread_mutex_unlock(&streams_lock);
    emu_stream_unref(s);
    return NULL;
}

/* Blocks until s completed the work numbered seq. */
void emu_stream_wait_seq(emu_stream *s, uint64_t seq)
{
    pthread_mutex_lock(&s->lock);
    while (s->completed < seq) pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

int emu_stream_done(emu_stream *s, uint64_t seq)
{
    pthread_mutex_lock(&s->lock);
    int done = s->completed >= seq;
    pthread_mutex_unlock(&s->lock);
    return done;
}

/* ------------------------------------------------------------------------
 * Resolving stream handles
 * ---------------------------------------------------------------------- */
/* ctx: as current to the thread (a converted context: its green context's default stream). */
static emu_stream *legacy_of(CUcontext ctx)
{
    pthread_mutex_lock(&ctx->lock);
    if (!ctx->legacy && ctx->green) ctx->legacy = stream_new(ctx->owner, S_LEGACY, 0, 0, ctx->green);
    if (!ctx->legacy) ctx->legacy = stream_new(ctx, S_LEGACY, 0, 0, NULL);
    emu_stream *s = ctx->legacy;
    pthread_mutex_unlock(&ctx->lock);
    return s;
}

static emu_stream *per_thread_of(CUcontext ctx)
{
    pthread_t self = pthread_self();
    emu_stream *found = NULL;
    pthread_mutex_lock(&streams_lock);
    for (emu_stream *s = all_streams; s && !found; s = s->next) {
        if (s->kind != S_PER_THREAD || s->ctx != ctx || !pthread_equal(s->owner, self)) continue;
        pthread_mutex_lock(&s->lock);
        if (!s->exiting) found = s;
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&streams_lock);
    /* Only this thread creates its own per-thread streams: no race here. */
    return found ? found : stream_new(ctx, S_PER_THREAD, 0, 0, NULL);
}

CUresult emu_stream_get(CUstream h, int per_thread, emu_stream **out)
{
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        CUcontext ctx;
        CUresult r = emu_ctx_require(&ctx);
        if (r != CUDA_SUCCESS) return r;
        int pt = h == CU_STREAM_PER_THREAD || (h == NULL && per_thread);
        CUcontext raw = emu_ctx_current_raw();
        /* a green context current: the NULL and legacy handles are its default stream; the
         * per-thread stream is refused (cuStreamGetCtx_v2: "specifying CU_STREAM_PER_THREAD ...
         * will return CUDA_ERROR_INVALID_HANDLE if a green context is current") */
        if (raw->green && pt) return CUDA_ERROR_INVALID_HANDLE;
        *out = pt ? per_thread_of(ctx) : legacy_of(raw);
        return CUDA_SUCCESS;
    }
    if (!emu_handle_ok(h, EMU_K_STREAM)) return CUDA_ERROR_INVALID_HANDLE;
    emu_stream *s = ((stream_slot *)(void *)h)->s;
    /* cuGreenCtxDestroy: "Once the green context is destroyed, any subsequent API calls
     * involving these streams (including cuStreamDestroy) will return
     * CUDA_ERROR_CONTEXT_IS_DESTROYED." */
    if (stream_green_gone(s)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = s;
    return CUDA_SUCCESS;
}

CUcontext emu_stream_ctx(emu_stream *s) { return s->ctx; }

int emu_stream_blocking(emu_stream *s)
{
    return s->kind != S_LEGACY && !(s->flags & CU_STREAM_NON_BLOCKING);
}

/* Any use of the legacy stream while a blocking stream of its context
 * captures is invalid (emu_capture_check_ctx). */
CUresult emu_stream_legacy_check(emu_stream *s)
{
    if (s->kind != S_LEGACY) return CUDA_SUCCESS;
    return emu_capture_check_ctx(s->ctx, 1, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
}

struct emu_capture *emu_stream_capture(emu_stream *s)
{
    return __atomic_load_n(&s->capture, __ATOMIC_ACQUIRE);
}

void emu_stream_set_capture(emu_stream *s, struct emu_capture *c)
{
    __atomic_store_n(&s->capture, c, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------------
 * Work and enqueueing
 * ---------------------------------------------------------------------- */
emu_work *emu_work_new(size_t size, const char *what, void (*run)(emu_work *, emu_stream *))
{
    if (size < sizeof(emu_work)) size = sizeof(emu_work);
    emu_work *w = emu_xcalloc(1, size);
    w->what = what;
    w->run = run;
    return w;
}

static void touch_add(emu_work *w, CUdeviceptr base, size_t size)
{
    if (!size) return;
    for (size_t i = 0; i < w->nranges; i++) {
        if (w->ranges[i].base == base && w->ranges[i].size == size) return;
    }
    if (w->nranges == w->cap_ranges) {
        size_t cap = w->cap_ranges ? 2 * w->cap_ranges : 4;
        emu_range *r = realloc(w->ranges, cap * sizeof *r);
        if (!r) {
            emu_log("out of host memory");
            abort();
        }
        w->ranges = r;
        w->cap_ranges = cap;
    }
    w->ranges[w->nranges++] = (emu_range){ base, size };
}

void emu_work_touch_ptr(emu_work *w, CUdeviceptr p)
{
    emu_range r;
    if (emu_mem_find(p, &r)) touch_add(w, r.base, r.size);
}

/* [p, p+n) itself covers every range lying inside it for overlap tests; the
 * ranges holding its two ends are added whole. */
void emu_work_touch_range(emu_work *w, CUdeviceptr p, size_t n)
{
    if (!n) return;
    touch_add(w, p, n);
    emu_work_touch_ptr(w, p);
    emu_work_touch_ptr(w, p + n - 1);
}

void emu_work_touch_words(emu_work *w, const void *bytes, size_t n)
{
    const unsigned char *b = bytes;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        CUdeviceptr v;
        memcpy(&v, b + i, 8);
        if (v) emu_work_touch_ptr(w, v);
    }
}

typedef struct wait_work {
    emu_work w;
    size_t n;
    dep deps[];
} wait_work;

static void wait_run(emu_work *w, emu_stream *s)
{
    (void)s;
    wait_work *ww = (wait_work *)w;
    for (size_t i = 0; i < ww->n; i++) emu_stream_wait_seq(ww->deps[i].s, ww->deps[i].seq);
}

static void wait_release(emu_work *w)
{
    wait_work *ww = (wait_work *)w;
    for (size_t i = 0; i < ww->n; i++) emu_stream_unref(ww->deps[i].s);
    free(ww);
}

/* Appends w[0..n) to s in one piece; seq[i] (if seq) gets w[i]'s number.
 * Takes ownership of the works. */
static CUresult stream_push_many(emu_stream *s, emu_work **w, size_t n, uint64_t *seq)
{
    pthread_mutex_lock(&s->lock);
    if (s->exiting) {
        pthread_mutex_unlock(&s->lock);
        for (size_t i = 0; i < n; i++) emu_work_release(w[i]);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    for (size_t i = 0; i < n; i++) {
        w[i]->next = NULL;
        w[i]->seq = ++s->submitted;
        if (seq) seq[i] = w[i]->seq;
        if (s->tail) s->tail->next = w[i];
        else s->head = w[i];
        s->tail = w[i];
    }
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return CUDA_SUCCESS;
}

static CUresult stream_push(emu_stream *s, emu_work *w, uint64_t *seq)
{
    return stream_push_many(s, &w, 1, seq);
}

emu_work *emu_stream_wait_new(dep *deps, size_t n, const char *what)
{
    wait_work *ww = (wait_work *)emu_work_new(sizeof *ww + n * sizeof *deps, what, wait_run);
    ww->w.release = wait_release;
    ww->n = n;
    memcpy(ww->deps, deps, n * sizeof *deps);
    return &ww->w;
}

/* Queues a wait for the given (referenced) dependencies on s; consumes the
 * references. */
CUresult emu_stream_push_wait(emu_stream *s, dep *deps, size_t n, const char *what)
{
    if (!n) return CUDA_SUCCESS;
    return stream_push(s, emu_stream_wait_new(deps, n, what), NULL);
}

/* The legacy stream's implicit synchronization: work on the legacy stream
 * waits for every blocking stream of its context, work on a blocking stream
 * waits for the legacy stream. Returns referenced dependencies (malloc'd). */
static size_t implicit_deps(emu_stream *s, dep **out)
{
    size_t n = 0, cap = 0;
    dep *d = NULL;
    *out = NULL;
    if (s->kind != S_LEGACY && (s->flags & CU_STREAM_NON_BLOCKING)) return 0;
    pthread_mutex_lock(&streams_lock);
    for (emu_stream *t = all_streams; t; t = t->next) {
        if (t == s || t->ctx != s->ctx) continue;
        int wanted = s->kind == S_LEGACY ? t->kind != S_LEGACY && !(t->flags & CU_STREAM_NON_BLOCKING)
                                         : t->kind == S_LEGACY;
        if (!wanted) continue;
        pthread_mutex_lock(&t->lock);
        uint64_t seq = t->submitted;
        int pending = t->completed < seq;
        pthread_mutex_unlock(&t->lock);
        if (!pending) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 4;
            dep *nd = realloc(d, cap * sizeof *d);
            if (!nd) {
                emu_log("out of host memory");
                abort();
            }
            d = nd;
        }
        emu_stream_ref(t);
        d[n++] = (dep){ t, seq };
    }
    pthread_mutex_unlock(&streams_lock);
    *out = d;
    return n;
}

CUresult emu_stream_enqueue_many(emu_stream *s, emu_work **w, size_t n, uint64_t *seq)
{
    dep *deps;
    size_t nd = implicit_deps(s, &deps);
    CUresult r = emu_stream_push_wait(s, deps, nd, w[0]->what);
    free(deps);
    if (r != CUDA_SUCCESS) {
        for (size_t i = 0; i < n; i++) emu_work_release(w[i]);
        return r;
    }
    return stream_push_many(s, w, n, seq);
}

/* emu_stream_enqueue_seq without the legacy stream's capture check (for callers that
 * made it before taking emu_ev_lock: the capture lock is never taken under it). */
CUresult emu_stream_enqueue_unchecked(emu_stream *s, emu_work *w, uint64_t *seq)
{
    return emu_stream_enqueue_many(s, &w, 1, seq);
}

CUresult emu_stream_enqueue_seq(emu_stream *s, emu_work *w, uint64_t *seq)
{
    CUresult r = emu_stream_legacy_check(s);
    if (r != CUDA_SUCCESS) {
        emu_work_release(w);
        return r;
    }
    return emu_stream_enqueue_unchecked(s, w, seq);
}

CUresult emu_stream_enqueue(emu_stream *s, emu_work *w)
{
    return emu_stream_enqueue_seq(s, w, NULL);
}

void emu_stream_wait_idle(emu_stream *s)
{
    pthread_mutex_lock(&s->lock);
    uint64_t seq = s->submitted;
    while (s->completed < seq) pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

/* Snapshot of the streams of ctx (all if NULL), each referenced. */
static size_t streams_of(CUcontext ctx, emu_stream ***out)
{
    size_t n = 0;
    pthread_mutex_lock(&streams_lock);
    for (emu_stream *t = all_streams; t; t = t->next) n += !ctx || t->ctx == ctx;
    emu_stream **v = emu_xcalloc(n ? n : 1, sizeof *v);
    n = 0;
    for (emu_stream *t = all_streams; t; t = t->next) {
        if (ctx && t->ctx != ctx) continue;
        emu_stream_ref(t);
        v[n++] = t;
    }
    pthread_mutex_unlock(&streams_lock);
    *out = v;
    return n;
}

emu_stream *emu_green_default(struct CUgreenCtx_st *g) { return legacy_of(g->ctx); }

size_t emu_streams_of_green(struct CUgreenCtx_st *g, emu_stream ***out)
{
    size_t n = 0;
    pthread_mutex_lock(&streams_lock);
    for (emu_stream *t = all_streams; t; t = t->next) n += t->green == g && t->green_id == g->id;
    emu_stream **v = emu_xcalloc(n ? n : 1, sizeof *v);
    n = 0;
    for (emu_stream *t = all_streams; t; t = t->next) {
        if (t->green != g || t->green_id != g->id) continue;
        pthread_mutex_lock(&t->lock);
        int live = !t->exiting;
        pthread_mutex_unlock(&t->lock);
        if (!live) continue;
        emu_stream_ref(t);
        v[n++] = t;
    }
    pthread_mutex_unlock(&streams_lock);
    *out = v;
    return n;
}

void emu_streams_release(emu_stream **v, size_t n)
{
    for (size_t i = 0; i < n; i++) emu_stream_unref(v[i]);
    free(v);
}

/* cuGreenCtxDestroy: the green context's streams finish what they were given (the
 * emulator waits, as cuCtxDestroy does) and leave their captures as a destroyed stream does
 * (a capture one began ends, its graph destroyed; one it joined is invalidated: "the API
 * will invalidate all active captures on these streams", CUDA 13.1); its
 * default stream retires; user streams stay (their handles answer
 * CUDA_ERROR_CONTEXT_IS_DESTROYED; the primary context's teardown ends them). */
void emu_green_detach(struct CUgreenCtx_st *g)
{
    emu_stream **v;
    size_t n = emu_streams_of_green(g, &v);
    for (size_t i = 0; i < n; i++) {
        emu_capture_stream_gone(v[i]);   /* as its destruction: a capture it began ends */
        emu_stream_wait_idle(v[i]);
    }
    emu_streams_release(v, n);
    pthread_mutex_lock(&g->ctx->lock);
    emu_stream *legacy = g->ctx->legacy;
    g->ctx->legacy = NULL;
    pthread_mutex_unlock(&g->ctx->lock);
    if (legacy) stream_retire(legacy);
}

void emu_streams_sync_all(CUcontext ctx)
{
    emu_stream **v;
    size_t n = streams_of(ctx, &v);
    for (size_t i = 0; i < n; i++) {
        emu_stream_wait_idle(v[i]);
        emu_stream_unref(v[i]);
    }
    free(v);
}

void emu_streams_ctx_destroyed(CUcontext ctx)
{
    pthread_mutex_lock(&ctx->lock);
    ctx->legacy = NULL;
    pthread_mutex_unlock(&ctx->lock);

    emu_stream **v;
    size_t n = streams_of(ctx, &v);
    for (size_t i = 0; i < n; i++) {
        emu_stream *s = v[i];
        emu_stream_wait_idle(s);
        pthread_mutex_lock(&s->lock);
        int retired = s->exiting;
        pthread_mutex_unlock(&s->lock);
        /* a live green context's default stream (cuDevicePrimaryCtxReset while it lives):
         * the green context forgets it, and makes another at its next use */
        if (!retired && s->kind == S_LEGACY && s->green) {
            pthread_mutex_lock(&s->green->ctx->lock);
            if (s->green->ctx->legacy == s) s->green->ctx->legacy = NULL;
            else retired = 1;                   /* cuGreenCtxDestroy retired it */
            pthread_mutex_unlock(&s->green->ctx->lock);
        }
        /* The owner's reference: the handle for user streams, ctx->legacy for
         * the legacy stream, the owning thread for per-thread streams. */
        if (!retired && s->kind == S_USER) stream_destroy(s, 0);
        else if (!retired) stream_retire(s);
        emu_stream_unref(v[i]);
    }
    free(v);

    /* Workers hold nothing of ctx once gone: wait for them. */
    pthread_mutex_lock(&streams_lock);
    for (;;) {
        int left = 0;
        for (emu_stream *t = all_streams; t; t = t->next) left += t->ctx == ctx;
        if (!left) break;
        pthread_cond_wait(&streams_cond, &streams_lock);
    }
    pthread_mutex_unlock(&streams_lock);
}

int emu_inflight_check(const char *call, CUdeviceptr base, size_t size)
{
    const char *what = NULL;
    const void *where = NULL;
    emu_range hit = { 0, 0 };
    if (!size) return 0;
    pthread_mutex_lock(&streams_lock);
    for (emu_stream *s = all_streams; s && !what; s = s->next) {
        pthread_mutex_lock(&s->lock);
        for (emu_work *w = s->head; w && !what; w = w->next) {
            for (size_t i = 0; i < w->nranges; i++) {
                const emu_range *r = &w->ranges[i];
                if (r->base < base + size && base < r->base + r->size) {
                    what = w->what;
                    where = s;
                    hit = *r;
                    break;
                }
            }
        }
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&streams_lock);
    if (!what) return 0;
    emu_violation(call, "range [0x%llx, 0x%llx) still in use by %s on stream %p (it touches [0x%llx, 0x%llx))",
                  (unsigned long long)base, (unsigned long long)(base + size), what, where,
                  (unsigned long long)hit.base, (unsigned long long)(hit.base + hit.size));
    return 1;
}

/* The device a worker runs for (copies and kernels check accessibility). */
int emu_worker_device(void)
{
    return tls_stream ? tls_stream->device : 0;
}

CUcontext emu_worker_ctx(void) { return tls_stream ? tls_stream->ctx : NULL; }

/* ------------------------------------------------------------------------
 * Submitting operations: capture or queue, and wait for synchronous ones
 * ---------------------------------------------------------------------- */

/* Runs or records one stream operation. `w` is the work to queue (owned:
 * released if not queued); `cap` what to record if s is capturing (NULL: the
 * operation cannot be captured here). sync: the call returns once the work is
 * done, and is checked as capture-unsafe. */
CUresult emu_stream_submit(const char *call, emu_stream *s, int sync, const emu_capture_op *cap, emu_work *w)
{
    CUresult r;
    if (sync && (r = emu_capture_check_unsafe(call)) != CUDA_SUCCESS) {
        emu_work_release(w);
        return r;
    }
    if (emu_stream_capture(s)) {
        emu_work_release(w);
        if (sync || !cap) {
            emu_capture_invalidate(s);
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
        return emu_capture_add(s, cap);
    }
    uint64_t seq;
    r = emu_stream_enqueue_seq(s, w, &seq);
    if (r != CUDA_SUCCESS || sync != 1) return r;   /* 2: a synchronous call returning early */
    emu_stream_wait_seq(s, seq);
    return emu_sticky_now(s->ctx);
}

/* ------------------------------------------------------------------------
 * Streams: exported
 * ---------------------------------------------------------------------- */
/* Priorities clamp to the device's range [-5 (greatest), 0 (least)], at
 * creation as when set as an attribute. */
static int priority_clamp(int p) { return p > 0 ? 0 : p < -5 ? -5 : p; }

/* A user stream of ctx (a primary context) and, if green is not NULL, of that green context. */
static void stream_make(CUstream *ph, CUcontext ctx, unsigned flags, int priority, struct CUgreenCtx_st *green)
{
    emu_stream *s = stream_new(ctx, S_USER, flags, priority_clamp(priority), green);
    stream_slot *slot = emu_handle_mem_get(EMU_K_STREAM, sizeof *slot);
    slot->s = s;
    s->handle = slot;
    emu_handle_add_ctx(slot, EMU_K_STREAM, ctx);
    *ph = (CUstream)(void *)slot;
}

/* cuGreenCtxStreamCreate: "CU_STREAM_NON_BLOCKING: This must be specified." */
CUresult emu_green_stream_create(struct CUgreenCtx_st *g, unsigned flags, int priority, CUstream *out)
{
    if (!out || flags != CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
    stream_make(out, g->ctx->owner, flags, priority, g);
    return CUDA_SUCCESS;
}

static CUresult stream_create(CUstream *ph, unsigned flags, int priority)
{
    CUcontext ctx;
    if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_ctx_require(&ctx);
    if (r != CUDA_SUCCESS) return r;
    /* created with a green context's converted context current: a stream of that green
     * context (cuStreamGetGreenCtx) */
    stream_make(ph, ctx, flags, priority, emu_ctx_current_raw()->green);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    EMU_ENTRY_INIT();
    return stream_create(phStream, Flags, 0);
}

EMU_EXPORT CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    EMU_ENTRY_INIT();
    return stream_create(phStream, flags, priority);
}

/* Ends a user stream's handle (del: destroyed by the program; else ended by
 * its context's teardown), takes it out of any capture, and retires it: its
 * queued work still runs. */
static void stream_destroy(emu_stream *s, int del)
{
    stream_slot *slot = s->handle;
    s->handle = NULL;
    if (del) emu_handle_del(slot);
    else emu_handle_end(slot);
    emu_handle_mem_put(EMU_K_STREAM, slot);
    emu_capture_stream_gone(s);
    stream_retire(s);
}

EMU_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream)
{
    EMU_ENTRY_INIT();
    emu_stream *s;
    if (!hStream || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD) return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = emu_stream_get(hStream, 0, &s);
    if (r != CUDA_SUCCESS) return r;
    stream_destroy(s, 1);
    return CUDA_SUCCESS;
}

static CUresult stream_sync(const char *call, CUstream h, int pt)
{
    emu_stream *s;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    if (emu_stream_capture(s)) {
        emu_capture_invalidate(s);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if ((r = emu_capture_check_unsafe(call)) != CUDA_SUCCESS) return r;
    if ((r = emu_stream_legacy_check(s)) != CUDA_SUCCESS) return r;
    emu_stream_wait_idle(s);
    emu_mem_pools_sync();
    return emu_sticky_now(s->ctx);
}

EMU_EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
    EMU_ENTRY_INIT();
    return stream_sync(__func__, hStream, 0);
}

EMU_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    EMU_ENTRY_INIT();
    return stream_sync(__func__, hStream, 1);
}

static CUresult stream_query(CUstream h, int pt)
{
    emu_stream *s;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    if (emu_stream_capture(s)) {
        emu_capture_invalidate(s);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if ((r = emu_stream_legacy_check(s)) != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&s->lock);
    int idle = s->completed == s->submitted;
    pthread_mutex_unlock(&s->lock);
    return idle ? emu_sticky_now(s->ctx) : CUDA_ERROR_NOT_READY;
}

EMU_EXPORT CUresult cuStreamQuery(CUstream hStream)
{
    EMU_ENTRY_INIT();
    return stream_query(hStream, 0);
}

EMU_EXPORT CUresult cuStreamQuery_ptsz(CUstream hStream)
{
    EMU_ENTRY_INIT();
    return stream_query(hStream, 1);
}

static CUresult stream_get_ctx(CUstream h, int pt, CUcontext *pctx)
{
    emu_stream *s;
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    /* "If the stream was created via the API cuGreenCtxStreamCreate, the returned context is
     * equivalent to the one returned by cuCtxFromGreenCtx()" (so too a stream made with the
     * converted context current, and its default stream) */
    *pctx = s->green ? s->green->ctx : s->ctx;
    return CUDA_SUCCESS;
}

/* CUDA 12.5: "If the stream is associated with a green context, the API returns the green
 * context in pGreenCtx and the primary context of the associated device in pCtx." */
static CUresult stream_get_ctx_v2(CUstream h, int pt, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    emu_stream *s;
    if (!pCtx || !pGreenCtx) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    *pCtx = s->ctx;
    *pGreenCtx = s->green;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    EMU_ENTRY_INIT();
    return stream_get_ctx_v2(hStream, 0, pCtx, pGreenCtx);
}

EMU_EXPORT CUresult cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    EMU_ENTRY_INIT();
    return stream_get_ctx_v2(hStream, 1, pCtx, pGreenCtx);
}

EMU_EXPORT CUresult cuStreamGetGreenCtx(CUstream hStream, CUgreenCtx *phCtx)
{
    EMU_ENTRY_INIT();
    emu_stream *s;
    if (!phCtx) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_stream_get(hStream, 0, &s);
    if (r != CUDA_SUCCESS) return r;
    *phCtx = s->green;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    EMU_ENTRY_INIT();
    return stream_get_ctx(hStream, 0, pctx);
}

EMU_EXPORT CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{
    EMU_ENTRY_INIT();
    return stream_get_ctx(hStream, 1, pctx);
}

static CUresult stream_get_flags(CUstream h, int pt, unsigned *flags)
{
    emu_stream *s;
    if (!flags) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    *flags = s->flags;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
    EMU_ENTRY_INIT();
    return stream_get_flags(hStream, 0, flags);
}

EMU_EXPORT CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags)
{
    EMU_ENTRY_INIT();
    return stream_get_flags(hStream, 1, flags);
}

static CUresult stream_get_priority(CUstream h, int pt, int *priority)
{
    emu_stream *s;
    if (!priority) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&s->attr_lock);
    *priority = s->priority;
    pthread_mutex_unlock(&s->attr_lock);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuStreamGetPriority(CUstream hStream, int *priority)
{
    EMU_ENTRY_INIT();
    return stream_get_priority(hStream, 0, priority);
}

EMU_EXPORT CUresult cuStreamGetPriority_ptsz(CUstream hStream, int *priority)
{
    EMU_ENTRY_INIT();
    return stream_get_priority(hStream, 1, priority);
}

/* ------------------------------------------------------------ attributes */

/* Stream attributes (cuStreamSetAttribute, cuStreamGetAttribute,
 * cuStreamCopyAttributes): the five CUDA documents as valid for streams.
 * They apply to work submitted afterwards; kernels captured on the stream
 * take its access policy window, priority and memory synchronization domain
 * and map as node attributes (emu_stream_node_attrs). Priority is the
 * stream's own, clamped as at creation. Other ids: CUDA_ERROR_INVALID_VALUE. */
static const CUstreamAttrID stream_attr_ids[] = {
    CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY,
    CU_LAUNCH_ATTRIBUTE_PRIORITY, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP,
    CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN,
};
#define N_STREAM_ATTRS (sizeof stream_attr_ids / sizeof stream_attr_ids[0])

static int stream_attr_id(CUstreamAttrID id)
{
    for (size_t i = 0; i < N_STREAM_ATTRS; i++)
        if (stream_attr_ids[i] == id) return 1;
    return 0;
}

/* Reads (set 0) or writes (set 1) attribute id of s through *v (attr_lock held). */
static void stream_attr_io(emu_stream *s, CUstreamAttrID id, CUstreamAttrValue *v, int set)
{
#define IO_(field, member) (set ? (void)(s->field = v->member) : (void)(v->member = s->field))
    switch ((int)id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: IO_(apw, accessPolicyWindow); break;
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY: IO_(sync, syncPolicy); break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP: IO_(domain_map, memSyncDomainMap); break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN: IO_(domain, memSyncDomain); break;
    default:
        if (set) s->priority = priority_clamp(v->priority);
        else v->priority = s->priority;
        break;
    }
#undef IO_
}

static CUresult stream_attr(CUstream h, int pt, CUstreamAttrID id, CUstreamAttrValue *v, int set)
{
    emu_stream *s;
    if (!v || !stream_attr_id(id)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    if (set && id == CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY &&
        (v->syncPolicy < CU_SYNC_POLICY_AUTO || v->syncPolicy > CU_SYNC_POLICY_BLOCKING_SYNC))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&s->attr_lock);
    stream_attr_io(s, id, v, set);
    pthread_mutex_unlock(&s->attr_lock);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuStreamSetAttribute(CUstream hStream, CUstreamAttrID attr, const CUstreamAttrValue *value)
{
    EMU_ENTRY_INIT();
    CUstreamAttrValue v;
    if (value) v = *value;
    return stream_attr(hStream, 0, attr, value ? &v : NULL, 1);
}

EMU_EXPORT CUresult cuStreamSetAttribute_ptsz(CUstream hStream, CUstreamAttrID attr, const CUstreamAttrValue *value)
{
    EMU_ENTRY_INIT();
    CUstreamAttrValue v;
    if (value) v = *value;
    return stream_attr(hStream, 1, attr, value ? &v : NULL, 1);
}

EMU_EXPORT CUresult cuStreamGetAttribute(CUstream hStream, CUstreamAttrID attr, CUstreamAttrValue *value_out)
{
    EMU_ENTRY_INIT();
    return stream_attr(hStream, 0, attr, value_out, 0);
}

EMU_EXPORT CUresult cuStreamGetAttribute_ptsz(CUstream hStream, CUstreamAttrID attr, CUstreamAttrValue *value_out)
{
    EMU_ENTRY_INIT();
    return stream_attr(hStream, 1, attr, value_out, 0);
}

/* Both streams must belong to one context. */
static CUresult stream_copy_attrs(CUstream dst, CUstream src, int pt)
{
    emu_stream *d, *s;
    CUresult r = emu_stream_get(dst, pt, &d);
    if (r == CUDA_SUCCESS) r = emu_stream_get(src, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    if (d->ctx != s->ctx) return CUDA_ERROR_INVALID_VALUE;
    CUstreamAttrValue v[N_STREAM_ATTRS];
    memset(v, 0, sizeof v);
    pthread_mutex_lock(&s->attr_lock);             /* one at a time: leaf locks */
    for (size_t i = 0; i < N_STREAM_ATTRS; i++) stream_attr_io(s, stream_attr_ids[i], &v[i], 0);
    pthread_mutex_unlock(&s->attr_lock);
    pthread_mutex_lock(&d->attr_lock);
    for (size_t i = 0; i < N_STREAM_ATTRS; i++) stream_attr_io(d, stream_attr_ids[i], &v[i], 1);
    pthread_mutex_unlock(&d->attr_lock);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuStreamCopyAttributes(CUstream dst, CUstream src)
{
    EMU_ENTRY_INIT();
    return stream_copy_attrs(dst, src, 0);
}

EMU_EXPORT CUresult cuStreamCopyAttributes_ptsz(CUstream dst, CUstream src)
{
    EMU_ENTRY_INIT();
    return stream_copy_attrs(dst, src, 1);
}

void emu_stream_node_attrs(emu_stream *s, CUkernelNodeAttrValue *attr)
{
    pthread_mutex_lock(&s->attr_lock);
    attr[CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW].accessPolicyWindow = s->apw;
    attr[CU_LAUNCH_ATTRIBUTE_PRIORITY].priority = s->priority;
    attr[CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP].memSyncDomainMap = s->domain_map;
    attr[CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN].memSyncDomain = s->domain;
    pthread_mutex_unlock(&s->attr_lock);
}

/* Host functions and callbacks run on the worker, in stream order. */
typedef struct host_work {
    emu_work w;
    CUhostFn fn;                    /* cuLaunchHostFunc */
    CUstreamCallback cb;            /* cuStreamAddCallback */
    CUstream handle;                /* what the callback is given */
    void *data;
} host_work;

static void host_run(emu_work *w, emu_stream *s)
{
    host_work *hw = (host_work *)w;
    if (hw->fn) hw->fn(hw->data);
    else hw->cb(hw->handle, emu_sticky_now(s->ctx), hw->data);
}

static CUresult launch_host(const char *call, CUstream h, int pt, CUhostFn fn, CUstreamCallback cb,
                            void *data)
{
    emu_stream *s;
    if (!fn && !cb) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    host_work *hw = (host_work *)emu_work_new(sizeof *hw, call, host_run);
    hw->fn = fn;
    hw->cb = cb;
    hw->w.runs_when_sticky = cb != NULL;   /* "status: CUDA_SUCCESS or any persistent error" */
    hw->handle = h;
    hw->data = data;
    CUDA_HOST_NODE_PARAMS hp = { .fn = fn, .userData = data };
    emu_capture_op op = { .type = CU_GRAPH_NODE_TYPE_HOST, .host = &hp };
    /* Callbacks cannot be captured (the driver says so); host functions can. */
    return emu_stream_submit(call, s, 0, fn ? &op : NULL, &hw->w);
}

EMU_EXPORT CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    EMU_ENTRY_INIT();
    return launch_host(__func__, hStream, 0, fn, NULL, userData);
}

EMU_EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    EMU_ENTRY_INIT();
    return launch_host(__func__, hStream, 1, fn, NULL, userData);
}

static CUresult add_callback(const char *call, CUstream h, int pt, CUstreamCallback cb, void *data,
                             unsigned flags)
{
    if (flags != 0 || !cb) return CUDA_ERROR_INVALID_VALUE;
    return launch_host(call, h, pt, NULL, cb, data);
}

EMU_EXPORT CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData,
                                        unsigned int flags)
{
    EMU_ENTRY_INIT();
    return add_callback(__func__, hStream, 0, callback, userData, flags);
}

EMU_EXPORT CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void *userData,
                                             unsigned int flags)
{
    EMU_ENTRY_INIT();
    return add_callback(__func__, hStream, 1, callback, userData, flags);
}

