/*
 * emu_ipc.c: legacy IPC of the emulated driver, between processes, and what
 * lets another process import an exported cuMemCreate descriptor.
 *
 * Responsible for:
 *   - cuIpcGetMemHandle: a handle naming the cuMemAlloc block that contains
 *     the pointer (any interior address). Emulated device memory is private
 *     anonymous memory, so the first export of a block moves its bytes into
 *     a memfd mapped MAP_SHARED at the same address (after waiting for every
 *     stream: no queued work may write during the move; a write by another
 *     host thread during that first call would be lost). The memfd stays
 *     open in the exporter until the block is freed (emu_ipc_alloc_gone).
 *     Exporting a block again gives the same handle; a new block at the same
 *     address gets a new one (the driver's documented behaviour).
 *   - cuIpcOpenMemHandle (and _v2): another process opens the exporter's
 *     memfd through /proc/<pid>/fd/<n> (same user; a ptrace "read" check,
 *     which Yama does not restrict), checks it is the same file (inode, size),
 *     maps it MAP_SHARED anywhere and registers it as a device block of the
 *     current context (emu_mem_ipc_add: device memory, not charged here, not
 *     freed by cuMemFree, gone with the context). Opening a handle the
 *     current context already opened returns the same address and counts a
 *     reference (documented). Errors: Flags other than 0 or
 *     CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, a NULL pdptr, a handle the emulator
 *     did not make, an exporter that is gone or whose block is gone:
 *     CUDA_ERROR_INVALID_VALUE; a handle of this very process, or no current
 *     context: CUDA_ERROR_INVALID_CONTEXT (what the driver answers).
 *   - cuIpcCloseMemHandle: drops one reference of an address cuIpcOpenMemHandle
 *     returned; the last one unmaps (queued work still using it is a
 *     violation, as for cuMemUnmap). Anything else: CUDA_ERROR_INVALID_VALUE.
 *   - the memfd name of cuMemCreate handles ("cudaemu-vmm:<device>:<handle
 *     types>:<rdma>"), from which cuMemImportFromShareableHandle learns the
 *     properties of a descriptor another process exported
 *     (emu_ipc_vmm_foreign).
 *
 * Locking: ipc_lock guards the two tables below. emu_mem.c's memory lock may
 * be taken under it (never the other way: emu_ipc_alloc_gone is called with
 * no lock held); waiting for streams (emu_streams_sync_all) happens with no
 * lock held.
 */
#include "emu_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int ipc_hash_oom;
#define uthash_nonfatal_oom(obj) (ipc_hash_oom = 1)
#include <uthash.h>

#define IPC_MAGIC "cudaemu"
#define IPC_VERSION 2u

/* What an emulated CUipcMemHandle holds. */
typedef struct ipc_payload {
    char magic[8];              /* IPC_MAGIC */
    uint32_t version;
    int32_t pid;                /* the exporter */
    int32_t device;
    int32_t fd;                 /* the exporter's memfd holding the block */
    uint64_t ino;               /* its inode (a reused descriptor number shows) */
    uint64_t buffer_id;         /* the block, in the exporter */
    uint64_t size, mapped;
} ipc_payload;
_Static_assert(sizeof(ipc_payload) <= CU_IPC_HANDLE_SIZE, "IPC payload too large");

/* A block of this process that was exported. */
typedef struct ipc_export {
    CUdeviceptr base;           /* key */
    unsigned long long buffer_id;
    int fd;
    uint64_t ino;
    UT_hash_handle hh;
} ipc_export;

/* A block of another process opened here, in one context. */
typedef struct ipc_key {
    int32_t pid;
    uint64_t buffer_id;
    CUcontext ctx;
} ipc_key;
typedef struct ipc_open {
    ipc_key key;
    CUdeviceptr base;
    unsigned long long local_id;    /* its buffer id here (emu_mem_ipc_add) */
    unsigned long refs;
    UT_hash_handle hh;
} ipc_open;

static pthread_mutex_t ipc_lock = PTHREAD_MUTEX_INITIALIZER;
static ipc_export *exports;     /* by base */
static ipc_open *opens;         /* by key */

/* ------------------------------------------------------------------ export */

/* Moves the block's bytes into a new memfd mapped at the same address
 * (under the memory lock, emu_mem_alloc_with). *(int *)u gets the memfd. */
