/*
 * core/rec_marks.c: the streams whose captured kernels take launch attributes
 * the recorder does not model: created with a priority
 * (cuStreamCreateWithPriority, cuGreenCtxStreamCreate), or given attributes
 * (cuStreamSetAttribute, cuStreamCopyAttributes). capture.c marks them and spoils the record of a
 * capture on, or joined by, a marked stream (the decision then reads the
 * graph back and sees the attributes). A mark goes when its stream is
 * destroyed (a later stream may reuse the handle).
 *
 * Locks: rec_lock (rec_internal.h), held by every caller.
 */
#include "rec_internal.h"

#include <stdlib.h>

typedef struct mark {
    sg_stream_id s;
    sg_readback why;                /* STREAM_PRIORITY or STREAM_ATTRIBUTES */
    UT_hash_handle hh;
} mark;

static mark *marks;
static sg_readback lost = SG_READBACK_NONE;   /* a mark that could not be kept: every stream */

sg_readback sg_rec_marked(sg_stream_id key)
{
    if (lost != SG_READBACK_NONE) return lost;
    mark *m;
    HASH_FIND(hh, marks, &key, sizeof key, m);
    return m ? m->why : SG_READBACK_NONE;
}

void sg_rec_mark(sg_stream_id key, sg_readback why)
{
    mark *m;
    HASH_FIND(hh, marks, &key, sizeof key, m);
    if (m) {
        if (why == SG_READBACK_STREAM_ATTRIBUTES) m->why = why;
        return;
    }
    if (!(m = calloc(1, sizeof *m))) {
        lost = why;
        return;
    }
    m->s = key;
    m->why = why;
    sg_rec_oom = 0;
    HASH_ADD(hh, marks, s, sizeof m->s, m);
    if (sg_rec_oom) {
        free(m);
        lost = why;
    }
}

void sg_rec_unmark(sg_stream_id key)
{
    mark *m;
    HASH_FIND(hh, marks, &key, sizeof key, m);
    if (m) {
        HASH_DEL(marks, m);
        free(m);
    }
}

void sg_rec_marks_reset(void)
{
    mark *m, *t;
    HASH_ITER(hh, marks, m, t) {
        HASH_DEL(marks, m);
        free(m);
    }
    lost = SG_READBACK_NONE;
}
