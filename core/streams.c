/*
 * core/streams.c: stream identities (streams.h).
 */
#include "streams.h"

static uint64_t next_thread;                 /* atomic */
static __thread uint64_t tls_thread;

sg_stream_id sg_stream_id_default(CUstream s, int per_thread)
{
    if (!s) s = per_thread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
    sg_stream_id id = { (uintptr_t)s, 0 };
    if (s == CU_STREAM_PER_THREAD) {
        if (!tls_thread) tls_thread = __atomic_add_fetch(&next_thread, 1, __ATOMIC_RELAXED);
        id.thread = tls_thread;
    }
    return id;
}
