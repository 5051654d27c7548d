/*
 * core/vmm_util.h: small helpers shared by the parts of core/ that make VMM
 * and event calls on the library's own behalf (memory.c, slots.c).
 *
 *   - relaxed capture mode: while the program captures a stream, the
 *     library's own driver calls must not invalidate its capture, so they run
 *     in CU_STREAM_CAPTURE_MODE_RELAXED (background.md);
 *   - making a context current for a few calls and restoring the caller's;
 *   - the access descriptors of a device's memory: the device itself and
 *     every peer that can access it (NCCL deadlocks without peer access).
 *
 * Thread safety: the relaxed state is thread-local; nothing else is shared.
 */
#ifndef SG_VMM_UTIL_H
#define SG_VMM_UTIL_H

#include <cuda.h>
#include <stddef.h>

/* Puts the calling thread in relaxed capture mode until sg_vmm_unrelax()
 * (idempotent: a second call before the unrelax does nothing). Does nothing
 * if the driver lacks cuThreadExchangeStreamCaptureMode or refuses. */
void sg_vmm_relax(void);

/* Restores the mode the thread had before the first sg_vmm_relax() (no-op
 * if not relaxed). Call it at the end of each public operation. */
void sg_vmm_unrelax(void);

/* Makes ctx current if it is not; *prev gets what to restore. 0, or -1 if
 * the driver refused (nothing changed). */
int sg_vmm_ctx_enter(CUcontext ctx, CUcontext *prev);

/* Restores prev (after a successful sg_vmm_ctx_enter(ctx, &prev)). */
void sg_vmm_ctx_leave(CUcontext ctx, CUcontext prev);

/* Writes the read-write access descriptors for memory of device dev: dev
 * first, then every other device d for which cuDeviceCanAccessPeer(d, dev)
 * says yes (devices the driver cannot answer for are left out). Returns how
 * many were written (at least 1 if max >= 1, at most max). */
size_t sg_vmm_access_descs(CUdevice dev, CUmemAccessDesc *out, size_t max);

#endif /* SG_VMM_UTIL_H */