static int make_shared(const emu_alloc_view *v, void *u)
{
    int fd = memfd_create("cudaemu-ipc", MFD_CLOEXEC);
    if (fd < 0) return -1;
    void *tmp = MAP_FAILED;
    if (ftruncate(fd, (off_t)v->mapped) == 0)
        tmp = mmap(NULL, v->mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (tmp == MAP_FAILED) {
        close(fd);
        return -1;
    }
    memcpy(tmp, (void *)v->base, v->mapped);
    /* One step replaces the private pages: nothing is ever unmapped there. */
    if (mremap(tmp, v->mapped, v->mapped, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)v->base) == MAP_FAILED) {
        munmap(tmp, v->mapped);
        close(fd);
        return -1;
    }
    *(int *)u = fd;
    return 0;
}

/* The export of the block v (ipc_lock held), NULL if none. */
static ipc_export *export_of(const emu_alloc_view *v)
{
    ipc_export *e;
    HASH_FIND(hh, exports, &v->base, sizeof v->base, e);
    return e && e->buffer_id == v->buffer_id ? e : NULL;
}

/* Exports the block containing p (ipc_lock held); NULL if p is in no
 * cuMemAlloc block or memory ran out. */
static ipc_export *export_block(CUdeviceptr p, emu_alloc_view *v)
{
    ipc_export *e = calloc(1, sizeof *e);
    int fd = -1;
    struct stat st;
    if (!e || emu_mem_alloc_with(p, make_shared, &fd, v) != 0) {
        free(e);
        return NULL;
    }
    *e = (ipc_export){ .base = v->base, .buffer_id = v->buffer_id, .fd = fd,
                       .ino = fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 0 };
    ipc_hash_oom = 0;
    HASH_ADD(hh, exports, base, sizeof e->base, e);
    if (ipc_hash_oom) {         /* the block stays shared; it is only not exported */
        close(fd);
        free(e);
        return NULL;
    }
    return e;
}

EMU_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    EMU_ENTRY_INIT();
    CUcontext ctx;
    CUresult rc = emu_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    if (!pHandle) return CUDA_ERROR_INVALID_VALUE;
    emu_alloc_view v;
    if (emu_mem_alloc_with(dptr, NULL, NULL, &v) != 0) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&ipc_lock);
    int known = export_of(&v) != NULL;
    pthread_mutex_unlock(&ipc_lock);
    if (!known) emu_streams_sync_all(NULL);     /* nothing queued writes while the bytes move */
    pthread_mutex_lock(&ipc_lock);
    ipc_export *e = export_of(&v);
    if (!e) e = export_block(dptr, &v);
    ipc_payload pl = { .magic = IPC_MAGIC, .version = IPC_VERSION, .pid = (int32_t)getpid(),
                       .device = v.device, .fd = e ? e->fd : -1, .ino = e ? e->ino : 0,
                       .buffer_id = v.buffer_id, .size = v.size, .mapped = v.mapped };
    pthread_mutex_unlock(&ipc_lock);
    if (!e) return CUDA_ERROR_INVALID_VALUE;
    memset(pHandle, 0, sizeof *pHandle);
    memcpy(pHandle->reserved, &pl, sizeof pl);
    return CUDA_SUCCESS;
}

void emu_ipc_alloc_gone(CUdeviceptr base, unsigned long long buffer_id)
{
    pthread_mutex_lock(&ipc_lock);
    ipc_export *e;
    HASH_FIND(hh, exports, &base, sizeof base, e);
    if (e && e->buffer_id == buffer_id) HASH_DEL(exports, e);
    else e = NULL;
    pthread_mutex_unlock(&ipc_lock);
    if (e) {
        close(e->fd);
        free(e);
    }
}

/* -------------------------------------------------------------- open, close */

/* The block opened under key (ipc_lock held), NULL if none; an entry whose
 * range went with its context is dropped. */
static ipc_open *open_find(const ipc_key *key)
{
    ipc_open *o;
    HASH_FIND(hh, opens, key, sizeof *key, o);
    if (o && !emu_mem_ipc_find(o->base, o->local_id, 0)) {
        HASH_DEL(opens, o);
        free(o);
        o = NULL;
    }
    return o;
}

/* Maps the exporter's memfd of pl and registers it (ipc_lock held). */
static CUresult open_map(const ipc_payload *pl, CUcontext ctx, ipc_open *o)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pl->pid, (int)pl->fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT) emu_log("cuIpcOpenMemHandle: cannot open %s: %s", path, strerror(errno));
        return CUDA_ERROR_INVALID_VALUE;    /* exporter or block gone */
    }
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && (uint64_t)st.st_ino == pl->ino && S_ISREG(st.st_mode) &&
        (uint64_t)st.st_size == pl->mapped && pl->size <= pl->mapped)
        p = mmap(NULL, pl->mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return CUDA_ERROR_INVALID_VALUE;
    emu_alloc_view v = { (CUdeviceptr)p, pl->size, pl->mapped, pl->device, 0 };
    CUresult rc = emu_mem_ipc_add(&v, ctx, &o->local_id);
    if (rc != CUDA_SUCCESS) {
        munmap(p, pl->mapped);
        return rc;
    }
    o->base = v.base;
    return CUDA_SUCCESS;
}

