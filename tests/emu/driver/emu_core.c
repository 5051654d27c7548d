/*
 * emu_core.c: the emulated driver's foundation.
 *
 * Responsible for: bootstrap and the CUDAEMU_* knobs, call statistics and the
 * CUDAEMU_STATS file, CUDAEMU_FAIL fault injection, logging and violations,
 * the handle registry (with each handle's owning context, and the handles a
 * context teardown ended), the handle memory pools (LIFO reuse of freed
 * handle values), the sticky errors of faulted kernels (cudaemu_fault), error
 * names, cuInit, devices, and contexts (primary and
 * created, the per-thread current context and its push/pop stack, and the
 * teardown order of a context's resources).
 *
 * Locks:
 *   - stat list: lock-free (atomic push of each entry's static record); its
 *     counters are atomic; the entry a thread is in (emu_stat_nodes, reports)
 *     is thread-local.
 *   - emu_handle_lock guards the handle registry (emu_handles).
 *   - emu_pool_lock guards the handle memory pools (emu_pools); a leaf lock.
 *   - emu_ctx_lock guards the primary-context table (emu_primary[]).
 *     Never held while calling into streams (emu_streams_*), which may block.
 *   Current contexts are thread-local and need no lock.
 */
#include "emu_internal.h"
#include "emu_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uthash.h>

emu_config emu_cfg;

/* ------------------------------------------------------------------ errors */

static const struct { CUresult code; const char *name; } emu_errors[] = {
#define X(name, value) { (CUresult)(value), #name },
#include "emu_errors.inc"
#undef X
};

static const char *emu_error_name(CUresult r)
{
    for (size_t i = 0; i < sizeof emu_errors / sizeof emu_errors[0]; i++)
        if (emu_errors[i].code == r) return emu_errors[i].name;
    return NULL;
}

static int emu_error_parse(const char *s, CUresult *out)
{
    for (size_t i = 0; i < sizeof emu_errors / sizeof emu_errors[0]; i++)
        if (strcmp(emu_errors[i].name, s) == 0) { *out = emu_errors[i].code; return 1; }
    return 0;
}

/* "CUDA_ERROR_INVALID_VALUE" -> "invalid value"; one buffer per code. */
static const char *emu_error_string(CUresult r)
{
    static char strings[sizeof emu_errors / sizeof emu_errors[0]][64];
    for (size_t i = 0; i < sizeof emu_errors / sizeof emu_errors[0]; i++) {
        if (emu_errors[i].code != r) continue;
        if (!strings[i][0]) {
            const char *n = emu_errors[i].name;
            n += strncmp(n, "CUDA_ERROR_", 11) == 0 ? 11 : 5; /* CUDA_SUCCESS -> SUCCESS */
            char tmp[64];
            size_t k = 0;
            for (; n[k] && k < sizeof tmp - 1; k++)
                tmp[k] = n[k] == '_' ? ' ' : (char)(n[k] >= 'A' && n[k] <= 'Z' ? n[k] + 32 : n[k]);
            tmp[k] = 0;
            memcpy(strings[i], tmp, k + 1); /* racing writers write the same bytes */
        }
        return strings[i];
    }
    return NULL;
}

/* ------------------------------------------------------------------ logging */

static void emu_vlog(const char *prefix, const char *fmt, va_list ap)
{
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "cudaemu: %s", prefix);
    if (n < 0) return;
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof buf - 2) len = sizeof buf - 2;
    buf[len++] = '\n';
    ssize_t w = write(2, buf, len);
    (void)w;
}

void emu_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emu_vlog("", fmt, ap);
    va_end(ap);
}

static atomic_ulong emu_violations;

void emu_violation(const char *call, const char *fmt, ...)
{
    char prefix[128];
    snprintf(prefix, sizeof prefix, "VIOLATION: %s: ", call);
    atomic_fetch_add(&emu_violations, 1);
    va_list ap;
    va_start(ap, fmt);
    emu_vlog(prefix, fmt, ap);
    va_end(ap);
}

unsigned long emu_violation_count(void) { return atomic_load(&emu_violations); }

/* ------------------------------------------------------------------ knobs */

static void emu_bad_knob(const char *var, const char *val, const char *want)
{
    emu_log("bad value for %s: '%s' (expected %s)", var, val, want);
    exit(2);
}

/* Parses a decimal unsigned value of `var` into *out; unset keeps *out.
 * `sizes`: a K, M, G or T suffix (powers of 1024) may follow. */
static void emu_knob_parse(const char *var, unsigned long long lo, unsigned long long hi,
                           unsigned long long *out, const char *want, int sizes)
{
    const char *v = getenv(var);
    if (!v) return;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    int shift = 0;
    if (sizes && *end && !end[1]) {
        const char *units = "KMGT", *u = strchr(units, end[0] & ~0x20);
        if (u && end[0]) { shift = 10 * (int)(u - units + 1); end++; }
    }
    if (errno || end == v || *end || v[0] == '-' || (shift && x > hi >> shift)) emu_bad_knob(var, v, want);
    x <<= shift;
    if (x < lo || x > hi) emu_bad_knob(var, v, want);
    *out = x;
}

static void emu_knob_ull(const char *var, unsigned long long lo, unsigned long long hi,
                         unsigned long long *out, const char *want)
{
    emu_knob_parse(var, lo, hi, out, want, 0);
}

/* CUDAEMU_FAIL=NAME:N[+]:ERROR[,...]: the Nth call of NAME (or, with '+', the
 * Nth and every later one) returns ERROR. */
typedef struct emu_fail_rule {
    char name[96];
    unsigned long nth;
    int and_later;
    CUresult err;
    struct emu_fail_rule *next;
} emu_fail_rule;
static emu_fail_rule *emu_fail_rules;

static void emu_parse_fail(const char *spec)
{
    const char *want = "NAME:N:CUDA_ERROR_xxx[,...] with N >= 1 (N+ for the Nth and later calls)";
    char item[256];
    for (const char *p = spec; *p;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof item) emu_bad_knob("CUDAEMU_FAIL", spec, want);
        memcpy(item, p, len);
        item[len] = 0;
        p += len + (p[len] == ',');
        char *c1 = strchr(item, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c1 || !c2 || c1 == item || (size_t)(c1 - item) >= sizeof emu_fail_rules->name)
            emu_bad_knob("CUDAEMU_FAIL", spec, want);
        *c1 = *c2 = 0;
        emu_fail_rule *r = calloc(1, sizeof *r);
        if (!r) abort();
        memcpy(r->name, item, (size_t)(c1 - item) + 1);
        char *end;
        r->nth = strtoul(c1 + 1, &end, 10);
        if (*end == '+') { r->and_later = 1; end++; }
        if (r->nth == 0 || *end || !emu_error_parse(c2 + 1, &r->err) || r->err == CUDA_SUCCESS)
            emu_bad_knob("CUDAEMU_FAIL", spec, want);
        r->next = emu_fail_rules;
        emu_fail_rules = r;
    }
}

