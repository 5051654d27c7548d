/*
 * emu_ext.c: external memory and external semaphores of the emulated CUDA
 * driver (docs/emulator.md, "External memory and semaphores"): what
 * cuImportExternalMemory and cuImportExternalSemaphore import from another
 * API (Vulkan, Direct3D, a process). There is no other API here, so the one
 * handle type of each that a Linux driver takes from a file descriptor
 * (CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD; CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_
 * OPAQUE_FD and TIMELINE_SEMAPHORE_FD) is backed by the file the descriptor
 * names: a program (a test playing the exporting API) hands it a memfd, or
 * the descriptor cuMemExportToShareableHandle gave out.
 *
 *   - External memory: the whole file is the object's memory; each buffer
 *     cuExternalMemoryGetMappedBuffer maps is a shared mapping of its part
 *     of the file, a device range (RK_EXT, emu_mem.c) of the current
 *     context that cuMemFree (or the context's teardown) ends. Destroying
 *     the object leaves its buffers mapped but no longer usable ("must no
 *     longer be used and must be explicitly freed using cuMemFree"): a
 *     kernel, copy or memset reaching one afterwards is a violation.
 *   - External semaphores: the first 8 bytes of the file are the
 *     semaphore's value, which the other API (the test) may read and write
 *     through its own mapping. A binary semaphore (OPAQUE_FD) is signaled
 *     when nonzero: a signal sets 1, a wait waits for it and resets it to 0
 *     (one wait per signal); a timeline semaphore is set to the signal's
 *     fence value (a value below the current one is a violation: Vulkan
 *     requires a timeline to grow), a wait waits until it reaches the
 *     wait's fence value. Signals and waits are stream work, captured as
 *     external semaphore signal / wait nodes.
 *
 * Locks: none of its own. Objects are immutable once imported; their
 * lifetime is the handle registry's (emu_core.c), a destroy racing with a
 * use of the same object is the program's error as with the driver.
 */
#include "emu_graph.h"
#include "emu_mem.h"
#include "emu_stream.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct CUextMemory_st {
    int fd;                         /* owned since the import */
    unsigned long long size;        /* CUDA_EXTERNAL_MEMORY_HANDLE_DESC::size */
};

struct CUextSemaphore_st {
    CUexternalSemaphoreHandleType type;
    uint64_t *value;                /* the file's first 8 bytes, mapped shared (a page) */
};

/* The file behind fd and its size, or -1 (not a descriptor, not a file). */
static long long fd_size(int fd)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return -1;
    return (long long)st.st_size;
}

/* ------------------------------------------------------------------------
 * External memory
 * ---------------------------------------------------------------------- */

/* The handle types of Windows (and NvSciBuf) do not exist on Linux: the
 * driver refuses them as invalid values; DMA-BUF is not emulated. Success
 * takes the descriptor ("Ownership of the file descriptor is transferred
 * to the CUDA driver when the handle is imported successfully"). */