static CUresult ipc_open_handle(CUdeviceptr *pdptr, const CUipcMemHandle *handle, unsigned flags)
{
    CUcontext ctx;
    CUresult rc = emu_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    if (!pdptr || (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) return CUDA_ERROR_INVALID_VALUE;
    ipc_payload pl;
    memcpy(&pl, handle->reserved, sizeof pl);
    if (memcmp(pl.magic, IPC_MAGIC, sizeof IPC_MAGIC) != 0 || pl.version != IPC_VERSION)
        return CUDA_ERROR_INVALID_VALUE;
    if (pl.pid == (int32_t)getpid()) return CUDA_ERROR_INVALID_CONTEXT;
    ipc_key key;
    memset(&key, 0, sizeof key);      /* the padding is part of the hash key */
    key.pid = pl.pid;
    key.buffer_id = pl.buffer_id;
    key.ctx = ctx;
    pthread_mutex_lock(&ipc_lock);
    ipc_open *o = open_find(&key);
    if (o) {
        o->refs++;
    } else if ((o = calloc(1, sizeof *o))) {
        o->key = key;
        o->refs = 1;
        rc = open_map(&pl, ctx, o);
        if (rc == CUDA_SUCCESS) {
            ipc_hash_oom = 0;
            HASH_ADD(hh, opens, key, sizeof o->key, o);
            if (ipc_hash_oom) {
                emu_mem_ipc_find(o->base, o->local_id, 1);
                rc = CUDA_ERROR_OUT_OF_MEMORY;
            }
        }
        if (rc != CUDA_SUCCESS) {
            free(o);
            o = NULL;
        }
    } else {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (o) *pdptr = o->base;
    pthread_mutex_unlock(&ipc_lock);
    return rc;
}

/* cuIpcOpenMemHandle (CUDA 4.1) and _v2 (CUDA 11) take the same arguments. */
EMU_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    EMU_ENTRY_INIT();
    return ipc_open_handle(pdptr, &handle, Flags);
}

EMU_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    EMU_ENTRY_INIT();
    return ipc_open_handle(pdptr, &handle, Flags);
}

EMU_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    EMU_ENTRY_INIT();
    CUcontext ctx;
    CUresult rc = emu_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    pthread_mutex_lock(&ipc_lock);
    ipc_open *o = NULL, *it, *tmp;
    HASH_ITER(hh, opens, it, tmp)
        if (it->base == dptr && (o = open_find(&it->key))) break;
    if (o && --o->refs == 0) HASH_DEL(opens, o);
    pthread_mutex_unlock(&ipc_lock);
    if (!o) return CUDA_ERROR_INVALID_VALUE;
    if (o->refs == 0) {
        emu_range r;
        if (emu_mem_find(o->base, &r)) emu_inflight_check(__func__, r.base, r.size);
        emu_mem_ipc_find(o->base, o->local_id, 1);
        free(o);
    }
    return CUDA_SUCCESS;
}

/* --------------------------------------------- cuMemCreate descriptors */

void emu_ipc_vmm_name(char *buf, size_t n, const CUmemAllocationProp *prop)
{
    snprintf(buf, n, "cudaemu-vmm:%d:%llu:%d", prop->location.id,
             (unsigned long long)prop->requestedHandleTypes,
             prop->allocFlags.gpuDirectRDMACapable ? 1 : 0);
}

int emu_ipc_vmm_foreign(int fd, CUmemAllocationProp *prop, size_t *size)
{
    char path[64], name[256];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(path, name, sizeof name - 1);
    if (len <= 0) return -1;
    name[len] = 0;
    int dev, rdma, used = 0;
    unsigned long long types;
    struct stat st;
    if (sscanf(name, "/memfd:cudaemu-vmm:%d:%llu:%d%n", &dev, &types, &rdma, &used) != 3 || !used ||
        dev < 0 || dev >= emu_device_count() || fstat(fd, &st) != 0 || st.st_size <= 0 ||
        (size_t)st.st_size % emu_cfg.granularity)
        return -1;
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = dev;
    prop->requestedHandleTypes = (CUmemAllocationHandleType)types;
    prop->allocFlags.gpuDirectRDMACapable = rdma != 0;
    *size = (size_t)st.st_size;
    return 0;
}
