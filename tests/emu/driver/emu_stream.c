/*
 * emu_stream.c: streams, events, stream memory operations, copies and
 * memsets (synchronous and asynchronous), stream-ordered allocation, modules,
 * kernels, and the in-flight work registry of the emulated CUDA driver.
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
 *   ev_lock        the fields of every event (struct CUevent_st); event
 *                  reference counts are atomics.
 *   ctx->lock      (emu_core.c) ctx->legacy; held here only to create the
 *                  legacy stream.
 *   streams_lock   the list of live streams (`all_streams`, emu_stream.next)
 *                  and streams_cond; this is the in-flight registry's lock.
 *   s->lock        one stream's queue (head/tail, emu_work.next, seq),
 *                  submitted/completed/exiting/worker_alive, s->cond.
 * Stream refcounts and the capture pointer are atomics. Nothing here calls
 * into emu_mem.c or emu_graph.c while holding one of these locks, so those
 * parts may call emu_inflight_check and emu_stream_capture under their own
 * locks. No lock is held while work runs.
 *
 * Module handles (CUmod_st, CUfunc_st, emu_internal.h) are immutable once
 * published, but for a function's attributes (emu_library.c); the handle
 * registry (emu_core.c) says whether they are alive. Modules made from CUDA
 * images (fat binaries, cubins, PTX) belong to a library (emu_library.c),
 * which finds their functions. Stream slots, events, modules and functions
 * come from the handle pools (emu_core.c), so freed handle values are reused
 * last-freed first, as a driver's are.
 */
#include "emu_internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>

/* ------------------------------------------------------------------------
 * Types
 * ---------------------------------------------------------------------- */
enum stream_kind { S_USER, S_LEGACY, S_PER_THREAD };

struct emu_stream {
    CUcontext ctx;
    int device;
    enum stream_kind kind;
    unsigned flags;                 /* CU_STREAM_* given at creation */
    int priority;
    pthread_t owner;                /* S_PER_THREAD: the thread it belongs to */
    int refs;                       /* atomic: handle/owner, worker, events, deps */
    struct emu_capture *capture;    /* atomic, owned by emu_graph.c */
    struct stream_slot *handle;     /* S_USER: its CUstream until destroyed, else NULL */

    pthread_mutex_t lock;
    pthread_cond_t cond;            /* new work, completion, exit */
    emu_work *head, *tail;          /* queued work; head is running when busy */
    uint64_t submitted, completed;
    int exiting;                    /* no more work; worker exits once drained */
    int worker_alive;

    emu_stream *next;               /* all_streams, streams_lock */
};

/* The value of a CUstream: a slot naming the stream. A destroyed stream's
 * slot goes back to the handle pool at once (the next cuStreamCreate gets the
 * same value, as with the driver) while the stream itself finishes its queued
 * work and is freed by its worker. */
typedef struct stream_slot { emu_stream *s; } stream_slot;

struct CUmemPoolHandle_st { int device; };

/* An event with its reference count: the handle holds one, every queued
 * record marker holds one. */
typedef struct emu_event {
    struct CUevent_st pub;
    int refs;                       /* atomic */
} emu_event;

typedef struct dep { emu_stream *s; uint64_t seq; } dep;

static pthread_mutex_t ev_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t streams_cond = PTHREAD_COND_INITIALIZER;
static emu_stream *all_streams;

/* What the current thread runs, for the fault handler and device checks. */
static __thread emu_stream *tls_stream;
static __thread const char *volatile tls_kernel;

static pthread_once_t stream_once = PTHREAD_ONCE_INIT;
static pthread_key_t pt_key;        /* set on threads owning per-thread streams */
static struct sigaction old_segv, old_bus;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *xcalloc(size_t n, size_t size)
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
    const char *k = tls_kernel;
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
static void stream_ref(emu_stream *s) { __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED); }

static void stream_unref(emu_stream *s)
{
    if (__atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s);
}

static void work_release(emu_work *w)
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
    pthread_mutex_lock(&ev_lock);
    pthread_mutex_lock(&streams_lock);
    for (emu_stream *s = all_streams; s; s = s->next) pthread_mutex_lock(&s->lock);
}

static void fork_parent(void)
{
    for (emu_stream *s = all_streams; s; s = s->next) pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&streams_lock);
    pthread_mutex_unlock(&ev_lock);
}

static void fork_child(void)
{
    pthread_cond_init(&streams_cond, NULL);
    for (emu_stream *s = all_streams; s; s = s->next) {
        pthread_cond_init(&s->cond, NULL);
        if (s->worker_alive) start_worker(s);   /* inherits the lost worker's reference */
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&streams_lock);
    pthread_mutex_unlock(&ev_lock);
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
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* Creates a stream and its worker; the caller gets one reference. */
static emu_stream *stream_new(CUcontext ctx, enum stream_kind kind, unsigned flags, int priority)
{
    pthread_once(&stream_once, stream_init_once);
    emu_stream *s = xcalloc(1, sizeof *s);
    s->ctx = ctx;
    s->device = ctx->device;
    s->kind = kind;
    s->flags = flags;
    s->priority = priority;
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
    stream_unref(s);
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
        w->run(w, s);
        pthread_mutex_lock(&s->lock);
        s->head = w->next;
        if (!s->head) s->tail = NULL;
        pthread_mutex_unlock(&s->lock);
        /* Released before it counts as completed: what a waiter sees done
         * holds nothing any more (an event record's reference included). */
        uint64_t seq = w->seq;
        work_release(w);
        pthread_mutex_lock(&s->lock);
        s->completed = seq;
        pthread_cond_broadcast(&s->cond);
    }
    s->worker_alive = 0;
    pthread_mutex_unlock(&s->lock);

    pthread_mutex_lock(&streams_lock);
    for (emu_stream **pp = &all_streams; *pp; pp = &(*pp)->next) {
        if (*pp == s) { *pp = s->next; break; }
    }
    pthread_cond_broadcast(&streams_cond);
    pthread_mutex_unlock(&streams_lock);
    stream_unref(s);
    return NULL;
}

/* Blocks until s completed the work numbered seq. */
static void stream_wait_seq(emu_stream *s, uint64_t seq)
{
    pthread_mutex_lock(&s->lock);
    while (s->completed < seq) pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

static int stream_done(emu_stream *s, uint64_t seq)
{
    pthread_mutex_lock(&s->lock);
    int done = s->completed >= seq;
    pthread_mutex_unlock(&s->lock);
    return done;
}

/* ------------------------------------------------------------------------
 * Resolving stream handles
 * ---------------------------------------------------------------------- */
static emu_stream *legacy_of(CUcontext ctx)
{
    pthread_mutex_lock(&ctx->lock);
    if (!ctx->legacy) ctx->legacy = stream_new(ctx, S_LEGACY, 0, 0);
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
    return found ? found : stream_new(ctx, S_PER_THREAD, 0, 0);
}

CUresult emu_stream_get(CUstream h, int per_thread, emu_stream **out)
{
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        CUcontext ctx;
        CUresult r = emu_ctx_require(&ctx);
        if (r != CUDA_SUCCESS) return r;
        int pt = h == CU_STREAM_PER_THREAD || (h == NULL && per_thread);
        *out = pt ? per_thread_of(ctx) : legacy_of(ctx);
        return CUDA_SUCCESS;
    }
    if (!emu_handle_ok(h, EMU_K_STREAM)) return CUDA_ERROR_INVALID_HANDLE;
    *out = ((stream_slot *)(void *)h)->s;
    return CUDA_SUCCESS;
}

CUcontext emu_stream_ctx(emu_stream *s) { return s->ctx; }

int emu_stream_blocking(emu_stream *s)
{
    return s->kind != S_LEGACY && !(s->flags & CU_STREAM_NON_BLOCKING);
}

/* Any use of the legacy stream while a blocking stream of its context
 * captures is invalid (emu_capture_check_ctx). */
static CUresult legacy_check(emu_stream *s)
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

static void capture_invalidate(emu_stream *s)
{
    emu_capture_invalidate(s);
}

/* ------------------------------------------------------------------------
 * Work and enqueueing
 * ---------------------------------------------------------------------- */
emu_work *emu_work_new(size_t size, const char *what, void (*run)(emu_work *, emu_stream *))
{
    if (size < sizeof(emu_work)) size = sizeof(emu_work);
    emu_work *w = xcalloc(1, size);
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
    for (size_t i = 0; i < ww->n; i++) stream_wait_seq(ww->deps[i].s, ww->deps[i].seq);
}

