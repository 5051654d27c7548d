/*
 * interpose/resolve.c: symbol resolution. The real dlsym, the real driver
 * functions, our exported dlsym and the cuGetProcAddress hooks.
 *
 * Globals and their guards:
 *   sg_real (hooks.h) and the driver table handed to core/: written once in
 *     resolve_once() under resolve_guard (pthread_once), read-only after.
 *
 * The exported dlsym itself (an assembly trampoline), the hook-name lookup
 * and the bootstrap of the real dlsym live in dlsym_entry.c, which is built
 * without sanitizer instrumentation because a sanitizer runtime calls dlsym
 * before it is initialised. Only exact hook names reach sg_dlsym_hooked()
 * here, and no sanitizer runtime looks up a driver name.
 */
#include "hooks.h"

#include "../core/core.h"
#include "../core/driver.h"
#include "../core/log.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SG_LIBCUDA "libcuda.so.1"

void *sg_real_dlsym(void *handle, const char *name)
{
    return sg_dlsym_bootstrap()(handle, name);
}

/* ---------------------------------------------------------------- driver */

static pthread_once_t resolve_guard = PTHREAD_ONCE_INIT;

/* Handle of the real libcuda if it is loaded; loads it if `load`. The caller
 * dlcloses the handle (the library stays: it was loaded before, or by the
 * program's use of CUDA, or resolve_once keeps its reference). */
static void *libcuda_handle(int load)
{
    void *h = dlopen(SG_LIBCUDA, RTLD_NOLOAD | RTLD_LAZY);
    if (!h && load) h = dlopen(SG_LIBCUDA, RTLD_LAZY);
    return h;
}

/* The real function `name` from the driver handle h (NULL if absent).
 * Aborts if it is one of our own wrappers: forwarding to it would recurse. */
static void *resolve_real(void *h, const char *name)
{
    void *p = sg_real_dlsym(h, name);
    int i = sg_hook_find(name);
    if (p && i >= 0 && p == sg_hooks[i].wrapper) {
        sg_log(SG_LOG_ERROR, "the real %s resolved to our own wrapper: is libstablegraph "
               "installed as %s? aborting", name, SG_LIBCUDA);
        abort();
    }
    return p;
}

static void resolve_once(void)
{
    void *h = libcuda_handle(1);  /* reference kept for the life of the process */
    if (!h) {
        SG_ERROR("cannot load %s (%s): every hooked call will fail", SG_LIBCUDA, dlerror());
        return;
    }
    for (int i = 0; i < SG_HOOK_COUNT; i++) {
        void *p = resolve_real(h, sg_hooks[i].name);
        memcpy((char *)&sg_real + sg_hooks[i].real_offset, &p, sizeof p);
    }
    sg_driver drv;
#define SG_DRV_FILL_(name, ret, params) drv.name = (ret(*) params)resolve_real(h, #name);
    SG_DRIVER_LIST(SG_DRV_FILL_)
    sg_driver_set(&drv);
}

void sg_resolve_driver(void)
{
    pthread_once(&resolve_guard, resolve_once);
}

CUresult sg_missing_real(int i)
{
    SG_ERROR("%s is not available in the real driver: returning CUDA_ERROR_NOT_FOUND",
             sg_hooks[i].name);
    return CUDA_ERROR_NOT_FOUND;
}

/* ---------------------------------------------------------------- dlsym */

/* What dlsym(RTLD_NEXT, name) called from `caller` finds: the first object
 * after the caller's in the link map chain whose own definition of `name`
 * it is. The chain of a process's initial objects is the global search
 * order; an object opened later with RTLD_LOCAL is also on the chain and
 * would be searched here though glibc skips it (only for hooked names, and
 * only if such an object defines one). */
