/*
 * emu_vmm.c: the virtual memory management API of the emulated CUDA driver,
 * with real page semantics: reservations (cuMemAddressReserve / Free) are
 * PROT_NONE anonymous mappings, physical handles (cuMemCreate / Release) are
 * memfd files, cuMemMap maps the memfd MAP_SHARED|MAP_FIXED (so one handle
 * mapped twice truly aliases), cuMemSetAccess is mprotect; granularity,
 * access queries, retaining the handle of a mapped address, export and
 * import as POSIX file descriptors, allocation properties.
 *
 * Locks: emu_mem_lock (emu_mem.h) guards reservations, handles and mappings, as
 * for all device memory; the in-flight check of unmapping runs outside it
 * (validate, drop, check, retake, validate again).
 */
#include "emu_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------
 * Virtual memory management
 * ---------------------------------------------------------------------- */

/* Common checks after EMU_ENTRY_INIT of a VMM call; `unsafe`: the call is
 * one the driver refuses during stream capture. */
static CUresult vmm_enter(const char *call, int unsafe)
{
    if (emu_cfg.no_vmm) return CUDA_ERROR_NOT_SUPPORTED;
    return unsafe ? emu_capture_check_unsafe(call) : CUDA_SUCCESS;
}

static int gran_aligned(size_t v) { return v % emu_cfg.granularity == 0; }

static CUresult location_check(const CUmemLocation *loc)
{
    if (!loc) return CUDA_ERROR_INVALID_VALUE;
    if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return loc->type == CU_MEM_LOCATION_TYPE_HOST || loc->type == CU_MEM_LOCATION_TYPE_HOST_NUMA
                   ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
    if (loc->id < 0 || loc->id >= emu_device_count() || loc->id >= MEM_MAX_DEVICES)
        return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

static CUresult prop_check(const CUmemAllocationProp *prop)
{
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    return location_check(&prop->location);
}

/* The handle with that id (emu_mem_lock held), NULL if none is alive. */
static mem_handle *handle_get(CUmemGenericAllocationHandle id)
{
    mem_handle *h = NULL;
    HASH_FIND(hh, emu_memory.handles, &id, sizeof id, h);
    return h;
}

/* Frees h once nothing refers to it any more (emu_mem_lock held). */
/* A new handle's id: the one released last, as a driver gives a released
 * handle's value to the next allocation (emu_mem_lock held). */
static unsigned long long handle_id_take(void)
{
    if (emu_memory.nfree_ids) return emu_memory.free_ids[--emu_memory.nfree_ids];
    return emu_memory.next_handle_id++;
}

static void handle_maybe_destroy(mem_handle *h)
{
    if (h->refs || h->maps) return;
    HASH_DEL(emu_memory.handles, h);
    if (emu_memory.nfree_ids == emu_memory.cap_free_ids) {
        size_t cap = emu_memory.cap_free_ids ? 2 * emu_memory.cap_free_ids : 16;
        unsigned long long *v = realloc(emu_memory.free_ids, cap * sizeof *v);
        if (v) {                /* else the id is not reused: harmless */
            emu_memory.free_ids = v;
            emu_memory.cap_free_ids = cap;
        }
    }
    if (emu_memory.nfree_ids < emu_memory.cap_free_ids) emu_memory.free_ids[emu_memory.nfree_ids++] = h->id;
    if (!h->imported) emu_memory.used[h->prop.location.id] -= h->size;
    close(h->fd);
    free(h);
}

EMU_EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                                  CUmemAllocationGranularity_flags option)
{
    EMU_ENTRY_INIT();
    CUresult rc = vmm_enter(__func__, 0);
    if (rc != CUDA_SUCCESS) return rc;
    if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                         option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = prop_check(prop)) != CUDA_SUCCESS) return rc;
    *granularity = emu_cfg.granularity;
    return CUDA_SUCCESS;
}

/* Reserves `size` bytes of PROT_NONE address space aligned to `align`, at
 * `hint` if that is free and aligned. NULL if the address space is full. */