static void wait_release(emu_work *w)
{
    wait_work *ww = (wait_work *)w;
    for (size_t i = 0; i < ww->n; i++) stream_unref(ww->deps[i].s);
    free(ww);
}

/* Appends w to s; *seq gets its number. Takes ownership of w. */
static CUresult stream_push(emu_stream *s, emu_work *w, uint64_t *seq)
{
    pthread_mutex_lock(&s->lock);
    if (s->exiting) {
        pthread_mutex_unlock(&s->lock);
        work_release(w);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    w->next = NULL;
    w->seq = ++s->submitted;
    if (seq) *seq = w->seq;
    if (s->tail) s->tail->next = w;
    else s->head = w;
    s->tail = w;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return CUDA_SUCCESS;
}

/* Queues a wait for the given (referenced) dependencies on s; consumes the
 * references. */
static CUresult push_wait(emu_stream *s, dep *deps, size_t n, const char *what)
{
    if (!n) return CUDA_SUCCESS;
    wait_work *ww = (wait_work *)emu_work_new(sizeof *ww + n * sizeof *deps, what, wait_run);
    ww->w.release = wait_release;
    ww->n = n;
    memcpy(ww->deps, deps, n * sizeof *deps);
    return stream_push(s, &ww->w, NULL);
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
        stream_ref(t);
        d[n++] = (dep){ t, seq };
    }
    pthread_mutex_unlock(&streams_lock);
    *out = d;
    return n;
}

/* enqueue_seq without the legacy stream's capture check (for callers that
 * made it before taking ev_lock: the capture lock is never taken under it). */
static CUresult enqueue_unchecked(emu_stream *s, emu_work *w, uint64_t *seq)
{
    dep *deps;
    size_t n = implicit_deps(s, &deps);
    CUresult r = push_wait(s, deps, n, w->what);
    free(deps);
    if (r != CUDA_SUCCESS) {
        work_release(w);
        return r;
    }
    return stream_push(s, w, seq);
}

static CUresult enqueue_seq(emu_stream *s, emu_work *w, uint64_t *seq)
{
    CUresult r = legacy_check(s);
    if (r != CUDA_SUCCESS) {
        work_release(w);
        return r;
    }
    return enqueue_unchecked(s, w, seq);
}

CUresult emu_stream_enqueue(emu_stream *s, emu_work *w)
{
    return enqueue_seq(s, w, NULL);
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
    emu_stream **v = xcalloc(n ? n : 1, sizeof *v);
    n = 0;
    for (emu_stream *t = all_streams; t; t = t->next) {
        if (ctx && t->ctx != ctx) continue;
        stream_ref(t);
        v[n++] = t;
    }
    pthread_mutex_unlock(&streams_lock);
    *out = v;
    return n;
}

