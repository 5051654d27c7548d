/*
 * core/streams.h: a stream's identity, for stream-ordered reuse of freed
 * memory (memory.c) and the launch order of exec variants (variants.c).
 *
 * A stream handle names the stream; NULL names the legacy default stream or,
 * from a _ptsz / _ptds entry point, the calling thread's per-thread default
 * stream. Per-thread default streams of different threads differ, and a
 * thread's id is never reused (pthread_self() values are: a thread that
 * exits leaves its value to the next one). A per-thread default stream is
 * "local to both the thread and the CUcontext" (CUDA driver API, "Stream
 * synchronization behavior"), and the legacy one is the context's: one
 * thread's default streams of two contexts are two streams, which the driver
 * does not order, so a default stream's identity holds its context, the
 * current one (round 27: the recorder took one thread's per-thread streams
 * of two contexts for one, tests/e2e/adv_records.c ptsz_ctx; round 29: exec
 * variants launched on the default streams of two contexts skipped their
 * order wait, tests/e2e/adv_ptsz.c variants_ctx, variants_legacy). Asking
 * for the context costs a driver call (cuCtxGetCurrent), paid only where a
 * default stream is named: a named stream's identity stays inline. A destroyed stream's handle may be
 * handed out again by the driver: its users are told at cuStreamDestroy
 * (memory.c, graphs.c) and must stop counting on its order.
 *
 * Thread safety: the per-thread id is thread-local; the id counter is atomic.
 */
#ifndef SG_STREAMS_H
#define SG_STREAMS_H

#include <cuda.h>
#include <stdint.h>

typedef struct sg_stream_id {
    uintptr_t stream;   /* a named stream's handle; for a default stream its context (0 if none) */
    uint64_t thread;    /* 0: a named stream; SG_STREAM_LEGACY_ID: the legacy default stream;
                         * else the per-thread default stream of thread `thread` (1, 2, ...) */
} sg_stream_id;

#define SG_STREAM_LEGACY_ID UINT64_MAX      /* never a thread's id */

static inline int sg_stream_id_per_thread(sg_stream_id id)
{
    return id.thread && id.thread != SG_STREAM_LEGACY_ID;
}

/* The default streams (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD): of
 * context ctx (sg_stream_id_in, where the caller knows it), of the current
 * one (sg_stream_id_default). */
sg_stream_id sg_stream_id_in(CUstream s, int per_thread, CUcontext ctx);
sg_stream_id sg_stream_id_default(CUstream s, int per_thread);

/* The calling thread's current context (NULL if none, or if the driver
 * cannot tell). */
CUcontext sg_stream_current_ctx(void);

/* A legacy or per-thread default stream (NULL included). */
static inline int sg_default_stream(CUstream s)
{
    return !s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

/* The context of stream s: a named stream's (cuStreamGetCtx), a default
 * stream's the current one (the caller's context for it); NULL if the
 * driver cannot tell. */
CUcontext sg_stream_ctx(CUstream s);

/* A named stream inline (the common case: every captured operation and
 * every exec launch asks), the default streams out of line. */
static inline sg_stream_id sg_stream_id_of(CUstream s, int per_thread)
{
    if (!sg_default_stream(s))
        return (sg_stream_id){ (uintptr_t)s, 0 };
    return sg_stream_id_default(s, per_thread);
}

static inline int sg_stream_id_eq(sg_stream_id a, sg_stream_id b)
{
    return a.stream == b.stream && a.thread == b.thread;
}

#endif /* SG_STREAMS_H */