static void emu_write_stats(void);

static pthread_once_t emu_boot_once = PTHREAD_ONCE_INIT;

static void emu_boot(void)
{
    unsigned long long g = 2u << 20, delay = 0, devs = 1, novmm = 0, mem = 16ull << 30, verbose = 0;
    emu_knob_parse("CUDAEMU_GRANULARITY", 4096, 1ull << 30, &g,
                   "a power of two between 4096 and 1073741824 (K, M, G suffixes allowed)", 1);
    if (g & (g - 1)) emu_bad_knob("CUDAEMU_GRANULARITY", getenv("CUDAEMU_GRANULARITY"), "a power of two");
    if (g % (unsigned long long)sysconf(_SC_PAGESIZE))
        emu_bad_knob("CUDAEMU_GRANULARITY", getenv("CUDAEMU_GRANULARITY"), "a multiple of the page size");
    emu_knob_ull("CUDAEMU_KERNEL_DELAY_US", 0, 10000000, &delay, "microseconds, 0..10000000");
    unsigned long long ddelay = 0;
    emu_knob_ull("CUDAEMU_DESTROY_DELAY_US", 0, 10000000, &ddelay, "microseconds, 0..10000000");
    emu_cfg.destroy_delay_us = (unsigned)ddelay;
    unsigned long long early = 0;
    emu_knob_ull("CUDAEMU_SYNC_EARLY_US", 0, 10000000, &early, "microseconds, 0..10000000");
    emu_cfg.sync_early_us = (unsigned)early;
    emu_knob_ull("CUDAEMU_DEVICES", 0, 8, &devs, "a device count, 0..8");
    emu_knob_ull("CUDAEMU_NO_VMM", 0, 1, &novmm, "0 or 1");
    emu_knob_parse("CUDAEMU_DEVICE_MEMORY", 1ull << 20, 1ull << 46, &mem,
                   "bytes per device, 1 MiB..64 TiB (K, M, G, T suffixes: powers of 1024)", 1);
    emu_knob_ull("CUDAEMU_VERBOSE", 0, 1, &verbose, "0 or 1");
    unsigned long long modb = 0, ctxb = 0;
    emu_knob_parse("CUDAEMU_MODULE_BYTES", 0, 1ull << 46, &modb,
                   "bytes per module load, 0..64 TiB (K, M, G, T suffixes: powers of 1024)", 1);
    emu_knob_parse("CUDAEMU_CTX_BYTES", 0, 1ull << 46, &ctxb,
                   "bytes per context, 0..64 TiB (K, M, G, T suffixes: powers of 1024)", 1);
    unsigned long long execb = 0;
    emu_knob_parse("CUDAEMU_EXEC_BYTES", 0, 1ull << 46, &execb,
                   "bytes per graph exec, 0..64 TiB (K, M, G, T suffixes: powers of 1024)", 1);
    unsigned long long funcb = 0;
    emu_knob_parse("CUDAEMU_FUNC_BYTES", 0, 1ull << 46, &funcb,
                   "bytes per lazily loaded function, 0..64 TiB (K, M, G, T suffixes: powers of 1024)", 1);
    emu_cfg.func_bytes = (size_t)funcb;
    const char *loading = getenv("CUDA_MODULE_LOADING");
    emu_cfg.eager = loading && strcmp(loading, "EAGER") == 0;
    emu_cfg.exec_bytes = (size_t)execb;
    emu_cfg.module_bytes = (size_t)modb;
    emu_cfg.ctx_bytes = (size_t)ctxb;
    unsigned long long trace_resolve = 0;
    emu_knob_ull("CUDAEMU_TRACE_RESOLVE", 0, 1, &trace_resolve, "0 or 1");
    emu_cfg.trace_resolve = (int)trace_resolve;
    const char *modules = getenv("CUDAEMU_MODULES");
    emu_cfg.modules = modules && *modules ? strdup(modules) : NULL;
    emu_cfg.granularity = (size_t)g;
    emu_cfg.kernel_delay_us = (unsigned)delay;
    emu_cfg.devices = (int)devs;
    emu_cfg.no_vmm = (int)novmm;
    unsigned long long nordma = 0;
    emu_knob_ull("CUDAEMU_NO_RDMA_VMM", 0, 1, &nordma, "0 or 1");
    emu_cfg.no_rdma_vmm = (int)nordma;
    emu_cfg.device_memory = (size_t)mem;
    emu_cfg.verbose = (int)verbose;
    const char *stats = getenv("CUDAEMU_STATS");
    if (stats && !*stats) emu_bad_knob("CUDAEMU_STATS", stats, "a file path");
    emu_cfg.stats_path = stats ? strdup(stats) : NULL;
    const char *fail = getenv("CUDAEMU_FAIL");
    if (fail) emu_parse_fail(fail);
    if (emu_cfg.stats_path) atexit(emu_write_stats);
}

void emu_bootstrap(void) { pthread_once(&emu_boot_once, emu_boot); }

__attribute__((constructor)) static void emu_ctor(void) { emu_bootstrap(); }

/* ------------------------------------------------------------------ statistics */

static int emu_sticky_exempt_name(const char *name);

/* The entry point the calling thread is in (set by emu_enter), for reports
 * made below it and emu_stat_nodes; NULL on stream worker threads. */
static __thread emu_entry_stat *emu_cur_entry;

static _Atomic(emu_entry_stat *) emu_stat_list;

CUresult emu_enter(emu_entry_stat *st)
{
    emu_bootstrap();
    int expected = 0;
    if (atomic_load_explicit((_Atomic int *)&st->registered, memory_order_acquire) != 2) {
        if (atomic_compare_exchange_strong((_Atomic int *)&st->registered, &expected, 1)) {
            const emu_fail_rule *mine = NULL;
            for (const emu_fail_rule *r = emu_fail_rules; r; r = r->next)
                if (strcmp(r->name, st->name) == 0) { mine = r; break; }
            st->rules = mine;
            st->sticky_exempt = emu_sticky_exempt_name(st->name);
            emu_entry_stat *head = atomic_load(&emu_stat_list);
            do st->next = head; while (!atomic_compare_exchange_weak(&emu_stat_list, &head, st));
            atomic_store_explicit((_Atomic int *)&st->registered, 2, memory_order_release);
        } else {
            while (atomic_load_explicit((_Atomic int *)&st->registered, memory_order_acquire) != 2)
                sched_yield();
        }
    }
    emu_cur_entry = st;
    unsigned long n = atomic_fetch_add((_Atomic unsigned long *)&st->calls, 1) + 1;
    if (st->rules) {
        for (const emu_fail_rule *r = st->rules; r; r = r->next) {
            if (strcmp(r->name, st->name) != 0) continue;
            if (n == r->nth || (r->and_later && n > r->nth)) return r->err;
        }
    }
    return CUDA_SUCCESS;
}