void emu_streams_sync_all(CUcontext ctx)
{
    emu_stream **v;
    size_t n = streams_of(ctx, &v);
    for (size_t i = 0; i < n; i++) {
        emu_stream_wait_idle(v[i]);
        stream_unref(v[i]);
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
        /* The owner's reference: the handle for user streams, ctx->legacy for
         * the legacy stream, the owning thread for per-thread streams. */
        if (!retired && s->kind == S_USER) stream_destroy(s, 0);
        else if (!retired) stream_retire(s);
        stream_unref(v[i]);
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
static int current_device(void)
{
    return tls_stream ? tls_stream->device : 0;
}

/* ------------------------------------------------------------------------
 * Submitting operations: capture or queue, and wait for synchronous ones
 * ---------------------------------------------------------------------- */

/* Runs or records one stream operation. `w` is the work to queue (owned:
 * released if not queued); `cap` what to record if s is capturing (NULL: the
 * operation cannot be captured here). sync: the call returns once the work is
 * done, and is checked as capture-unsafe. */
static CUresult submit(const char *call, emu_stream *s, int sync, const emu_capture_op *cap, emu_work *w)
{
    CUresult r;
    if (sync && (r = emu_capture_check_unsafe(call)) != CUDA_SUCCESS) {
        work_release(w);
        return r;
    }
    if (emu_stream_capture(s)) {
        work_release(w);
        if (sync || !cap) {
            capture_invalidate(s);
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
        return emu_capture_add(s, cap);
    }
    uint64_t seq;
    r = enqueue_seq(s, w, &seq);
    if (r == CUDA_SUCCESS && sync) stream_wait_seq(s, seq);
    return r;
}

/* ------------------------------------------------------------------------
 * Streams: exported
 * ---------------------------------------------------------------------- */
static CUresult stream_create(CUstream *ph, unsigned flags, int priority)
{
    CUcontext ctx;
    if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_ctx_require(&ctx);
    if (r != CUDA_SUCCESS) return r;
    /* Priorities clamp to the device's range [-5 (greatest), 0 (least)]. */
    if (priority > 0) priority = 0;
    if (priority < -5) priority = -5;
    emu_stream *s = stream_new(ctx, S_USER, flags, priority);
    stream_slot *slot = emu_handle_mem_get(EMU_K_STREAM, sizeof *slot);
    slot->s = s;
    s->handle = slot;
    emu_handle_add_ctx(slot, EMU_K_STREAM, ctx);
    *ph = (CUstream)(void *)slot;
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
    if (!hStream || !emu_handle_ok(hStream, EMU_K_STREAM)) return CUDA_ERROR_INVALID_HANDLE;
    stream_destroy(((stream_slot *)(void *)hStream)->s, 1);
    return CUDA_SUCCESS;
}

static CUresult stream_sync(const char *call, CUstream h, int pt)
{
    emu_stream *s;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    if (emu_stream_capture(s)) {
        capture_invalidate(s);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if ((r = emu_capture_check_unsafe(call)) != CUDA_SUCCESS) return r;
    if ((r = legacy_check(s)) != CUDA_SUCCESS) return r;
    emu_stream_wait_idle(s);
    emu_mem_pools_sync();
    return CUDA_SUCCESS;
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
        capture_invalidate(s);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if ((r = legacy_check(s)) != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&s->lock);
    int idle = s->completed == s->submitted;
    pthread_mutex_unlock(&s->lock);
    return idle ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
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
    *pctx = s->ctx;
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
    *priority = s->priority;
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
    (void)s;
    host_work *hw = (host_work *)w;
    if (hw->fn) hw->fn(hw->data);
    else hw->cb(hw->handle, CUDA_SUCCESS, hw->data);
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
    hw->handle = h;
    hw->data = data;
    CUDA_HOST_NODE_PARAMS hp = { .fn = fn, .userData = data };
    emu_capture_op op = { .type = CU_GRAPH_NODE_TYPE_HOST, .host = &hp };
    /* Callbacks cannot be captured (the driver says so); host functions can. */
    return submit(call, s, 0, fn ? &op : NULL, &hw->w);
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

/* ------------------------------------------------------------------------
 * Events
 * ---------------------------------------------------------------------- */
static emu_event *ev_of(CUevent e) { return (emu_event *)(void *)e; }

/* Drops a reference (no lock needed: the last one is only dropped once no
 * handle and no marker can reach the event). */
static void event_unref(emu_event *e)
{
    if (__atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    emu_stream *s = e->pub.stream;
    emu_capture_event_forget(&e->pub);
    emu_handle_mem_put(EMU_K_EVENT, e);    /* the next cuEventCreate reuses the value */
    if (s) stream_unref(s);
}

EMU_EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    EMU_ENTRY_INIT();
    const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (!phEvent || (Flags & ~known)) return CUDA_ERROR_INVALID_VALUE;
    if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx;
    CUresult r = emu_ctx_require(&ctx);
    if (r != CUDA_SUCCESS) return r;
    emu_event *e = emu_handle_mem_get(EMU_K_EVENT, sizeof *e);
    e->pub.flags = Flags;
    e->refs = 1;
    emu_handle_add_ctx(&e->pub, EMU_K_EVENT, ctx);
    *phEvent = &e->pub;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuEventDestroy_v2(CUevent hEvent)
{
    EMU_ENTRY_INIT();
    if (!hEvent || !emu_handle_ok(hEvent, EMU_K_EVENT)) return CUDA_ERROR_INVALID_HANDLE;
    emu_handle_del(hEvent);
    event_unref(ev_of(hEvent));     /* pending records keep it alive */
    return CUDA_SUCCESS;
}

/* Context teardown (after its streams are gone): ends and releases every
 * event created in ctx. */
static void events_ctx_destroyed(CUcontext ctx)
{
    const void **v;
    size_t n = emu_handles_of_ctx(ctx, EMU_K_EVENT, &v);
    for (size_t i = 0; i < n; i++) {
        emu_handle_end(v[i]);
        event_unref(ev_of((CUevent)(uintptr_t)v[i]));
    }
    free(v);
}

typedef struct mark_work {
    emu_work w;
    emu_event *e;
} mark_work;

static void mark_run(emu_work *w, emu_stream *s)
{
    mark_work *mw = (mark_work *)w;
    pthread_mutex_lock(&ev_lock);
    if (mw->e->pub.stream == s && mw->e->pub.seq == w->seq) mw->e->pub.time_ms = now_ms();
    pthread_mutex_unlock(&ev_lock);
}

static void mark_release(emu_work *w)
{
    event_unref(((mark_work *)w)->e);
    free(w);
}

static CUresult event_record(const char *call, CUevent h, CUstream hs, int pt, unsigned flags)
{
    emu_stream *s;
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    if (!h || !emu_handle_ok(h, EMU_K_EVENT)) return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = emu_stream_get(hs, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    if (emu_stream_capture(s)) return emu_capture_event_record(s, h);

    if ((r = legacy_check(s)) != CUDA_SUCCESS) return r;
    emu_event *e = ev_of(h);
    mark_work *mw = (mark_work *)emu_work_new(sizeof *mw, call, mark_run);
    mw->w.release = mark_release;
    mw->e = e;
    uint64_t seq;
    /* ev_lock is held until the event names the marker, so the marker cannot
     * run (it takes ev_lock) before. */
    __atomic_add_fetch(&e->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&ev_lock);
    r = enqueue_unchecked(s, &mw->w, &seq);
    emu_stream *old = NULL;
    if (r == CUDA_SUCCESS) {
        old = e->pub.stream;
        stream_ref(s);
        e->pub.stream = s;
        e->pub.seq = seq;
        e->pub.recorded = 1;
        e->pub.time_ms = 0;
    }
    pthread_mutex_unlock(&ev_lock);
    /* An ordinary record replaces any capture-time record (outside ev_lock:
     * the capture lock is never taken under it). */
    if (r == CUDA_SUCCESS) emu_capture_event_forget(&e->pub);
    if (old) stream_unref(old);
    return r;
}

EMU_EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    EMU_ENTRY_INIT();
    return event_record(__func__, hEvent, hStream, 0, 0);
}

EMU_EXPORT CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    EMU_ENTRY_INIT();
    return event_record(__func__, hEvent, hStream, 1, 0);
}

EMU_EXPORT CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    EMU_ENTRY_INIT();
    return event_record(__func__, hEvent, hStream, 0, flags);
}

EMU_EXPORT CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    EMU_ENTRY_INIT();
    return event_record(__func__, hEvent, hStream, 1, flags);
}

/* Where an event's last (non-captured) record completes: *s is referenced,
 * NULL if the event was never recorded outside capture. */
static void event_target(emu_event *e, emu_stream **s, uint64_t *seq)
{
    pthread_mutex_lock(&ev_lock);
    *s = e->pub.recorded && !e->pub.cap ? e->pub.stream : NULL;
    *seq = e->pub.seq;
    if (*s) stream_ref(*s);
    pthread_mutex_unlock(&ev_lock);
}

/* An event recorded during a capture still in progress may not be queried
 * or waited for (the capture is invalidated); once that capture ended, the
 * event has no work behind it: queries and waits see it complete. */
EMU_EXPORT CUresult cuEventQuery(CUevent hEvent)
{
    EMU_ENTRY_INIT();
    if (!hEvent || !emu_handle_ok(hEvent, EMU_K_EVENT)) return CUDA_ERROR_INVALID_HANDLE;
    if (emu_capture_event_busy(hEvent)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    emu_stream *s;
    uint64_t seq;
    event_target(ev_of(hEvent), &s, &seq);
    if (!s) return CUDA_SUCCESS;
    int done = stream_done(s, seq);
    stream_unref(s);
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EMU_EXPORT CUresult cuEventSynchronize(CUevent hEvent)
{
    EMU_ENTRY_INIT();
    if (!hEvent || !emu_handle_ok(hEvent, EMU_K_EVENT)) return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = emu_capture_check_unsafe(__func__);
    if (r != CUDA_SUCCESS) return r;
    if (emu_capture_event_busy(hEvent)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    emu_stream *s;
    uint64_t seq;
    event_target(ev_of(hEvent), &s, &seq);
    if (s) {
        stream_wait_seq(s, seq);
        stream_unref(s);
    }
    emu_mem_pools_sync();
    return CUDA_SUCCESS;
}

static CUresult event_elapsed(float *ms, CUevent a, CUevent b)
{
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    if (!a || !b || !emu_handle_ok(a, EMU_K_EVENT) || !emu_handle_ok(b, EMU_K_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
    emu_stream *sa, *sb;
    uint64_t qa, qb;
    event_target(ev_of(a), &sa, &qa);
    event_target(ev_of(b), &sb, &qb);
    CUresult r = CUDA_SUCCESS;
    if (!sa || !sb) r = CUDA_ERROR_INVALID_HANDLE;
    else if (!stream_done(sa, qa) || !stream_done(sb, qb)) r = CUDA_ERROR_NOT_READY;
    if (sa) stream_unref(sa);
    if (sb) stream_unref(sb);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&ev_lock);
    *ms = (float)(b->time_ms - a->time_ms);
    pthread_mutex_unlock(&ev_lock);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    EMU_ENTRY_INIT();
    return event_elapsed(pMilliseconds, hStart, hEnd);
}

EMU_EXPORT CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    EMU_ENTRY_INIT();
    return event_elapsed(pMilliseconds, hStart, hEnd);
}

static CUresult stream_wait_event(CUstream h, int pt, CUevent ev, unsigned flags)
{
    emu_stream *s;
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    if (!ev || !emu_handle_ok(ev, EMU_K_EVENT)) return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    if ((flags & CU_EVENT_WAIT_EXTERNAL) && emu_stream_capture(s)) {
        /* External event wait nodes are not emulated. */
        capture_invalidate(s);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (emu_capture_event_wait(s, ev, &r)) return r;
    /* A capturing stream that waits on an event recorded outside capture
     * gains no dependency in the graph: nothing to queue. */
    if (emu_stream_capture(s)) return CUDA_SUCCESS;
    dep d;
    event_target(ev_of(ev), &d.s, &d.seq);
    if (!d.s) return CUDA_SUCCESS;
    if (d.s == s || stream_done(d.s, d.seq)) {
        stream_unref(d.s);
        return CUDA_SUCCESS;
    }
    return push_wait(s, &d, 1, "cuStreamWaitEvent");
}

EMU_EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    EMU_ENTRY_INIT();
    return stream_wait_event(hStream, 0, hEvent, Flags);
}

EMU_EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    EMU_ENTRY_INIT();
    return stream_wait_event(hStream, 1, hEvent, Flags);
}

/* ------------------------------------------------------------------------
 * Stream memory operations (32- and 64-bit write and wait)
 * ---------------------------------------------------------------------- */
typedef struct memop_work {
    emu_work w;
    CUdeviceptr addr;
    uint64_t value;
    unsigned size;                  /* 4 or 8 */
    unsigned flags;
    int wait;
} memop_work;

static uint64_t memop_load(const memop_work *m)
{
    if (m->size == 8) return __atomic_load_n((uint64_t *)(uintptr_t)m->addr, __ATOMIC_ACQUIRE);
    return __atomic_load_n((uint32_t *)(uintptr_t)m->addr, __ATOMIC_ACQUIRE);
}

static int memop_satisfied(const memop_work *m)
{
    uint64_t cur = memop_load(m), v = m->value;
    uint64_t mask = m->size == 8 ? ~(uint64_t)0 : 0xffffffffu;
    switch (m->flags & 3) {
    case CU_STREAM_WAIT_VALUE_GEQ:
        return m->size == 8 ? (int64_t)(cur - v) >= 0 : (int32_t)(uint32_t)(cur - v) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ: return cur == v;
    case CU_STREAM_WAIT_VALUE_AND: return (cur & v) != 0;
    default: return (~(cur | v) & mask) != 0;   /* NOR */
    }
}

static void memop_run(emu_work *w, emu_stream *s)
{
    memop_work *m = (memop_work *)w;
    if (!emu_mem_accessible(m->addr, m->size, s->device)) {
        emu_violation(w->what, "illegal address 0x%llx (%u bytes not accessible to device %d)",
                      (unsigned long long)m->addr, m->size, s->device);
        return;
    }
    if (!m->wait) {
        if (m->size == 8) __atomic_store_n((uint64_t *)(uintptr_t)m->addr, m->value, __ATOMIC_RELEASE);
        else __atomic_store_n((uint32_t *)(uintptr_t)m->addr, (uint32_t)m->value, __ATOMIC_RELEASE);
        return;
    }
    struct timespec ts = { 0, 20000 };
    while (!memop_satisfied(m)) nanosleep(&ts, NULL);
}

/* Memory operations cannot be captured here (no batch-mem-op graph nodes in
 * the emulation): a capturing stream fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED. */
static CUresult memop(const char *call, CUstream h, int pt, CUdeviceptr addr, uint64_t value,
                      unsigned size, unsigned flags, int wait)
{
    emu_stream *s;
    emu_range r;
    unsigned known = wait ? 3u | CU_STREAM_WAIT_VALUE_FLUSH : CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER;
    if ((flags & ~known) || !addr || addr % size) return CUDA_ERROR_INVALID_VALUE;
    if (!emu_mem_find(addr, &r) || addr + size > r.base + r.size) return CUDA_ERROR_INVALID_VALUE;
    CUresult res = emu_stream_get(h, pt, &s);
    if (res != CUDA_SUCCESS) return res;
    memop_work *m = (memop_work *)emu_work_new(sizeof *m, call, memop_run);
    m->addr = addr;
    m->value = value;
    m->size = size;
    m->flags = flags;
    m->wait = wait;
    emu_work_touch_range(&m->w, addr, size);
    return submit(call, s, 0, NULL, &m->w);
}

#define MEMOP_EXPORTS(name, type, size, wait)                                               \
    EMU_EXPORT CUresult name(CUstream stream, CUdeviceptr addr, type value, unsigned int flags) \
    { EMU_ENTRY_INIT(); return memop(__func__, stream, 0, addr, value, size, flags, wait); }    \
    EMU_EXPORT CUresult name##_v2(CUstream stream, CUdeviceptr addr, type value, unsigned int flags) \
    { EMU_ENTRY_INIT(); return memop(__func__, stream, 0, addr, value, size, flags, wait); }    \
    EMU_EXPORT CUresult name##_ptsz(CUstream stream, CUdeviceptr addr, type value, unsigned int flags) \
    { EMU_ENTRY_INIT(); return memop(__func__, stream, 1, addr, value, size, flags, wait); }    \
    EMU_EXPORT CUresult name##_v2_ptsz(CUstream stream, CUdeviceptr addr, type value, unsigned int flags) \
    { EMU_ENTRY_INIT(); return memop(__func__, stream, 1, addr, value, size, flags, wait); }

MEMOP_EXPORTS(cuStreamWriteValue32, cuuint32_t, 4, 0)
MEMOP_EXPORTS(cuStreamWaitValue32, cuuint32_t, 4, 1)
MEMOP_EXPORTS(cuStreamWriteValue64, cuuint64_t, 8, 0)
MEMOP_EXPORTS(cuStreamWaitValue64, cuuint64_t, 8, 1)

/* ------------------------------------------------------------------------
 * Copies
 * ---------------------------------------------------------------------- */
typedef struct side {
    CUmemorytype type;
    uintptr_t base;                 /* host or device address */
    size_t x, y, z, pitch, height;
} side;

static side src_side(const CUDA_MEMCPY3D *p)
{
    return (side){ p->srcMemoryType, p->srcMemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)p->srcHost
                                                                            : (uintptr_t)p->srcDevice,
                   p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch, p->srcHeight };
}

static side dst_side(const CUDA_MEMCPY3D *p)
{
    return (side){ p->dstMemoryType, p->dstMemoryType == CU_MEMORYTYPE_HOST ? (uintptr_t)p->dstHost
                                                                            : (uintptr_t)p->dstDevice,
                   p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch, p->dstHeight };
}

/* Address of row (y, z) of the copy on one side. */
static uintptr_t side_row(const side *s, size_t y, size_t z)
{
    return s->base + ((s->z + z) * s->height + s->y + y) * s->pitch + s->x;
}

static CUresult side_check(const side *s, const CUDA_MEMCPY3D *p)
{
    emu_range r;
    if (s->type == CU_MEMORYTYPE_ARRAY) return CUDA_ERROR_NOT_SUPPORTED;
    if (s->type != CU_MEMORYTYPE_HOST && s->type != CU_MEMORYTYPE_DEVICE && s->type != CU_MEMORYTYPE_UNIFIED)
        return CUDA_ERROR_INVALID_VALUE;
    if (!s->base) return CUDA_ERROR_INVALID_VALUE;
    int rows = p->Height > 1 || p->Depth > 1 || s->y || s->z;
    if (rows && s->pitch < s->x + p->WidthInBytes) return CUDA_ERROR_INVALID_VALUE;
    if ((p->Depth > 1 || s->z) && s->height < s->y + p->Height) return CUDA_ERROR_INVALID_VALUE;
    /* Device memory (and unified addresses that are device memory): the whole
     * span, first row to end of last row, lies in the allocation holding its
     * start (emu_mem_extent_ok). */
    uintptr_t first = side_row(s, 0, 0);
    if (s->type == CU_MEMORYTYPE_DEVICE && !emu_mem_find(first, &r)) return CUDA_ERROR_INVALID_VALUE;
    if (s->type != CU_MEMORYTYPE_HOST && emu_mem_find(first, &r)) {
        size_t rows = (p->Depth - 1) * s->height + p->Height - 1;
        if (s->pitch && rows > (SIZE_MAX - p->WidthInBytes) / s->pitch) return CUDA_ERROR_INVALID_VALUE;
        if (!emu_mem_extent_ok(first, rows * s->pitch + p->WidthInBytes)) return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult emu_memcpy3d_check(const CUDA_MEMCPY3D *p)
{
    if (!p || p->srcLOD || p->dstLOD) return CUDA_ERROR_INVALID_VALUE;
    if (!p->WidthInBytes || !p->Height || !p->Depth) return CUDA_ERROR_INVALID_VALUE;
    side s = src_side(p), d = dst_side(p);
    CUresult r = side_check(&s, p);
    return r != CUDA_SUCCESS ? r : side_check(&d, p);
}

/* 1 if every row of the side is accessible (host memory always is). */
static int side_accessible(const side *s, const CUDA_MEMCPY3D *p, int dev, const char *what)
{
    emu_range r;
    if (s->type == CU_MEMORYTYPE_HOST) return 1;
    for (size_t z = 0; z < p->Depth; z++) {
        for (size_t y = 0; y < p->Height; y++) {
            uintptr_t a = side_row(s, y, z);
            /* Unified addresses outside every device range are host memory. */
            if (s->type == CU_MEMORYTYPE_UNIFIED && !emu_mem_find(a, &r)) continue;
            if (!emu_mem_accessible(a, p->WidthInBytes, dev)) {
                emu_violation(what, "illegal address 0x%llx (%zu bytes not accessible to device %d)",
                              (unsigned long long)a, p->WidthInBytes, dev);
                return 0;
            }
        }
    }
    return 1;
}

void emu_memcpy3d_exec(const CUDA_MEMCPY3D *p)
{
    side s = src_side(p), d = dst_side(p);
    int dev = current_device();
    if (!side_accessible(&s, p, dev, "memcpy") || !side_accessible(&d, p, dev, "memcpy")) return;
    for (size_t z = 0; z < p->Depth; z++) {
        for (size_t y = 0; y < p->Height; y++)
            emu_mem_copy((void *)side_row(&d, y, z), (const void *)side_row(&s, y, z), p->WidthInBytes);
    }
}

static void side_touch(emu_work *w, const side *s, const CUDA_MEMCPY3D *p)
{
    emu_range r;
    uintptr_t first = side_row(s, 0, 0);
    uintptr_t end = side_row(s, p->Height - 1, p->Depth - 1) + p->WidthInBytes;
    /* Host memory matters only where it is a device range (pinned memory). */
    if (s->type == CU_MEMORYTYPE_HOST && !emu_mem_find(first, &r) && !emu_mem_find(end - 1, &r)) return;
    emu_work_touch_range(w, first, end - first);
}

void emu_memcpy3d_touch(emu_work *w, const CUDA_MEMCPY3D *p)
{
    side s = src_side(p), d = dst_side(p);
    side_touch(w, &s, p);
    side_touch(w, &d, p);
}

typedef struct copy_work {
    emu_work w;
    CUDA_MEMCPY3D p;
} copy_work;

static void copy_run(emu_work *w, emu_stream *s)
{
    (void)s;
    emu_memcpy3d_exec(&((copy_work *)w)->p);
}

/* Every copy entry point ends here. A zero-sized copy does nothing. */
static CUresult copy_submit(const char *call, const CUDA_MEMCPY3D *p, CUstream h, int pt, int sync)
{
    if (p && (!p->WidthInBytes || !p->Height || !p->Depth)) return CUDA_SUCCESS;
    CUresult r = emu_memcpy3d_check(p);
    if (r != CUDA_SUCCESS) return r;
    emu_stream *s;
    if ((r = emu_stream_get(h, pt, &s)) != CUDA_SUCCESS) return r;
    copy_work *cw = (copy_work *)emu_work_new(sizeof *cw, call, copy_run);
    cw->p = *p;
    emu_memcpy3d_touch(&cw->w, p);
    emu_capture_op op = { .type = CU_GRAPH_NODE_TYPE_MEMCPY, .copy = p };
    return submit(call, s, sync, &op, &cw->w);
}

static CUresult copy_1d(const char *call, CUmemorytype dt, uintptr_t dst, CUmemorytype st, uintptr_t src,
                        size_t n, CUstream h, int pt, int sync)
{
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    p.srcMemoryType = st;
    p.dstMemoryType = dt;
    if (st == CU_MEMORYTYPE_HOST) p.srcHost = (const void *)src;
    else p.srcDevice = src;
    if (dt == CU_MEMORYTYPE_HOST) p.dstHost = (void *)dst;
    else p.dstDevice = dst;
    p.WidthInBytes = n;
    p.Height = p.Depth = 1;
    return copy_submit(call, &p, h, pt, sync);
}

static CUresult copy_2d(const char *call, const CUDA_MEMCPY2D *c, CUstream h, int pt, int sync)
{
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    p.srcXInBytes = c->srcXInBytes;
    p.srcY = c->srcY;
    p.srcMemoryType = c->srcMemoryType;
    p.srcHost = c->srcHost;
    p.srcDevice = c->srcDevice;
    p.srcArray = c->srcArray;
    p.srcPitch = c->srcPitch;
    p.srcHeight = c->srcY + c->Height;
    p.dstXInBytes = c->dstXInBytes;
    p.dstY = c->dstY;
    p.dstMemoryType = c->dstMemoryType;
    p.dstHost = c->dstHost;
    p.dstDevice = c->dstDevice;
    p.dstArray = c->dstArray;
    p.dstPitch = c->dstPitch;
    p.dstHeight = c->dstY + c->Height;
    p.WidthInBytes = c->WidthInBytes;
    p.Height = c->Height;
    p.Depth = 1;
    return copy_submit(call, &p, h, pt, sync);
}

#define H CU_MEMORYTYPE_HOST
#define D CU_MEMORYTYPE_DEVICE
#define U CU_MEMORYTYPE_UNIFIED

EMU_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, U, dst, U, src, ByteCount, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, U, dst, U, src, ByteCount, NULL, 1, 1); }
EMU_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, U, dst, U, src, ByteCount, hStream, 0, 0); }
EMU_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, U, dst, U, src, ByteCount, hStream, 1, 0); }

