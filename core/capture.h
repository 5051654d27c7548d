/*
 * core/capture.h: what core/ knows of stream captures in progress.
 *
 * The number of captures in progress in the process, counted at every
 * successful cuStreamBeginCapture* and every cuStreamEndCapture* that ended
 * one. It lets the library keep its shortcuts away from captures: while any
 * capture is in progress, a cuMemAlloc goes to the driver (which refuses it,
 * and invalidates the capture, exactly when the capture mode says so), and a
 * graph launch is checked for a capturing stream. The count can only be too
 * high (a capture the program abandoned), which costs those shortcuts and
 * nothing else.
 *
 * Thread safety: an atomic counter.
 */
#ifndef SG_CAPTURE_H
#define SG_CAPTURE_H

#include "call.h"

/* Handles CAPTURE_BEGIN and CAPTURE_END. */
CUresult sg_capture_call(const sg_call *c);

/* Nonzero while some capture may be in progress. */
int sg_capture_active(void);

/* Nonzero if stream s (per_thread: the _ptsz flavour) is capturing; an error
 * of the query counts as capturing (the caller then forwards). */
int sg_capture_stream(CUstream s, int per_thread);

void sg_capture_reset(void);

#endif /* SG_CAPTURE_H */
