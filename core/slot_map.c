/*
 * core/slot_map.c: the mapping half of the slots (slot_internal.h): the
 * address ranges generations are carved from (per context, first fit,
 * coalesced on return), binding one slot to an allocation's physical
 * handles (each mapped whole at slot base + its offset, then one
 * cuMemSetAccess for the device and its peers), unmapping, and the VMM calls
 * counted and timed (the profiled policy's remap cost estimate). Called with
 * the locks slots.c's header describes.
 */
#include "slot_internal.h"

#include "driver.h"
#include "log.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

sg_slot_stats sg_slot_stats_;

/* --------------------------------------------------------------- helpers */

/* The three VMM calls of aliasing (vmm.h), counted and timed here: the
 * profiled policy's estimate of what a remap costs. */
static CUresult vmm_map(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle h)
{
    uint64_t t0 = sg_now_ns();
    CUresult rc = sg_vmm_map(va, size, h);
    STAT_ADD(map_ns, sg_now_ns() - t0);
    STAT_ADD(maps, 1);
    return rc;
}

static CUresult vmm_unmap(CUdeviceptr va, size_t size)
{
    uint64_t t0 = sg_now_ns();
    CUresult rc = sg_vmm_unmap(va, size);
    STAT_ADD(unmap_ns, sg_now_ns() - t0);
    STAT_ADD(unmaps, 1);
    return rc;
}

static CUresult vmm_access(const sg_slot_ctx *cx, CUdeviceptr va, size_t size)
{
    uint64_t t0 = sg_now_ns();
    CUresult rc = sg_vmm_set_access(&cx->vmm, va, size);
    STAT_ADD(access_ns, sg_now_ns() - t0);
    STAT_ADD(set_access, 1);
    return rc;
}

/* ----------------------------------------------------- address ranges */

/* Takes bytes (a multiple of the granularity, > 0) from cx's reservations,
 * first fit, reserving more if none has room (cx->lock held). 0 or -1
 * (nothing changed). */
int sg_slot_range_take(sg_slot_ctx *cx, size_t bytes, size_t resv_size, CUdeviceptr *out)
{
    for (size_t k = 0; k < cx->nresvs; k++) {
        resv *r = &cx->resvs[k];
        for (size_t i = 0; i < r->nfree; i++) {
            if (r->free[i].size < bytes) continue;
            *out = r->free[i].base;
            r->free[i].base += bytes;
            r->free[i].size -= bytes;
            if (r->free[i].size == 0) {
                memmove(&r->free[i], &r->free[i + 1], (r->nfree - i - 1) * sizeof *r->free);
                r->nfree--;
            }
            return 0;
        }
    }
    if (sg_grow((void **)&cx->resvs, &cx->capresvs, cx->nresvs + 1, sizeof *cx->resvs) != 0)
        return -1;
    size_t want = resv_size;
    if (want == 0) {
        want = SG_SLOTS_RESV_FALLBACK;
        if (cx->vmm.total > 0 && cx->vmm.total <= SIZE_MAX / 4) want = cx->vmm.total * 2;
    }
    want = sg_round_up(want, cx->gran);
    if (want < bytes) want = bytes;
    resv r = { 0 };
    if (sg_grow((void **)&r.free, &r.capfree, 1, sizeof *r.free) != 0) return -1;
    CUresult rc = sg_vmm_reserve(want, cx->gran, &r.base);
    if (rc != CUDA_SUCCESS) {
        SG_WARN("slots: cuMemAddressReserve of %zu bytes failed (error %d)", want, (int)rc);
        free(r.free);
        return -1;
    }
    r.size = want;
    *out = r.base;
    if (want > bytes) r.free[r.nfree++] = (range){ r.base + bytes, want - bytes };
    cx->resvs[cx->nresvs++] = r;
    return 0;
}

/* Gives [base, base+bytes) back (cx->lock held). If the free list cannot
 * grow (out of host memory) the range is lost until the context goes. */
void sg_slot_range_give(sg_slot_ctx *cx, CUdeviceptr base, size_t bytes)
{
    for (size_t k = 0; k < cx->nresvs; k++) {
        resv *r = &cx->resvs[k];
        if (base < r->base || base - r->base >= r->size) continue;
        size_t i = 0;
        while (i < r->nfree && r->free[i].base < base) i++;
        int left = i > 0 && r->free[i - 1].base + r->free[i - 1].size == base;
        int right = i < r->nfree && base + bytes == r->free[i].base;
        if (left && right) {
            r->free[i - 1].size += bytes + r->free[i].size;
            memmove(&r->free[i], &r->free[i + 1], (r->nfree - i - 1) * sizeof *r->free);
            r->nfree--;
        } else if (left) {
            r->free[i - 1].size += bytes;
        } else if (right) {
            r->free[i].base = base;
            r->free[i].size += bytes;
        } else if (sg_grow((void **)&r->free, &r->capfree, r->nfree + 1, sizeof *r->free) == 0) {
            memmove(&r->free[i + 1], &r->free[i], (r->nfree - i) * sizeof *r->free);
            r->free[i] = (range){ base, bytes };
            r->nfree++;
        }
        return;
    }
}

/* ---------------------------------------------------------------- slots */

/* Unmaps every piece of s (g->lock held). Pieces whose unmap fails stay
 * listed. 0 if none is left, else -1. */