EMU_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, D, dstDevice, H, (uintptr_t)srcHost, ByteCount, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, D, dstDevice, H, (uintptr_t)srcHost, ByteCount, NULL, 1, 1); }
EMU_EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, H, (uintptr_t)dstHost, D, srcDevice, ByteCount, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, H, (uintptr_t)dstHost, D, srcDevice, ByteCount, NULL, 1, 1); }
EMU_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, D, dstDevice, D, srcDevice, ByteCount, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, D, dstDevice, D, srcDevice, ByteCount, NULL, 1, 1); }

EMU_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                         CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, D, dstDevice, H, (uintptr_t)srcHost, ByteCount, hStream, 0, 0); }
EMU_EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                              CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, D, dstDevice, H, (uintptr_t)srcHost, ByteCount, hStream, 1, 0); }
EMU_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, H, (uintptr_t)dstHost, D, srcDevice, ByteCount, hStream, 0, 0); }
EMU_EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                              CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, H, (uintptr_t)dstHost, D, srcDevice, ByteCount, hStream, 1, 0); }
EMU_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                         CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, D, dstDevice, D, srcDevice, ByteCount, hStream, 0, 0); }
EMU_EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                              CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_1d(__func__, D, dstDevice, D, srcDevice, ByteCount, hStream, 1, 0); }