void *emu_va_reserve(size_t size, size_t align, CUdeviceptr hint)
{
    const int fl = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (hint && hint % align == 0) {
        void *q = mmap((void *)hint, size, PROT_NONE, fl | MAP_FIXED_NOREPLACE, -1, 0);
        if (q == (void *)hint) return q;
        if (q != MAP_FAILED) munmap(q, size);   /* kernel without NOREPLACE */
    }
    size_t len = size + align;
    if (len < size) return NULL;
    char *q = mmap(NULL, len, PROT_NONE, fl, -1, 0);
    if (q == MAP_FAILED) return NULL;
    char *a = (char *)emu_round_up((uintptr_t)q, align);
    if (a > q) munmap(q, (size_t)(a - q));
    if (q + len > a + size) munmap(a + size, (size_t)(q + len - (a + size)));
    return a;
}

/* Turns [p, p+n) back into reservation pages (PROT_NONE, no backing). */
static int va_restore(CUdeviceptr p, size_t n)
{
    void *q = mmap((void *)p, n, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return q == MAP_FAILED ? -1 : 0;
}

EMU_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                        CUdeviceptr addr, unsigned long long flags)
{
    EMU_ENTRY_INIT();
    CUresult rc = vmm_enter(__func__, 1);
    if (rc != CUDA_SUCCESS) return rc;
    if (!ptr || size == 0 || flags || size % emu_page_size() || addr % emu_page_size() ||
        (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    size_t align = alignment > emu_cfg.granularity ? alignment : emu_cfg.granularity;

    reservation *rv = calloc(1, sizeof *rv);
    void *p = rv ? emu_va_reserve(size, align, addr) : NULL;
    if (!p) { free(rv); return CUDA_ERROR_OUT_OF_MEMORY; }
    rv->s = (span){ (CUdeviceptr)p, size };
    pthread_mutex_lock(&emu_mem_lock);
    int bad = emu_span_insert(&emu_memory.resvs, &rv->s);
    pthread_mutex_unlock(&emu_mem_lock);
    if (bad) { munmap(p, size); free(rv); return CUDA_ERROR_OUT_OF_MEMORY; }
    *ptr = (CUdeviceptr)p;
    return CUDA_SUCCESS;
}

/* The reservation exactly [ptr, ptr+size) if nothing is mapped in it
 * (emu_mem_lock held). */
static reservation *resv_free_whole(CUdeviceptr ptr, size_t size)
{
    span *s = emu_span_find(&emu_memory.resvs, ptr);
    if (!s || s->base != ptr || s->size != size) return NULL;
    if (emu_span_overlap(&emu_memory.ranges, ptr, ptr + size)) return NULL;
    return (reservation *)s;
}

/* The reservation must be given whole and hold no mapping. */
EMU_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    EMU_ENTRY_INIT();
    CUresult rc = vmm_enter(__func__, 1);
    if (rc != CUDA_SUCCESS) return rc;
    pthread_mutex_lock(&emu_mem_lock);
    reservation *rv = resv_free_whole(ptr, size);
    pthread_mutex_unlock(&emu_mem_lock);
    if (!rv) return CUDA_ERROR_INVALID_VALUE;

    emu_inflight_check(__func__, ptr, size);

    pthread_mutex_lock(&emu_mem_lock);
    rv = resv_free_whole(ptr, size);
    if (rv) emu_span_remove(&emu_memory.resvs, &rv->s);
    pthread_mutex_unlock(&emu_mem_lock);
    if (!rv) return CUDA_ERROR_INVALID_VALUE;
    munmap((void *)ptr, size);
    free(rv);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                const CUmemAllocationProp *prop, unsigned long long flags)
{
    EMU_ENTRY_INIT();
    CUresult rc = vmm_enter(__func__, 1);
    if (rc != CUDA_SUCCESS) return rc;
    if (!handle || flags || size == 0 || !gran_aligned(size)) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = prop_check(prop)) != CUDA_SUCCESS) return rc;
    int dev = prop->location.id;

    mem_handle *h = calloc(1, sizeof *h);
    if (!h) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&emu_mem_lock);
    int ok = emu_usage_take(dev, size);
    pthread_mutex_unlock(&emu_mem_lock);
    if (!ok) { free(h); return CUDA_ERROR_OUT_OF_MEMORY; }

    char name[64];
    emu_ipc_vmm_name(name, sizeof name, prop);
    h->fd = memfd_create(name, MFD_CLOEXEC);
    ok = h->fd >= 0 && ftruncate(h->fd, (off_t)size) == 0;
    pthread_mutex_lock(&emu_mem_lock);
    if (ok) {
        h->size = size;
        h->prop = *prop;
        h->refs = 1;
        h->id = handle_id_take();
        h->block_id = emu_memory.next_buffer_id++;
        emu_mem_hash_oom = 0;
        HASH_ADD(hh, emu_memory.handles, id, sizeof h->id, h);
        ok = !emu_mem_hash_oom;
    }
    if (!ok) emu_memory.used[dev] -= size;
    pthread_mutex_unlock(&emu_mem_lock);
    if (!ok) {
        if (h->fd >= 0) close(h->fd);
        free(h);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *handle = h->id;
    return CUDA_SUCCESS;
}

