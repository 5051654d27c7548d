/*
 * core/vmm.h: the one adapter through which core/ makes VMM and event calls
 * on its own behalf (memory.c's arenas, slots.c's slots, the variants'
 * ordering events).
 *
 *   - relaxed capture mode: while the program captures a stream, the
 *     library's own driver calls must not invalidate its capture, so they run
 *     in CU_STREAM_CAPTURE_MODE_RELAXED (background.md). sg_vmm_relax() puts
 *     the calling thread in that mode until sg_vmm_unrelax(); every call
 *     below relaxes first, and each public operation of core/ ends with
 *     sg_vmm_unrelax() (core.c does it after every hooked call);
 *   - making a context current for a few calls and restoring the caller's;
 *   - a device's VMM set-up (granularity, allocation properties, access
 *     descriptors for the device and every peer that can access it: NCCL
 *     deadlocks without peer access);
 *   - the VMM calls themselves, counted (driver.h).
 *
 * Thread safety: the relaxed state is thread-local; nothing else is shared.
 * sg_vmm_create asks for memory shareable as a POSIX file descriptor when
 * the device reports it (legacy IPC of placed blocks, ipc.h); if the driver
 * refuses that, it makes the chunk without.
 */
#ifndef SG_VMM_H
#define SG_VMM_H

#include <cuda.h>
#include <stddef.h>

#define SG_VMM_MAX_DEVICES 64

/* Relaxed capture mode for the calling thread, until sg_vmm_unrelax()
 * (idempotent). Does nothing if the driver lacks
 * cuThreadExchangeStreamCaptureMode or refuses. */
void sg_vmm_relax(void);
/* Restores the mode the thread had before the first sg_vmm_relax(). Inline
 * test of the thread's flag (initial-exec TLS: one load), since every hooked
 * call that may relax ends with it, every cuGraphLaunch included. */
extern __thread int sg_vmm_relaxed __attribute__((tls_model("initial-exec"), visibility("hidden")));
void sg_vmm_unrelax_now(void);
static inline void sg_vmm_unrelax(void)
{
    if (__builtin_expect(sg_vmm_relaxed, 0)) sg_vmm_unrelax_now();
}

/* Makes ctx current if it is not; *prev gets what to restore. 0, or -1 if
 * the driver refused (nothing changed). */
int sg_vmm_ctx_enter(CUcontext ctx, CUcontext *prev);
/* 1 if the driver says no context is current (where it would answer the
 * program's call with CUDA_ERROR_INVALID_CONTEXT); 0 if one is, or if it
 * cannot say. */
int sg_vmm_no_context(void);
/* Restores prev (after a successful sg_vmm_ctx_enter(ctx, &prev)). */
void sg_vmm_ctx_leave(CUcontext ctx, CUcontext prev);

/* What allocating and mapping physical memory for one context needs. */
typedef struct sg_vmm_dev {
    CUdevice dev;
    size_t gran;                      /* minimum granularity, a power of two */
    size_t align;                     /* of placed blocks: the device's texture
                                       * alignment, at least SG_ARENA_ALIGN */
    size_t total;                     /* the device's memory (0 if unknown) */
    CUmemAllocationProp prop;         /* pinned device memory of dev, shareable as a
                                       * POSIX file descriptor if the device can */
    CUmemAccessDesc access[SG_VMM_MAX_DEVICES];
    size_t naccess;                   /* dev first, then its peers */
} sg_vmm_dev;

/* Fills *d for context ctx. Returns 0; -1 if the device has no VMM support
 * or the driver cannot say (*why then names the reason, for a log line). */
int sg_vmm_dev_setup(CUcontext ctx, sg_vmm_dev *d, const char **why);

/* The VMM calls, relaxed and counted. */
CUresult sg_vmm_reserve(size_t size, size_t align, CUdeviceptr *base);
CUresult sg_vmm_unreserve(CUdeviceptr base, size_t size);
CUresult sg_vmm_create(const sg_vmm_dev *d, size_t size, CUmemGenericAllocationHandle *h);
CUresult sg_vmm_release(CUmemGenericAllocationHandle h);
CUresult sg_vmm_map(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle h);
CUresult sg_vmm_set_access(const sg_vmm_dev *d, CUdeviceptr va, size_t size);
CUresult sg_vmm_unmap(CUdeviceptr va, size_t size);

#endif /* SG_VMM_H */