#undef H
#undef D
#undef U

EMU_EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{ EMU_ENTRY_INIT(); return copy_2d(__func__, pCopy, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{ EMU_ENTRY_INIT(); return copy_2d(__func__, pCopy, NULL, 1, 1); }
EMU_EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_2d(__func__, pCopy, hStream, 0, 0); }
EMU_EXPORT CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_2d(__func__, pCopy, hStream, 1, 0); }
EMU_EXPORT CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{ EMU_ENTRY_INIT(); return copy_submit(__func__, pCopy, NULL, 0, 1); }
EMU_EXPORT CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy)
{ EMU_ENTRY_INIT(); return copy_submit(__func__, pCopy, NULL, 1, 1); }
EMU_EXPORT CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_submit(__func__, pCopy, hStream, 0, 0); }
EMU_EXPORT CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{ EMU_ENTRY_INIT(); return copy_submit(__func__, pCopy, hStream, 1, 0); }

/* ------------------------------------------------------------------------
 * Memsets
 * ---------------------------------------------------------------------- */
CUresult emu_memset_check(const CUDA_MEMSET_NODE_PARAMS *p)
{
    emu_range r;
    if (!p || !p->dst || !p->width || !p->height) return CUDA_ERROR_INVALID_VALUE;
    unsigned es = p->elementSize;
    if (es != 1 && es != 2 && es != 4) return CUDA_ERROR_INVALID_VALUE;
    if (p->dst % es) return CUDA_ERROR_INVALID_VALUE;
    if (p->height > 1 && (p->pitch < p->width * es || p->pitch % es)) return CUDA_ERROR_INVALID_VALUE;
    if (!emu_mem_find(p->dst, &r)) return CUDA_ERROR_INVALID_VALUE;
    /* The whole span lies in the allocation holding dst. */
    if (p->width > SIZE_MAX / es || (p->height > 1 && p->height - 1 > (SIZE_MAX - p->width * es) / p->pitch))
        return CUDA_ERROR_INVALID_VALUE;
    if (!emu_mem_extent_ok(p->dst, (p->height - 1) * p->pitch + p->width * es)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

void emu_memset_exec(const CUDA_MEMSET_NODE_PARAMS *p)
{
    int dev = current_device();
    size_t row_bytes = p->width * p->elementSize;
    for (size_t y = 0; y < p->height; y++) {
        unsigned char *row = (unsigned char *)(uintptr_t)(p->dst + y * p->pitch);
        if (!emu_mem_accessible((CUdeviceptr)(uintptr_t)row, row_bytes, dev)) {
            emu_violation("memset", "illegal address %p (%zu bytes not accessible to device %d)",
                          (void *)row, row_bytes, dev);
            return;
        }
        if (p->elementSize == 1) {
            memset(row, (int)(p->value & 0xff), p->width);
        } else if (p->elementSize == 2) {
            uint16_t v = (uint16_t)p->value;
            for (size_t i = 0; i < p->width; i++) memcpy(row + 2 * i, &v, 2);
        } else {
            uint32_t v = p->value;
            for (size_t i = 0; i < p->width; i++) memcpy(row + 4 * i, &v, 4);
        }
    }
}

void emu_memset_touch(emu_work *w, const CUDA_MEMSET_NODE_PARAMS *p)
{
    size_t span = (p->height - 1) * p->pitch + p->width * p->elementSize;
    emu_work_touch_range(w, p->dst, span);
}

typedef struct set_work {
    emu_work w;
    CUDA_MEMSET_NODE_PARAMS p;
} set_work;

static void set_run(emu_work *w, emu_stream *s)
{
    (void)s;
    emu_memset_exec(&((set_work *)w)->p);
}

/* Every memset entry point ends here; `width` counts elements. */
static CUresult memset_submit(const char *call, CUdeviceptr dst, size_t pitch, unsigned value, unsigned es,
                              size_t width, size_t height, CUstream h, int pt, int sync)
{
    if (!width || !height) return CUDA_SUCCESS;
    CUDA_MEMSET_NODE_PARAMS p = { .dst = dst, .pitch = height > 1 ? pitch : width * es, .value = value,
                                  .elementSize = es, .width = width, .height = height };
    CUresult r = emu_memset_check(&p);
    if (r != CUDA_SUCCESS) return r;
    emu_stream *s;
    if ((r = emu_stream_get(h, pt, &s)) != CUDA_SUCCESS) return r;
    set_work *sw = (set_work *)emu_work_new(sizeof *sw, call, set_run);
    sw->p = p;
    emu_memset_touch(&sw->w, &p);
    emu_capture_op op = { .type = CU_GRAPH_NODE_TYPE_MEMSET, .set = &p };
    return submit(call, s, sync, &op, &sw->w);
}

#define MEMSET_1D(name, type, es)                                                              \
    EMU_EXPORT CUresult name##_v2(CUdeviceptr d, type v, size_t n)                             \
    { EMU_ENTRY_INIT(); return memset_submit(__func__, d, 0, v, es, n, 1, NULL, 0, 1); }       \
    EMU_EXPORT CUresult name##_v2_ptds(CUdeviceptr d, type v, size_t n)                        \
    { EMU_ENTRY_INIT(); return memset_submit(__func__, d, 0, v, es, n, 1, NULL, 1, 1); }       \
    EMU_EXPORT CUresult name##Async(CUdeviceptr d, type v, size_t n, CUstream h)               \
    { EMU_ENTRY_INIT(); return memset_submit(__func__, d, 0, v, es, n, 1, h, 0, 0); }          \
    EMU_EXPORT CUresult name##Async_ptsz(CUdeviceptr d, type v, size_t n, CUstream h)          \
    { EMU_ENTRY_INIT(); return memset_submit(__func__, d, 0, v, es, n, 1, h, 1, 0); }

#define MEMSET_2D(name, type, es)                                                              \
    EMU_EXPORT CUresult name##_v2(CUdeviceptr d, size_t pitch, type v, size_t w, size_t ht)    \
    { EMU_ENTRY_INIT(); return memset_submit(__func__, d, pitch, v, es, w, ht, NULL, 0, 1); }  \
    EMU_EXPORT CUresult name##_v2_ptds(CUdeviceptr d, size_t pitch, type v, size_t w, size_t ht) \
    { EMU_ENTRY_INIT(); return memset_submit(__func__, d, pitch, v, es, w, ht, NULL, 1, 1); }  \
    EMU_EXPORT CUresult name##Async(CUdeviceptr d, size_t pitch, type v, size_t w, size_t ht, CUstream h) \
    { EMU_ENTRY_INIT(); return memset_submit(__func__, d, pitch, v, es, w, ht, h, 0, 0); }     \
    EMU_EXPORT CUresult name##Async_ptsz(CUdeviceptr d, size_t pitch, type v, size_t w, size_t ht, CUstream h) \
    { EMU_ENTRY_INIT(); return memset_submit(__func__, d, pitch, v, es, w, ht, h, 1, 0); }

MEMSET_1D(cuMemsetD8, unsigned char, 1)
MEMSET_1D(cuMemsetD16, unsigned short, 2)
MEMSET_1D(cuMemsetD32, unsigned int, 4)
MEMSET_2D(cuMemsetD2D8, unsigned char, 1)
MEMSET_2D(cuMemsetD2D16, unsigned short, 2)
MEMSET_2D(cuMemsetD2D32, unsigned int, 4)

/* ------------------------------------------------------------------------
 * Stream-ordered allocation (the default pool of each device only). Inside a
 * capture they make allocation and free nodes (emu_graph.c).
 * ---------------------------------------------------------------------- */
static struct CUmemPoolHandle_st default_pools[8];
static pthread_once_t pools_once = PTHREAD_ONCE_INIT;

static void pools_init(void)
{
    for (int i = 0; i < 8; i++) {
        default_pools[i].device = i;
        emu_handle_add(&default_pools[i], EMU_K_POOL);
    }
}

static CUresult default_pool(CUmemoryPool *out, CUdevice dev)
{
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= emu_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    pthread_once(&pools_once, pools_init);
    *out = &default_pools[dev];
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    EMU_ENTRY_INIT();
    return default_pool(pool_out, dev);
}

EMU_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    EMU_ENTRY_INIT();
    return default_pool(pool, dev);
}

/* A pool argument: one of the devices' default pools. */
static int pool_ok(CUmemoryPool pool)
{
    pthread_once(&pools_once, pools_init);
    return pool >= &default_pools[0] && pool < &default_pools[emu_device_count()];
}

/* cuMemPoolTrimTo: "Releases memory back to the OS until the pool contains
 * fewer than minBytesToKeep reserved bytes"; memory in use stays. */
EMU_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    EMU_ENTRY_INIT();
    if (!pool_ok(pool)) return CUDA_ERROR_INVALID_VALUE;
    emu_mem_pool_trim(pool->device, minBytesToKeep);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    EMU_ENTRY_INIT();
    if (!pool_ok(pool)) return CUDA_ERROR_INVALID_VALUE;
    return emu_mem_pool_attr(pool->device, attr, 1, value);
}