/* Drops the creation (or a retain) reference; the memory goes when the last
 * mapping does. Releasing more often than retained is an error. */
EMU_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    EMU_ENTRY_INIT();
    CUresult rc = vmm_enter(__func__, 1);
    if (rc != CUDA_SUCCESS) return rc;
    pthread_mutex_lock(&emu_mem_lock);
    mem_handle *h = handle_get(handle);
    int ok = h && h->refs > 0;
    if (ok) {
        h->refs--;
        handle_maybe_destroy(h);
    }
    pthread_mutex_unlock(&emu_mem_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Validates a cuMemMap request (emu_mem_lock held). */
static CUresult map_check(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle handle, unsigned long long flags,
                          mem_handle **hp, span **rvp)
{
    if (flags || offset != 0 || size == 0 || !gran_aligned(ptr) || !gran_aligned(size) ||
        ptr + size < ptr)
        return CUDA_ERROR_INVALID_VALUE;
    mem_handle *h = handle_get(handle);
    if (!h || h->refs == 0 || size > h->size) return CUDA_ERROR_INVALID_VALUE;
    span *rv = emu_span_find(&emu_memory.resvs, ptr);
    if (!rv || ptr + size > rv->base + rv->size) return CUDA_ERROR_INVALID_VALUE;
    if (emu_span_overlap(&emu_memory.ranges, ptr, ptr + size)) return CUDA_ERROR_INVALID_VALUE;
    *hp = h;
    *rvp = rv;
    return CUDA_SUCCESS;
}

/* The new mapping starts with no access (PROT_NONE) until cuMemSetAccess. */
EMU_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                             CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    EMU_ENTRY_INIT();
    CUresult rc = vmm_enter(__func__, 1);
    if (rc != CUDA_SUCCESS) return rc;
    mem_handle *h;
    span *rv;
    pthread_mutex_lock(&emu_mem_lock);
    rc = map_check(ptr, size, offset, handle, flags, &h, &rv);
    pthread_mutex_unlock(&emu_mem_lock);
    if (rc != CUDA_SUCCESS) return rc;

    /* Queued work that used an earlier mapping here would now see this one. */
    emu_inflight_check(__func__, ptr, size);

    mem_range *r = calloc(1, sizeof *r);
    if (!r) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&emu_mem_lock);
    rc = map_check(ptr, size, offset, handle, flags, &h, &rv);
    if (rc == CUDA_SUCCESS) {
        void *q = mmap((void *)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd, 0);
        *r = (mem_range){ .s = { ptr, size }, .mapped = size, .kind = RK_MAP,
                          .device = h->prop.location.id, .buffer_id = emu_memory.next_buffer_id++,
                          .handle = h, .resv = *rv };
        if (q == MAP_FAILED || emu_span_insert(&emu_memory.ranges, &r->s) != 0) {
            va_restore(ptr, size);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            h->maps++;
        }
    }
    pthread_mutex_unlock(&emu_mem_lock);
    if (rc != CUDA_SUCCESS) free(r);
    return rc;
}

/* If [ptr, ptr+size) is exactly a run of whole, adjacent mappings, returns
 * how many and stores the index of the first in *first; else 0 (emu_mem_lock
 * held). Mappings are consecutive in the sorted registry. */
