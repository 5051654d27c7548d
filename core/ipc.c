/*
 * core/ipc.c: legacy CUDA IPC on placed memory (ipc.h): this process's
 * exports (cuIpcGetMemHandle of a placed block, and the chunks the server
 * thread exports for a request) and the blocks opened here from other
 * processes' handles (cuIpcOpenMemHandle, cuIpcCloseMemHandle, what pointer
 * queries find there).
 *
 * Locks: ipc_lock guards `exports` (two hash tables over the same records:
 * by block id, by nonce) and `imports`; nexports / nimports are also read
 * without it (atomics) so that a free or a pointer query pays nothing while
 * there is nothing. No other lock of core/ is taken under ipc_lock, and it
 * is never held across a call that waits on the device: only the server's
 * cuMemExportToShareableHandle calls run under it (see ipc.h).
 */
#include "ipc.h"

#include "contexts.h"
#include "driver.h"
#include "log.h"
#include "util.h"
#include "vmm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int ipc_oom;                    /* set by uthash (ipc_lock held) */
#define uthash_nonfatal_oom(elt) (ipc_oom = 1)
#include "hash.h"

/* Ids of opened blocks (BUFFER_ID): apart from placed blocks' ids
 * (SG_MEM_ID_BASE + n) and from the driver's. */
#define IMPORT_ID_BASE (SG_MEM_ID_BASE + (1ULL << 61))

/* One exported placed block. */
typedef struct ipc_export {
    uint64_t block;                    /* sg_alloc_info.id (key of hb) */
    uint64_t nonce;                    /* key of hn */
    CUcontext ctx;
    CUipcMemHandle handle;
    sg_ipc_layout layout;
    CUmemGenericAllocationHandle *chunk;   /* layout.n, address order */
    struct ipc_export *gone;           /* sg_ipc_ctx_gone's list */
    UT_hash_handle hb, hn;
} ipc_export;

/* One block opened here, in one context. */
typedef struct ipc_import {
    uint32_t pid;                      /* the export: (pid, tag, nonce) ... */
    uint64_t tag, nonce;
    CUcontext ctx;                     /* ... opened in ctx */
    CUdeviceptr resv, ptr;             /* the reservation; the block's base in it */
    size_t size, chunk_size, n;        /* the block's bytes; the chunks mapped */
    uint64_t id;
    unsigned long refs;
    int sync_memops;                   /* CU_POINTER_ATTRIBUTE_SYNC_MEMOPS */
    struct ipc_import *next;
} ipc_import;

static pthread_mutex_t ipc_lock = PTHREAD_MUTEX_INITIALIZER;
static ipc_export *by_block, *by_nonce;
static ipc_import *imports;
static int nexports, nimports;        /* atomics (written under ipc_lock) */
static uint64_t next_import;           /* atomic */

static void export_free(ipc_export *e)
{
    if (!e) return;
    free(e->chunk);
    free(e);
}

/* Takes e out of both tables (ipc_lock held). */
static void export_unlink(ipc_export *e)
{
    HASH_DELETE(hb, by_block, e);
    HASH_DELETE(hn, by_nonce, e);
    __atomic_sub_fetch(&nexports, 1, __ATOMIC_RELEASE);
}

static ipc_export *export_by_nonce(uint64_t nonce)
{
    ipc_export *e;
    HASH_FIND(hn, by_nonce, &nonce, sizeof nonce, e);
    return e;
}

/* Ends every export (ipc_lock held). */
static void exports_drop_all(void)
{
    ipc_export *e, *tmp;
    HASH_ITER(hb, by_block, e, tmp) {
        export_unlink(e);
        export_free(e);
    }
}

/* ------------------------------------------------- the server's callbacks */

static int src_layout(uint64_t nonce, sg_ipc_layout *l)
{
    pthread_mutex_lock(&ipc_lock);
    ipc_export *e = export_by_nonce(nonce);
    if (e) *l = e->layout;
    pthread_mutex_unlock(&ipc_lock);
    return e ? 0 : -1;
}

/* Under ipc_lock, so that the block (and its chunks) cannot go meanwhile:
 * its free waits in sg_ipc_block_gone. */
