/*
 * emu_array.c: CUDA arrays in the emulated driver, as far as memory goes:
 * cuArrayCreate_v2 / cuArray3DCreate_v2 check the descriptor and charge the
 * array's bytes to the device's memory budget (emu_mem.c's accounting),
 * cuArrayDestroy gives them back, the descriptor queries return what was
 * asked for, and a context's teardown ends its arrays. An array has no
 * contents and no address: nothing copies to or from it (copies naming
 * CU_MEMORYTYPE_ARRAY are CUDA_ERROR_NOT_SUPPORTED, emu_copy.c), and no
 * texture or surface is made from it.
 *
 * Arrays come from the handle pool (EMU_K_ARRAY) and are registered as
 * handles of their context. Locks: none of its own; an array is immutable
 * once published; the charge is taken and given back under emu_mem_lock
 * (emu_mem.h).
 */
#include "emu_mem.h"

#include <stdlib.h>

struct CUarray_st {
    CUDA_ARRAY3D_DESCRIPTOR desc;   /* as created (cuArrayCreate: Depth and Flags 0) */
    int device;
    size_t len;                     /* bytes charged: whole pages */
};

/* Bytes of one channel of `f`; 0 for a format the emulation does not know
 * the layout of (block-compressed, video and normalized packed formats). */
static size_t format_bytes(CUarray_format f)
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
    size_t channel = format_bytes(d->Format);
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
    CUarray a = emu_handle_mem_get(EMU_K_ARRAY, sizeof *a);
    a->desc = *d;
    a->device = ctx->device;
    a->len = len;
    emu_handle_add_ctx(a, EMU_K_ARRAY, ctx);
    *out = a;
    return CUDA_SUCCESS;
}

/* Gives an array's charge back and its memory to the pool (its handle
 * already deleted or ended). */
static void array_free(void *h)
{
    CUarray a = h;
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
