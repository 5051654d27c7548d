/*
 * emu_array.c: CUDA arrays in the emulated driver: cuArrayCreate_v2 /
 * cuArray3DCreate_v2 check the descriptor, charge the array's bytes to the
 * device's memory budget (emu_mem.c's accounting) and give the array its
 * own storage (its elements, row after row, layer after layer: no address
 * a program sees); cuArrayDestroy gives both back, the descriptor queries
 * return what was asked for, and a context's teardown ends its arrays.
 * Copies name an array by handle (CU_MEMORYTYPE_ARRAY, emu_copy.c): they
 * check its extents here (emu_array_side_check) and reach its storage
 * under emu_array_lock (emu_array_pin), and so do texture fetches (emu_tex.c).
 * No surface is made from an array.
 *
 * Each array has a generation, unique over the process: a copy or a node
 * binds to the generation its handle had when it was queued or its
 * parameters were set, so that a handle value given to a new array
 * (handle pools give the value freed last out first) is not taken for the
 * array the copy named (a real driver would use the freed array's memory).
 *
 * Arrays come from the handle pool (EMU_K_ARRAY) and are registered as
 * handles of their context. Locks: emu_array_lock guards an array's
 * storage against its destroy while a copy uses it (taken before
 * emu_mem_lock, never after); the descriptor is immutable once published;
 * the charge is taken and given back under emu_mem_lock (emu_mem.h).
 */
#include "emu_mem.h"

#include <stdlib.h>
#include <sys/mman.h>

struct CUarray_st {
    CUDA_ARRAY3D_DESCRIPTOR desc;   /* as created (cuArrayCreate: Depth and Flags 0); first: a
                                     * freed object's first word links the pool */
    int device;
    CUcontext ctx;
    size_t len;                     /* bytes charged: whole pages */
    size_t elem;                    /* bytes of one element (channels x channel size) */
    unsigned char *data;            /* the elements, row-major, len bytes (mmap'd) */
    uint64_t gen;                   /* unique per array made; kept in the pool after its destroy */
};

pthread_mutex_t emu_array_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t array_gens;         /* under emu_array_lock */

/* Bytes of one channel of `f`; 0 for a format the emulation does not know
 * the layout of (block-compressed, video and normalized packed formats). */
size_t emu_format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
    }
}

/* The bytes of the array `d` describes, after cuArray3DCreate's rules on
 * extents and flags; 0 with *err set when it is refused. */
static size_t desc_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, CUresult *err)
{
    const unsigned known = CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_CUBEMAP |
                           CUDA_ARRAY3D_TEXTURE_GATHER;
    int layered = (d->Flags & CUDA_ARRAY3D_LAYERED) != 0, cube = (d->Flags & CUDA_ARRAY3D_CUBEMAP) != 0;
    size_t channel = emu_format_bytes(d->Format);
    *err = CUDA_ERROR_INVALID_VALUE;
    if (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4) return 0;
    /* A 1D array has no height and no depth; a 2D one no depth; a layered one
     * counts its layers in Depth; a cubemap is square with 6 layers (a
     * multiple of 6 when layered); texture gather is for 2D arrays only. */
    if (!d->Width || (!d->Height && d->Depth && !layered) || (layered && !d->Depth)) return 0;
    if (cube && (!d->Height || d->Width != d->Height || (layered ? d->Depth % 6 : d->Depth != 6))) return 0;
    if ((d->Flags & CUDA_ARRAY3D_TEXTURE_GATHER) && (!d->Height || d->Depth)) return 0;
    *err = CUDA_ERROR_NOT_SUPPORTED;    /* other flags (sparse, deferred mapping, ...) and formats */
    if ((d->Flags & ~known) || !channel) return 0;
    size_t n = (size_t)d->Width * (d->Height ? d->Height : 1), depth = d->Depth ? d->Depth : 1;
    size_t elem = channel * d->NumChannels;
    *err = CUDA_ERROR_OUT_OF_MEMORY;
    if (n > SIZE_MAX / depth / elem) return 0;
    return n * depth * elem;
}

