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
#include "../core/process.h"

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
    /* after the driver's own fork handlers, registered as it loaded */
    sg_process_driver_loaded();
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

/* The last object of the process's initial set (the program, the preloaded
 * libraries and their dependencies), noted by the constructor before main:
 * the objects after it on the link map chain were opened with dlopen. NULL
 * before the constructor ran (every object loaded then is initial). */
static struct link_map *initial_last;

void sg_resolve_note_initial(void)
{
    struct link_map *m = _r_debug.r_map;
    while (m && m->l_next) m = m->l_next;
    __atomic_store_n(&initial_last, m, __ATOMIC_RELEASE);
}

static int is_initial(const struct link_map *self)
{
    struct link_map *last = __atomic_load_n(&initial_last, __ATOMIC_ACQUIRE);
    if (!last) return 1;
    for (struct link_map *m = _r_debug.r_map; m; m = m->l_next) {
        if (m == self) return 1;
        if (m == last) return 0;
    }
    return 0;
}

/* m's own definition of name (not one of its dependencies'), or NULL. */
static void *own_definition(struct link_map *m, const char *name)
{
    Dl_info info;
    struct link_map *owner = NULL;
    const char *file = m->l_name && m->l_name[0] ? m->l_name : NULL;
    if (!file && m != _r_debug.r_map) return NULL;   /* the program's is "" */
    void *h = dlopen(file, RTLD_NOLOAD | RTLD_LAZY);
    if (!h) return NULL;
    void *p = sg_real_dlsym(h, name);
    dlclose(h);
    return p && dladdr1(p, &info, (void **)&owner, RTLD_DL_LINKMAP) && owner == m ? p : NULL;
}

/* What dlsym(RTLD_NEXT, name) called from `caller` finds, as glibc looks it
 * up: for an object of the initial set, the first object after it on the
 * link map chain whose own definition of name it is (an object opened later
 * with RTLD_LOCAL is also on the chain and would be searched here though
 * glibc skips it: only for hooked names, and only if such an object defines
 * one). For an object opened with dlopen, glibc searches the search list
 * of the object's first loader, the program's: the global scope (the
 * initial set, then the objects opened with RTLD_GLOBAL), loaded before the
 * caller or not, but the caller. Searching the chain after the caller found
 * nothing where libcuda was loaded before it (tests/e2e/adv_interpose.c,
 * next_plugin). There this library's own definition is passed over: what
 * the program would have found without it decides (substitute). */
static void *next_after(void *caller, const char *name)
{
    Dl_info info;
    struct link_map *self = NULL, *me = NULL, *owner = NULL;
    if (!dladdr1(caller, &info, (void **)&self, RTLD_DL_LINKMAP) || !self) return NULL;
    if (is_initial(self)) {
        for (struct link_map *m = self->l_next; m; m = m->l_next) {
            void *p = own_definition(m, name);
            if (p) return p;
        }
        return NULL;
    }
    if (!dladdr1((void *)next_after, &info, (void **)&me, RTLD_DL_LINKMAP)) return NULL;
    struct link_map *last = __atomic_load_n(&initial_last, __ATOMIC_ACQUIRE);
    for (struct link_map *m = _r_debug.r_map; m; m = m->l_next) {
        void *p = m != self && m != me ? own_definition(m, name) : NULL;
        if (p) return p;
        if (m == last) break;
    }
    /* the global scope after this library: the objects opened RTLD_GLOBAL */
    void *p = sg_real_dlsym(RTLD_NEXT, name);
    return p && dladdr1(p, &info, (void **)&owner, RTLD_DL_LINKMAP) && owner != self ? p : NULL;
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
