/*
 * interpose/hooks.h: what interpose/ files share: the hook table generated
 * from hooks.def, the real driver functions, the init guard and the
 * reentrancy guard.
 *
 * Globals and their guards:
 *   sg_real, sg_hooks' real addresses: written once by sg_resolve_driver()
 *     (under its pthread_once) before sg_ready is set, then read-only.
 *   sg_ready: atomic; set (release) when configuration and resolution are
 *     done; hooks read it (acquire) on entry.
 *   sg_passthrough_all: written once at configuration (policy off, or a bad
 *     configuration), then read-only.
 *   sg_in_hook: thread-local; set while core/ handles a call, so that a hook
 *     reached from inside it forwards directly.
 *   sg_hook_counters: atomics (see core/stats.h).
 */
#ifndef SG_HOOKS_H
#define SG_HOOKS_H

/* Declare every variant under its own name (cuda.h otherwise renames the
 * current ones, e.g. cuMemAlloc to cuMemAlloc_v2). */
#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>

#include <stddef.h>

#include "../core/stats.h"

#define SG_EXPORT __attribute__((visibility("default")))

enum { SG_STREAM_NONE, SG_STREAM_LEGACY, SG_STREAM_PTSZ };

/* Parameter lists: Pn(type1, name1, ...) expands, through SG_PARAMS_,
 * SG_ARGS_, SG_FIELDS_ and SG_UNPACK_, to a prototype, a call, struct
 * fields, and a call from a struct pointer `a`. */
#define SG_PARAMS(p) SG_PARAMS_##p
#define SG_ARGS(p)   SG_ARGS_##p
#define SG_FIELDS(p) SG_FIELDS_##p
#define SG_UNPACK(p) SG_UNPACK_##p
#define SG_PARAMS_P0() void
#define SG_ARGS_P0()
#define SG_FIELDS_P0() char sg_none_;
#define SG_UNPACK_P0()
#define SG_PARAMS_P1(t1, n1) t1 n1
#define SG_PARAMS_P2(t1, n1, ...) t1 n1, SG_PARAMS_P1(__VA_ARGS__)
#define SG_PARAMS_P3(t1, n1, ...) t1 n1, SG_PARAMS_P2(__VA_ARGS__)
#define SG_PARAMS_P4(t1, n1, ...) t1 n1, SG_PARAMS_P3(__VA_ARGS__)
#define SG_PARAMS_P5(t1, n1, ...) t1 n1, SG_PARAMS_P4(__VA_ARGS__)
#define SG_PARAMS_P6(t1, n1, ...) t1 n1, SG_PARAMS_P5(__VA_ARGS__)
#define SG_ARGS_P1(t1, n1) n1
#define SG_ARGS_P2(t1, n1, ...) n1, SG_ARGS_P1(__VA_ARGS__)
#define SG_ARGS_P3(t1, n1, ...) n1, SG_ARGS_P2(__VA_ARGS__)
#define SG_ARGS_P4(t1, n1, ...) n1, SG_ARGS_P3(__VA_ARGS__)
#define SG_ARGS_P5(t1, n1, ...) n1, SG_ARGS_P4(__VA_ARGS__)
#define SG_ARGS_P6(t1, n1, ...) n1, SG_ARGS_P5(__VA_ARGS__)
#define SG_FIELDS_P1(t1, n1) t1 n1;
#define SG_FIELDS_P2(t1, n1, ...) t1 n1; SG_FIELDS_P1(__VA_ARGS__)
#define SG_FIELDS_P3(t1, n1, ...) t1 n1; SG_FIELDS_P2(__VA_ARGS__)
#define SG_FIELDS_P4(t1, n1, ...) t1 n1; SG_FIELDS_P3(__VA_ARGS__)
#define SG_FIELDS_P5(t1, n1, ...) t1 n1; SG_FIELDS_P4(__VA_ARGS__)
#define SG_FIELDS_P6(t1, n1, ...) t1 n1; SG_FIELDS_P5(__VA_ARGS__)
#define SG_UNPACK_P1(t1, n1) a->n1
#define SG_UNPACK_P2(t1, n1, ...) a->n1, SG_UNPACK_P1(__VA_ARGS__)
#define SG_UNPACK_P3(t1, n1, ...) a->n1, SG_UNPACK_P2(__VA_ARGS__)
#define SG_UNPACK_P4(t1, n1, ...) a->n1, SG_UNPACK_P3(__VA_ARGS__)
#define SG_UNPACK_P5(t1, n1, ...) a->n1, SG_UNPACK_P4(__VA_ARGS__)
#define SG_UNPACK_P6(t1, n1, ...) a->n1, SG_UNPACK_P5(__VA_ARGS__)
#define SG_PARAMS_P7(t1, n1, ...) t1 n1, SG_PARAMS_P6(__VA_ARGS__)
#define SG_PARAMS_P8(t1, n1, ...) t1 n1, SG_PARAMS_P7(__VA_ARGS__)
#define SG_PARAMS_P9(t1, n1, ...) t1 n1, SG_PARAMS_P8(__VA_ARGS__)
#define SG_PARAMS_P10(t1, n1, ...) t1 n1, SG_PARAMS_P9(__VA_ARGS__)
#define SG_PARAMS_P11(t1, n1, ...) t1 n1, SG_PARAMS_P10(__VA_ARGS__)
#define SG_ARGS_P7(t1, n1, ...) n1, SG_ARGS_P6(__VA_ARGS__)
#define SG_ARGS_P8(t1, n1, ...) n1, SG_ARGS_P7(__VA_ARGS__)
#define SG_ARGS_P9(t1, n1, ...) n1, SG_ARGS_P8(__VA_ARGS__)
#define SG_ARGS_P10(t1, n1, ...) n1, SG_ARGS_P9(__VA_ARGS__)
#define SG_ARGS_P11(t1, n1, ...) n1, SG_ARGS_P10(__VA_ARGS__)
#define SG_FIELDS_P7(t1, n1, ...) t1 n1; SG_FIELDS_P6(__VA_ARGS__)
#define SG_FIELDS_P8(t1, n1, ...) t1 n1; SG_FIELDS_P7(__VA_ARGS__)
#define SG_FIELDS_P9(t1, n1, ...) t1 n1; SG_FIELDS_P8(__VA_ARGS__)
#define SG_FIELDS_P10(t1, n1, ...) t1 n1; SG_FIELDS_P9(__VA_ARGS__)
#define SG_FIELDS_P11(t1, n1, ...) t1 n1; SG_FIELDS_P10(__VA_ARGS__)
#define SG_UNPACK_P7(t1, n1, ...) a->n1, SG_UNPACK_P6(__VA_ARGS__)
#define SG_UNPACK_P8(t1, n1, ...) a->n1, SG_UNPACK_P7(__VA_ARGS__)
#define SG_UNPACK_P9(t1, n1, ...) a->n1, SG_UNPACK_P8(__VA_ARGS__)
#define SG_UNPACK_P10(t1, n1, ...) a->n1, SG_UNPACK_P9(__VA_ARGS__)
#define SG_UNPACK_P11(t1, n1, ...) a->n1, SG_UNPACK_P10(__VA_ARGS__)