void emu_stat_nodes(unsigned long nodes, unsigned long changed)
{
    emu_entry_stat *st = emu_cur_entry;
    if (!st) return;
    atomic_fetch_add((_Atomic unsigned long *)&st->nodes, nodes);
    atomic_fetch_add((_Atomic unsigned long *)&st->changed, changed);
}

/* What is alive in the driver now (cuemuLive, the stats file's "live"): the
 * registered handles of each kind that no teardown ended, then the device
 * ranges (allocations and mappings), VMM reservations, VMM physical handles
 * and the bytes charged to the devices. */
enum { EMU_LIVE_MEM = EMU_K_COUNT - 1, EMU_LIVE_COUNT = EMU_LIVE_MEM + 4 };
static const char *const emu_live_names[EMU_LIVE_COUNT] = {
    "contexts", "streams", "events", "modules", "functions", "graphs", "nodes", "execs",
    "memhandles", "pools", "libraries", "kernels", "arrays", "user_objects", "green_contexts",
    "resource_descriptors", "external_memories", "external_semaphores",
    "device_ranges", "vmm_reservations", "vmm_handles", "device_bytes",
};
_Static_assert(EMU_K_EXTSEM == EMU_K_COUNT - 1, "emu_live_names lists every handle kind");
static pthread_mutex_t emu_handle_lock;
static void emu_live_counts(unsigned long long out[EMU_LIVE_COUNT]);

/* cuemuLive: an export of the emulator only (not a CUDA entry point): *n =
 * the live objects of the kind named (emu_live_names). A program or test reads
 * it through dlsym; CUDA_ERROR_INVALID_VALUE for an unknown name. */
EMU_EXPORT CUresult cuemuLive(const char *what, unsigned long long *n)
{
    if (!what || !n) return CUDA_ERROR_INVALID_VALUE;
    for (int k = 0; k < EMU_LIVE_COUNT; k++) {
        if (strcmp(what, emu_live_names[k]) != 0) continue;
        unsigned long long live[EMU_LIVE_COUNT];
        emu_live_counts(live);
        *n = live[k];
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_VALUE;
}

/* Writes the CUDAEMU_STATS file: {"calls": {...}, "nodes": {name: {"nodes": n,
 * "changed": n}, ...} (entries that covered graph nodes only), "violations":
 * n}, through a temporary file renamed into place so readers never see half a
 * file. */
static void emu_write_stats(void)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", emu_cfg.stats_path, (int)getpid()) >= (int)sizeof tmp) return;
    FILE *f = fopen(tmp, "w");
    if (!f) { emu_log("cannot write %s: %s", tmp, strerror(errno)); return; }
    fprintf(f, "{\"calls\": {");
    int first = 1;
    for (emu_entry_stat *s = atomic_load(&emu_stat_list); s; s = s->next) {
        fprintf(f, "%s\n  \"%s\": %lu", first ? "" : ",", s->name,
                atomic_load((_Atomic unsigned long *)&s->calls));
        first = 0;
    }
    fprintf(f, "\n}, \"nodes\": {");
    first = 1;
    for (emu_entry_stat *s = atomic_load(&emu_stat_list); s; s = s->next) {
        unsigned long nodes = atomic_load((_Atomic unsigned long *)&s->nodes);
        if (!nodes) continue;
        fprintf(f, "%s\n  \"%s\": {\"nodes\": %lu, \"changed\": %lu}", first ? "" : ",", s->name, nodes,
                atomic_load((_Atomic unsigned long *)&s->changed));
        first = 0;
    }
    fprintf(f, "\n}, \"live\": {");
    unsigned long long live[EMU_LIVE_COUNT];
    emu_live_counts(live);
    for (int k = 0; k < EMU_LIVE_COUNT; k++)
        fprintf(f, "%s\n  \"%s\": %llu", k ? "," : "", emu_live_names[k], live[k]);
    fprintf(f, "\n}, \"violations\": %lu}\n", emu_violation_count());
    if (fclose(f) != 0 || rename(tmp, emu_cfg.stats_path) != 0) {
        emu_log("cannot write %s: %s", emu_cfg.stats_path, strerror(errno));
        unlink(tmp);
    }
}

/* ------------------------------------------------------------------ handles */

/* A registered handle. `ended`: its context's teardown ended it; the entry
 * stays so a later use is reported (emu_handle_ok) until a new handle takes
 * the address. */
typedef struct emu_handle {
    const void *h;
    emu_kind kind;
    CUcontext owner;
    int ended;
    UT_hash_handle hh;
} emu_handle;
static emu_handle *emu_handles;                       /* guarded by emu_handle_lock */
static pthread_mutex_t emu_handle_lock = PTHREAD_MUTEX_INITIALIZER;

static void emu_live_counts(unsigned long long out[EMU_LIVE_COUNT])
{
    memset(out, 0, EMU_LIVE_COUNT * sizeof *out);
    pthread_mutex_lock(&emu_handle_lock);
    for (emu_handle *e = emu_handles; e; e = e->hh.next)
        if (!e->ended && e->kind >= 1 && e->kind < EMU_K_COUNT) out[e->kind - 1]++;
    pthread_mutex_unlock(&emu_handle_lock);
    emu_mem_live(out + EMU_LIVE_MEM);
}

void emu_handle_add_ctx(const void *h, emu_kind kind, CUcontext owner)
{
    emu_handle *e = calloc(1, sizeof *e), *old;
    if (!e) { emu_log("out of host memory registering a handle"); abort(); }
    e->h = h;
    e->kind = kind;
    e->owner = owner;
    pthread_mutex_lock(&emu_handle_lock);
    HASH_FIND_PTR(emu_handles, &h, old);
    if (old) HASH_DEL(emu_handles, old);      /* an ended handle's address reused */
    HASH_ADD_PTR(emu_handles, h, e);
    pthread_mutex_unlock(&emu_handle_lock);
    free(old);
}

void emu_handle_add(const void *h, emu_kind kind) { emu_handle_add_ctx(h, kind, NULL); }

void emu_leaf_locks_fork(int phase)
{
    if (phase == 0) {                     /* leaves: nothing is taken under them */
        emu_exec_tok_fork(0);
        emu_uobj_fork(0);
        pthread_mutex_lock(&emu_handle_lock);
        emu_mem_fork(0);
        return;
    }
    emu_mem_fork(phase);
    pthread_mutex_unlock(&emu_handle_lock);
    emu_uobj_fork(phase);
    emu_exec_tok_fork(phase);
}