EMU_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    EMU_ENTRY_INIT();
    if (!pool_ok(pool)) return CUDA_ERROR_INVALID_VALUE;
    return emu_mem_pool_attr(pool->device, attr, 0, value);
}

static CUresult alloc_async(const char *call, CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream h,
                            int pt)
{
    emu_stream *s;
    if (!dptr || !bytes) return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&pools_once, pools_init);
    if (pool && (pool < &default_pools[0] || pool >= &default_pools[emu_device_count()]))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    int dev = pool ? pool->device : s->device;
    if (emu_stream_capture(s)) {
        /* cuMemAllocAsync: "During stream capture, this function results in
         * the creation of an allocation node." */
        emu_capture_op op = { .type = CU_GRAPH_NODE_TYPE_MEM_ALLOC, .mem_bytes = bytes, .mem_dev = dev,
                              .mem_out = dptr };
        return emu_capture_add(s, &op);
    }
    return emu_mem_alloc_device(dptr, bytes, dev, pool ? pool : &default_pools[dev], call);
}

EMU_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{ EMU_ENTRY_INIT(); return alloc_async(__func__, dptr, bytesize, NULL, hStream, 0); }
EMU_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{ EMU_ENTRY_INIT(); return alloc_async(__func__, dptr, bytesize, NULL, hStream, 1); }

static CUresult alloc_from_pool(const char *call, CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool,
                                CUstream h, int pt)
{
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(call, dptr, bytes, pool, h, pt);
}

EMU_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                            CUstream hStream)
{ EMU_ENTRY_INIT(); return alloc_from_pool(__func__, dptr, bytesize, pool, hStream, 0); }
EMU_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                 CUstream hStream)
{ EMU_ENTRY_INIT(); return alloc_from_pool(__func__, dptr, bytesize, pool, hStream, 1); }

typedef struct free_work {
    emu_work w;
    CUdeviceptr p;
    uint64_t token;
} free_work;

static void free_run(emu_work *w, emu_stream *s)
{
    (void)s;
    free_work *fw = (free_work *)w;
    emu_mem_free_async_complete(fw->p, fw->token);
}

static CUresult free_async(const char *call, CUdeviceptr p, CUstream h, int pt)
{
    emu_stream *s;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r != CUDA_SUCCESS) return r;
    if (emu_stream_capture(s)) {
        /* cuMemFreeAsync: "During stream capture, this function results in
         * the creation of a free node and must therefore be passed the
         * address of a graph allocation" (else INVALID_VALUE, and the
         * capture is invalidated: emu_capture_add). */
        emu_capture_op op = { .type = CU_GRAPH_NODE_TYPE_MEM_FREE, .mem_ptr = p };
        return emu_capture_add(s, &op);
    }
    uint64_t token;
    r = emu_mem_free_async_begin(p, &token);
    if (r != CUDA_SUCCESS) return r;
    /* The free itself touches nothing: work queued after it on the stream
     * that still uses p is what the release reports. */
    free_work *fw = (free_work *)emu_work_new(sizeof *fw, call, free_run);
    fw->p = p;
    fw->token = token;
    return enqueue_seq(s, &fw->w, NULL);
}

