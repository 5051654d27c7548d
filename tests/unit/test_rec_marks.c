/*
 * tests/unit/test_rec_marks.c: the recorder's marked streams (core/rec_marks.c):
 * a stream created with a priority or given launch attributes is marked by
 * its identity (a user stream's handle; a per-thread default stream's
 * thread), says why, loses its mark when destroyed, and the reset forgets
 * every mark. The out-of-memory path (every stream marked for good) is not
 * reached here: it needs a failing allocator.
 */
#include "check.h"
#include "core/rec_internal.h"

int sg_rec_oom;   /* rec_graph.c's, which this test does not link */

static sg_stream_id user(uintptr_t h) { return sg_stream_id_of((CUstream)h, 0); }

TEST(marked_by_identity_with_the_reason)
{
    sg_rec_marks_reset();
    CHECK_EQ(sg_rec_marked(user(0x1000)), SG_READBACK_NONE);
    sg_rec_mark(user(0x1000), SG_READBACK_STREAM_PRIORITY);
    CHECK_EQ(sg_rec_marked(user(0x1000)), SG_READBACK_STREAM_PRIORITY);
    CHECK_EQ(sg_rec_marked(user(0x2000)), SG_READBACK_NONE);
    /* attributes over a priority: the later, wider reason */
    sg_rec_mark(user(0x1000), SG_READBACK_STREAM_ATTRIBUTES);
    CHECK_EQ(sg_rec_marked(user(0x1000)), SG_READBACK_STREAM_ATTRIBUTES);
    /* a priority does not narrow it back */
    sg_rec_mark(user(0x1000), SG_READBACK_STREAM_PRIORITY);
    CHECK_EQ(sg_rec_marked(user(0x1000)), SG_READBACK_STREAM_ATTRIBUTES);
}

TEST(per_thread_streams_are_told_apart)
{
    sg_rec_marks_reset();
    sg_stream_id mine = { (uintptr_t)CU_STREAM_PER_THREAD, 1 }, other = { (uintptr_t)CU_STREAM_PER_THREAD, 2 };
    sg_rec_mark(mine, SG_READBACK_STREAM_ATTRIBUTES);
    CHECK_EQ(sg_rec_marked(mine), SG_READBACK_STREAM_ATTRIBUTES);
    CHECK_EQ(sg_rec_marked(other), SG_READBACK_NONE);
    CHECK_EQ(sg_rec_marked(user(0x1000)), SG_READBACK_NONE);
}

TEST(unmark_and_reset)
{
    sg_rec_marks_reset();
    sg_rec_mark(user(0x1000), SG_READBACK_STREAM_ATTRIBUTES);
    sg_rec_mark(user(0x2000), SG_READBACK_STREAM_PRIORITY);
    sg_rec_unmark(user(0x1000));                 /* destroyed: a new stream may reuse the handle */
    CHECK_EQ(sg_rec_marked(user(0x1000)), SG_READBACK_NONE);
    CHECK_EQ(sg_rec_marked(user(0x2000)), SG_READBACK_STREAM_PRIORITY);
    sg_rec_unmark(user(0x3000));                 /* never marked: nothing happens */
    sg_rec_marks_reset();
    CHECK_EQ(sg_rec_marked(user(0x2000)), SG_READBACK_NONE);
}

int main(void)
{
    RUN(marked_by_identity_with_the_reason);
    RUN(per_thread_streams_are_told_apart);
    RUN(unmark_and_reset);
    sg_rec_marks_reset();
    return check_done();
}