void emu_handle_del(const void *h)
{
    pthread_mutex_lock(&emu_handle_lock);
    emu_handle *e;
    HASH_FIND_PTR(emu_handles, &h, e);
    if (e) HASH_DEL(emu_handles, e);
    pthread_mutex_unlock(&emu_handle_lock);
    free(e);
}

void emu_handle_end(const void *h)
{
    pthread_mutex_lock(&emu_handle_lock);
    emu_handle *e;
    HASH_FIND_PTR(emu_handles, &h, e);
    if (e) e->ended = 1;
    pthread_mutex_unlock(&emu_handle_lock);
}

/* 1 alive, 0 unknown or of another kind, -1 ended by its context's teardown. */
static int handle_state(const void *h, emu_kind kind)
{
    if (!h) return 0;
    pthread_mutex_lock(&emu_handle_lock);
    emu_handle *e;
    HASH_FIND_PTR(emu_handles, &h, e);
    int st = !e || e->kind != kind ? 0 : e->ended ? -1 : 1;
    pthread_mutex_unlock(&emu_handle_lock);
    return st;
}

int emu_handle_alive(const void *h, emu_kind kind) { return handle_state(h, kind) == 1; }

int emu_handle_ok(const void *h, emu_kind kind)
{
    static const char *const names[EMU_K_COUNT] = {
        [EMU_K_STREAM] = "stream", [EMU_K_EVENT] = "event", [EMU_K_MODULE] = "module",
        [EMU_K_FUNC] = "function", [EMU_K_EXEC] = "graph exec", [EMU_K_LIBRARY] = "library",
        [EMU_K_KERNEL] = "kernel", [EMU_K_ARRAY] = "array", [EMU_K_UOBJ] = "user object",
        [EMU_K_GREEN] = "green context", [EMU_K_RESDESC] = "resource descriptor",
        [EMU_K_EXTMEM] = "external memory", [EMU_K_EXTSEM] = "external semaphore",
    };
    int st = handle_state(h, kind);
    if (st < 0)
        emu_violation(emu_cur_entry ? emu_cur_entry->name : "stream work",
                      "%s %p belonged to a context that was destroyed or reset (cuCtxDestroy: using the "
                      "context's resources afterwards is undefined behavior)",
                      names[kind] ? names[kind] : "handle", h);
    return st == 1;
}

/* The live handles of `kind` that belong to ctx, in a malloc'd array (*out,
 * NULL when none); returns the count. */
static size_t emu_handles_of_ctx(CUcontext ctx, emu_kind kind, const void ***out)
{
    size_t n = 0, cap = 0;
    const void **v = NULL;
    pthread_mutex_lock(&emu_handle_lock);
    for (emu_handle *e = emu_handles; e; e = e->hh.next) {
        if (e->owner != ctx || e->kind != kind || e->ended) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            const void **nv = realloc(v, cap * sizeof *v);
            if (!nv) { emu_log("out of host memory"); abort(); }
            v = nv;
        }
        v[n++] = e->h;
    }
    pthread_mutex_unlock(&emu_handle_lock);
    *out = v;
    return n;
}

void emu_handles_end_ctx(CUcontext ctx, emu_kind kind, void (*release)(void *h))
{
    const void **v;
    size_t n = emu_handles_of_ctx(ctx, kind, &v);
    for (size_t i = 0; i < n; i++) {
        emu_handle_end(v[i]);
        release((void *)(uintptr_t)v[i]);
    }
    free(v);
}

/* Handle memory pools: one LIFO free list per kind, linked through the first
 * word of each free object; guarded by emu_pool_lock. */
static pthread_mutex_t emu_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { void *free; size_t size; } emu_pools[EMU_K_COUNT];

void *emu_handle_mem_get(emu_kind kind, size_t size)
{
    if (size < sizeof(void *)) size = sizeof(void *);
    pthread_mutex_lock(&emu_pool_lock);
    if (!emu_pools[kind].size) emu_pools[kind].size = size;
    if (emu_pools[kind].size != size) {
        emu_log("internal error: handle pool %d holds %zu-byte objects, asked for %zu",
                (int)kind, emu_pools[kind].size, size);
        abort();
    }
    void *p = emu_pools[kind].free;
    if (p) emu_pools[kind].free = *(void **)p;
    pthread_mutex_unlock(&emu_pool_lock);
    if (p) memset(p, 0, size);
    else if (!(p = calloc(1, size))) { emu_log("out of host memory"); abort(); }
    return p;
}

/* The destroys' delay (CUDAEMU_DESTROY_DELAY_US, or cuemuDestroyDelay at run
 * time): a destroy waits that long, or until cuemuDestroyDelay is called
 * again, which ends every wait in progress (dd_gen moves on). */
static pthread_mutex_t dd_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dd_cond = PTHREAD_COND_INITIALIZER;
static unsigned long dd_gen;      /* dd_lock */

void emu_destroy_delay(void)
{
    unsigned us = __atomic_load_n(&emu_cfg.destroy_delay_us, __ATOMIC_ACQUIRE);
    if (!us) return;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += us / 1000000;
    until.tv_nsec += (long)(us % 1000000) * 1000;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&dd_lock);
    unsigned long g = dd_gen;
    while (g == dd_gen && pthread_cond_timedwait(&dd_cond, &dd_lock, &until) != ETIMEDOUT) {
    }
    pthread_mutex_unlock(&dd_lock);
}

/* cuemuDestroyDelay: an export of the emulator only (not a CUDA entry
 * point), read through dlsym: sets the destroys' delay to us microseconds
 * (0..10000000, as CUDAEMU_DESTROY_DELAY_US) from now on, and ends the
 * waits of the destroys in flight. A test holds one destroy in flight for
 * exactly as long as another thread needs (tests/e2e/adv_reuse.c's
 * windows): a long delay before the destroy, 0 once the other thread is
 * done. CUDA_ERROR_INVALID_VALUE above the bound. */
EMU_EXPORT CUresult cuemuDestroyDelay(unsigned long long us)
{
    if (us > 10000000ULL) return CUDA_ERROR_INVALID_VALUE;
    __atomic_store_n(&emu_cfg.destroy_delay_us, (unsigned)us, __ATOMIC_RELEASE);
    pthread_mutex_lock(&dd_lock);
    dd_gen++;
    pthread_cond_broadcast(&dd_cond);
    pthread_mutex_unlock(&dd_lock);
    return CUDA_SUCCESS;
}

void emu_handle_mem_put(emu_kind kind, void *p)
{
    if (!p) return;
    pthread_mutex_lock(&emu_pool_lock);
    *(void **)p = emu_pools[kind].free;
    emu_pools[kind].free = p;
    pthread_mutex_unlock(&emu_pool_lock);
}

/* ------------------------------------------------------------------ init, devices */

static atomic_int emu_inited;

int emu_initialized(void) { return atomic_load(&emu_inited); }
int emu_device_count(void) { return emu_cfg.devices; }