EMU_EXPORT CUresult cuImportExternalMemory(CUexternalMemory *extMem_out,
                                           const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *memHandleDesc)
{
    EMU_ENTRY_INIT();
    CUcontext ctx;
    CUresult rc = emu_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *d = memHandleDesc;
    if (!extMem_out || !d || !d->size || (d->flags & ~(unsigned)CUDA_EXTERNAL_MEMORY_DEDICATED))
        return CUDA_ERROR_INVALID_VALUE;
    if (d->type == CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD) {
        emu_log("cuImportExternalMemory: DMA-BUF handles are not emulated");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (d->type != CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD) return CUDA_ERROR_INVALID_VALUE;
    long long have = fd_size(d->handle.fd);
    if (have < 0) return CUDA_ERROR_INVALID_HANDLE;
    if ((unsigned long long)have < d->size) return CUDA_ERROR_INVALID_VALUE;   /* smaller than said */
    CUexternalMemory m = emu_handle_mem_get(EMU_K_EXTMEM, sizeof *m);
    m->fd = d->handle.fd;
    m->size = d->size;
    emu_handle_add(m, EMU_K_EXTMEM);
    *extMem_out = m;
    return CUDA_SUCCESS;
}

/* "flags must be zero"; the range must lie in the object. The buffer is a
 * new device range of the current context (its own address, even where two
 * buffers overlap in the object). */
EMU_EXPORT CUresult cuExternalMemoryGetMappedBuffer(CUdeviceptr *devPtr, CUexternalMemory extMem,
                                                    const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *bufferDesc)
{
    EMU_ENTRY_INIT();
    CUcontext ctx;
    CUresult rc = emu_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    if (!devPtr || !bufferDesc) return CUDA_ERROR_INVALID_VALUE;
    if (!extMem || !emu_handle_ok(extMem, EMU_K_EXTMEM)) return CUDA_ERROR_INVALID_HANDLE;
    const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *b = bufferDesc;
    if (b->flags || !b->size || b->offset > extMem->size || b->size > extMem->size - b->offset)
        return CUDA_ERROR_INVALID_VALUE;
    size_t page = emu_page_size();
    size_t start = (size_t)(b->offset - b->offset % page), off = (size_t)(b->offset % page);
    size_t len = emu_round_up(off + (size_t)b->size, page);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, extMem->fd, (off_t)start);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    rc = emu_mem_ext_add(p, len, off, (size_t)b->size, emu_ctx_device(ctx), ctx, extMem);
    if (rc != CUDA_SUCCESS) {
        munmap(p, len);
        return rc;
    }
    *devPtr = (CUdeviceptr)p + off;
    return CUDA_SUCCESS;
}

/* Mipmapped arrays are not emulated ("Emulation limits"): the arguments
 * are checked, then the call is refused. */