static int src_export(uint64_t nonce, size_t first, size_t n, int *fds)
{
    int rc = -1;
    size_t k = 0;
    pthread_mutex_lock(&ipc_lock);
    ipc_export *e = export_by_nonce(nonce);
    if (e && first <= e->layout.n && n <= e->layout.n - first) {
        CUcontext prev;
        int entered = sg_vmm_ctx_enter(e->ctx, &prev) == 0;
        sg_vmm_relax();
        for (rc = 0; k < n && rc == 0; k++)
            if (SG_DRIVER_CALL(cuMemExportToShareableHandle, &fds[k], e->chunk[first + k],
                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) != CUDA_SUCCESS)
                rc = -1;
        if (rc != 0) k--;              /* the failed one made nothing */
        if (entered) sg_vmm_ctx_leave(e->ctx, prev);
        sg_vmm_unrelax();
    }
    pthread_mutex_unlock(&ipc_lock);
    if (rc != 0)
        for (size_t i = 0; i < k; i++) close(fds[i]);
    return rc;
}

static const sg_ipc_source source = { src_layout, src_export };

/* ------------------------------------------------------------------ export */

/* Why b cannot be exported, or NULL with *out made (not yet in the tables). */
static const char *export_make(const sg_alloc_info *b, const sg_mem_handle *h, size_t n,
                               ipc_export **out)
{
    if (!sg_drv.cuMemExportToShareableHandle) return "the driver lacks cuMemExportToShareableHandle";
    ipc_export *e = calloc(1, sizeof *e);
    if (e) e->chunk = n ? calloc(n, sizeof *e->chunk) : NULL;
    const char *why = NULL;
    if (!n) why = "its chunks could not be listed (freed meanwhile, or out of memory)";
    else if (!e || !e->chunk) why = "out of memory";
    for (size_t i = 0; !why && i < n; i++) {
        if (h[i].size != h[0].size || h[i].va != h[0].va + i * h[0].size)
            why = "its chunks are not one contiguous run of equal chunks";
        else
            e->chunk[i] = h[i].handle;
    }
    int fd = -1;
    CUresult rc = CUDA_SUCCESS;
    if (!why) {
        sg_vmm_relax();
        rc = SG_DRIVER_CALL(cuMemExportToShareableHandle, &fd, e->chunk[0],
                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        if (rc == CUDA_SUCCESS) close(fd);
        else why = "its memory is not shareable as a POSIX file descriptor (the device does not "
                   "support it, or the driver refused it when the memory was made)";
    }
    uint64_t tag = 0;
    if (!why && sg_ipc_serve(&source, &tag, &why) != 0 && !why) why = "the library has no IPC server";
    if (!why) {
        e->block = b->id;
        e->nonce = sg_ipc_random();
        e->ctx = b->ctx;
        e->layout = (sg_ipc_layout){ n, h[0].size, b->size, (uint64_t)-h[0].offset };
        sg_ipc_wire w = { (uint32_t)getpid(), tag, e->nonce, b->size, e->layout.offset };
        sg_ipc_encode(&w, &e->handle);
        *out = e;
    } else {
        export_free(e);
    }
    return why;
}

CUresult sg_ipc_export(CUipcMemHandle *out, const sg_alloc_info *b, const sg_mem_handle *chunk,
                       size_t n, int first)
{
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&ipc_lock);
    ipc_export *e;
    HASH_FIND(hb, by_block, &b->id, sizeof b->id, e);
    if (e) *out = e->handle;
    pthread_mutex_unlock(&ipc_lock);
    if (e) return CUDA_SUCCESS;

    ipc_export *made = NULL;
    const char *why = export_make(b, chunk, n, &made);
    sg_vmm_unrelax();
    if (!why) {
        pthread_mutex_lock(&ipc_lock);
        HASH_FIND(hb, by_block, &b->id, sizeof b->id, e);   /* another thread was first */
        if (!e) {
            ipc_oom = 0;
            HASH_ADD(hb, by_block, block, sizeof made->block, made);
            if (!ipc_oom) HASH_ADD(hn, by_nonce, nonce, sizeof made->nonce, made);
            if (ipc_oom) {
                HASH_DELETE(hb, by_block, made);
                why = "out of memory";
            } else {
                e = made;
                made = NULL;
                __atomic_add_fetch(&nexports, 1, __ATOMIC_RELEASE);
            }
        }
        if (e) *out = e->handle;
        pthread_mutex_unlock(&ipc_lock);
        export_free(made);
    }
    if (!why) {
        SG_LOG_AT_CAP_(SG_LOG_INFO, 1, "cuIpcGetMemHandle of memory the library placed: the handle is "
                       "the library's own; only a process running with the library can open it "
                       "(others get CUDA_ERROR_INVALID_VALUE)");
        return CUDA_SUCCESS;
    }
    if (first)
        SG_WARN("cuIpcGetMemHandle on the allocation at 0x%llx (%zu bytes), which the library placed "
                "in VMM memory: %s; returning CUDA_ERROR_INVALID_VALUE. To give such allocations to "
                "the driver unchanged, set %s below their size (e.g. %s=%zu)",
                (unsigned long long)b->base, b->size, why, SG_ENV_PLACE_MAX, SG_ENV_PLACE_MAX,
                b->size ? b->size - 1 : 0);
    return CUDA_ERROR_INVALID_VALUE;
}

