/*
 * emu_stream.h: what the stream files of the emulated driver share (private
 * to emu_stream.c, emu_event.c, emu_copy.c, emu_pool.c, emu_module.c and
 * emu_managed.c; the rest of the driver sees streams through emu_internal.h
 * only).
 *
 * A stream (struct emu_stream) is owned by emu_stream.c: its fields are
 * guarded as stated there (streams_lock for the list of streams, s->lock for
 * one stream's queue and counters, atomics for refs and capture). The other
 * files read a stream's immutable fields (ctx, device, kind, flags) and go
 * through the functions below for everything else.
 *
 * Lock order (never take an earlier one while holding a later one):
 *   emu_ev_lock (emu_event.c) -> ctx->lock (emu_core.c) -> streams_lock -> s->lock
 *   -> tok_lock (emu_exec.c: a graph launch's completion hook, a leaf).
 * s->attr_lock (a stream's attributes and priority) is a leaf too: nothing
 * else is taken while it is held.
 */
#ifndef EMU_STREAM_H
#define EMU_STREAM_H

#include "emu_internal.h"

enum stream_kind { S_USER, S_LEGACY, S_PER_THREAD };

struct emu_stream {
    CUcontext ctx;                  /* a green context's stream: the primary context (its owner) */
    struct CUgreenCtx_st *green;    /* the green context it belongs to (NULL: none) */
    unsigned long long green_id;    /* its id: the struct of a destroyed green context is
                                     * reused by the next one (emu_stream_green_gone) */
    int device;
    enum stream_kind kind;
    unsigned flags;                 /* CU_STREAM_* given at creation */
    int priority;                   /* creation's; then cuStreamSetAttribute's (attr_lock) */
    pthread_mutex_t attr_lock;      /* a leaf lock: priority after creation, the attributes */
    CUaccessPolicyWindow apw;       /* the launch attributes cuStreamSetAttribute sets; */
    CUsynchronizationPolicy sync;   /* kernels captured on the stream take all but sync */
    CUlaunchMemSyncDomainMap domain_map;
    CUlaunchMemSyncDomain domain;
    pthread_t owner;                /* S_PER_THREAD: the thread it belongs to */
    int refs;                       /* atomic: handle/owner, worker, events, deps */
    struct emu_capture *capture;    /* atomic, owned by emu_capture.c */
    struct stream_slot *handle;     /* S_USER: its CUstream until destroyed, else NULL */

    pthread_mutex_t lock;
    pthread_cond_t cond;            /* new work, completion, exit */
    emu_work *head, *tail;          /* queued work; head is running when busy */
    emu_work *retiring;             /* completed, being released by the worker (unlocked) */
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

typedef struct dep { emu_stream *s; uint64_t seq; } dep;

/* emu_event.c: the fields of every event (the fork handlers of emu_stream.c
 * take it first). */
extern pthread_mutex_t emu_ev_lock;
/* The kernel the calling worker thread runs (NULL: none), for the fault
 * handler (emu_stream.c); set by emu_module.c around each kernel. */
extern __thread const char *volatile emu_tls_kernel;


/* Stream references and progress (emu_stream.c). */
void emu_stream_ref(emu_stream *s);
void emu_stream_unref(emu_stream *s);
/* Blocks until s completed the work numbered seq / whether it has. */
void emu_stream_wait_seq(emu_stream *s, uint64_t seq);
int emu_stream_done(emu_stream *s, uint64_t seq);
/* Frees a work item (its ranges, then its release function or free). */
void emu_work_release(emu_work *w);
/* Queues a wait for the given referenced dependencies on s (consumes them). */
CUresult emu_stream_push_wait(emu_stream *s, dep *deps, size_t n, const char *what);
/* Queues w on s behind the legacy stream's implicit synchronization; *seq
 * (if not NULL) gets its number. emu_stream_enqueue_seq first refuses a use of the
 * legacy stream that a capture forbids (emu_stream_legacy_check); emu_stream_enqueue_unchecked is
 * for callers that made that check before taking emu_ev_lock. Take w. */
CUresult emu_stream_enqueue_seq(emu_stream *s, emu_work *w, uint64_t *seq);
CUresult emu_stream_enqueue_unchecked(emu_stream *s, emu_work *w, uint64_t *seq);
/* emu_stream_enqueue_unchecked of several works in one piece (no other work
 * between them); seq[i] (if seq) gets w[i]'s number. Takes the works. */
CUresult emu_stream_enqueue_many(emu_stream *s, emu_work **w, size_t n, uint64_t *seq);
/* A work that waits for the given referenced dependencies (consumed), not
 * queued yet. */
emu_work *emu_stream_wait_new(dep *deps, size_t n, const char *what);
/* The device and context the calling worker runs for (0 and NULL outside a
 * worker). */
int emu_worker_device(void);
CUcontext emu_worker_ctx(void);
/* Runs or records one stream operation: `w` is the work to queue (owned:
 * released if not queued); `cap` what to record if s is capturing (NULL: the
 * operation cannot be captured here). sync: the call returns once the work
 * is done, and is checked as capture-unsafe; 2: checked so, but returns
 * once queued (a synchronous operation returning early, emu_copy.c).
 * (emu_stream.c) */
CUresult emu_stream_submit(const char *call, emu_stream *s, int sync, const emu_capture_op *cap, emu_work *w);

#endif /* EMU_STREAM_H */