EMU_EXPORT CUresult cuExternalMemoryGetMappedMipmappedArray(CUmipmappedArray *mipmap, CUexternalMemory extMem,
                                                            const CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC *mipmapDesc)
{
    EMU_ENTRY_INIT();
    if (!mipmap || !mipmapDesc) return CUDA_ERROR_INVALID_VALUE;
    if (!extMem || !emu_handle_ok(extMem, EMU_K_EXTMEM)) return CUDA_ERROR_INVALID_HANDLE;
    emu_log("cuExternalMemoryGetMappedMipmappedArray: mipmapped arrays are not emulated");
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* "Any existing buffers and CUDA mipmapped arrays mapped onto this object
 * must no longer be used and must be explicitly freed using cuMemFree":
 * the buffers stay device ranges until then, inaccessible; work still
 * queued that reaches one is a violation of this call (checked for the
 * first 64 buffers of the object). */
EMU_EXPORT CUresult cuDestroyExternalMemory(CUexternalMemory extMem)
{
    EMU_ENTRY_INIT();
    if (!extMem || !emu_handle_ok(extMem, EMU_K_EXTMEM)) return CUDA_ERROR_INVALID_HANDLE;
    emu_range rs[64];
    size_t n = emu_mem_ext_gone(extMem, rs, 64);
    for (size_t i = 0; i < n && i < 64; i++) emu_inflight_check(__func__, rs[i].base, rs[i].size);
    close(extMem->fd);
    emu_handle_del(extMem);
    emu_handle_mem_put(EMU_K_EXTMEM, extMem);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------
 * External semaphores
 * ---------------------------------------------------------------------- */

static int sem_timeline(CUexternalSemaphore s)
{
    return s->type == CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD;
}

/* OPAQUE_FD (binary) and TIMELINE_SEMAPHORE_FD: a file of at least 8 bytes.
 * Windows types and NvSciSync do not exist on Linux (invalid values);
 * "flags: Reserved for future use. Must be zero." */
EMU_EXPORT CUresult cuImportExternalSemaphore(CUexternalSemaphore *extSem_out,
                                              const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *semHandleDesc)
{
    EMU_ENTRY_INIT();
    CUcontext ctx;
    CUresult rc = emu_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *d = semHandleDesc;
    if (!extSem_out || !d || d->flags) return CUDA_ERROR_INVALID_VALUE;
    if (d->type != CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD &&
        d->type != CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD)
        return CUDA_ERROR_INVALID_VALUE;
    long long have = fd_size(d->handle.fd);
    if (have < 0) return CUDA_ERROR_INVALID_HANDLE;
    if (have < 8) return CUDA_ERROR_INVALID_VALUE;
    void *p = mmap(NULL, emu_page_size(), PROT_READ | PROT_WRITE, MAP_SHARED, d->handle.fd, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OPERATING_SYSTEM;
    close(d->handle.fd);            /* the driver's now; the mapping keeps the memory */
    CUexternalSemaphore s = emu_handle_mem_get(EMU_K_EXTSEM, sizeof *s);
    s->type = d->type;
    s->value = p;
    emu_handle_add(s, EMU_K_EXTSEM);
    *extSem_out = s;
    return CUDA_SUCCESS;
}

size_t emu_extsem_params_size(CUgraphNodeType type)
{
    return type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL ? sizeof(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS)
                                                        : sizeof(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS);
}

/* The flag of each kind (CUDA_EXTERNAL_SEMAPHORE_*_SKIP_NVSCIBUF_MEMSYNC,
 * meaningful for NvSciSync only) is accepted; others are invalid values. */
CUresult emu_extsem_check(CUgraphNodeType type, const CUexternalSemaphore *sems, const void *params, unsigned n)
{
    if (!n || !sems || !params) return CUDA_ERROR_INVALID_VALUE;
    int sig = type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL;
    for (unsigned i = 0; i < n; i++) {
        if (!sems[i] || !emu_handle_ok(sems[i], EMU_K_EXTSEM)) return CUDA_ERROR_INVALID_HANDLE;
        unsigned flags = sig ? ((const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *)params)[i].flags
                             : ((const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *)params)[i].flags;
        if (flags & ~(sig ? (unsigned)CUDA_EXTERNAL_SEMAPHORE_SIGNAL_SKIP_NVSCIBUF_MEMSYNC
                          : (unsigned)CUDA_EXTERNAL_SEMAPHORE_WAIT_SKIP_NVSCIBUF_MEMSYNC))
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

void emu_extsem_touch(emu_work *w, const CUexternalSemaphore *sems, unsigned n)
{
    for (unsigned i = 0; i < n; i++) emu_work_touch_range(w, (CUdeviceptr)sems[i]->value, 8);
}

int emu_extsem_live(const CUexternalSemaphore *sems, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (!emu_handle_alive(sems[i], EMU_K_EXTSEM)) return 0;
    return 1;
}

/* A waiter's semaphore, still the one it started on (destroyed meanwhile:
 * a violation, and the wait ends). */
static int sem_alive(CUexternalSemaphore s, const uint64_t *val, const char *what)
{
    if (emu_handle_alive(s, EMU_K_EXTSEM) && s->value == val) return 1;
    emu_violation(what, "external semaphore %p destroyed while waited on", (void *)s);
    return 0;
}

void emu_extsem_exec(CUgraphNodeType type, const CUexternalSemaphore *sems, const void *params, unsigned n,
                     const char *what)
{
    struct timespec ts = { 0, 20000 };
    for (unsigned i = 0; i < n; i++) {
        CUexternalSemaphore s = sems[i];
        if (!emu_handle_alive(s, EMU_K_EXTSEM)) {
            emu_violation(what, "external semaphore %p was destroyed before its operation ran", (void *)s);
            return;
        }
        uint64_t cur = __atomic_load_n(s->value, __ATOMIC_ACQUIRE);
        if (type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL) {
            uint64_t v = sem_timeline(s) ? ((const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *)params)[i].params.fence.value : 1;
            if (sem_timeline(s) && v < cur)
                emu_violation(what, "timeline semaphore %p signaled to %llu below its value %llu", (void *)s,
                              (unsigned long long)v, (unsigned long long)cur);
            else if (!sem_timeline(s) && cur)
                emu_violation(what, "binary semaphore %p signaled while already signaled", (void *)s);
            __atomic_store_n(s->value, v, __ATOMIC_RELEASE);
        } else if (sem_timeline(s)) {
            uint64_t v = ((const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *)params)[i].params.fence.value;
            uint64_t *val = s->value;
            while (__atomic_load_n(val, __ATOMIC_ACQUIRE) < v && sem_alive(s, val, what)) nanosleep(&ts, NULL);
        } else {
            uint64_t one = 1, *val = s->value;
            while (!__atomic_compare_exchange_n(val, &one, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
                   sem_alive(s, val, what)) {
                one = 1;
                nanosleep(&ts, NULL);
            }
        }
    }
}

typedef struct extsem_work {
    emu_work w;
    CUgraphNodeType type;
    unsigned n;
    CUexternalSemaphore *sems;      /* n handles, then n parameter structs: one allocation */
    void *params;
} extsem_work;

static void extsem_run(emu_work *w, emu_stream *s)
{
    (void)s;
    extsem_work *e = (extsem_work *)w;
    emu_extsem_exec(e->type, e->sems, e->params, e->n, w->what);
}

static void extsem_release(emu_work *w)
{
    free(((extsem_work *)w)->sems);
    free(w);
}

/* Queued on the stream, or on a capturing stream added as an external
 * semaphore signal / wait node. */
static CUresult extsem_submit(const char *call, CUgraphNodeType type, const CUexternalSemaphore *sems,
                              const void *params, unsigned n, CUstream h, int pt)
{
    emu_stream *s;
    CUresult r = emu_extsem_check(type, sems, params, n);
    if (r != CUDA_SUCCESS || (r = emu_stream_get(h, pt, &s)) != CUDA_SUCCESS) return r;
    size_t psz = emu_extsem_params_size(type);
    extsem_work *e = (extsem_work *)emu_work_new(sizeof *e, call, extsem_run);
    e->w.release = extsem_release;
    e->type = type;
    e->n = n;
    e->sems = emu_xcalloc(n, sizeof *sems + psz);
    memcpy(e->sems, sems, n * sizeof *sems);
    e->params = (char *)e->sems + n * sizeof *sems;
    memcpy(e->params, params, n * psz);
    emu_extsem_touch(&e->w, sems, n);
    emu_capture_op op = { .type = type, .sems = sems, .sem_params = params, .nsems = n };
    return emu_stream_submit(call, s, 0, &op, &e->w);
}

#define EXTSEM_EXPORTS(name, ptype, type)                                                            \
    EMU_EXPORT CUresult name(const CUexternalSemaphore *extSemArray, const ptype *paramsArray,        \
                             unsigned int numExtSems, CUstream stream)                                \
    { EMU_ENTRY_INIT(); return extsem_submit(__func__, type, extSemArray, paramsArray, numExtSems, stream, 0); } \
    EMU_EXPORT CUresult name##_ptsz(const CUexternalSemaphore *extSemArray, const ptype *paramsArray, \
                                    unsigned int numExtSems, CUstream stream)                         \
    { EMU_ENTRY_INIT(); return extsem_submit(__func__, type, extSemArray, paramsArray, numExtSems, stream, 1); }
EXTSEM_EXPORTS(cuSignalExternalSemaphoresAsync, CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS,
               CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL)
EXTSEM_EXPORTS(cuWaitExternalSemaphoresAsync, CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS,
               CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT)

/* "Any outstanding signals or waits must have completed before the
 * semaphore is destroyed": queued work still naming it is a violation. */
EMU_EXPORT CUresult cuDestroyExternalSemaphore(CUexternalSemaphore extSem)
{
    EMU_ENTRY_INIT();
    if (!extSem || !emu_handle_ok(extSem, EMU_K_EXTSEM)) return CUDA_ERROR_INVALID_HANDLE;
    /* Work still queued keeps reading the value: its page is left mapped
     * (the violation is reported; the waiter gives up once it sees the
     * semaphore gone). */
    int busy = emu_inflight_check(__func__, (CUdeviceptr)extSem->value, 8);
    emu_handle_del(extSem);
    if (!busy) munmap(extSem->value, emu_page_size());
    emu_handle_mem_put(EMU_K_EXTSEM, extSem);
    return CUDA_SUCCESS;
}