EMU_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{ EMU_ENTRY_INIT(); return free_async(__func__, dptr, hStream, 0); }
EMU_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{ EMU_ENTRY_INIT(); return free_async(__func__, dptr, hStream, 1); }

/* ------------------------------------------------------------------------
 * Modules
 * ---------------------------------------------------------------------- */
static size_t abi_align(size_t size)
{
    size_t a = 1;
    while (a < size && a < 8) a <<= 1;
    return a;
}

int emu_kernel_table_count(const emu_kernel *table)
{
    int n = 0;
    for (; table[n].name; n++)
        if (!table[n].fn || table[n].num_params > 32) return -1;
    return n;
}

void emu_kernel_layout(const emu_kernel *k, size_t off[32], size_t *abi_size)
{
    size_t end = 0;
    for (unsigned j = 0; j < k->num_params; j++) {
        size_t a = abi_align(k->param_sizes[j]);
        off[j] = (end + a - 1) / a * a;
        end = off[j] + k->param_sizes[j];
    }
    *abi_size = end;
}

CUmodule emu_module_new(CUcontext ctx)
{
    CUmodule m = emu_handle_mem_get(EMU_K_MODULE, sizeof *m);
    m->ctx = ctx;
    return m;
}

CUfunction emu_func_new(const emu_kernel *k, CUmodule m)
{
    static uint64_t func_gens;      /* atomic */
    CUfunction f = emu_handle_mem_get(EMU_K_FUNC, sizeof *f);
    f->k = k;
    f->mod = m;
    f->gen = __atomic_add_fetch(&func_gens, 1, __ATOMIC_RELAXED);
    emu_kernel_layout(k, f->off, &f->abi_size);
    emu_func_attr_init(f->attr, k, m->ctx ? m->ctx->device : 0);
    emu_handle_add_ctx(f, EMU_K_FUNC, m->ctx);
    return f;
}

/* Builds a module from a dlopen()ed object; closes it on failure. */
static CUresult module_from_dl(void *dl, CUcontext ctx, CUmodule *out)
{
    const emu_kernel *table = dlsym(dl, EMU_MODULE_SYMBOL);
    int n = table ? emu_kernel_table_count(table) : -1;
    if (n < 0) {
        dlclose(dl);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    CUmodule m = emu_module_new(ctx);
    m->dl = dl;
    m->nfuncs = (unsigned)n;
    m->funcs = xcalloc(n ? (size_t)n : 1, sizeof *m->funcs);
    for (int i = 0; i < n; i++) m->funcs[i] = emu_func_new(&table[i], m);
    emu_handle_add_ctx(m, EMU_K_MODULE, ctx);
    *out = m;
    return CUDA_SUCCESS;
}

void *emu_module_dlopen_path(const char *fname)
{
    /* A path without a slash would make dlopen search the library path. */
    char path[4096];
    if (!strchr(fname, '/')) {
        if (snprintf(path, sizeof path, "./%s", fname) >= (int)sizeof path) return NULL;
        fname = path;
    }
    return dlopen(fname, RTLD_NOW | RTLD_LOCAL);
}

EMU_EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    EMU_ENTRY_INIT();
    CUcontext ctx;
    if (!module || !fname) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_ctx_require(&ctx);
    if (r != CUDA_SUCCESS) return r;
    if (access(fname, R_OK) != 0) return CUDA_ERROR_FILE_NOT_FOUND;
    if (emu_file_is_cuda_image(fname)) return emu_lib_module_load(ctx, module);
    void *dl = emu_module_dlopen_path(fname);
    if (!dl) return CUDA_ERROR_INVALID_IMAGE;
    return module_from_dl(dl, ctx, module);
}

/* Size of an ELF image held in memory: the furthest of its section headers
 * and loadable contents; 0 if the bytes are not a 64-bit ELF object. */
static size_t elf_image_size(const void *image)
{
    const Elf64_Ehdr *eh = image;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64) return 0;
    if (eh->e_type != ET_DYN) return 0;
    size_t end = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
    size_t ph_end = eh->e_phoff + (size_t)eh->e_phnum * eh->e_phentsize;
    if (ph_end > end) end = ph_end;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)((const char *)image + eh->e_phoff);
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        size_t e = ph[i].p_offset + ph[i].p_filesz;
        if (e > end) end = e;
    }
    return end;
}

void *emu_module_dlopen_image(const void *image, CUresult *err)
{
    size_t size = elf_image_size(image);
    *err = CUDA_ERROR_INVALID_IMAGE;
    if (!size) return NULL;
    int fd = memfd_create("cudaemu-module", MFD_CLOEXEC);
    *err = CUDA_ERROR_OUT_OF_MEMORY;
    if (fd < 0) return NULL;
    const char *p = image;
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, p + done, size - done);
        if (n <= 0) {
            close(fd);
            return NULL;
        }
        done += (size_t)n;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    close(fd);
    *err = dl ? CUDA_SUCCESS : CUDA_ERROR_INVALID_IMAGE;
    return dl;
}

/* An emulated module's ELF image, or a CUDA image (emu_library.c). */
static CUresult module_load_data(CUmodule *module, const void *image)
{
    CUcontext ctx;
    if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_ctx_require(&ctx);
    if (r != CUDA_SUCCESS) return r;
    if (emu_image_is_cuda(image)) return emu_lib_module_load(ctx, module);
    void *dl = emu_module_dlopen_image(image, &r);
    if (!dl) return r;
    return module_from_dl(dl, ctx, module);
}

EMU_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    EMU_ENTRY_INIT();
    return module_load_data(module, image);
}

/* JIT options have nothing to act on: there is no JIT. */
EMU_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                       CUjit_option *options, void **optionValues)
{
    EMU_ENTRY_INIT();
    if (numOptions && (!options || !optionValues)) return CUDA_ERROR_INVALID_VALUE;
    return module_load_data(module, image);
}

EMU_EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    EMU_ENTRY_INIT();
    return module_load_data(module, fatCubin);
}

/* Unloads an emulated module: its handles end (deleted, or ended by its
 * context's teardown), its code goes once no stream runs it, and the handle
 * values go back to the pools, the functions so that a module loaded next
 * gets this module's function values in the same order. */
static void module_unload(CUmodule m, int teardown)
{
    void (*end)(const void *) = teardown ? emu_handle_end : emu_handle_del;
    end(m);
    for (unsigned i = 0; i < m->nfuncs; i++) end(m->funcs[i]);
    emu_streams_sync_all(NULL);
    dlclose(m->dl);
    for (unsigned i = m->nfuncs; i-- > 0;) emu_handle_mem_put(EMU_K_FUNC, m->funcs[i]);
    free(m->funcs);
    emu_handle_mem_put(EMU_K_MODULE, m);
}

/* Waits for every stream first, so no kernel of the module is still running
 * when its code goes away. */
EMU_EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
    EMU_ENTRY_INIT();
    if (!hmod || !emu_handle_ok(hmod, EMU_K_MODULE)) return CUDA_ERROR_INVALID_HANDLE;
    if (hmod->lib) return emu_lib_module_unload(hmod);
    module_unload(hmod, 0);
    return CUDA_SUCCESS;
}

void emu_stream_ctx_resources_destroyed(CUcontext ctx)
{
    events_ctx_destroyed(ctx);
    const void **v;
    size_t n = emu_handles_of_ctx(ctx, EMU_K_MODULE, &v);
    for (size_t i = 0; i < n; i++) {
        CUmodule m = (CUmodule)(uintptr_t)v[i];
        if (m->lib) emu_lib_module_ctx_destroyed(m);
        else module_unload(m, 1);
    }
    free(v);
}

EMU_EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    EMU_ENTRY_INIT();
    if (!hfunc || !name) return CUDA_ERROR_INVALID_VALUE;
    if (!hmod || !emu_handle_ok(hmod, EMU_K_MODULE)) return CUDA_ERROR_INVALID_HANDLE;
    if (hmod->lib) return emu_lib_function(hmod->lib, hmod->ctx, name, hfunc);
    for (unsigned i = 0; i < hmod->nfuncs; i++) {
        if (strcmp(hmod->funcs[i]->k->name, name) == 0) {
            *hfunc = hmod->funcs[i];
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_FOUND;
}

EMU_EXPORT CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
    EMU_ENTRY_INIT();
    if (!func || !emu_handle_ok(func, EMU_K_FUNC)) return CUDA_ERROR_INVALID_HANDLE;
    return emu_param_info(func->k, func->off, paramIndex, paramOffset, paramSize, __func__);
}

