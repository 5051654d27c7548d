/*
 * emu_tex.c: texture objects of the emulated driver (cuTexObjectCreate,
 * cuTexObjectDestroy, cuTexObjectGetResourceDesc / GetTextureDesc /
 * GetResourceViewDesc) and the fetch the emulated kernels make through a
 * texture handle (cudaemu_tex_fetch, emu_kernel.h). docs/emulator.md,
 * "Texture objects".
 *
 * Resources: CU_RESOURCE_TYPE_LINEAR and CU_RESOURCE_TYPE_PITCH2D over
 * device memory, with cuda.h's checks ("devPtr ... must be set to a valid
 * device pointer, that is aligned to CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT";
 * element counts within the MAXIMUM_TEXTURE*_LINEAR_* attributes; pitch
 * "aligned to CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT", at most
 * MAXIMUM_TEXTURE2D_LINEAR_PITCH; "flags must be set to zero"; a resource
 * view only for arrays): CUDA_ERROR_INVALID_VALUE otherwise. A CUDA array
 * (CU_RESOURCE_TYPE_ARRAY, no resource view) reads the array's storage, bound
 * to the array's generation (emu_array.c). Mipmapped arrays, resource views
 * and surfaces are not emulated (CUDA_ERROR_NOT_SUPPORTED, logged).
 *
 * A handle is a small number (slot + 1), the lowest free one: a destroyed
 * texture's value is given to the next one created, as real drivers do, so
 * a program (or a library) that keys anything on the value alone is caught.
 *
 * Fetches check what a GPU would not: a handle that names no live texture
 * (never created, destroyed, its context destroyed) and an element that
 * lies in no memory the texture's device may access now (the memory was
 * freed or unmapped) are violations (emu_violation), and the fetch reads
 * zeros.
 *
 * Locks: tex_lock guards the table (a leaf but for emu_array_lock, taken
 * before it for array fetches).
 */
#include "emu_mem.h"
#include "emu_kernel.h"

#include <stdlib.h>
#include <string.h>

/* The emulated device's texture limits (emu_device_attribute reports them). */
#define TEX_ALIGN            512
#define TEX_PITCH_ALIGN      512          /* cuMemAllocPitch's (emu_mem.c) */
#define TEX1D_LINEAR_MAX     (1u << 28)
#define TEX2D_LINEAR_W_MAX   131072u
#define TEX2D_LINEAR_H_MAX   65000u
#define TEX2D_LINEAR_PITCH   2097120u

typedef struct tex_rec {
    int live;
    CUcontext ctx;
    int device;
    CUDA_RESOURCE_DESC res;
    CUDA_TEXTURE_DESC tex;
    size_t elem;                   /* bytes of one element */
    uint64_t array_gen;            /* CU_RESOURCE_TYPE_ARRAY: the array's generation */
} tex_rec;

static pthread_mutex_t tex_lock = PTHREAD_MUTEX_INITIALIZER;
static tex_rec *tex_tab;
static size_t tex_n;               /* slots in use or freed */
static size_t tex_cap;

int emu_tex_attribute(CUdevice_attribute a)
{
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return TEX_ALIGN;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: return TEX_PITCH_ALIGN;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH: return (int)TEX1D_LINEAR_MAX;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH: return (int)TEX2D_LINEAR_W_MAX;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT: return (int)TEX2D_LINEAR_H_MAX;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH: return (int)TEX2D_LINEAR_PITCH;
    default: return -1;
    }
}

static size_t elem_bytes(CUarray_format f, unsigned channels)
{
    size_t b = emu_format_bytes(f);
    return b && (channels == 1 || channels == 2 || channels == 4) ? b * channels : 0;
}

