/*
 * core/fp_pinfo.c: the parameter-layout cache of the fingerprint code
 * (fp_internal.h).
 *
 * One uthash per handle kind (CUfunction, CUkernel), guarded by pinfo_lock.
 * An entry is made by probing cuFuncGetParamInfo / cuKernelGetParamInfo with
 * indices 0, 1, ... until CUDA_ERROR_INVALID_VALUE (outside the lock), then
 * added under it; entries never change afterwards. Probing failures other
 * than the end of the list are not cached (the handle may be bad now and
 * valid later): the node is then not comparable.
 *
 * Handles die: after cuModuleUnload / cuLibraryUnload the driver may give a
 * new function the handle value of an unloaded one (issue 10, class 9). So
 * every unload starts a new epoch (sg_fp_cache_epoch_bump): the entries made
 * before it leave the cache (they are retired: freed once no build that may
 * still hold one is running, counted by sg_fp_cache_enter / leave), and every
 * fingerprint built before it (sg_fp.epoch) is no longer trusted as a hint
 * nor as a description (graphs.c forwards the next update of such an exec).
 *
 * Locks: pinfo_lock guards both caches, the retired list, the epoch and the
 * reader count; it is never held across a driver call.
 */
#include "fp_internal.h"

#include "driver.h"

#include <pthread.h>
#include <stdlib.h>

/* Set by uthash when an add runs out of memory (pinfo_lock held). */
static int pinfo_oom;
#define uthash_nonfatal_oom(elt) (pinfo_oom = 1)
#include "hash.h"

typedef struct pinfo_entry {
    sg_fp_pinfo pi;                  /* first: entries are handed out as &e->pi */
    UT_hash_handle hh;
    struct pinfo_entry *retired_next;
} pinfo_entry;

static pthread_mutex_t pinfo_lock = PTHREAD_MUTEX_INITIALIZER;
static pinfo_entry *pinfo_cache[2];  /* 0: CUfunction, 1: CUkernel */
static pinfo_entry *retired;
static uint64_t epoch = 1;           /* also read without the lock (atomic) */
static int readers;
const sg_fp_pinfo sg_fp_pinfo_none = { .ok = 0 };
#define NONE ((pinfo_entry *)(void *)&sg_fp_pinfo_none)

/* ------------------------------------------------------------ param info */

/* Asks the driver for parameter i of h. */
static CUresult pinfo_query(int is_kern, const void *h, size_t i, size_t *off, size_t *size)
{
    if (is_kern)
        return SG_DRIVER_CALL(cuKernelGetParamInfo, (CUkernel)(uintptr_t)h, i, off, size);
    return SG_DRIVER_CALL(cuFuncGetParamInfo, (CUfunction)(uintptr_t)h, i, off, size);
}

/* One pass over h's parameters: *out (malloc'd pairs of offset, size) and
 * *count. Returns 0; 1 if the driver cannot tell (an error other than the
 * end of the list, or too many parameters); -1 if out of memory. */
static int pinfo_pass(int is_kern, const void *h, uint32_t **out, size_t *count)
{
    size_t cap = 16, n = 0;
    uint32_t *tmp = malloc(2 * cap * sizeof *tmp);
    if (!tmp) return -1;
    for (;; n++) {
        size_t off = 0, size = 0;
        CUresult r = pinfo_query(is_kern, h, n, &off, &size);
        if (r == CUDA_ERROR_INVALID_VALUE) break;
        if (r != CUDA_SUCCESS || n >= SG_FP_MAX_PARAMS || off > UINT32_MAX / 2 ||
            size > UINT32_MAX / 2) {
            free(tmp);
            return 1;
        }
        if (n == cap) {
            uint32_t *t = realloc(tmp, 4 * cap * sizeof *tmp);
            if (!t) { free(tmp); return -1; }
            tmp = t;
            cap *= 2;
        }
        tmp[2 * n] = (uint32_t)off;
        tmp[2 * n + 1] = (uint32_t)size;
    }
    *out = tmp;
    *count = n;
    return 0;
}

/* Probes the layout of h. Returns a new entry, NONE if the driver
 * cannot tell, or NULL if out of memory.
 * CUDA_ERROR_INVALID_VALUE means "past the last parameter", but a failing
 * call may say it too, and a layout cut short would let changed arguments
 * compare equal. So the layout is probed twice and trusted only if both
 * passes agree (a call failing once, or failing from some call on, makes
 * them differ); the result is cached, so this costs twice a handful of
 * calls per function. */