/* Hook indices: SG_ID_<name>. */
#define SG_ID_ITEM_(name, ...) SG_ID_##name,
enum {
#define SG_HOOK SG_ID_ITEM_
#define SG_RESOLVER SG_ID_ITEM_
#include "hooks.def"
#undef SG_HOOK
#undef SG_RESOLVER
    SG_HOOK_COUNT
};

/* The real driver functions, typed from cuda.h: sg_real.<name>. */
#define SG_REAL_FIELD_(name, ...) __typeof__(&name) name;
typedef struct sg_real_table {
#define SG_HOOK SG_REAL_FIELD_
#define SG_RESOLVER SG_REAL_FIELD_
#include "hooks.def"
#undef SG_HOOK
#undef SG_RESOLVER
} sg_real_table;
extern sg_real_table sg_real;

typedef struct sg_hook_entry {
    const char *name;      /* exact ELF name */
    const char *base;      /* name cuGetProcAddress is asked for */
    int stream;            /* SG_STREAM_* */
    void *wrapper;         /* our exported function */
    size_t real_offset;    /* where in sg_real its real function lives */
} sg_hook_entry;

extern const sg_hook_entry sg_hooks[SG_HOOK_COUNT];
extern const char *const sg_hook_names[SG_HOOK_COUNT];
extern sg_hook_counter sg_hook_counters[SG_HOOK_COUNT];

/* The real function of hook i (NULL if the driver lacks it or is not
 * resolved yet). */
void *sg_hook_real(int i);

/* Index of the hook with exactly this ELF name, or -1. Cheap, no locks, no
 * allocation, no intercepted libc calls, not instrumented (dlsym_entry.c):
 * safe inside dlsym, even before a sanitizer runtime is initialised. */
int sg_hook_find(const char *name);

/* Counts one hand-out of hook i's wrapper and returns the wrapper. */
void *sg_hook_hand_out(int i);

/* --- init (init.c) --- */
extern int sg_ready __attribute__((visibility("hidden")));
extern int sg_passthrough_all;
extern __thread int sg_in_hook __attribute__((tls_model("initial-exec")));
/* Reads the configuration (once); exits with status 2 under
 * STABLEGRAPH_STRICT=1 if it is bad. */
void sg_config_init(void);
/* Everything a hook needs: configuration and the real driver. Idempotent. */
void sg_init_slow(void);

static inline void sg_ensure_init(void)
{
    if (__builtin_expect(!__atomic_load_n(&sg_ready, __ATOMIC_ACQUIRE), 0)) sg_init_slow();
}

/* --- resolution (resolve.c) --- */
/* The real dlsym (bootstrapped once with dlvsym, dlsym_entry.c). */
void *sg_real_dlsym(void *handle, const char *name);
/* dlsym_entry.c: the real dlsym, found on first use; called by the dlsym
 * trampoline and by sg_real_dlsym(). */
void *(*sg_dlsym_bootstrap(void))(void *, const char *);
/* resolve.c: dlsym of hook i's exact name; caller is the return address of
 * the program's dlsym call (tail-jumped to from the trampoline). */
void *sg_dlsym_hooked(void *handle, const char *name, int i, void *caller);
/* Resolves every hook's real function from libcuda.so.1 and fills the driver
 * table for core/. Aborts if a "real" function is one of our wrappers.
 * Idempotent. */
void sg_resolve_driver(void);
/* Notes which objects are the process's initial set (the constructor): a
 * dlsym(RTLD_NEXT) from one of them searches the link map chain, from any
 * other object its dependencies. */
void sg_resolve_note_initial(void);
/* Result for a hook whose real function is missing. */
CUresult sg_missing_real(int i);

#endif /* SG_HOOKS_H */