void sg_ipc_block_gone(uint64_t id)
{
    if (!__atomic_load_n(&nexports, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&ipc_lock);
    ipc_export *e;
    HASH_FIND(hb, by_block, &id, sizeof id, e);
    if (e) export_unlink(e);
    pthread_mutex_unlock(&ipc_lock);
    export_free(e);
}

/* ------------------------------------------------------------------ import */

/* An import being made: what the fetch callbacks fill. */
typedef struct import_job {
    ipc_import *im;
    const sg_vmm_dev *dev;
    size_t mapped;                     /* chunks mapped so far */
    CUresult rc;                       /* CUDA_SUCCESS, or why the open fails */
    const char *why;
} import_job;

static int job_fail(import_job *j, CUresult rc, const char *why)
{
    j->rc = rc;
    j->why = why;
    return -1;
}

static int on_layout(void *u, const sg_ipc_layout *l)
{
    import_job *j = u;
    ipc_import *im = j->im;
    if (l->chunk_size % j->dev->gran || l->n > SIZE_MAX / l->chunk_size)
        return job_fail(j, CUDA_ERROR_INVALID_VALUE,
                        "its chunks do not suit this device's granularity");
    im->chunk_size = (size_t)l->chunk_size;
    im->n = (size_t)l->n;
    if (sg_vmm_reserve(im->n * im->chunk_size, im->chunk_size, &im->resv) != CUDA_SUCCESS)
        return job_fail(j, CUDA_ERROR_MAP_FAILED, "cuMemAddressReserve failed");
    im->ptr = im->resv + l->offset;
    return 0;
}

static int on_fd(void *u, size_t i, int fd)
{
    import_job *j = u;
    ipc_import *im = j->im;
    CUmemGenericAllocationHandle h;
    sg_vmm_relax();
    CUresult rc = SG_DRIVER_CALL(cuMemImportFromShareableHandle, &h, (void *)(intptr_t)fd,
                                 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fd);
    if (rc != CUDA_SUCCESS) return job_fail(j, CUDA_ERROR_MAP_FAILED, "cuMemImportFromShareableHandle failed");
    rc = sg_vmm_map(im->resv + i * im->chunk_size, im->chunk_size, h);
    sg_vmm_release(h);                 /* the mapping holds the memory */
    if (rc != CUDA_SUCCESS) return job_fail(j, CUDA_ERROR_MAP_FAILED, "cuMemMap failed");
    j->mapped = i + 1;
    return 0;
}

/* Unmaps the first `mapped` chunks of im and frees its reservation. */
static void import_unmap(const ipc_import *im, size_t mapped)
{
    for (size_t i = 0; i < mapped; i++) sg_vmm_unmap(im->resv + i * im->chunk_size, im->chunk_size);
    if (im->resv) sg_vmm_unreserve(im->resv, im->n * im->chunk_size);
}

static ipc_import *import_find(const sg_ipc_wire *w, CUcontext ctx)
{
    for (ipc_import *im = imports; im; im = im->next)
        if (im->pid == w->pid && im->tag == w->tag && im->nonce == w->nonce && im->ctx == ctx) return im;
    return NULL;
}

/* The VMM facts of ctx's device (0), or -1. */
static int ctx_vmm(CUcontext ctx, sg_vmm_dev *out)
{
    sg_ctx *cx = sg_ctx_get(ctx);
    if (!cx) return -1;
    pthread_mutex_lock(&cx->lock);
    int ok = sg_ctx_vmm_locked(cx);
    if (ok) *out = cx->vmm;
    pthread_mutex_unlock(&cx->lock);
    sg_ctx_put(cx);
    return ok ? 0 : -1;
}

/* Opens the export w in ctx (not yet opened there). */
static CUresult import_make(const sg_ipc_wire *w, CUcontext ctx, unsigned flags, ipc_import **out)
{
    sg_vmm_dev dev;
    ipc_import *im = calloc(1, sizeof *im);
    import_job j = { im, &dev, 0, CUDA_SUCCESS, NULL };
    if (!im) return CUDA_ERROR_OUT_OF_MEMORY;
    *im = (ipc_import){ .pid = w->pid, .tag = w->tag, .nonce = w->nonce, .ctx = ctx, .size = w->size,
                        .refs = 1 };
    const char *why = NULL;
    if (!sg_drv.cuMemImportFromShareableHandle) {
        job_fail(&j, CUDA_ERROR_MAP_FAILED, "the driver lacks cuMemImportFromShareableHandle");
    } else if (ctx_vmm(ctx, &dev) != 0) {
        job_fail(&j, CUDA_ERROR_MAP_FAILED, "the current device has no virtual memory management");
    } else if (sg_ipc_fetch(w, on_layout, on_fd, &j, &why) != 0 && why) {
        job_fail(&j, CUDA_ERROR_INVALID_VALUE, why);
    } else if (j.rc == CUDA_SUCCESS) {
        if (!(flags & CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) dev.naccess = 1;   /* this device only */
        if (sg_vmm_set_access(&dev, im->resv, im->n * im->chunk_size) != CUDA_SUCCESS)
            job_fail(&j, CUDA_ERROR_MAP_FAILED, "cuMemSetAccess failed");
    }
    if (j.rc != CUDA_SUCCESS) {
        import_unmap(im, j.mapped);
        sg_vmm_unrelax();
        free(im);
        SG_WARN_ONCE("cuIpcOpenMemHandle of a handle from process %u, which the library placed in "
                     "VMM memory there: %s; returning %d. Legacy IPC of such memory needs the "
                     "library in both processes, the same user and the same network namespace; "
                     "to keep these allocations away from the library, set %s in the exporting "
                     "process below their size", (unsigned)w->pid, j.why, (int)j.rc,
                     SG_ENV_PLACE_MAX);
        return j.rc;
    }
    sg_vmm_unrelax();
    im->id = IMPORT_ID_BASE + __atomic_add_fetch(&next_import, 1, __ATOMIC_RELAXED);
    *out = im;
    return CUDA_SUCCESS;
}

static CUresult ipc_open(const sg_call *c)
{
    sg_ipc_wire w;
    if (sg_ipc_decode(c->u.ipc_open.handle, &w) != 0) return c->forward(c->args);
    CUcontext ctx = NULL;
    if (!c->u.ipc_open.out || (c->u.ipc_open.flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
        return CUDA_ERROR_INVALID_VALUE;
    if (w.pid == (uint32_t)getpid() || !sg_drv.cuCtxGetCurrent ||
        SG_DRIVER_CALL(cuCtxGetCurrent, &ctx) != CUDA_SUCCESS || !ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&ipc_lock);
    ipc_import *im = import_find(&w, ctx);
    if (im) {
        im->refs++;
        *c->u.ipc_open.out = im->ptr;
    }
    pthread_mutex_unlock(&ipc_lock);
    if (im) return CUDA_SUCCESS;

    ipc_import *made = NULL;
    CUresult rc = import_make(&w, ctx, c->u.ipc_open.flags, &made);
    if (rc != CUDA_SUCCESS) return rc;
    pthread_mutex_lock(&ipc_lock);
    im = import_find(&w, ctx);          /* another thread opened it meanwhile */
    if (im) {
        im->refs++;
    } else {
        im = made;
        made = NULL;
        im->next = imports;
        imports = im;
        __atomic_add_fetch(&nimports, 1, __ATOMIC_RELEASE);
    }
    *c->u.ipc_open.out = im->ptr;
    pthread_mutex_unlock(&ipc_lock);
    if (made) {
        import_unmap(made, made->n);
        sg_vmm_unrelax();
        free(made);
    }
    return CUDA_SUCCESS;
}

/* Takes im out of the list (ipc_lock held). */
static void import_unlink(ipc_import *im)
{
    ipc_import **pp = &imports;
    while (*pp != im) pp = &(*pp)->next;
    *pp = im->next;
    __atomic_sub_fetch(&nimports, 1, __ATOMIC_RELEASE);
}

/* Like the driver's, a close needs a current context (any: the driver's
 * documentation does not tie it to the opening one). */
static CUresult ipc_close(const sg_call *c)
{
    CUdeviceptr p = c->u.ipc_close.ptr;
    CUcontext ctx = NULL;
    if (!__atomic_load_n(&nimports, __ATOMIC_ACQUIRE)) return c->forward(c->args);
    if (SG_DRIVER_CALL(cuCtxGetCurrent, &ctx) != CUDA_SUCCESS || !ctx) return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&ipc_lock);
    ipc_import *im = imports;
    while (im && im->ptr != p) im = im->next;
    int last = im && --im->refs == 0;
    if (last) import_unlink(im);
    pthread_mutex_unlock(&ipc_lock);
    if (!im) return c->forward(c->args);
    if (last) {
        import_unmap(im, im->n);
        sg_vmm_unrelax();
        free(im);
    }
    return CUDA_SUCCESS;
}

CUresult sg_ipc_call(const sg_call *c)
{
    switch (c->kind) {
    case SG_CALL_IPC_OPEN:
        return ipc_open(c);
    case SG_CALL_IPC_CLOSE:
        return ipc_close(c);
    default:
        return c->forward(c->args);
    }
}

int sg_ipc_opened(void) { return __atomic_load_n(&nimports, __ATOMIC_ACQUIRE) != 0; }

int sg_ipc_lookup(CUdeviceptr p, sg_alloc_info *out)
{
    if (!__atomic_load_n(&nimports, __ATOMIC_ACQUIRE)) return -1;
    int r = -1;
    pthread_mutex_lock(&ipc_lock);
    for (ipc_import *im = imports; im && r < 0; im = im->next) {
        if (p - im->resv >= im->n * im->chunk_size) continue;
        r = p - im->ptr < im->size;
        if (r) *out = (sg_alloc_info){ .base = im->ptr, .size = im->size, .id = im->id, .ctx = im->ctx,
                                       .sync_memops = im->sync_memops };
    }
    pthread_mutex_unlock(&ipc_lock);
    return r;
}

int sg_ipc_set_sync(CUdeviceptr p, uint64_t id, int on)
{
    int found = 0;
    pthread_mutex_lock(&ipc_lock);
    for (ipc_import *im = imports; im && !found; im = im->next) {
        if (im->id != id || p - im->ptr >= im->size) continue;
        im->sync_memops = on;
        found = 1;
    }
    pthread_mutex_unlock(&ipc_lock);
    return found;
}

/* ------------------------------------------------------------- life cycle */

void sg_ipc_ctx_gone(CUcontext ctx)
{
    ipc_export *dead = NULL;
    ipc_import *gone = NULL;
    pthread_mutex_lock(&ipc_lock);
    ipc_export *e, *tmp;
    HASH_ITER(hb, by_block, e, tmp) {
        if (e->ctx != ctx) continue;
        export_unlink(e);
        e->gone = dead;
        dead = e;
    }
    for (ipc_import **pp = &imports; *pp;) {
        ipc_import *im = *pp;
        if (im->ctx != ctx) {
            pp = &im->next;
            continue;
        }
        *pp = im->next;
        __atomic_sub_fetch(&nimports, 1, __ATOMIC_RELEASE);
        im->next = gone;
        gone = im;
    }
    pthread_mutex_unlock(&ipc_lock);
    while (dead) {
        e = dead;
        dead = e->gone;
        export_free(e);
    }
    while (gone) {
        ipc_import *im = gone;
        gone = im->next;
        import_unmap(im, im->n);
        free(im);
    }
    sg_vmm_unrelax();
}

void sg_ipc_atfork(int phase)
{
    if (phase == 0) {
        pthread_mutex_lock(&ipc_lock);
        sg_ipc_wire_atfork(0);
        return;
    }
    sg_ipc_wire_atfork(phase);
    if (phase == 2) exports_drop_all();   /* the exports are the parent's */
    pthread_mutex_unlock(&ipc_lock);
}

void sg_ipc_reset(void)
{
    pthread_mutex_lock(&ipc_lock);
    exports_drop_all();
    ipc_import *im = imports;
    imports = NULL;
    __atomic_store_n(&nimports, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&ipc_lock);
    while (im) {
        ipc_import *next = im->next;
        import_unmap(im, im->n);
        free(im);
        im = next;
    }
    sg_vmm_unrelax();
}
