/*
 * core/capture.h: what core/ knows of stream captures in progress (and,
 * through record.h, what they record).
 *
 * The number of captures in progress in the process, counted at every
 * successful cuStreamBeginCapture* and every cuStreamEndCapture* that ended
 * one. It lets the library keep its shortcuts away from captures: while any
 * capture is in progress, a cuMemAlloc goes to the driver (which refuses it,
 * and invalidates the capture, exactly when the capture mode says so), a
 * cuMemFree asks the driver for its verdict, and a graph launch is checked
 * for a capturing stream; while none is, a kernel launch goes straight to
 * the driver (interpose/hooks.c reads the counter). The count can only be
 * too high (a capture the program abandoned), which costs those shortcuts
 * and nothing else.
 *
 * Thread safety: an atomic counter.
 */
#ifndef SG_CAPTURE_H
#define SG_CAPTURE_H

#include "call.h"

/* atomic: read it through sg_capture_active(); hidden, so that
 * interpose/hooks.c reaches it without the GOT */
extern int sg_captures_active __attribute__((visibility("hidden")));

/* Nonzero while some capture may be in progress. */
static inline int sg_capture_active(void)
{
    return __atomic_load_n(&sg_captures_active, __ATOMIC_ACQUIRE) > 0;
}

/* Nonzero if stream s (per_thread: the _ptsz flavour) is capturing; an error
 * of the query counts as capturing (the caller then forwards). */
int sg_capture_stream(CUstream s, int per_thread);

/* Forgets every capture (tests, and the reset of core/). */
void sg_capture_reset(void);

#endif /* SG_CAPTURE_H */