CUresult emu_param_info(const emu_kernel *k, const size_t *off, size_t index, size_t *offset, size_t *size,
                        const char *call)
{
    if (!k->fn) return emu_kernel_missing(k->name, call);
    if (!offset || index >= k->num_params) return CUDA_ERROR_INVALID_VALUE;
    *offset = off[index];
    if (size) *size = k->param_sizes[index];
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    EMU_ENTRY_INIT();
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    if (!hfunc || !emu_handle_ok(hfunc, EMU_K_FUNC)) return CUDA_ERROR_INVALID_HANDLE;
    *name = hfunc->k->name;
    return CUDA_SUCCESS;
}

CUcontext emu_func_ctx(CUfunction f)
{
    return f && emu_handle_alive(f, EMU_K_FUNC) ? f->mod->ctx : NULL;
}

const char *emu_func_name(CUfunction f)
{
    return f && emu_handle_alive(f, EMU_K_FUNC) ? f->k->name : "<unloaded function>";
}

int emu_args_func_loaded(const emu_args *a)
{
    /* Pool memory is never unmapped: reading a stale function's gen is safe. */
    return emu_handle_alive(a->func, EMU_K_FUNC) && a->func->gen == a->func_gen;
}

/* ------------------------------------------------------------------------
 * Kernel arguments and launches
 * ---------------------------------------------------------------------- */
static emu_args *args_alloc(CUfunction f, size_t size)
{
    emu_args *a = calloc(1, sizeof *a + size);
    if (!a) return NULL;
    a->func = f;
    a->func_gen = f->gen;
    a->size = size;
    a->num_params = f->k->num_params;
    for (unsigned i = 0; i < a->num_params; i++) a->params[i] = a->data + f->off[i];
    return a;
}

/* Reads an `extra` array: the buffer and its size. */
static CUresult extra_buffer(void **extra, const void **buf, size_t *size)
{
    int have_size = 0;
    *buf = NULL;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
            *buf = extra[i + 1];
        } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
            if (!extra[i + 1]) return CUDA_ERROR_INVALID_VALUE;
            *size = *(const size_t *)extra[i + 1];
            have_size = 1;
        } else {
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return *buf && have_size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult emu_args_pack(CUfunction f, void **kernelParams, void **extra, emu_args **out)
{
    CUresult r = emu_func_resolve(f, NULL, &f);
    if (r != CUDA_SUCCESS) return r;
    if (!f->k->fn) return emu_kernel_missing(f->k->name, "a kernel node or launch");
    if (kernelParams && extra) return CUDA_ERROR_INVALID_VALUE;
    unsigned n = f->k->num_params;
    const void *buf = NULL;
    size_t size = 0;
    if (extra) {
        r = extra_buffer(extra, &buf, &size);
        if (r != CUDA_SUCCESS) return r;
        if (size != f->abi_size) return CUDA_ERROR_INVALID_VALUE;
    } else if (n) {
        if (!kernelParams) return CUDA_ERROR_INVALID_VALUE;
        for (unsigned i = 0; i < n; i++) {
            if (!kernelParams[i]) return CUDA_ERROR_INVALID_VALUE;
        }
    }
    emu_args *a = args_alloc(f, f->abi_size);
    if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
    if (buf) memcpy(a->data, buf, a->size);
    for (unsigned i = 0; !buf && i < n; i++) memcpy(a->params[i], kernelParams[i], f->k->param_sizes[i]);
    *out = a;
    return CUDA_SUCCESS;
}

emu_args *emu_args_clone(const emu_args *a)
{
    emu_args *c = malloc(sizeof *c + a->size);
    if (!c) return NULL;
    memcpy(c, a, sizeof *c + a->size);
    for (unsigned i = 0; i < c->num_params; i++)
        c->params[i] = c->data + ((const unsigned char *)a->params[i] - a->data);
    return c;
}

void emu_kernel_run(const emu_args *a, const emu_launch *launch, int dev, const char *call)
{
    if (emu_cfg.kernel_delay_us) {
        struct timespec ts = { emu_cfg.kernel_delay_us / 1000000, (emu_cfg.kernel_delay_us % 1000000) * 1000L };
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    }
    if (!emu_args_func_loaded(a)) {
        emu_violation(call, "launch of a function whose module was unloaded");
        return;
    }
    const char *name = a->func->k->name;
    for (size_t i = 0; i + 8 <= a->size; i += 8) {
        CUdeviceptr v;
        emu_range r;
        memcpy(&v, a->data + i, 8);
        if (!v || !emu_mem_find(v, &r)) continue;
        if (!emu_mem_accessible(v, 1, dev)) {
            emu_violation(call, "illegal address 0x%llx in the arguments of kernel %s (not accessible to device %d)",
                          (unsigned long long)v, name, dev);
            return;
        }
    }
    tls_kernel = name;
    a->func->k->fn((void **)a->params, launch);
    tls_kernel = NULL;
}

typedef struct kernel_work {
    emu_work w;
    emu_args *args;
    emu_launch launch;
} kernel_work;

static void kernel_run(emu_work *w, emu_stream *s)
{
    kernel_work *kw = (kernel_work *)w;
    emu_kernel_run(kw->args, &kw->launch, s->device, w->what);
}

static void kernel_release(emu_work *w)
{
    free(((kernel_work *)w)->args);
    free(w);
}

/* f may be a CUkernel: launched as its function in the stream's context. */
static CUresult launch_kernel(const char *call, CUfunction f, emu_launch l, CUstream h, int pt,
                              void **kernelParams, void **extra)
{
    if (!f || (!emu_handle_ok(f, EMU_K_FUNC) && !emu_handle_ok(f, EMU_K_KERNEL))) return CUDA_ERROR_INVALID_HANDLE;
    if (!l.grid.x || !l.grid.y || !l.grid.z || !l.block.x || !l.block.y || !l.block.z)
        return CUDA_ERROR_INVALID_VALUE;
    if (l.grid.x > 0x7fffffffu || l.grid.y > 65535 || l.grid.z > 65535) return CUDA_ERROR_INVALID_VALUE;
    if (l.block.x > 1024 || l.block.y > 1024 || l.block.z > 64 ||
        (unsigned long long)l.block.x * l.block.y * l.block.z > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    emu_stream *s;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r == CUDA_SUCCESS) r = emu_func_resolve(f, emu_stream_ctx(s), &f);
    if (r != CUDA_SUCCESS) return r;
    if (!f->k->fn) return emu_kernel_missing(f->k->name, call);
    if (l.shared_bytes > (unsigned)emu_func_attr(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES))
        return CUDA_ERROR_INVALID_VALUE;
    emu_args *a;
    if ((r = emu_args_pack(f, kernelParams, extra, &a)) != CUDA_SUCCESS) return r;
    kernel_work *kw = (kernel_work *)emu_work_new(sizeof *kw, call, kernel_run);
    kw->w.release = kernel_release;
    kw->args = a;
    kw->launch = l;
    emu_work_touch_words(&kw->w, a->data, a->size);
    /* emu_capture_add copies what it keeps. */
    emu_capture_op op = { .type = CU_GRAPH_NODE_TYPE_KERNEL, .args = a, .launch = l };
    if (emu_stream_capture(s)) {
        r = emu_capture_add(s, &op);
        work_release(&kw->w);
        return r;
    }
    return submit(call, s, 0, &op, &kw->w);
}

EMU_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                   unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
    EMU_ENTRY_INIT();
    emu_launch l = { { gridDimX, gridDimY, gridDimZ }, { blockDimX, blockDimY, blockDimZ }, sharedMemBytes };
    return launch_kernel(__func__, f, l, hStream, 0, kernelParams, extra);
}

EMU_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                        void **kernelParams, void **extra)
{
    EMU_ENTRY_INIT();
    emu_launch l = { { gridDimX, gridDimY, gridDimZ }, { blockDimX, blockDimY, blockDimZ }, sharedMemBytes };
    return launch_kernel(__func__, f, l, hStream, 1, kernelParams, extra);
}