static pinfo_entry *pinfo_probe(int is_kern, const void *h)
{
    if (is_kern ? !sg_drv.cuKernelGetParamInfo : !sg_drv.cuFuncGetParamInfo)
        return NONE;
    uint32_t *tmp = NULL, *again = NULL;
    size_t n = 0, n2 = 0;
    int r1 = pinfo_pass(is_kern, h, &tmp, &n);
    if (r1) return r1 < 0 ? NULL : NONE;
    int r2 = pinfo_pass(is_kern, h, &again, &n2);
    int same = r2 == 0 && n2 == n && !memcmp(tmp, again, 2 * n * sizeof *tmp);
    free(again);
    if (!same) {
        free(tmp);
        return r2 < 0 ? NULL : NONE;
    }
    size_t m = n ? n : 1;
    pinfo_entry *ent = calloc(1, sizeof *ent + m * sizeof(uint64_t) + m * sizeof(sg_fp_parg));
    if (!ent) { free(tmp); return NULL; }
    sg_fp_pinfo *e = &ent->pi;
    e->h = h;
    e->ok = 1;
    e->n = (uint32_t)n;
    e->off64 = (uint64_t *)(ent + 1);
    e->arg = (sg_fp_parg *)(e->off64 + m);
    uint64_t covered = 0;
    int dense = n > 0;
    for (size_t i = 0; i < n; i++) {
        e->arg[i].off = tmp[2 * i];
        e->arg[i].size = tmp[2 * i + 1];
        e->off64[i] = e->arg[i].off;
        if (e->arg[i].off != (i ? e->arg[i - 1].off + e->arg[i - 1].size : 0)) dense = 0;
        if (e->arg[i].off + e->arg[i].size > e->total) e->total = e->arg[i].off + e->arg[i].size;
        covered += e->arg[i].size;
    }
    e->gaps = covered != e->total;   /* overlapping arguments also count as gaps */
    e->dense_n = dense && !e->gaps ? (e->n < 9 ? e->n : 9) : 0;
    int words = e->dense_n && n <= 64;
    for (size_t i = 0; words && i < n; i++) {
        if (e->arg[i].size == 8) e->words8 |= (uint64_t)1 << i;
        else if (e->arg[i].size != 4) words = 0;
    }
    e->words_n = words ? e->n : 0;
    if (!words) e->words8 = 0;
    free(tmp);
    return ent;
}

static void free_retired_locked(void)
{
    while (readers == 0 && retired) {
        pinfo_entry *e = retired;
        retired = e->retired_next;
        free(e);
    }
}

const sg_fp_pinfo *sg_fp_pinfo_get(int is_kern, const void *h)
{
    pinfo_entry *e;
    pthread_mutex_lock(&pinfo_lock);
    HASH_FIND_PTR(pinfo_cache[is_kern], &h, e);
    uint64_t ep = epoch;
    pthread_mutex_unlock(&pinfo_lock);
    if (e) return &e->pi;
    pinfo_entry *made = pinfo_probe(is_kern, h);
    if (!made || made == NONE) return made ? &sg_fp_pinfo_none : NULL;
    pthread_mutex_lock(&pinfo_lock);
    HASH_FIND_PTR(pinfo_cache[is_kern], &h, e);   /* another thread may have added it */
    if (!e && ep == epoch) {
        pinfo_oom = 0;
        HASH_ADD(hh, pinfo_cache[is_kern], pi.h, sizeof made->pi.h, made);
        if (pinfo_oom) {
            pthread_mutex_unlock(&pinfo_lock);
            free(made);
            return NULL;
        }
        e = made;
        made = NULL;
    } else if (!e) {
        /* an unload happened while probing: the layout may be the old
         * function's; hand it out retired (valid for this build only) */
        made->retired_next = retired;
        retired = made;
        e = made;
        made = NULL;
    }
    pthread_mutex_unlock(&pinfo_lock);
    free(made);
    return &e->pi;
}

uint64_t sg_fp_epoch(void) { return __atomic_load_n(&epoch, __ATOMIC_ACQUIRE); }

void sg_fp_cache_enter(void)
{
    pthread_mutex_lock(&pinfo_lock);
    readers++;
    pthread_mutex_unlock(&pinfo_lock);
}

void sg_fp_cache_leave(void)
{
    pthread_mutex_lock(&pinfo_lock);
    readers--;
    free_retired_locked();
    pthread_mutex_unlock(&pinfo_lock);
}

void sg_fp_cache_epoch_bump(void)
{
    pthread_mutex_lock(&pinfo_lock);
    for (int k = 0; k < 2; k++) {
        pinfo_entry *e, *t;
        HASH_ITER(hh, pinfo_cache[k], e, t) {
            HASH_DEL(pinfo_cache[k], e);
            e->retired_next = retired;
            retired = e;
        }
    }
    __atomic_add_fetch(&epoch, 1, __ATOMIC_RELEASE);
    free_retired_locked();
    pthread_mutex_unlock(&pinfo_lock);
}

void sg_fp_cache_atfork(int phase)
{
    if (phase == 0) pthread_mutex_lock(&pinfo_lock);
    else pthread_mutex_unlock(&pinfo_lock);
}

void sg_fp_cache_reset(void)
{
    pthread_mutex_lock(&pinfo_lock);
    for (int k = 0; k < 2; k++) {
        pinfo_entry *e, *t;
        HASH_ITER(hh, pinfo_cache[k], e, t) {
            HASH_DEL(pinfo_cache[k], e);
            free(e);
        }
    }
    readers = 0;
    free_retired_locked();
    pthread_mutex_unlock(&pinfo_lock);
}