static size_t mappings_tiling(CUdeviceptr ptr, size_t size, size_t *first)
{
    CUdeviceptr end = ptr + size, pos = ptr;
    if (size == 0 || end < ptr) return 0;
    size_t i = emu_span_lower(&emu_memory.ranges, ptr), k = 0;
    while (pos < end && i + k < emu_memory.ranges.n) {
        mem_range *r = (mem_range *)emu_memory.ranges.v[i + k];
        if (r->kind != RK_MAP || r->s.base != pos) return 0;
        pos += r->s.size;
        k++;
    }
    *first = i;
    return pos == end ? k : 0;
}

static int access_prot(const mem_range *r)
{
    int prot = PROT_NONE;
    for (int d = 0; d < MEM_MAX_DEVICES; d++) {
        if (r->access[d] == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) return PROT_READ | PROT_WRITE;
        if (r->access[d] == CU_MEM_ACCESS_FLAGS_PROT_READ) prot = PROT_READ;
    }
    return prot;
}

/* The range must consist of whole mappings. The host sees the most generous
 * access any device has (emulated kernels run on the host). */
EMU_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    EMU_ENTRY_INIT();
    CUresult rc = vmm_enter(__func__, 1);
    if (rc != CUDA_SUCCESS) return rc;
    if (!desc || count == 0) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        if ((rc = location_check(&desc[i].location)) != CUDA_SUCCESS) return rc;
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
    }
    size_t first, k;
    pthread_mutex_lock(&emu_mem_lock);
    if (!(k = mappings_tiling(ptr, size, &first))) rc = CUDA_ERROR_INVALID_VALUE;
    for (size_t j = 0; j < k && rc == CUDA_SUCCESS; j++) {
        mem_range *r = (mem_range *)emu_memory.ranges.v[first + j];
        mem_range next = *r;
        for (size_t i = 0; i < count; i++) next.access[desc[i].location.id] = desc[i].flags;
        if (mprotect((void *)r->s.base, r->s.size, access_prot(&next)) != 0)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        else
            memcpy(r->access, next.access, sizeof r->access);
    }
    pthread_mutex_unlock(&emu_mem_lock);
    return rc;
}

EMU_EXPORT CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    EMU_ENTRY_INIT();
    CUresult rc = vmm_enter(__func__, 0);
    if (rc != CUDA_SUCCESS) return rc;
    if (!flags) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = location_check(location)) != CUDA_SUCCESS) return rc;
    pthread_mutex_lock(&emu_mem_lock);
    mem_range *r = emu_range_find(ptr);
    int ok = r && r->kind == RK_MAP;
    if (ok) *flags = r->access[location->id];
    pthread_mutex_unlock(&emu_mem_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Unmaps whole mappings; like the driver it does not wait for queued work,
 * so unmapping memory such work may touch is reported as a violation. */
EMU_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    EMU_ENTRY_INIT();
    CUresult rc = vmm_enter(__func__, 1);
    if (rc != CUDA_SUCCESS) return rc;
    size_t first, k;
    pthread_mutex_lock(&emu_mem_lock);
    k = mappings_tiling(ptr, size, &first);
    pthread_mutex_unlock(&emu_mem_lock);
    if (!k) return CUDA_ERROR_INVALID_VALUE;

    emu_inflight_check(__func__, ptr, size);

    pthread_mutex_lock(&emu_mem_lock);
    k = mappings_tiling(ptr, size, &first);
    for (size_t j = 0; j < k; j++) {
        mem_range *r = (mem_range *)emu_memory.ranges.v[first + j];
        if (va_restore(r->s.base, r->s.size) != 0)   /* leaves a hole: loud */
            emu_log("cuMemUnmap: cannot restore reservation pages at 0x%llx: %s",
                    (unsigned long long)r->s.base, strerror(errno));
        r->handle->maps--;
        handle_maybe_destroy(r->handle);
        free(r);
    }
    if (k) {
        memmove(&emu_memory.ranges.v[first], &emu_memory.ranges.v[first + k],
                (emu_memory.ranges.n - first - k) * sizeof *emu_memory.ranges.v);
        emu_memory.ranges.n -= k;
    }
    pthread_mutex_unlock(&emu_mem_lock);
    return k ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Takes a new reference on the handle mapped at addr (any interior address). */
EMU_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    EMU_ENTRY_INIT();
    CUresult rc = vmm_enter(__func__, 0);
    if (rc != CUDA_SUCCESS) return rc;
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&emu_mem_lock);
    mem_range *r = emu_range_find((CUdeviceptr)addr);
    int ok = r && r->kind == RK_MAP;
    if (ok) {
        r->handle->refs++;
        *handle = r->handle->id;
    }
    pthread_mutex_unlock(&emu_mem_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* cuMemExportToShareableHandle: only CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
 * is emulated (the device reports HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
 * only), and only for a handle whose cuMemCreate requested it
 * (requestedHandleTypes, which CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES
 * reports): *(int *)shareableHandle gets a new file descriptor of the
 * memory. Another requested type: CUDA_ERROR_INVALID_VALUE; a type the device
 * does not support: CUDA_ERROR_NOT_SUPPORTED. */
EMU_EXPORT CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                                 CUmemAllocationHandleType handleType, unsigned long long flags)
{
    EMU_ENTRY_INIT();
    CUresult rc = vmm_enter(__func__, 0);
    if (rc != CUDA_SUCCESS) return rc;
    if (!shareableHandle || flags) return CUDA_ERROR_INVALID_VALUE;
    if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return handleType == CU_MEM_HANDLE_TYPE_NONE ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
    int fd = -1;
    pthread_mutex_lock(&emu_mem_lock);
    mem_handle *h = handle_get(handle);
    if (!h || !(h->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) rc = CUDA_ERROR_INVALID_VALUE;
    else if ((fd = fcntl(h->fd, F_DUPFD_CLOEXEC, 0)) < 0) rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&emu_mem_lock);
    if (rc == CUDA_SUCCESS) memcpy(shareableHandle, &fd, sizeof fd);
    return rc;
}