static CUresult array_create(const char *call, CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    CUresult r = emu_capture_check_unsafe(call);
    if (r != CUDA_SUCCESS) return r;
    CUcontext ctx;
    if ((r = emu_ctx_require(&ctx)) != CUDA_SUCCESS) return r;
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    size_t bytes = desc_bytes(d, &r), len = emu_round_up(bytes, emu_page_size());
    if (!bytes) return r;
    if (len < bytes) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&emu_mem_lock);
    int ok = emu_usage_take(ctx->device, len);
    pthread_mutex_unlock(&emu_mem_lock);
    if (!ok) return CUDA_ERROR_OUT_OF_MEMORY;
    /* Storage: pages taken only where written (an array as large as the
     * device budget costs nothing until used). */
    void *data = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (data == MAP_FAILED) {
        pthread_mutex_lock(&emu_mem_lock);
        emu_memory.used[ctx->device] -= len;
        pthread_mutex_unlock(&emu_mem_lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUarray a = emu_handle_mem_get(EMU_K_ARRAY, sizeof *a);
    a->desc = *d;
    a->device = ctx->device;
    a->ctx = ctx;
    a->len = len;
    a->elem = emu_format_bytes(d->Format) * d->NumChannels;
    a->data = data;
    pthread_mutex_lock(&emu_array_lock);
    a->gen = ++array_gens;
    pthread_mutex_unlock(&emu_array_lock);
    emu_handle_add_ctx(a, EMU_K_ARRAY, ctx);
    *out = a;
    return CUDA_SUCCESS;
}

/* Gives an array's charge back and its memory to the pool (its handle
 * already deleted or ended). */
static void array_free(void *h)
{
    CUarray a = h;
    pthread_mutex_lock(&emu_array_lock);   /* no copy is using the storage */
    munmap(a->data, a->len);
    a->data = NULL;
    pthread_mutex_unlock(&emu_array_lock);
    pthread_mutex_lock(&emu_mem_lock);
    emu_memory.used[a->device] -= a->len;
    pthread_mutex_unlock(&emu_mem_lock);
    emu_handle_mem_put(EMU_K_ARRAY, a);
}

EMU_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    EMU_ENTRY_INIT();
    if (!pAllocateArray) return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d = { .Width = pAllocateArray->Width, .Height = pAllocateArray->Height,
                                  .Format = pAllocateArray->Format, .NumChannels = pAllocateArray->NumChannels };
    return array_create(__func__, pHandle, &d);
}

EMU_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    EMU_ENTRY_INIT();
    if (!pAllocateArray) return CUDA_ERROR_INVALID_VALUE;
    return array_create(__func__, pHandle, pAllocateArray);
}

/* The entry point exists (the library hooks it); mipmapped arrays are not
 * emulated. */
EMU_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                           unsigned int numMipmapLevels)
{
    EMU_ENTRY_INIT();
    if (!pHandle || !desc || !numMipmapLevels) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_ERROR_NOT_SUPPORTED;
}

EMU_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    EMU_ENTRY_INIT();
    CUresult r = emu_capture_check_unsafe(__func__);
    if (r != CUDA_SUCCESS) return r;
    if (!hArray || !emu_handle_ok(hArray, EMU_K_ARRAY)) return CUDA_ERROR_INVALID_HANDLE;
    emu_handle_del(hArray);
    array_free(hArray);
    return CUDA_SUCCESS;
}

/* "Get a 1D or 2D CUDA array descriptor": an array with a depth (3D or
 * layered) is CUDA_ERROR_INVALID_VALUE. */
EMU_EXPORT CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
    EMU_ENTRY_INIT();
    if (!hArray || !emu_handle_ok(hArray, EMU_K_ARRAY)) return CUDA_ERROR_INVALID_HANDLE;
    if (!pArrayDescriptor || hArray->desc.Depth) return CUDA_ERROR_INVALID_VALUE;
    *pArrayDescriptor = (CUDA_ARRAY_DESCRIPTOR){ .Width = hArray->desc.Width, .Height = hArray->desc.Height,
                                                 .Format = hArray->desc.Format,
                                                 .NumChannels = hArray->desc.NumChannels };
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
    EMU_ENTRY_INIT();
    if (!hArray || !emu_handle_ok(hArray, EMU_K_ARRAY)) return CUDA_ERROR_INVALID_HANDLE;
    if (!pArrayDescriptor) return CUDA_ERROR_INVALID_VALUE;
    *pArrayDescriptor = hArray->desc;
    return CUDA_SUCCESS;
}

