/*
 * core/streams.h: a stream's identity, for stream-ordered reuse of freed
 * memory (memory.c) and the launch order of exec variants (variants.c).
 *
 * A stream handle names the stream; NULL names the legacy default stream or,
 * from a _ptsz / _ptds entry point, the calling thread's per-thread default
 * stream. Per-thread default streams of different threads differ, and a
 * thread's id is never reused (pthread_self() values are: a thread that
 * exits leaves its value to the next one). A destroyed stream's handle may be
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
    uintptr_t stream;   /* the handle; CU_STREAM_LEGACY or CU_STREAM_PER_THREAD for the defaults */
    uint64_t thread;    /* for CU_STREAM_PER_THREAD: the thread's id (1, 2, ...); else 0 */
} sg_stream_id;

/* The default streams (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD). */
sg_stream_id sg_stream_id_default(CUstream s, int per_thread);

/* A named stream inline (the common case: every captured operation and
 * every exec launch asks), the default streams out of line. */
static inline sg_stream_id sg_stream_id_of(CUstream s, int per_thread)
{
    if (s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD)
        return (sg_stream_id){ (uintptr_t)s, 0 };
    return sg_stream_id_default(s, per_thread);
}

static inline int sg_stream_id_eq(sg_stream_id a, sg_stream_id b)
{
    return a.stream == b.stream && a.thread == b.thread;
}

#endif /* SG_STREAMS_H */