EMU_EXPORT CUresult cuInit(unsigned int flags)
{
    EMU_ENTRY();
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (emu_cfg.devices == 0) return CUDA_ERROR_NO_DEVICE;
    atomic_store(&emu_inited, 1);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDriverGetVersion(int *v)
{
    EMU_ENTRY();
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = EMU_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    EMU_ENTRY();
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    *pStr = emu_error_name(error);
    return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EMU_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    EMU_ENTRY();
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    *pStr = emu_error_string(error);
    return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult emu_device_check(CUdevice dev)
{
    if (!emu_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    return dev >= 0 && dev < emu_cfg.devices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

EMU_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    EMU_ENTRY_INIT();
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= emu_cfg.devices) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDeviceGetCount(int *count)
{
    EMU_ENTRY_INIT();
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = emu_cfg.devices;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    EMU_ENTRY();
    CUresult r = emu_device_check(dev);
    if (r != CUDA_SUCCESS) return r;
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "cudaemu emulated device %d", dev);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    EMU_ENTRY();
    CUresult r = emu_device_check(dev);
    if (r != CUDA_SUCCESS) return r;
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    *bytes = emu_cfg.device_memory;
    return CUDA_SUCCESS;
}

static CUresult emu_device_get_uuid(CUuuid *uuid, CUdevice dev)
{
    CUresult r = emu_device_check(dev);
    if (r != CUDA_SUCCESS) return r;
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    memset(uuid, 0, sizeof *uuid);
    memcpy(uuid->bytes, "cudaemu-dev", 11);
    uuid->bytes[15] = (char)dev;
    return CUDA_SUCCESS;
}

void emu_device_uuid(CUdevice dev, CUuuid *uuid) { (void)emu_device_get_uuid(uuid, dev); }

EMU_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    EMU_ENTRY();
    return emu_device_get_uuid(uuid, dev);
}

/* The 9.2 entry (the CUDA runtime asks for it); _v2 differs only for MIG
 * instances, which the emulation does not have. */
EMU_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    EMU_ENTRY();
    return emu_device_get_uuid(uuid, dev);
}

/* Attribute values of the emulated device (an H100-like part, figures from
 * NVIDIA's H100 SXM5 specification: 132 SMs, 2048 threads, 64 K registers
 * and 228 KiB shared memory per SM, 50 MiB L2); every other valid attribute
 * reads 0. */
int emu_device_attribute(CUdevice_attribute a, CUdevice dev)
{
    int t = emu_tex_attribute(a);   /* texture alignment and limits (emu_tex.c) */
    if (t >= 0) return t;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: return dev;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return !emu_cfg.no_vmm;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: return !emu_cfg.no_vmm;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;              /* cuMemAllocManaged */
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;   /* no cuStreamAttachMemAsync needed */
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;          /* cuMemcpy2D's (emu_copy.c) */
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED: return !emu_cfg.no_vmm && !emu_cfg.no_rdma_vmm;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 232448;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 52428800;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
    default: return 0;
    }
}

EMU_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    EMU_ENTRY();
    CUresult r = emu_device_check(dev);
    if (r != CUDA_SUCCESS) return r;
    if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    *pi = emu_device_attribute(attrib, dev);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    EMU_ENTRY();
    CUresult r = emu_device_check(dev);
    if (r == CUDA_SUCCESS) r = emu_device_check(peerDev);
    if (r != CUDA_SUCCESS) return r;
    if (!canAccessPeer) return CUDA_ERROR_INVALID_VALUE;
    *canAccessPeer = dev != peerDev;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ sticky errors */

/* Sources (docs/emulator.md, "Sticky errors: a faulting kernel"): cuda.h on
 * CUDA_ERROR_ASSERT ("The context cannot be used anymore, and must be
 * destroyed"), CUDA_ERROR_ILLEGAL_ADDRESS and CUDA_ERROR_LAUNCH_FAILED ("This
 * leaves the process in an inconsistent state and any further CUDA work will
 * return the same error. To continue using CUDA, the process must be
 * terminated and relaunched"); cuCtxSynchronize "returns an error if one of
 * the preceding tasks failed", and most entry points "may also return error
 * codes from previous, asynchronous launches". */
static atomic_int emu_sticky_any;        /* a sticky error was ever set: the slow path */
static atomic_int emu_sticky_process;    /* ILLEGAL_ADDRESS, LAUNCH_FAILED: every context */

/* The entry points that still answer once a sticky error stands: they need
 * no usable context (device queries, the current-context stack) or are the
 * way out of an assert (context teardown). Entry points made with EMU_ENTRY
 * alone (cuInit, error names, device attributes, cuGetProcAddress,
 * cuGetExportTable) answer too. */
static int emu_sticky_exempt_name(const char *name)
{
    static const char *const names[] = {
        "cuDeviceGet", "cuDeviceGetCount", "cuCtxGetCurrent", "cuCtxSetCurrent",
        "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2", "cuCtxGetDevice", "cuCtxGetDevice_v2",
        "cuCtxDestroy_v2", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease",
        "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2",
        "cuDevicePrimaryCtxGetState", NULL,
    };
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], name) == 0) return 1;
    return 0;
}

void emu_sticky_set(CUcontext ctx, CUresult code)
{
    if (code == CUDA_ERROR_ILLEGAL_ADDRESS || code == CUDA_ERROR_LAUNCH_FAILED) {
        int none = 0;
        atomic_compare_exchange_strong(&emu_sticky_process, &none, (int)code);
    } else if (ctx) {
        int none = 0;
        atomic_compare_exchange_strong((_Atomic int *)&ctx->sticky, &none, (int)code);
    }
    atomic_store(&emu_sticky_any, 1);
}

CUresult emu_sticky_now(CUcontext ctx)
{
    if (!atomic_load(&emu_sticky_any)) return CUDA_SUCCESS;
    int p = atomic_load(&emu_sticky_process);
    if (p) return (CUresult)p;
    return ctx ? (CUresult)atomic_load((_Atomic int *)&ctx->sticky) : CUDA_SUCCESS;
}

CUresult emu_sticky_entry(const emu_entry_stat *st)
{
    if (!atomic_load(&emu_sticky_any) || st->sticky_exempt) return CUDA_SUCCESS;
    return emu_sticky_now(emu_ctx_current());
}

void emu_sticky_ctx_gone(CUcontext ctx) { atomic_store((_Atomic int *)&ctx->sticky, 0); }

/* ------------------------------------------------------------------ contexts */

#define EMU_CTX_STACK 16
static __thread CUcontext emu_ctx_stack[EMU_CTX_STACK]; /* [depth-1] is current */
static __thread int emu_ctx_depth;

static pthread_mutex_t emu_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    CUcontext ctx;       /* created on first retain, never freed (stable handle) */
    int refs;            /* retains minus releases */
    unsigned flags;
} emu_primary[8];        /* guarded by emu_ctx_lock */