/* cuda.h's checks of a resource; *elem gets the element's bytes. */
static CUresult res_check(const CUDA_RESOURCE_DESC *r, const CUDA_RESOURCE_VIEW_DESC *view,
                          CUcontext ctx, size_t *elem, uint64_t *gen)
{
    if (r->flags) return CUDA_ERROR_INVALID_VALUE;
    switch (r->resType) {
    case CU_RESOURCE_TYPE_LINEAR: {
        const CUdeviceptr p = r->res.linear.devPtr;
        *elem = elem_bytes(r->res.linear.format, r->res.linear.numChannels);
        if (view || !p || p % TEX_ALIGN || !*elem || !r->res.linear.sizeInBytes ||
            r->res.linear.sizeInBytes / *elem > TEX1D_LINEAR_MAX)
            return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
    }
    case CU_RESOURCE_TYPE_PITCH2D: {
        const CUdeviceptr p = r->res.pitch2D.devPtr;
        size_t w = r->res.pitch2D.width, h = r->res.pitch2D.height, pitch = r->res.pitch2D.pitchInBytes;
        *elem = elem_bytes(r->res.pitch2D.format, r->res.pitch2D.numChannels);
        if (view || !p || p % TEX_ALIGN || !*elem || !w || !h || w > TEX2D_LINEAR_W_MAX ||
            h > TEX2D_LINEAR_H_MAX || !pitch || pitch % TEX_PITCH_ALIGN || pitch > TEX2D_LINEAR_PITCH ||
            w * *elem > pitch)
            return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
    }
    case CU_RESOURCE_TYPE_ARRAY: {
        CUarray a = r->res.array.hArray;
        if (!(*gen = emu_array_gen(a)) || emu_array_ctx(a) != ctx) return CUDA_ERROR_INVALID_VALUE;
        if (view || emu_array_depth(a)) {
            emu_log("cuTexObjectCreate: resource views and 3D or layered arrays are not emulated");
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        *elem = emu_array_elem(a);
        return CUDA_SUCCESS;
    }
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
        emu_log("cuTexObjectCreate: mipmapped arrays are not emulated");
        return CUDA_ERROR_NOT_SUPPORTED;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static int tex_desc_ok(const CUDA_TEXTURE_DESC *t)
{
    const unsigned known = CU_TRSF_READ_AS_INTEGER | CU_TRSF_NORMALIZED_COORDINATES |
                           CU_TRSF_SRGB | CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION |
                           CU_TRSF_SEAMLESS_CUBEMAP;
    if (t->flags & ~known) return 0;
    for (int i = 0; i < 3; i++)
        if ((unsigned)t->addressMode[i] > CU_TR_ADDRESS_MODE_BORDER) return 0;
    return (unsigned)t->filterMode <= CU_TR_FILTER_MODE_LINEAR &&
           (unsigned)t->mipmapFilterMode <= CU_TR_FILTER_MODE_LINEAR;
}

EMU_EXPORT CUresult cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
                                      const CUDA_TEXTURE_DESC *pTexDesc,
                                      const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)
{
    EMU_ENTRY_INIT();
    CUcontext ctx;
    CUresult r = emu_ctx_require(&ctx);
    if (r != CUDA_SUCCESS) return r;
    if (!pTexObject || !pResDesc || !pTexDesc || !tex_desc_ok(pTexDesc)) return CUDA_ERROR_INVALID_VALUE;
    size_t elem = 0;
    uint64_t gen = 0;
    if ((r = res_check(pResDesc, pResViewDesc, ctx, &elem, &gen)) != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&tex_lock);
    size_t i = 0;
    while (i < tex_n && tex_tab[i].live) i++;
    if (i == tex_cap) {
        size_t cap = tex_cap ? tex_cap * 2 : 16;
        tex_rec *t = realloc(tex_tab, cap * sizeof *t);
        if (!t) {
            pthread_mutex_unlock(&tex_lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        tex_tab = t;
        tex_cap = cap;
    }
    if (i == tex_n) tex_n++;
    tex_tab[i] = (tex_rec){ .live = 1, .ctx = ctx, .device = ctx->device, .res = *pResDesc,
                            .tex = *pTexDesc, .elem = elem, .array_gen = gen };
    pthread_mutex_unlock(&tex_lock);
    *pTexObject = (CUtexObject)(i + 1);
    return CUDA_SUCCESS;
}

/* The live record of h, copied into *out (tex_lock held): 1, else 0. */
static int tex_get_locked(CUtexObject h, tex_rec *out)
{
    if (!h || h > tex_n || !tex_tab[h - 1].live) return 0;
    *out = tex_tab[h - 1];
    return 1;
}

static int tex_get(CUtexObject h, tex_rec *out)
{
    pthread_mutex_lock(&tex_lock);
    int ok = tex_get_locked(h, out);
    pthread_mutex_unlock(&tex_lock);
    return ok;
}

EMU_EXPORT CUresult cuTexObjectDestroy(CUtexObject texObject)
{
    EMU_ENTRY_INIT();
    pthread_mutex_lock(&tex_lock);
    tex_rec t;
    int ok = tex_get_locked(texObject, &t);
    if (ok) tex_tab[texObject - 1].live = 0;
    pthread_mutex_unlock(&tex_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EMU_EXPORT CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUtexObject texObject)
{
    EMU_ENTRY_INIT();
    tex_rec t;
    if (!pResDesc || !tex_get(texObject, &t)) return CUDA_ERROR_INVALID_VALUE;
    *pResDesc = t.res;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *pTexDesc, CUtexObject texObject)
{
    EMU_ENTRY_INIT();
    tex_rec t;
    if (!pTexDesc || !tex_get(texObject, &t)) return CUDA_ERROR_INVALID_VALUE;
    *pTexDesc = t.tex;
    return CUDA_SUCCESS;
}

/* No texture here has a resource view (none is accepted). */
EMU_EXPORT CUresult cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC *pResViewDesc, CUtexObject texObject)
{
    EMU_ENTRY_INIT();
    tex_rec t;
    if (!pResViewDesc || !tex_get(texObject, &t)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_ERROR_INVALID_VALUE;
}

EMU_EXPORT CUresult cuSurfObjectCreate(CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc)
{
    EMU_ENTRY_INIT();
    (void)pSurfObject;
    (void)pResDesc;
    emu_log("cuSurfObjectCreate: surfaces are not emulated");
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* A context's teardown ends its textures. */
void emu_tex_ctx_destroyed(CUcontext ctx)
{
    pthread_mutex_lock(&tex_lock);
    for (size_t i = 0; i < tex_n; i++)
        if (tex_tab[i].live && tex_tab[i].ctx == ctx) tex_tab[i].live = 0;
    pthread_mutex_unlock(&tex_lock);
}

/* Coordinate c of an extent n under address mode m (unnormalized
 * coordinates: wrap and mirror, which CUDA supports only for normalized
 * ones, clamp): the index to read, or -1 for the border (zeros). */
static long long address(long long c, size_t n, CUaddress_mode m)
{
    if (c >= 0 && (size_t)c < n) return c;
    if (m == CU_TR_ADDRESS_MODE_BORDER) return -1;
    return c < 0 ? 0 : (long long)n - 1;
}

EMU_EXPORT size_t cudaemu_tex_fetch(unsigned long long tex, long long x, long long y, void *out)
{
    tex_rec t;
    memset(out, 0, 16);
    if (!tex_get(tex, &t)) {
        emu_violation("cudaemu_tex_fetch", "%llu is not a live texture object", tex);
        return 0;
    }
    long long xi, yi;
    CUdeviceptr p;
    switch (t.res.resType) {
    case CU_RESOURCE_TYPE_LINEAR:   /* tex1Dfetch: an index outside reads zeros */
        if (y || x < 0 || (unsigned long long)x >= t.res.res.linear.sizeInBytes / t.elem) return t.elem;
        p = t.res.res.linear.devPtr + (CUdeviceptr)x * t.elem;
        break;
    case CU_RESOURCE_TYPE_PITCH2D:
        xi = address(x, t.res.res.pitch2D.width, t.tex.addressMode[0]);
        yi = address(y, t.res.res.pitch2D.height, t.tex.addressMode[1]);
        if (xi < 0 || yi < 0) return t.elem;
        p = t.res.res.pitch2D.devPtr + (CUdeviceptr)yi * t.res.res.pitch2D.pitchInBytes +
            (CUdeviceptr)xi * t.elem;
        break;
    default: {                       /* an array: its storage, row-major */
        uintptr_t base;
        size_t pitch, height;
        pthread_mutex_lock(&emu_array_lock);
        int pin = emu_array_pin(t.res.res.array.hArray, t.array_gen, &base, &pitch, &height);
        if (pin == 1) {
            xi = address(x, pitch / t.elem, t.tex.addressMode[0]);
            yi = address(y, height, t.tex.addressMode[1]);
            if (xi >= 0 && yi >= 0) memcpy(out, (void *)(base + (size_t)yi * pitch + (size_t)xi * t.elem), t.elem);
        }
        pthread_mutex_unlock(&emu_array_lock);
        if (pin != 1) emu_violation("cudaemu_tex_fetch", "texture %llu reads a destroyed array", tex);
        return pin == 1 ? t.elem : 0;
    }
    }
    if (!emu_mem_accessible(p, t.elem, t.device)) {
        emu_violation("cudaemu_tex_fetch", "texture %llu reads 0x%llx: no live device memory of device %d",
                      tex, (unsigned long long)p, t.device);
        return 0;
    }
    memcpy(out, (const void *)(uintptr_t)p, t.elem);
    return t.elem;
}