void emu_arrays_ctx_destroyed(CUcontext ctx)
{
    emu_handles_end_ctx(ctx, EMU_K_ARRAY, array_free);
}

/* The generation of live array h, 0 if h is no live array. */
uint64_t emu_array_gen(CUarray h)
{
    if (!h || !emu_handle_ok(h, EMU_K_ARRAY)) return 0;
    pthread_mutex_lock(&emu_array_lock);
    uint64_t g = h->gen;
    pthread_mutex_unlock(&emu_array_lock);
    return g;
}

/* The context and device of live array h (NULL and -1 if none). */
CUcontext emu_array_ctx(CUarray h) { return emu_array_gen(h) ? h->ctx : NULL; }
int emu_array_device(CUarray h) { return emu_array_gen(h) ? h->device : -1; }

/* Whether h names a live array of 2 or 3 dimensions (a "multidimensional"
 * memory operand of the exec setters), 1D arrays and 1D layered ones not. */
int emu_array_multidim(CUarray h)
{
    if (!emu_array_gen(h)) return 0;
    return h->desc.Height != 0 || (h->desc.Depth != 0 && !(h->desc.Flags & CUDA_ARRAY3D_LAYERED));
}

/* The rows of the array, its layers (Depth, or the layers of a layered
 * one; at least 1 each) and the bytes of a row. */
static void array_shape(CUarray a, size_t *row, size_t *rows, size_t *layers)
{
    *row = a->desc.Width * a->elem;
    *rows = a->desc.Height ? a->desc.Height : 1;
    *layers = a->desc.Depth ? a->desc.Depth : 1;
}

/* cuMemcpy2D / cuMemcpy3D's rules for an array operand: a live array
 * (else CUDA_ERROR_INVALID_VALUE, the only error the copies list for bad
 * parameters); "srcXInBytes must be evenly divisible by the array element
 * size", and so must the width (whole elements move); the copy's box (x,
 * y, z; w bytes, h rows, d layers) inside the array. A 1D array has one
 * row, a 2D one one layer. Element sizes of two arrays: cuMemcpyAtoA "the
 * elements must be the same size" (checked by the caller). */
CUresult emu_array_side_check(CUarray h, size_t x, size_t y, size_t z, size_t w, size_t hgt, size_t d)
{
    size_t row, rows, layers;
    if (!emu_array_gen(h)) return CUDA_ERROR_INVALID_VALUE;
    array_shape(h, &row, &rows, &layers);
    if (x % h->elem || w % h->elem) return CUDA_ERROR_INVALID_VALUE;
    if (x > row || w > row - x || y > rows || hgt > rows - y || z > layers || d > layers - z)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

size_t emu_array_elem(CUarray h) { return emu_array_gen(h) ? h->elem : 0; }
size_t emu_array_depth(CUarray h) { return emu_array_gen(h) ? h->desc.Depth : 0; }

/* With emu_array_lock held by the caller: the storage of array h if it is
 * still the array of generation gen, with its row pitch and row count
 * (the "pitch" and "height" of a pitched operand): 1; 0 when the array was
 * destroyed since and its handle is dead, -1 when the handle value names
 * another array now. */
int emu_array_pin(CUarray h, uint64_t gen, uintptr_t *base, size_t *pitch, size_t *height)
{
    size_t layers;
    if (!h || !gen || !emu_handle_ok(h, EMU_K_ARRAY)) return 0;
    if (h->gen != gen || !h->data) return -1;
    array_shape(h, pitch, height, &layers);
    *base = (uintptr_t)h->data;
    return 1;
}