/* The file descriptor of an exported allocation gives a new handle to the
 * same memory: one of this process's, with the same properties and block id;
 * one of another process (passed over a socket), with the properties its
 * cuMemCreate gave (the memfd's name carries them, emu_ipc.c) and a new block
 * id. Either way the memory stays charged to the budget of the process that
 * created it, not to this one. A descriptor of anything else:
 * CUDA_ERROR_INVALID_VALUE. */
EMU_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                   CUmemAllocationHandleType shHandleType)
{
    EMU_ENTRY_INIT();
    CUresult rc = vmm_enter(__func__, 1);
    if (rc != CUDA_SUCCESS) return rc;
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
    struct stat want, have;
    int osfd = (int)(intptr_t)osHandle;
    if (fstat(osfd, &want) != 0) return CUDA_ERROR_INVALID_VALUE;
    mem_handle *n = calloc(1, sizeof *n);
    if (!n) return CUDA_ERROR_OUT_OF_MEMORY;
    int foreign = emu_ipc_vmm_foreign(osfd, &n->prop, &n->size) == 0;
    rc = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&emu_mem_lock);
    mem_handle *src = NULL;
    for (mem_handle *h = emu_memory.handles; h && !src; h = h->hh.next)
        if (fstat(h->fd, &have) == 0 && have.st_ino == want.st_ino && have.st_dev == want.st_dev) src = h;
    if (src || foreign) {
        if (src) {
            n->prop = src->prop;
            n->size = src->size;
        }
        n->block_id = src ? src->block_id : emu_memory.next_buffer_id++;
        n->refs = 1;
        n->imported = 1;
        n->fd = fcntl(osfd, F_DUPFD_CLOEXEC, 0);
        rc = n->fd < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    }
    if (rc == CUDA_SUCCESS) {
        n->id = handle_id_take();
        emu_mem_hash_oom = 0;
        HASH_ADD(hh, emu_memory.handles, id, sizeof n->id, n);
        rc = emu_mem_hash_oom ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
        if (rc == CUDA_SUCCESS) *handle = n->id;
        else close(n->fd);
    }
    pthread_mutex_unlock(&emu_mem_lock);
    if (rc != CUDA_SUCCESS) free(n);
    return rc;
}

EMU_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                           CUmemGenericAllocationHandle handle)
{
    EMU_ENTRY_INIT();
    CUresult rc = vmm_enter(__func__, 0);
    if (rc != CUDA_SUCCESS) return rc;
    if (!prop) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&emu_mem_lock);
    mem_handle *h = handle_get(handle);
    if (h) *prop = h->prop;
    pthread_mutex_unlock(&emu_mem_lock);
    return h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