static void *next_after(void *caller, const char *name)
{
    Dl_info info;
    struct link_map *self = NULL, *owner;
    if (!dladdr1(caller, &info, (void **)&self, RTLD_DL_LINKMAP) || !self) return NULL;
    for (struct link_map *m = self->l_next; m; m = m->l_next) {
        if (!m->l_name || !m->l_name[0]) continue;
        void *h = dlopen(m->l_name, RTLD_NOLOAD | RTLD_LAZY);
        if (!h) continue;
        void *p = sg_real_dlsym(h, name);
        dlclose(h);
        owner = NULL;
        if (p && dladdr1(p, &info, (void **)&owner, RTLD_DL_LINKMAP) && owner == m) return p;
    }
    return NULL;
}

/* Given what the lookup found without substitution (r), returns what the
 * program gets: our wrapper if r is the real driver's function or our own
 * export standing in for one, r otherwise (some other definition, or NULL). */
static void *substitute(int i, void *r)
{
    if (!r) return NULL;
    if (r == sg_hooks[i].wrapper) {
        /* The lookup found our export. Without us it would have found the
         * next definition: hand out the wrapper only if there is one. */
        if (sg_real_dlsym(RTLD_NEXT, sg_hooks[i].name)) return sg_hook_hand_out(i);
        void *h = libcuda_handle(0);
        if (!h) return NULL;
        dlclose(h);
        sg_resolve_driver();
        return sg_hook_real(i) ? sg_hook_hand_out(i) : NULL;
    }
    void *h = libcuda_handle(0);  /* r exists, so something defining it is loaded */
    if (h) {
        dlclose(h);
        sg_resolve_driver();
        if (r == sg_hook_real(i)) return sg_hook_hand_out(i);
    }
    return r;
}

void *sg_dlsym_hooked(void *handle, const char *name, int i, void *caller)
{
    void *r = handle == RTLD_NEXT ? next_after(caller, name) : sg_real_dlsym(handle, name);
    return substitute(i, r);
}

/* ---------------------------------------------------------------- cuGetProcAddress */

/* Identifies which hooked variant the driver returned for `symbol` and
 * returns its wrapper; p itself if it is none of them. Variants registered
 * under the requested name are preferred (two names could share an address);
 * then any hook whose real address it is (cuGraphInstantiate at 12000 is
 * cuGraphInstantiateWithFlags). Never guesses from the version. */
static void *gpa_substitute(const char *symbol, void *p)
{
    int asked = 0;
    for (int i = 0; i < SG_HOOK_COUNT; i++) {
        if (strcmp(sg_hooks[i].base, symbol) != 0) continue;
        asked = 1;
        if (sg_hook_real(i) == p) return sg_hook_hand_out(i);
    }
    for (int i = 0; i < SG_HOOK_COUNT; i++) {
        if (sg_hook_real(i) == p) {
            SG_DEBUG("cuGetProcAddress(\"%s\") returned %s", symbol, sg_hooks[i].name);
            return sg_hook_hand_out(i);
        }
    }
    if (asked)
        SG_DEBUG_ONCE("cuGetProcAddress(\"%s\") returned %p, none of the hooked variants: "
                      "handed back unchanged", symbol, p);
    return p;
}

/* Shared tail of the cuGetProcAddress hooks: substitute on success. */
static CUresult gpa_finish(CUresult rc, const char *symbol, void **pfn)
{
    if (rc == CUDA_SUCCESS && symbol && pfn && *pfn) *pfn = gpa_substitute(symbol, *pfn);
    return rc;
}

/* Entry of the cuGetProcAddress hooks; returns nonzero if the real one is
 * there. */
static int gpa_enter(int id)
{
    sg_ensure_init();
    __atomic_fetch_add(&sg_hook_counters[id].calls, 1, __ATOMIC_RELAXED);
    return sg_hook_real(id) != NULL;
}

SG_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    if (!gpa_enter(SG_ID_cuGetProcAddress_v2)) return sg_missing_real(SG_ID_cuGetProcAddress_v2);
    return gpa_finish(sg_real.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus),
                      symbol, pfn);
}

SG_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags)
{
    if (!gpa_enter(SG_ID_cuGetProcAddress)) return sg_missing_real(SG_ID_cuGetProcAddress);
    return gpa_finish(sg_real.cuGetProcAddress(symbol, pfn, cudaVersion, flags), symbol, pfn);
}