CUcontext emu_ctx_current_raw(void) { return emu_ctx_depth ? emu_ctx_stack[emu_ctx_depth - 1] : NULL; }

/* A converted context stands for its owner, the primary context (cuCtxFromGreenCtx: "For
 * APIs whose semantics are independent of green context resources, the operation is
 * performed identically to how it would perform with a primary context"). */
static CUcontext ctx_owner(CUcontext c) { return c && c->green ? c->owner : c; }

CUcontext emu_ctx_current(void) { return ctx_owner(emu_ctx_current_raw()); }

static void emu_ctx_set_current(CUcontext c)
{
    if (emu_ctx_depth == 0) emu_ctx_depth = c ? 1 : 0;
    if (emu_ctx_depth) emu_ctx_stack[emu_ctx_depth - 1] = c;
    if (!c && emu_ctx_depth == 1) emu_ctx_depth = 0;
}

int emu_ctx_live(CUcontext c) { return c && emu_handle_ok(c, EMU_K_CTX) && !c->destroyed; }

CUresult emu_ctx_resolve(CUcontext *ctx)
{
    if (!*ctx) return emu_ctx_require(ctx);
    if (!emu_ctx_live(*ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    *ctx = ctx_owner(*ctx);
    return CUDA_SUCCESS;
}

CUresult emu_ctx_require(CUcontext *out)
{
    if (!emu_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    CUcontext c = emu_ctx_current_raw();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    if (!emu_ctx_live(c)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = ctx_owner(c);
    return CUDA_SUCCESS;
}

/* A primary context's struct is made once and kept (its value is the
 * device's for good); a created one comes from the handle pool, so the value
 * of a destroyed context is the next cuCtxCreate's. */
static CUcontext emu_ctx_new(int dev, unsigned flags, int primary)
{
    CUcontext c = primary ? calloc(1, sizeof *c) : emu_handle_mem_get(EMU_K_CTX, sizeof *c);
    if (!c) return NULL;
    c->device = dev;
    c->flags = flags;
    c->is_primary = primary;
    pthread_mutex_init(&c->lock, NULL);
    emu_handle_add(c, EMU_K_CTX);
    return c;
}

/* Tears down a context's streams and allocations; the handle of a created
 * context dies too. */
static void emu_ctx_teardown(CUcontext c, int free_handle)
{
    emu_cls_ctx_destroyed(c);
    emu_streams_ctx_destroyed(c);
    emu_graph_ctx_destroyed(c);
    emu_events_ctx_destroyed(c);
    emu_modules_ctx_destroyed(c);
    emu_mem_ctx_destroyed(c);
    emu_arrays_ctx_destroyed(c);
    emu_tex_ctx_destroyed(c);
    pthread_mutex_lock(&c->lock);
    c->legacy = NULL;
    size_t held = c->charge + c->limit_charge;
    c->charge = c->limit_charge = 0;
    c->limits_set = 0;          /* a primary context starts again at the defaults */
    free(c->limits);
    c->limits = NULL;
    pthread_mutex_unlock(&c->lock);
    emu_charge_give(c->device, held);
    emu_sticky_ctx_gone(c);
    if (free_handle) {
        /* cuCtxDestroy: "If the context is current to the calling thread then
         * the context will also be popped from the current thread's context
         * stack (as though cuCtxPopCurrent() were called)." Deeper in this
         * thread's stack it is forgotten (NULL); other threads keep it
         * current and get CUDA_ERROR_CONTEXT_IS_DESTROYED. */
        if (emu_ctx_depth && emu_ctx_stack[emu_ctx_depth - 1] == c) emu_ctx_depth--;
        for (int i = 0; i < emu_ctx_depth; i++)
            if (emu_ctx_stack[i] == c) emu_ctx_stack[i] = NULL;
        c->destroyed = 1;
        emu_handle_del(c);
        /* The struct goes back to the handle pool, never to the system: another
         * thread that still holds it current sees CONTEXT_IS_DESTROYED until
         * the next cuCtxCreate takes the value, then the new context (as with
         * a real driver, which hands the value out again). */
        emu_handle_mem_put(EMU_K_CTX, c);
    }
}

static CUresult emu_ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
    CUresult r = emu_device_check(dev);
    if (r != CUDA_SUCCESS) return r;
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (emu_ctx_depth >= EMU_CTX_STACK) return CUDA_ERROR_OUT_OF_MEMORY;
    /* the context's own device memory (CUDAEMU_CTX_BYTES): beyond what is
     * left, OUT_OF_MEMORY and no context */
    if (!emu_charge_take(dev, emu_cfg.ctx_bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
    CUcontext c = emu_ctx_new(dev, flags, 0);
    if (!c) {
        emu_charge_give(dev, emu_cfg.ctx_bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->charge = emu_cfg.ctx_bytes;
    emu_ctx_stack[emu_ctx_depth++] = c;   /* a new context is pushed current */
    *pctx = c;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    EMU_ENTRY_INIT();
    return emu_ctx_create(pctx, flags, dev);
}

/* Execution affinity is not emulated: an affinity parameter is
 * CUDA_ERROR_NOT_SUPPORTED, none makes a context as cuCtxCreate_v2. */
EMU_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                   unsigned int flags, CUdevice dev)
{
    EMU_ENTRY_INIT();
    if (numParams < 0 || (numParams && !paramsArray)) return CUDA_ERROR_INVALID_VALUE;
    if (numParams) return CUDA_ERROR_NOT_SUPPORTED;
    return emu_ctx_create(pctx, flags, dev);
}

EMU_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev)
{
    EMU_ENTRY_INIT();
    if (params && (params->numExecAffinityParams || params->cigParams)) return CUDA_ERROR_NOT_SUPPORTED;
    return emu_ctx_create(pctx, flags, dev);
}

EMU_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    EMU_ENTRY_INIT();
    if (!emu_ctx_live(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx->is_primary) return CUDA_ERROR_INVALID_CONTEXT;  /* use cuDevicePrimaryCtxRelease */
    emu_ctx_teardown(ctx, 1);
    emu_destroy_delay();
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    EMU_ENTRY_INIT();
    if (ctx && !emu_ctx_live(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    emu_ctx_set_current(ctx);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    EMU_ENTRY_INIT();
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    *pctx = emu_ctx_current_raw();
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    EMU_ENTRY_INIT();
    if (!emu_ctx_live(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    if (emu_ctx_depth >= EMU_CTX_STACK) return CUDA_ERROR_OUT_OF_MEMORY;
    emu_ctx_stack[emu_ctx_depth++] = ctx;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    EMU_ENTRY_INIT();
    if (emu_ctx_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext c = emu_ctx_stack[--emu_ctx_depth];
    if (pctx) *pctx = c;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
    EMU_ENTRY_INIT();
    CUcontext c;
    CUresult r = emu_ctx_require(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    *device = c->device;
    return CUDA_SUCCESS;
}

/* CUDA 13: the device of ctx, or of the current context if ctx is NULL. */
EMU_EXPORT CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    EMU_ENTRY_INIT();
    CUresult r = emu_ctx_resolve(&ctx);
    if (r != CUDA_SUCCESS) return r;
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    *device = ctx->device;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuCtxGetFlags(unsigned int *flags)
{
    EMU_ENTRY_INIT();
    CUcontext c;
    CUresult r = emu_ctx_require(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!flags) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&emu_ctx_lock);
    *flags = c->flags;
    pthread_mutex_unlock(&emu_ctx_lock);
    return CUDA_SUCCESS;
}

/* Flags of cuDevicePrimaryCtxSetFlags and cuCtxSetFlags: within
 * CU_CTX_FLAGS_MASK, at most one scheduling flag ("Only one of the
 * scheduling flags can be set"). */
static int ctx_flags_valid(unsigned flags)
{
    unsigned sched = flags & CU_CTX_SCHED_MASK;
    return !(flags & ~(unsigned)CU_CTX_FLAGS_MASK) && !(sched & (sched - 1));
}

/* CUDA 12.1: "Sets the flags for the current context overwriting previously
 * set ones." The flags of a primary context are the device's primary-context
 * flags (the emulator's reading): cuDevicePrimaryCtxGetState reports them and
 * they survive a reset, as cuDevicePrimaryCtxSetFlags' do. A converted
 * (green) context current sets its primary context's (emu_ctx_require). */
EMU_EXPORT CUresult cuCtxSetFlags(unsigned int flags)
{
    EMU_ENTRY_INIT();
    CUcontext c;
    CUresult r = emu_ctx_require(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!ctx_flags_valid(flags)) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&emu_ctx_lock);
    c->flags = flags;
    if (c->is_primary && emu_primary[c->device].ctx == c) emu_primary[c->device].flags = flags;
    pthread_mutex_unlock(&emu_ctx_lock);
    return CUDA_SUCCESS;
}

unsigned emu_ctx_current_flags(void)
{
    CUcontext c = emu_ctx_current_raw();
    if (!emu_ctx_live(c)) return 0;
    c = ctx_owner(c);
    pthread_mutex_lock(&emu_ctx_lock);
    unsigned f = c->flags;
    pthread_mutex_unlock(&emu_ctx_lock);
    return f;
}

EMU_EXPORT CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    EMU_ENTRY_INIT();
    if (!ctx) ctx = emu_ctx_current();
    if (!emu_ctx_live(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    *version = 3020;
    return CUDA_SUCCESS;
}

/* Synchronizes context c for entry point `call`. */
static CUresult emu_ctx_sync(CUcontext c, const char *call)
{
    CUresult r = emu_capture_check_unsafe(call);
    if (r != CUDA_SUCCESS) return r;
    /* Synchronizing a context one of whose streams captures is invalid in
     * every capture mode (emu_capture_check_ctx). */
    r = emu_capture_check_ctx(c, 0, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    if (r != CUDA_SUCCESS) return r;
    emu_streams_sync_all(c);
    emu_mem_pools_sync();
    return emu_sticky_now(c);
}

/* Context limits (cuCtxSetLimit, cuCtxGetLimit). A limit's default is what
 * cuCtxGetLimit reports until it is set; the three that size a device
 * reservation take device memory above their default, charged to the
 * context's device like an allocation: the stack size per thread for
 * EMU_STACK_THREADS resident threads, the printf FIFO and the malloc heap
 * their bytes. A raise beyond what is left is CUDA_ERROR_OUT_OF_MEMORY and
 * the limit stays as it was ("If these reservations of device memory fail,
 * cuCtxSetLimit() will return CUDA_ERROR_OUT_OF_MEMORY, and the limit can be
 * reset to a lower value"); a lower value gives memory back. */
#define EMU_STACK_THREADS 1024

static size_t limit_default(CUlimit l)
{
    switch (l) {
    case CU_LIMIT_STACK_SIZE: return 1024;
    case CU_LIMIT_PRINTF_FIFO_SIZE: return 1u << 20;
    case CU_LIMIT_MALLOC_HEAP_SIZE: return 8u << 20;
    case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT: return 2048;
    case CU_LIMIT_MAX_L2_FETCH_GRANULARITY: return 64;
    case CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED: return 1;
    default: return 0;
    }
}

static size_t limit_value(CUcontext c, CUlimit l)
{
    return c->limits_set & (1u << l) ? c->limits[l] : limit_default(l);
}

/* The device memory the limits hold with limit l set to v. */
static size_t limits_charge(CUcontext c, CUlimit l, size_t v)
{
    size_t sum = 0;
    for (CUlimit i = CU_LIMIT_STACK_SIZE; i <= CU_LIMIT_MALLOC_HEAP_SIZE; i++) {
        size_t x = i == l ? v : limit_value(c, i), d = limit_default(i);
        if (x > d) sum += (x - d) * (i == CU_LIMIT_STACK_SIZE ? EMU_STACK_THREADS : 1);
    }
    return sum;
}

EMU_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
    EMU_ENTRY_INIT();
    CUcontext c;
    CUresult r = emu_ctx_require(&c);
    if (r != CUDA_SUCCESS) return r;
    switch (limit) {
    case CU_LIMIT_STACK_SIZE:
    case CU_LIMIT_PRINTF_FIFO_SIZE:
    case CU_LIMIT_MALLOC_HEAP_SIZE:
    case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT:
    case CU_LIMIT_PERSISTING_L2_CACHE_SIZE:
    case CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED:
        break;
    case CU_LIMIT_MAX_L2_FETCH_GRANULARITY:         /* a hint: clamped */
        if (value > 128) value = 128;
        break;
    default:        /* the sync depth (compute capability < 9.0 only), the query-only ones */
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    }
    if (limit == CU_LIMIT_STACK_SIZE && value > (1u << 20)) return CUDA_ERROR_INVALID_VALUE;
    if (limit <= CU_LIMIT_MALLOC_HEAP_SIZE && value > emu_cfg.device_memory) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&c->lock);
    if (!c->limits && !(c->limits = calloc(CU_LIMIT_MAX, sizeof *c->limits))) {
        pthread_mutex_unlock(&c->lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    size_t was = c->limit_charge, now = limits_charge(c, limit, value);
    int ok = now <= was || emu_charge_take(c->device, now - was);
    if (ok) {
        if (now < was) emu_charge_give(c->device, was - now);
        c->limit_charge = now;
        c->limits[limit] = value;
        c->limits_set |= 1u << limit;
    }
    pthread_mutex_unlock(&c->lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

EMU_EXPORT CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    EMU_ENTRY_INIT();
    CUcontext c;
    if (!pvalue || (unsigned)limit >= CU_LIMIT_MAX) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_ctx_require(&c);
    if (r != CUDA_SUCCESS) return r;
    if (limit == CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH) return CUDA_ERROR_UNSUPPORTED_LIMIT;
    pthread_mutex_lock(&c->lock);
    size_t v = limit_value(c, limit);
    pthread_mutex_unlock(&c->lock);
    *pvalue = v;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuCtxSynchronize(void)
{
    EMU_ENTRY_INIT();
    CUcontext c;
    CUresult r = emu_ctx_require(&c);
    return r != CUDA_SUCCESS ? r : emu_ctx_sync(c, __func__);
}

/* CUDA 13: synchronizes ctx, or the current context if ctx is NULL. */
EMU_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    EMU_ENTRY_INIT();
    CUresult r = emu_ctx_resolve(&ctx);
    return r != CUDA_SUCCESS ? r : emu_ctx_sync(ctx, __func__);
}

EMU_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags)
{
    EMU_ENTRY_INIT();
    CUcontext c;
    CUresult r = emu_ctx_require(&c);
    if (r != CUDA_SUCCESS) return r;
    if (flags) return CUDA_ERROR_INVALID_VALUE;
    if (!emu_ctx_live(peer)) return CUDA_ERROR_INVALID_CONTEXT;
    if (peer->device == c->device) return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

/* Primary contexts: one stable handle per device. */
static CUresult emu_primary_get(CUcontext *pctx, CUdevice dev, int retain)
{
    CUresult r = emu_device_check(dev);
    if (r != CUDA_SUCCESS) return r;
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&emu_ctx_lock);
    if (!emu_primary[dev].ctx) emu_primary[dev].ctx = emu_ctx_new(dev, emu_primary[dev].flags, 1);
    CUcontext c = emu_primary[dev].ctx;
    /* the first retain activates it: its own device memory (CUDAEMU_CTX_BYTES)
     * is taken, or OUT_OF_MEMORY and it stays inactive (emu_mem_lock is a leaf) */
    int oom = c && retain && emu_primary[dev].refs == 0 && !emu_charge_take(dev, emu_cfg.ctx_bytes);
    if (c && retain && !oom && emu_primary[dev].refs++ == 0) c->charge = emu_cfg.ctx_bytes;
    pthread_mutex_unlock(&emu_ctx_lock);
    if (!c || oom) return CUDA_ERROR_OUT_OF_MEMORY;
    *pctx = c;
    return CUDA_SUCCESS;
}

CUresult emu_ctx_primary(CUdevice dev, CUcontext *pctx) { return emu_primary_get(pctx, dev, 0); }

EMU_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    EMU_ENTRY_INIT();
    return emu_primary_get(pctx, dev, 1);
}

/* Drops one retain (release) or all of them (reset); the last one tears the
 * context's resources down. */
static CUresult emu_primary_drop(CUdevice dev, int all)
{
    CUresult r = emu_device_check(dev);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&emu_ctx_lock);
    CUcontext c = emu_primary[dev].ctx;
    int was = emu_primary[dev].refs;
    if (!all && was == 0) { pthread_mutex_unlock(&emu_ctx_lock); return CUDA_ERROR_INVALID_CONTEXT; }
    emu_primary[dev].refs = all ? 0 : was - 1;
    int teardown = c && emu_primary[dev].refs == 0;
    pthread_mutex_unlock(&emu_ctx_lock);
    if (teardown) emu_ctx_teardown(c, 0);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    EMU_ENTRY_INIT();
    return emu_primary_drop(dev, 0);
}

EMU_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    EMU_ENTRY_INIT();
    return emu_primary_drop(dev, 1);
}

/* The 7.0 entries (the CUDA runtime asks for them): same semantics here. */
EMU_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    EMU_ENTRY_INIT();
    return emu_primary_drop(dev, 0);
}

EMU_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    EMU_ENTRY_INIT();
    return emu_primary_drop(dev, 1);
}

EMU_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    EMU_ENTRY_INIT();
    CUresult r = emu_device_check(dev);
    if (r != CUDA_SUCCESS) return r;
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&emu_ctx_lock);
    *flags = emu_primary[dev].flags;
    *active = emu_primary[dev].refs > 0;
    pthread_mutex_unlock(&emu_ctx_lock);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    EMU_ENTRY_INIT();
    CUresult r = emu_device_check(dev);
    if (r != CUDA_SUCCESS) return r;
    if (!ctx_flags_valid(flags)) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&emu_ctx_lock);
    emu_primary[dev].flags = flags;
    if (emu_primary[dev].ctx) emu_primary[dev].ctx->flags = flags;
    pthread_mutex_unlock(&emu_ctx_lock);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ green contexts' converted contexts */

/* cuGreenCtxCreate: "This API will retain the primary context on device dev, which will is
 * released when the green context is destroyed." The converted context is "a normal primary
 * context but with the resources of the specified green context": is_primary (cuCtxDestroy
 * refuses it), its owner the primary context. */
CUresult emu_ctx_green_begin(CUdevice dev, struct CUgreenCtx_st *g)
{
    CUcontext primary;
    CUresult r = emu_primary_get(&primary, dev, 1);
    if (r != CUDA_SUCCESS) return r;
    CUcontext c = g->ctx = emu_handle_mem_get(EMU_K_CTX, sizeof *c);   /* a destroyed context's value */
    c->device = dev;
    pthread_mutex_lock(&emu_ctx_lock);             /* cuCtxSetFlags writes them under it */
    c->flags = primary->flags;
    pthread_mutex_unlock(&emu_ctx_lock);
    c->is_primary = 1;
    c->green = g;
    c->owner = primary;
    pthread_mutex_init(&c->lock, NULL);
    emu_handle_add(c, EMU_K_CTX);
    return CUDA_SUCCESS;
}

void emu_ctx_green_end(struct CUgreenCtx_st *g)
{
    CUcontext c = g->ctx;
    /* as cuCtxDestroy: popped where it is current to the calling thread, forgotten deeper in
     * its stack; other threads that hold it get CUDA_ERROR_CONTEXT_IS_DESTROYED */
    if (emu_ctx_depth && emu_ctx_stack[emu_ctx_depth - 1] == c) emu_ctx_depth--;
    for (int i = 0; i < emu_ctx_depth; i++)
        if (emu_ctx_stack[i] == c) emu_ctx_stack[i] = NULL;
    pthread_mutex_lock(&c->lock);
    c->legacy = NULL;
    pthread_mutex_unlock(&c->lock);
    c->destroyed = 1;
    emu_handle_del(c);
    (void)emu_primary_drop(c->device, 0);
    emu_handle_mem_put(EMU_K_CTX, c);   /* the next cuCtxCreate or green context gets the value */
}