int sg_slot_unmap(slot *s)
{
    size_t keep = 0;
    for (size_t i = 0; i < s->npieces; i++) {
        if (vmm_unmap(s->base + s->pieces[i].off, s->pieces[i].size) != CUDA_SUCCESS)
            s->pieces[keep++] = s->pieces[i];
    }
    s->npieces = keep;
    return keep ? -1 : 0;
}

/* 1 if s shows exactly want (g->lock held). */
int sg_slot_matches(const slot *s, const sg_slot_bind *want)
{
    return s->id == want->id && (want->id != 0 || s->npieces == 0);
}

/* Fills *hs / *nh with the handles to map for want (hs may become a malloc'd
 * array, to be freed by the caller if != stack). 0, or -1 (logged) if the
 * allocation is not a live own-handle one with this id, or its handles do not
 * tile [0, total) from offset 0 in whole granules within size bytes. */
static int handles_of(const sg_slot_ctx *cx, const sg_slot_bind *want, size_t size,
                      sg_mem_handle *stack, const sg_mem_handle **hs, size_t *nh)
{
    if (want->nhandles > 0) {
        *hs = want->handles;
        *nh = want->nhandles;
    } else {
        sg_alloc_info info;
        if (!sg_mem_find(want->base, &info) || info.base != want->base || info.id != want->id ||
            !info.own_handles) {
            SG_DEBUG("slots: 0x%llx is not the live own-handle allocation %llu",
                     (unsigned long long)want->base, (unsigned long long)want->id);
            return -1;
        }
        size_t n = sg_mem_block_handles(want->base, stack, SG_SLOTS_STACK_HANDLES);
        sg_mem_handle *buf = stack;
        if (n > SG_SLOTS_STACK_HANDLES) {
            if (!(buf = malloc(n * sizeof *buf))) return -1;
            size_t m = sg_mem_block_handles(want->base, buf, n);
            if (m != n) {
                free(buf);
                return -1;
            }
        }
        *hs = buf;
        *nh = n;
    }
    size_t off = 0;
    for (size_t i = 0; i < *nh; i++) {
        const sg_mem_handle *h = &(*hs)[i];
        if (h->offset != (long long)off || h->size == 0 || h->size % cx->gran ||
            h->size > size - off) {
            SG_DEBUG("slots: allocation %llu (handle %zu of %zu at offset %lld, %zu bytes) does "
                     "not fit a slot of %zu bytes", (unsigned long long)want->id, i, *nh,
                     h->offset, h->size, size);
            if (*hs != stack && *hs != want->handles) free((void *)*hs);
            *hs = NULL;
            *nh = 0;
            return -1;
        }
        off += h->size;
    }
    if (*nh == 0) return -1;
    return 0;
}

/* Makes s show want (g->lock held, generation idle). 0, or -1 with s empty. */
int sg_slot_rebind(const sg_slot_ctx *cx, slot *s, const sg_slot_bind *want)
{
    sg_mem_handle stack[SG_SLOTS_STACK_HANDLES];
    const sg_mem_handle *hs = NULL;
    size_t nh = 0;
    int valid = want->id == 0 || handles_of(cx, want, s->size, stack, &hs, &nh) == 0;
    s->id = 0;
    int rc = sg_slot_unmap(s);
    if (rc != 0 || !valid) {
        rc = -1;
        goto out;
    }
    if (want->id == 0) goto out;                  /* asked to show nothing: done */
    if (sg_grow((void **)&s->pieces, &s->cappieces, nh, sizeof *s->pieces) != 0) {
        rc = -1;
        goto out;
    }
    CUresult cr = CUDA_SUCCESS;
    size_t total = 0;
    for (size_t i = 0; i < nh && cr == CUDA_SUCCESS; i++) {
        cr = vmm_map(s->base + (size_t)hs[i].offset, hs[i].size, hs[i].handle);
        if (cr == CUDA_SUCCESS) {
            s->pieces[s->npieces++] = (piece){ (size_t)hs[i].offset, hs[i].size };
            total += hs[i].size;
        }
    }
    if (cr == CUDA_SUCCESS) cr = vmm_access(cx, s->base, total);
    if (cr != CUDA_SUCCESS) {
        SG_WARN("slots: mapping allocation %llu at slot 0x%llx failed (error %d): the slot stays "
                "empty", (unsigned long long)want->id, (unsigned long long)s->base, (int)cr);
        sg_slot_unmap(s);
        rc = -1;
        goto out;
    }
    s->id = want->id;
    s->abase = want->base;
    s->listed = want->nhandles == 0;
out:
    if (hs && hs != stack && hs != want->handles) free((void *)hs);
    return rc;
}

size_t sg_slot_drop_freed(slot *s)
{
    sg_alloc_info info;
    if (!s->id || !s->listed || (sg_mem_find(s->abase, &info) && info.id == s->id)) return 0;
    size_t bytes = 0;
    for (size_t i = 0; i < s->npieces; i++) bytes += s->pieces[i].size;
    s->id = 0;                          /* an empty slot matches no block */
    if (sg_slot_unmap(s) != 0) return 0;   /* what stays mapped goes at the next rebind */
    return bytes;
}

/* Retries the unmaps that failed when slots of cx were destroyed (cx->lock
 * held); what fails again stays listed. */
void sg_slot_orphans_retry(sg_slot_ctx *cx)
{
    size_t keep = 0;
    for (size_t i = 0; i < cx->norphans; i++)
        if (vmm_unmap(cx->orphans[i].base, cx->orphans[i].size) != CUDA_SUCCESS)
            cx->orphans[keep++] = cx->orphans[i];
    cx->norphans = keep;
}

