/*
 * emu_internal.h: contracts between the parts of the emulated CUDA driver.
 *
 * The emulated driver (build/emu/libcuda.so.1) implements a subset of the
 * CUDA 13 driver API on the CPU. Its sources (tests/emu/driver/) are split
 * by responsibility:
 *
 *   emu_core.c     init, configuration knobs (CUDAEMU_*), devices, contexts
 *                  and their teardown, errors, call statistics, fault
 *                  injection, violations, the handle registry and pools.
 *   emu_resolve.c  cuGetProcAddress (legacy and _v2) and its name table.
 *   emu_mem.c      device memory and its accounting, pinned and registered
 *                  host memory, address ranges, pointer attributes, legacy
 *                  IPC, graph allocations, the device-range registry used to
 *                  find what work touches.
 *   emu_vmm.c      the virtual memory management API.
 *   emu_managed.c  the managed-memory hints: cuMemPrefetchAsync,
 *                  cuMemAdvise, cuStreamAttachMemAsync (argument checks,
 *                  stream order; memory is coherent, so no data moves).
 *   emu_array.c    CUDA arrays: descriptors and their charge to the device
 *                  (emu_mem.h: the memory state the three share).
 *   emu_stream.c   streams and their worker threads, the in-flight work
 *                  registry used to detect violations, submitting work
 *                  (capture or queue), host functions and callbacks.
 *   emu_event.c    events.
 *   emu_copy.c     copies, memsets and stream memory operations.
 *   emu_pool.c     stream-ordered allocation and the default pools.
 *   emu_module.c   modules, functions, kernel arguments and launches
 *                  (emu_stream.h: what the stream files share).
 *   emu_capture.c  stream capture.
 *   emu_graph.c    graphs, nodes and edges.
 *   emu_graph_params.c  node parameters and what a change of them may do.
 *   emu_exec.c     graph execs: instantiate, launch, destroy.
 *   emu_exec_update.c   per-node exec changes and cuGraphExecUpdate
 *                  (emu_graph.h: what the graph files share).
 *   emu_uobj.c     user objects: their references (graphs, execs, launches)
 *                  and the destructor thread.
 *   emu_library.c  CUDA images (fat binaries, cubins, PTX) and CUDAEMU_MODULES,
 *                  libraries and kernels (cuLibrary*, cuKernel*), function
 *                  attributes, occupancy, the module loading mode.
 *   emu_runtime.c  cuGetExportTable: the CUDA runtime's private tables,
 *                  context-local storage.
 *   emu_green.c    green contexts: SM resources, their split and
 *                  descriptors, cuGreenCtx*, the converted context.
 *   emu_ipc.c      legacy IPC (cuIpcGetMemHandle, cuIpcOpenMemHandle,
 *                  cuIpcCloseMemHandle) between processes, and what lets
 *                  another process import an exported cuMemCreate descriptor.
 *   emu_kernel.h   the module ABI (what a module of emulated kernels exports).
 *
 * Rules every part follows:
 *   - Every exported function is defined under its exact ELF name (this file
 *     is compiled with __CUDA_API_VERSION_INTERNAL so cuda.h does not rename
 *     anything) and starts with EMU_ENTRY(), which counts the call under
 *     __func__ and applies CUDAEMU_FAIL fault injection before anything else.
 *   - Exported functions never call other exported functions: shared work goes
 *     through the emu_* functions declared here (so a call is counted once, and
 *     an interposer never sees the emulator's internal calls).
 *   - A failing call changes nothing.
 *   - Anything the real driver would turn into memory corruption or an
 *     illegal-address fault is made loud: emu_violation() logs and counts it.
 */
#ifndef EMU_INTERNAL_H
#define EMU_INTERNAL_H

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "emu_kernel.h"

#define EMU_EXPORT __attribute__((visibility("default")))
#define EMU_DRIVER_VERSION 13000

/* ------------------------------------------------------------------------
 * emu_core.c: statistics and fault injection
 * ---------------------------------------------------------------------- */

/* One per exported entry point, a function-local static made by EMU_ENTRY.
 * Registered in a global lock-free list on first use. */
typedef struct emu_entry_stat {
    const char *name;                 /* exact ELF name (__func__) */
    unsigned long calls;              /* atomic */
    unsigned long nodes;              /* atomic: graph nodes its calls covered (emu_stat_nodes) */
    unsigned long changed;            /* atomic: of those, nodes whose parameters an update changed */
    int registered;                   /* atomic: 0 none, 1 in progress, 2 done */
    int sticky_exempt;                /* answers whatever sticky error stands (emu_sticky_entry) */
    const struct emu_fail_rule *rules;/* fault-injection rules for this name */
    struct emu_entry_stat *next;
} emu_entry_stat;

/* Counts the call; returns the injected error if CUDAEMU_FAIL says this call
 * fails, CUDA_SUCCESS otherwise. Thread-safe, lock-free after registration. */
CUresult emu_enter(emu_entry_stat *st);

/* Adds to the entry point the calling thread is in (its last emu_enter) the
 * graph nodes a successful call covered and, for updates, how many of them
 * it changed; written as "nodes" in the CUDAEMU_STATS file, so a cost model
 * can charge updates, instantiations, launches and node listings per node. */
void emu_stat_nodes(unsigned long nodes, unsigned long changed);

#define EMU_ENTRY()                                                         \
    static emu_entry_stat emu_stat_ = { .name = __func__ };                 \
    do {                                                                    \
        CUresult emu_inj_ = emu_enter(&emu_stat_);                          \
        if (emu_inj_ != CUDA_SUCCESS) return emu_inj_;                      \
    } while (0)

/* EMU_ENTRY, then CUDA_ERROR_NOT_INITIALIZED unless cuInit succeeded, then
 * the sticky error of a faulted kernel, if one stands for the calling
 * thread's context (emu_sticky_entry). */
#define EMU_ENTRY_INIT()                                                    \
    EMU_ENTRY();                                                            \
    do {                                                                    \
        if (!emu_initialized()) return CUDA_ERROR_NOT_INITIALIZED;          \
        CUresult emu_sticky_ = emu_sticky_entry(&emu_stat_);                \
        if (emu_sticky_ != CUDA_SUCCESS) return emu_sticky_;                \
    } while (0)

/* Sticky errors (docs/emulator.md, "Sticky errors: a faulting kernel"). A
 * kernel that calls cudaemu_fault(code) (emu_kernel.h) ends there and
 * poisons its context with code: CUDA_ERROR_ASSERT stands for that context
 * until its teardown (cuCtxDestroy, the primary context's reset or last
 * release); CUDA_ERROR_ILLEGAL_ADDRESS and CUDA_ERROR_LAUNCH_FAILED stand for
 * every context of the process until it ends.
 * emu_sticky_set: called on the worker that ran the kernel.
 * emu_sticky_now: the error that stands for ctx (NULL: none), or
 * CUDA_SUCCESS; for the synchronizing calls, after they waited.
 * emu_sticky_entry: at every EMU_ENTRY_INIT: the error that stands for the
 * calling thread's current context, unless the entry point is one that
 * works without a usable context (device queries, the current-context
 * stack, context teardown: emu_core.c lists them).
 * emu_sticky_ctx_gone: ctx's teardown ends a CUDA_ERROR_ASSERT. */
void emu_sticky_set(CUcontext ctx, CUresult code);
CUresult emu_sticky_now(CUcontext ctx);
CUresult emu_sticky_entry(const emu_entry_stat *st);
void emu_sticky_ctx_gone(CUcontext ctx);

/* Ensures the emulator's own state (knobs, stats) is set up. Idempotent;
 * called by emu_enter. Does NOT mean cuInit was called. */
void emu_bootstrap(void);
int emu_initialized(void);            /* cuInit(0) succeeded */

/* emu_mem.c: device memory taken by something other than an allocation (a
 * module or library load, a context, a raised context limit): 1 and charged
 * to dev if that much is left, else 0 and nothing charged; give returns it. */
int emu_charge_take(int dev, size_t bytes);
void emu_charge_give(int dev, size_t bytes);

/* ------------------------------------------------------------------------
 * emu_core.c: knobs (parsed once at bootstrap; bad values exit(2) with a
 * message naming the variable)
 * ---------------------------------------------------------------------- */
typedef struct emu_config {
    size_t granularity;        /* CUDAEMU_GRANULARITY, default 2 MiB, power of two >= page */
    unsigned kernel_delay_us;  /* CUDAEMU_KERNEL_DELAY_US, default 0 */
    unsigned destroy_delay_us; /* CUDAEMU_DESTROY_DELAY_US, default 0 (emu_destroy_delay) */
    unsigned sync_early_us;    /* CUDAEMU_SYNC_EARLY_US, default 0: synchronous memory operations
                                  the documentation lets return early do so, their work
                                  delayed this long (emu_copy.c) */
    int devices;               /* CUDAEMU_DEVICES, default 1, 1..8 */
    int no_vmm;                /* CUDAEMU_NO_VMM=1 */
    int no_rdma_vmm;           /* CUDAEMU_NO_RDMA_VMM=1: GPUDirect RDMA on cuMemAlloc memory only */
    size_t device_memory;      /* CUDAEMU_DEVICE_MEMORY, bytes per device, default 16 GiB */
    const char *stats_path;    /* CUDAEMU_STATS, NULL if unset */
    int verbose;               /* CUDAEMU_VERBOSE=1: log every violation in full */
    int trace_resolve;         /* CUDAEMU_TRACE_RESOLVE=1: log every cuGetProcAddress and
                                  cuGetExportTable request and private-table call */
    const char *modules;       /* CUDAEMU_MODULES, NULL if unset (emu_library.c) */
    size_t module_bytes;       /* CUDAEMU_MODULE_BYTES: device memory per module or library load */
    size_t ctx_bytes;          /* CUDAEMU_CTX_BYTES: device memory per active context */
    size_t exec_bytes;         /* CUDAEMU_EXEC_BYTES: device memory per launched graph exec */
    size_t func_bytes;         /* CUDAEMU_FUNC_BYTES: device memory per lazily loaded function */
    int eager;                 /* CUDA_MODULE_LOADING=EAGER (else lazy loading, the default) */
} emu_config;
extern emu_config emu_cfg;

/* Logging: every line starts with "cudaemu: ". Never allocates. */
void emu_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A use of memory that the real driver would turn into corruption or an
 * illegal-address fault. Logs "cudaemu: VIOLATION: <call>: <msg>" and counts it
 * (the count appears as "violations" in the CUDAEMU_STATS file). */
void emu_violation(const char *call, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
unsigned long emu_violation_count(void);

/* ------------------------------------------------------------------------
 * emu_core.c: handle registry. Every handle the emulator gives out (context,
 * stream, event, module, function, graph, node, exec, mem handle) is
 * registered while alive, so a stale or foreign handle gets an error code
 * instead of a crash. Guarded by one internal mutex.
 * ---------------------------------------------------------------------- */
typedef enum emu_kind {
    EMU_K_CTX = 1, EMU_K_STREAM, EMU_K_EVENT, EMU_K_MODULE, EMU_K_FUNC,
    EMU_K_GRAPH, EMU_K_NODE, EMU_K_EXEC, EMU_K_MEMHANDLE, EMU_K_POOL,
    EMU_K_LIBRARY, EMU_K_KERNEL, EMU_K_ARRAY, EMU_K_UOBJ, EMU_K_GREEN, EMU_K_RESDESC,
    EMU_K_EXTMEM, EMU_K_EXTSEM,
    EMU_K_COUNT                     /* keep last */
} emu_kind;
void emu_handle_add(const void *h, emu_kind kind);
/* Registers a handle that belongs to context `owner` (cuCtxDestroy and the
 * primary context's reset end it: emu_handle_end). A handle registered at the
 * address of an ended one replaces it. */
void emu_handle_add_ctx(const void *h, emu_kind kind, CUcontext owner);
void emu_handle_del(const void *h);
/* 1 if alive and of that kind. A handle its context's teardown ended is not
 * alive, and asking about it is a use of a destroyed context's resource
 * (undefined in CUDA, cuCtxDestroy): it is reported as a violation of the
 * entry point being called. For API argument checks. */
int emu_handle_ok(const void *h, emu_kind kind);
/* The same without the report: for the emulator's own probes. */
int emu_handle_alive(const void *h, emu_kind kind);
/* Context teardown: ends handle h (it stays known as ended, see above). */
void emu_handle_end(const void *h);
/* Context teardown of ctx's live handles of `kind`: each is ended
 * (emu_handle_end), then given to release (which frees what it names). */
void emu_handles_end_ctx(CUcontext ctx, emu_kind kind, void (*release)(void *h));

/* Handle memory with the driver's reuse of freed handle values: objects of
 * one kind (one size per kind) come from a LIFO free list, so the value of
 * the handle freed last is the next one given out. Returned zeroed. Never
 * gives memory back to the system (a stale handle never points at unmapped
 * memory). Thread-safe. */
void *emu_handle_mem_get(emu_kind kind, size_t size);
void emu_handle_mem_put(emu_kind kind, void *p);
/* CUDAEMU_DESTROY_DELAY_US: a destroy that gave a handle value back
 * (cuGraphDestroy, cuGraphDestroyNode, cuGraphExecDestroy, cuCtxDestroy,
 * cuGreenCtxDestroy) sleeps that long before
 * it returns, so that another thread's create gets the value while the
 * destroying call is still in flight (a caller's bookkeeping done after the
 * call returns then comes late). */
void emu_destroy_delay(void);

/* ------------------------------------------------------------------------
 * emu_core.c: devices and contexts
 * ---------------------------------------------------------------------- */
struct emu_stream;
struct CUgreenCtx_st;
struct CUctx_st {
    int device;                 /* ordinal */
    unsigned flags;
    int is_primary;
    int destroyed;
    struct emu_stream *legacy;  /* the legacy default stream (emu_stream.c creates it lazily) */
    pthread_mutex_t lock;       /* guards legacy creation */
    int sticky;                 /* atomic: the CUresult a faulted kernel left (emu_sticky_set) */
    size_t charge;              /* device memory the context itself holds (CUDAEMU_CTX_BYTES) */
    size_t *limits;             /* cuCtxSetLimit (emu_core.c): CU_LIMIT_MAX values, where limits_set
                                 * has the bit; made at the first set, freed at teardown (a
                                 * destroyed context's struct is kept: it stays small) */
    unsigned limits_set;        /* else the default */
    size_t limit_charge;        /* device memory the raised limits hold */
    struct CUgreenCtx_st *green;/* a green context's converted context (cuCtxFromGreenCtx): the
                                 * green context; NULL for any other (emu_green.c) */
    struct CUctx_st *owner;     /* converted: the device's primary context, which owns what is
                                 * made with it current (memory, modules, events, streams' work) */
};

/* A green context (emu_green.c): its converted context (ctx, is_primary,
 * green and owner set), its SM count; destroyed: cuGreenCtxDestroy ran (its
 * streams then answer CUDA_ERROR_CONTEXT_IS_DESTROYED). */
struct CUgreenCtx_st {
    unsigned sm_count;
    unsigned long long id;
    int destroyed;              /* atomic */
    struct CUctx_st *ctx;       /* its converted context, from the contexts' handle pool (a
                                 * destroyed one's value goes to the next cuCtxCreate or green
                                 * context, as a driver's would) */
};

/* The calling thread's current context; NULL if none. A green context's
 * converted context counts as the device's primary context (its owner):
 * emu_ctx_current, emu_ctx_require and emu_ctx_resolve give the owner, so
 * memory, modules, events and graphs made with it current are the primary
 * context's; emu_ctx_current_raw gives the handle the program set
 * (cuCtxGetCurrent, default streams, stream creation). */
CUcontext emu_ctx_current(void);
CUcontext emu_ctx_current_raw(void);
/* The flags (cuCtxGetFlags) of the calling thread's current context, its
 * owner's for a converted one; 0 if none is current or it was destroyed. */
unsigned emu_ctx_current_flags(void);
/* Current context or CUDA_ERROR_INVALID_CONTEXT (or NOT_INITIALIZED). */
CUresult emu_ctx_require(CUcontext *out);
/* 1 if c is a context that exists and was not destroyed. */
int emu_ctx_live(CUcontext c);
/* A context argument: NULL means the current one (emu_ctx_require); any
 * other must be live, else CUDA_ERROR_INVALID_CONTEXT. */
CUresult emu_ctx_resolve(CUcontext *ctx);
int emu_device_count(void);
/* The primary context of dev, created if needed but not retained (the
 * runtime's private interface hands it out this way); NOT_INITIALIZED before
 * cuInit, INVALID_DEVICE for a bad ordinal. */
CUresult emu_ctx_primary(CUdevice dev, CUcontext *pctx);
/* A device's attribute value and UUID, as cuDeviceGetAttribute and
 * cuDeviceGetUuid report them (dev must be valid). */
int emu_device_attribute(CUdevice_attribute a, CUdevice dev);
void emu_device_uuid(CUdevice dev, CUuuid *uuid);
/* emu_runtime.c: runs and drops the CUDA runtime's context-local storage of
 * ctx (its destroy callbacks) at context teardown, before anything else. */
void emu_cls_ctx_destroyed(CUcontext ctx);
/* emu_core.c, for emu_green.c: retains dev's primary context and makes g's
 * converted context (registered as a context); emu_ctx_green_end ends it
 * (popped from the calling thread's stack as cuCtxDestroy does, other
 * threads get CUDA_ERROR_CONTEXT_IS_DESTROYED) and drops the retain. */
CUresult emu_ctx_green_begin(CUdevice dev, struct CUgreenCtx_st *g);
void emu_ctx_green_end(struct CUgreenCtx_st *g);
/* emu_stream.c, for emu_green.c: the streams of green context g, each
 * referenced (release with emu_streams_release); emu_green_stream_create
 * makes a user stream of g; emu_green_default is g's default stream (made
 * at the first use); emu_green_detach waits for g's streams, ends
 * their captures and retires g's default stream. */
size_t emu_streams_of_green(struct CUgreenCtx_st *g, struct emu_stream ***out);
void emu_streams_release(struct emu_stream **v, size_t n);
CUresult emu_green_stream_create(struct CUgreenCtx_st *g, unsigned flags, int priority, CUstream *out);
struct emu_stream *emu_green_default(struct CUgreenCtx_st *g);
void emu_green_detach(struct CUgreenCtx_st *g);

/* ------------------------------------------------------------------------
 * emu_mem.c: device ranges. A "device range" is any address range the
 * emulator handed out as device-accessible memory: a cuMemAlloc allocation, a
 * cuMemAllocAsync allocation, a VMM mapping (one per cuMemMap), pinned host
 * memory. Thread-safe.
 * ---------------------------------------------------------------------- */
typedef struct emu_range { CUdeviceptr base; size_t size; } emu_range;

/* If p lies inside a live device range, stores it and returns 1; else 0. */
int emu_mem_find(CUdeviceptr p, emu_range *out);
/* The context the allocation holding p was made in (cuMemAlloc(Pitch),
 * cuMemAllocManaged, pinned or registered host memory); NULL for memory not
 * made in a context (stream-ordered, VMM, graph, IPC) or no device range. */
CUcontext emu_mem_alloc_ctx(CUdeviceptr p);
int emu_mem_operand_device(CUdeviceptr p);
/* 1 if every byte of [p, p+n) lies in live device ranges that device `dev`
 * may access (VMM mappings: cuMemSetAccess gave dev read/write). */
int emu_mem_accessible(CUdeviceptr p, size_t n, int dev);
/* The driver's range check of an API-level copy, memset or memory node:
 * 1 if [p, p+n) lies inside the allocation that contains p (the requested
 * size of a cuMemAlloc, stream-ordered, pinned or registered block; for VMM
 * memory, the run of adjacent mappings that starts with the one holding p);
 * 0 if p is in no device range or the range runs past that end. */
/* 0 if p lies in a pool's allocation that device dev's kernels may not
 * touch (the pool is not open to dev: cuMemPoolSetAccess), else 1. */
int emu_mem_pool_open(CUdeviceptr p, int dev);
int emu_mem_extent_ok(CUdeviceptr p, size_t n);
/* 1 and the allocation in *out if [p, p+n) lies in one cuMemAllocManaged
 * allocation (its whole pages: the managed-memory calls round their range
 * to pages); 0 otherwise. */
int emu_mem_managed_find(CUdeviceptr p, size_t n, emu_range *out);
/* Context teardown: frees every cuMemAlloc and pinned host allocation the
 * context made and drops its host registrations, as the driver does; VMM and
 * stream-ordered memory is not tied to a context and stays. Called after the
 * context's streams are gone. */
void emu_mem_ctx_destroyed(CUcontext ctx);
/* emu_array.c: the same for the context's CUDA arrays (their charge goes
 * back to the device; their handles end). */
void emu_arrays_ctx_destroyed(CUcontext ctx);
/* Arrays as copy operands (emu_array.c). */
extern pthread_mutex_t emu_array_lock;
uint64_t emu_array_gen(CUarray h);
CUcontext emu_array_ctx(CUarray h);
int emu_array_device(CUarray h);
int emu_array_multidim(CUarray h);
size_t emu_array_elem(CUarray h);
size_t emu_array_depth(CUarray h);
/* Bytes of one channel of an array format; 0 for one whose layout is not
 * emulated (block-compressed, video, packed). */
size_t emu_format_bytes(CUarray_format f);
/* emu_tex.c: texture objects. The texture attributes of the device (-1 for
 * any other attribute); a context's teardown ends its textures. */
int emu_tex_attribute(CUdevice_attribute a);
void emu_tex_ctx_destroyed(CUcontext ctx);
CUresult emu_array_side_check(CUarray h, size_t x, size_t y, size_t z, size_t w, size_t hgt, size_t d);
int emu_array_pin(CUarray h, uint64_t gen, uintptr_t *base, size_t *pitch, size_t *height);
/* Plain copy/set used by streams and graphs once validated. */
void emu_mem_copy(void *dst, const void *src, size_t n);
/* cuMemFreeAsync, at the call: marks the stream-ordered (or graph)
 * allocation at p as being freed (so a second free, or a cuMemFree, is
 * refused with CUDA_ERROR_INVALID_VALUE); CUDA_ERROR_INVALID_VALUE if p is
 * not the base of a live one. *token names what is freed (for a graph
 * allocation: its incarnation). */
CUresult emu_mem_free_async_begin(CUdeviceptr p, uint64_t *token);
/* The stream, event and context synchronize calls: every pool gives back
 * the held bytes above its release threshold. */
void emu_mem_pools_sync(void);
/* Memory pools (emu_pool.c owns the calls; their state is emu_mem.c's).
 * emu_mem_pool_add makes *pool a pool of device (created: by
 * cuMemPoolCreate; max_size: most bytes it may reserve, 0 for the device's
 * memory), accessible from its device only. emu_mem_pool_destroy marks it
 * destroyed, gives back what it holds, makes the device's default pool
 * current again if it was current, and returns 1 if nothing of it is left
 * (the caller then gives its handle memory back), 0 if allocations remain
 * (the last one's free gives it back), -1 if it was already destroyed. emu_mem_pool_current returns dev's
 * current pool (NULL: its default one), first setting it to `set` if
 * change. emu_mem_pool_access reads (set == 0) or sets dev's access to the
 * pool's memory. emu_mem_pool_trim: cuMemPoolTrimTo. emu_mem_pool_attr:
 * cuMemPoolGetAttribute (set == 0) / cuMemPoolSetAttribute. */
struct CUmemPoolHandle_st;
void emu_mem_pool_add(CUmemoryPool pool, int device, int created, size_t max_size);
int emu_mem_pool_destroy(CUmemoryPool pool);
CUmemoryPool emu_mem_pool_current(int dev, CUmemoryPool set, int change);
CUresult emu_mem_pool_access(CUmemoryPool pool, int dev, CUmemAccess_flags *flags, int set);
void emu_mem_pool_trim(CUmemoryPool pool, size_t keep);
CUresult emu_mem_pool_attr(CUmemoryPool pool, CUmemPool_attribute attr, int set, void *value);
/* emu_pool.c: the access descriptors (at most max) of an allocation node
 * captured from pool: each other device the pool is open to. */
size_t emu_pool_access_descs(CUmemoryPool pool, CUmemAccessDesc *out, size_t max);
/* Releases memory queued by cuMemFreeAsync or a free node (called on the
 * stream worker) with the token emu_mem_free_async_begin or
 * emu_gmem_request_free gave. */
void emu_mem_free_async_complete(CUdeviceptr p, uint64_t token);

/* Graph allocations (allocation nodes; emu_mem.c, "Graph allocations").
 * emu_gmem_create reserves the address range of a new allocation node of
 * graph `graph_uid` (one reference: the node). emu_gmem_ref adds delta
 * references (each copy of the node's parameters holds one); the range goes
 * once none is left and it is not allocated. emu_gmem_info: 1 if p is the
 * address of a graph allocation, with the graph that made it and the graph
 * that holds its free node (0: none); emu_gmem_set_freed_in sets (set) or
 * clears that graph. emu_gmem_arm allocates, for a launch, the allocations
 * of its allocation nodes, all or none: CUDA_ERROR_INVALID_VALUE if one is
 * still allocated from an earlier launch and not being freed (unless
 * auto_free), CUDA_ERROR_OUT_OF_MEMORY beyond the device memory.
 * emu_gmem_request_free marks the current allocation of p as being freed
 * and returns the token for emu_mem_free_async_complete (0: not allocated
 * or already being freed). emu_gmem_graph_attr reads (current, high == 1)
 * or resets (high == 2) the bytes graphs hold on dev. */
CUresult emu_gmem_create(size_t bytes, int dev, uint64_t graph_uid, CUdeviceptr *out);
void emu_gmem_ref(CUdeviceptr p, int delta);
int emu_gmem_info(CUdeviceptr p, uint64_t *owner_graph, uint64_t *freed_in);
void emu_gmem_set_freed_in(CUdeviceptr p, uint64_t graph_uid, int set);
CUresult emu_gmem_arm(const CUdeviceptr *v, size_t n, int auto_free);
uint64_t emu_gmem_request_free(CUdeviceptr p);
void emu_gmem_graph_attr(int dev, int current, int high, uint64_t *out_current, uint64_t *out_high);
/* Allocation used by cuMemAllocAsync/FromPoolAsync from `pool` on stream s
 * (memory available at once; the emulator's pool never reuses an address
 * before the free completed). Where the device has no room left and the
 * pool allows internal dependencies, the bytes of frees queued on streams
 * and not yet reached are claimed and s waits for those frees (emu_mem.c,
 * "Claims"). CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE reports the pool. */
CUresult emu_mem_alloc_device(CUdeviceptr *out, size_t bytes, int device, CUmemoryPool pool,
                              struct emu_stream *s, const char *call);
/* After cuMemFreeAsync queued the free of p (emu_mem_free_async_begin's
 * token) as work seq on stream s: what a claim waits for. Takes a reference
 * to s while the free is pending. */
void emu_mem_free_async_queued(CUdeviceptr p, struct emu_stream *s, uint64_t token, uint64_t seq);

/* Legacy IPC (emu_ipc.c owns it; these reach emu_mem.c's registry).
 * emu_mem_alloc_with: if p lies in a live cuMemAlloc block, fills *out and
 * returns fn(out, u) (0 when fn is NULL), fn running under the memory lock
 * (it must take no emulator lock); -1 if p is in no such block.
 * emu_mem_ipc_add registers [v->base, v->base + v->mapped), mapped by the
 * caller, as a block opened from another process (not charged, not freed by
 * cuMemFree, freed with ctx); *id gets its buffer id. emu_mem_ipc_find: 1 if
 * that block is still registered at base with id (remove: unregisters and
 * unmaps it), else 0. */
typedef struct emu_alloc_view {
    CUdeviceptr base;
    size_t size, mapped;        /* requested; whole pages */
    int device;
    unsigned long long buffer_id;
} emu_alloc_view;
int emu_mem_alloc_with(CUdeviceptr p, int (*fn)(const emu_alloc_view *, void *), void *u,
                       emu_alloc_view *out);
CUresult emu_mem_ipc_add(const emu_alloc_view *v, CUcontext ctx, unsigned long long *id);
int emu_mem_ipc_find(CUdeviceptr base, unsigned long long id, int remove);
/* External memory (emu_ext.c): emu_mem_ext_add registers a buffer mapped
 * onto external object `ext` (the mmap `map` of `mapped` bytes; the buffer
 * is [map + off, map + off + size)), device memory of ctx, freed by cuMemFree
 * or with ctx, charged to nobody; emu_mem_ext_gone marks every buffer of
 * `ext` inaccessible (its object was destroyed) and gives up to max of their
 * ranges; returns how many there are. */
CUresult emu_mem_ext_add(void *map, size_t mapped, size_t off, size_t size, int dev, CUcontext ctx,
                         const void *ext);
size_t emu_mem_ext_gone(const void *ext, emu_range *out, size_t max);
/* emu_ipc.c: a cuMemAlloc block is gone (its exported file, if any, closes);
 * the memfd name cuMemCreate gives a handle (it carries the properties, so
 * that another process importing its descriptor knows them); the
 * properties and size of a descriptor of another process's cuMemCreate
 * memory (0), or -1 if fd is not one. */
void emu_ipc_alloc_gone(CUdeviceptr base, unsigned long long buffer_id);
void emu_ipc_vmm_name(char *buf, size_t n, const CUmemAllocationProp *prop);
int emu_ipc_vmm_foreign(int fd, CUmemAllocationProp *prop, size_t *size);

/* ------------------------------------------------------------------------
 * emu_stream.c: work on streams (emu_copy.c: copies and memsets;
 * emu_module.c: kernel arguments and launches)
 * ---------------------------------------------------------------------- */
typedef struct emu_stream emu_stream;
typedef struct emu_work emu_work;

/* A unit of work queued on a stream. The stream owns it once enqueued: it
 * runs work->run on the stream's worker thread, in order; then, under the
 * stream's lock and at the very moment the work counts as completed (what
 * waiters, queries and a fork see together), calls work->complete if set;
 * then work->release (free() if NULL), outside any lock. complete must not
 * block and takes no lock but a leaf one (a launch token's); work released
 * without having completed (never queued, or its stream retired) gets
 * release only. A fork child runs again the work that was running at the
 * fork (its run must allow that), and never releases work that had
 * completed. `ranges` lists every device range the work may touch; while
 * the work is queued or running those ranges are "in flight" and
 * unmapping/freeing/remapping them is a violation. */
struct emu_work {
    void (*run)(emu_work *w, emu_stream *s);
    int runs_when_sticky;       /* run even once its context has a sticky error (callbacks) */
    void (*complete)(emu_work *w);
    void (*release)(emu_work *w);
    const char *what;           /* entry point that queued it, for messages */
    emu_range *ranges;
    size_t nranges, cap_ranges;
    emu_work *next;             /* queue link, owned by the stream */
    uint64_t seq;               /* set by enqueue */
};

/* Resolves a stream argument: NULL means the legacy stream of the current
 * context, or the per-thread stream when per_thread is nonzero (the _ptsz
 * entry points); CU_STREAM_LEGACY and CU_STREAM_PER_THREAD are accepted. */
CUresult emu_stream_get(CUstream h, int per_thread, emu_stream **out);
/* The stream's context and device. */
CUcontext emu_stream_ctx(emu_stream *s);
/* The launch attributes a kernel captured on s takes (attr: by id, at least
 * CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN + 1 entries; the others untouched). */
void emu_stream_node_attrs(emu_stream *s, CUkernelNodeAttrValue *attr);
/* Enqueues work (takes ownership, also on failure). Applies the legacy
 * stream's implicit synchronization. Never called for a capturing stream. */
CUresult emu_stream_enqueue(emu_stream *s, emu_work *w);
/* CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (and the captures concerned
 * invalidated) if s is the legacy stream and a blocking stream of its
 * context captures; for calls that must refuse before changing anything
 * (a graph launch's token and allocations). */
CUresult emu_stream_legacy_check(emu_stream *s);
/* fork(): the leaf locks a stream worker may hold while it runs work (a
 * launch token's, the handle registry's, device memory's), taken by
 * emu_stream.c's fork handlers after every stream lock so that no child
 * inherits one held by a thread it does not have. phase: 0 prepare (lock),
 * 1 parent (unlock), 2 child (unlock, condition variables made anew). */
void emu_leaf_locks_fork(int phase);
/* Its parts: the launch tokens' lock (emu_exec.c), device memory's (emu_mem.c),
 * the user objects' counts and destructor queue (emu_uobj.c). */
void emu_exec_tok_fork(int phase);
void emu_uobj_fork(int phase);
void emu_mem_fork(int phase);

/* Blocks until all work queued on s so far completed. */
void emu_stream_wait_idle(emu_stream *s);
/* Blocks until every stream of ctx (or of all contexts if NULL) is idle. */
void emu_streams_sync_all(CUcontext ctx);
/* 1 if work on s waits for the legacy stream (a user stream created without
 * CU_STREAM_NON_BLOCKING, or a per-thread default stream). */
int emu_stream_blocking(emu_stream *s);
/* The capture state of a stream (owned by emu_capture.c), NULL if not capturing. */
struct emu_capture *emu_stream_capture(emu_stream *s);
void emu_stream_set_capture(emu_stream *s, struct emu_capture *c);

/* Context teardown (cuCtxDestroy, primary context reset/last release): waits
 * for and destroys every stream of ctx, unloads nothing else. */
void emu_streams_ctx_destroyed(CUcontext ctx);

/* Copy and memset execution shared by streams and graph nodes (emu_copy.c).
 * exec runs the operation now (on a worker thread); touch records the device
 * ranges the operation reaches; check validates parameters as the driver does
 * (CUDA_ERROR_INVALID_VALUE for bad pitches, element sizes, NULL operands). */
CUresult emu_memcpy3d_check(const CUDA_MEMCPY3D *p);
void emu_memcpy3d_exec(const CUDA_MEMCPY3D *p, uint64_t src_gen, uint64_t dst_gen);
void emu_memcpy3d_gens(const CUDA_MEMCPY3D *p, uint64_t *src_gen, uint64_t *dst_gen);
void emu_memcpy3d_touch(emu_work *w, const CUDA_MEMCPY3D *p);
CUresult emu_memset_check(const CUDA_MEMSET_NODE_PARAMS *p);
void emu_memset_exec(const CUDA_MEMSET_NODE_PARAMS *p);
void emu_memset_touch(emu_work *w, const CUDA_MEMSET_NODE_PARAMS *p);
/* Waits until every synchronous operation that returned early
 * (CUDAEMU_SYNC_EARLY_US) has run (cuPointerSetAttribute: "If there are some
 * previously initiated synchronous memory operations that are pending when
 * this attribute is set, the function does not return until those memory
 * operations are complete"). */
void emu_sync_early_drain(void);
/* emu_mem.c: what an address is for the synchronous operations' rules: 0
 * memory the emulator does not know (pageable host memory), 1 pinned host or
 * managed memory, 2 device memory; and whether a synchronous operation on it
 * from the current context must complete before returning (its
 * SYNC_MEMOPS, or CU_CTX_SYNC_MEMOPS of the current context). */
int emu_mem_class(CUdeviceptr p);
int emu_sync_guaranteed(CUdeviceptr p);

/* Allocates zeroed work of `size` bytes (>= sizeof(emu_work)). */
emu_work *emu_work_new(size_t size, const char *what, void (*run)(emu_work *, emu_stream *));
/* Records that the work may touch the device range containing p (no-op if p
 * is not in a device range). */
void emu_work_touch_ptr(emu_work *w, CUdeviceptr p);
/* Records [p, p+n) and every device range overlapping it. */
void emu_work_touch_range(emu_work *w, CUdeviceptr p, size_t n);
/* Scans every aligned 8-byte word of `bytes` for device pointers. */
void emu_work_touch_words(emu_work *w, const void *bytes, size_t n);

/* If [base, base+size) overlaps a range of queued or running work on any
 * stream, reports a violation for `call` and returns 1; else 0. */
int emu_inflight_check(const char *call, CUdeviceptr base, size_t size);

/* Kernel arguments packed by the module ABI's layout. */
typedef struct emu_args {
    CUfunction func;
    uint64_t func_gen;          /* which load of func (handle values are reused) */
    size_t size;                /* bytes of packed argument data */
    unsigned num_params;
    void *params[32];           /* params[i] points into data */
    unsigned char data[];       /* packed bytes */
} emu_args;
/* Packs from kernelParams or extra (exactly one non-NULL, as the driver
 * requires); CUDA_ERROR_INVALID_VALUE / INVALID_HANDLE on bad input. */
CUresult emu_args_pack(CUfunction f, void **kernelParams, void **extra, emu_args **out);
emu_args *emu_args_clone(const emu_args *a);
/* Runs the kernel (honours CUDAEMU_KERNEL_DELAY_US); `call` names the entry
 * for messages; checks that every pointer argument is accessible to `dev`.
 * A kernel that calls cudaemu_fault ends there and poisons the worker's
 * context (emu_sticky_set). */
void emu_kernel_run(const emu_args *a, const emu_launch *launch, int dev, const char *call);
/* Name of a function, for messages. */
const char *emu_func_name(CUfunction f);
/* 1 if the function the arguments were packed for is still loaded (not
 * unloaded, its handle value not reused by a later load). */
int emu_args_func_loaded(const emu_args *a);
/* Context teardown, after its streams: emu_event.c ends and releases the
 * context's events; emu_module.c unloads its modules (their functions end
 * with them; a library's module and functions in ctx, emu_library.c). */
void emu_events_ctx_destroyed(CUcontext ctx);
void emu_modules_ctx_destroyed(CUcontext ctx);

/* ------------------------------------------------------------------------
 * emu_capture.c: capture hooks used by stream operations (and
 * emu_exec.c: the teardown of graph execs)
 * ---------------------------------------------------------------------- */
struct emu_capture;

/* Called at the start of every call the real driver treats as unsafe during
 * capture (allocation, free, VMM calls, synchronization). If the calling
 * thread's capture mode forbids it while some stream is capturing, the
 * capture(s) concerned are invalidated and CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
 * is returned; otherwise CUDA_SUCCESS. */
CUresult emu_capture_check_unsafe(const char *call);
/* The operations the CUDA Programming Guide ("Prohibited and Unhandled
 * Operations") calls invalid in every capture mode, RELAXED included:
 *   - synchronizing a context while one of its streams captures
 *     (blocking_only == 0, err CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
 *   - any use of the legacy stream while a blocking stream of its context
 *     captures (blocking_only == 1, err CUDA_ERROR_STREAM_CAPTURE_IMPLICIT).
 * Invalidates every capture concerned and returns err; CUDA_SUCCESS if none. */
CUresult emu_capture_check_ctx(CUcontext ctx, int blocking_only, CUresult err);
/* Querying or synchronizing an event whose last record was made in a
 * capture still in progress (invalid in every mode): invalidates that
 * capture and returns 1; 0 if the event is not such an event. */
int emu_capture_event_busy(CUevent ev);

/* Adds a node to the capture in progress on s (the stream operation is then
 * recorded, not executed). type is CU_GRAPH_NODE_TYPE_KERNEL (params:
 * const emu_args * plus launch), MEMCPY (CUDA_MEMCPY3D), MEMSET
 * (CUDA_MEMSET_NODE_PARAMS), HOST (CUDA_HOST_NODE_PARAMS), MEM_ALLOC
 * (cuMemAllocAsync) or MEM_FREE (cuMemFreeAsync; an address that is not a
 * graph allocation, or one already freed by a graph, gives
 * CUDA_ERROR_INVALID_VALUE and invalidates the capture), EVENT_RECORD or
 * WAIT_EVENT (cuEventRecordWithFlags with CU_EVENT_RECORD_EXTERNAL,
 * cuStreamWaitEvent with CU_EVENT_WAIT_EXTERNAL: event). */
typedef struct emu_capture_op {
    CUgraphNodeType type;
    const emu_args *args;             /* KERNEL */
    emu_launch launch;                /* KERNEL */
    const CUlaunchAttribute *attrs;   /* KERNEL: cuLaunchKernelEx's (checked), over the stream's */
    unsigned nattrs;
    const CUDA_MEMCPY3D *copy;        /* MEMCPY */
    const CUDA_MEMCPY3D *copies;      /* MEMCPY, a batch (copy NULL): ncopies nodes, each on the
                                       * stream's last nodes, together its new last nodes */
    size_t ncopies;
    const CUDA_MEMSET_NODE_PARAMS *set; /* MEMSET */
    const CUDA_HOST_NODE_PARAMS *host;  /* HOST */
    size_t mem_bytes;                 /* MEM_ALLOC: size, device, pool; *mem_out gets the address */
    int mem_dev;
    CUmemoryPool mem_pool;
    CUdeviceptr *mem_out;
    CUdeviceptr mem_ptr;              /* MEM_FREE */
    CUevent event;                    /* EVENT_RECORD, WAIT_EVENT */
    const CUstreamBatchMemOpParams *memops; /* BATCH_MEM_OP: nmemops operations (checked) */
    unsigned nmemops;
    const CUexternalSemaphore *sems;  /* EXT_SEMAS_SIGNAL / _WAIT: nsems semaphores (checked) and */
    const void *sem_params;           /* their CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS / _WAIT_PARAMS */
    unsigned nsems;
} emu_capture_op;
/* External semaphores (emu_ext.c), shared by streams and their graph nodes:
 * type is CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL or _WAIT, params the array of
 * the matching parameter struct. check: the documented argument checks
 * (CUDA_ERROR_INVALID_HANDLE for a semaphore not alive); touch: records the
 * semaphores as in use by w (cuDestroyExternalSemaphore checks it); exec:
 * runs the operations in order on the calling worker (a wait blocks); live:
 * whether every semaphore is still alive (a launch naming a destroyed one is
 * refused). */
CUresult emu_extsem_check(CUgraphNodeType type, const CUexternalSemaphore *sems, const void *params, unsigned n);
void emu_extsem_touch(emu_work *w, const CUexternalSemaphore *sems, unsigned n);
void emu_extsem_exec(CUgraphNodeType type, const CUexternalSemaphore *sems, const void *params, unsigned n,
                     const char *what);
int emu_extsem_live(const CUexternalSemaphore *sems, unsigned n);
size_t emu_extsem_params_size(CUgraphNodeType type);
/* Stream memory operations (emu_copy.c), shared by streams and batch memory
 * operation nodes: the documented checks (v2: the _v2 entry points, which
 * alone accept CU_STREAM_MEM_OP_BARRIER), the range every operation with an
 * address touches, and running them in order on the calling worker. */
CUresult emu_memops_check(const CUstreamBatchMemOpParams *ops, unsigned n, unsigned flags, int v2);
void emu_memops_touch(emu_work *w, const CUstreamBatchMemOpParams *ops, unsigned n);
void emu_memops_exec(const CUstreamBatchMemOpParams *ops, unsigned n, int dev, const char *what);
CUresult emu_capture_add(emu_stream *s, const emu_capture_op *op);
/* The launch attributes of cuLaunchKernelEx (emu_graph_params.c): those valid
 * for graph nodes are accepted (kept by a captured kernel's node; no effect on
 * how the kernel runs), IGNORE and programmatic stream serialization
 * (emu_launch_programmatic); clusters of more than one block and the other ids
 * (programmatic events, completion events) are not emulated:
 * CUDA_ERROR_NOT_SUPPORTED; the stream-only synchronization policy:
 * CUDA_ERROR_INVALID_VALUE. apply: writes the node attributes into attr (by id). */
CUresult emu_launch_attrs_check(const CUlaunchAttribute *a, unsigned n);
void emu_launch_attrs_apply(CUkernelNodeAttrValue *attr, const CUlaunchAttribute *a, unsigned n);
int emu_launch_programmatic(const CUlaunchAttribute *a, unsigned n);
/* Event record / wait while capturing (fork-join across streams). */
CUresult emu_capture_event_record(emu_stream *s, CUevent ev);
/* Returns 1 if ev was recorded in a capture and s now joins it (handled). */
int emu_capture_event_wait(emu_stream *s, CUevent ev, CUresult *res);
/* Invalidates the capture in progress on s, if any (for stream operations
 * that cannot be captured). */
void emu_capture_invalidate(emu_stream *s);
/* s is being destroyed: it leaves its capture, if any (a capture whose
 * origin stream goes is ended and its graph destroyed; another stream's
 * capture is invalidated). */
void emu_capture_stream_gone(emu_stream *s);
/* Context teardown: ends and frees the graph execs of ctx. */
void emu_graph_ctx_destroyed(CUcontext ctx);
/* Frees an event's capture-time state (ev->cap) under the capture lock: call
 * it when the event is recorded outside capture or destroyed. */
void emu_capture_event_forget(CUevent ev);

/* The context a function's module was loaded in (emu_module.c); NULL if the
 * function is not alive. */
CUcontext emu_func_ctx(CUfunction f);

/* ------------------------------------------------------------------------
 * Modules and functions (emu_module.c loads emulated modules; emu_library.c
 * owns modules made from CUDA images and the functions of libraries)
 * ---------------------------------------------------------------------- */
struct CUlib_st;
/* Functions and modules come from the handle pools (emu_handle_mem_get): an
 * unloaded module's CUfunction and CUmodule values are given to the
 * functions and modules loaded next. `gen` tells a reused function from the
 * one an argument block was packed for. */
struct CUfunc_st {
    const emu_kernel *k;            /* k->fn NULL: a kernel no module provides */
    CUmodule mod;
    uint64_t gen;                   /* unique over the process */
    size_t off[32];                 /* ABI offset of each argument */
    size_t abi_size;                /* end of the last argument */
    int attr[CU_FUNC_ATTRIBUTE_MAX];/* cuFuncGetAttribute values (atomic ints) */
    int loaded;                     /* its code is in its context (atomic; emu_func_load) */
    size_t charge;                  /* device memory its load took (CUDAEMU_FUNC_BYTES) */
};

struct CUmod_st {
    void *dl;                       /* emulated module: its object */
    CUcontext ctx;
    unsigned nfuncs;
    struct CUfunc_st **funcs;       /* emulated module: its functions */
    struct CUlib_st *lib;           /* non-NULL: functions come from this library */
    size_t charge;                  /* device memory the load took (CUDAEMU_MODULE_BYTES) */
};

/* Number of kernels in a module table, -1 if an entry is invalid. */
int emu_kernel_table_count(const emu_kernel *table);
/* The ABI offset of each argument of k (emu_kernel.h) and the end of the last. */
void emu_kernel_layout(const emu_kernel *k, size_t off[32], size_t *abi_size);
/* A new module of ctx from the handle pool (not yet registered). */
CUmodule emu_module_new(CUcontext ctx);
/* A new function for kernel k of module m, from the handle pool, registered
 * as a handle of m's context. */
CUfunction emu_func_new(const emu_kernel *k, CUmodule m);
/* Loads f's code into its context if not yet (lazy loading); 0 if the
 * device has no room for it (CUDA_ERROR_OUT_OF_MEMORY: nothing loaded). */
int emu_func_load(CUfunction f);
/* f ends: gives back what its load took. */
void emu_func_unload(CUfunction f);
/* dlopen of an emulated module by path / from an ELF image in memory (*err:
 * INVALID_IMAGE if it is not one); NULL on failure. */
void *emu_module_dlopen_path(const char *fname);
void *emu_module_dlopen_image(const void *image, CUresult *err);
/* cuFuncGetParamInfo's / cuKernelGetParamInfo's answer for kernel k laid out
 * at off (`call` names the entry for the missing-kernel message). */
CUresult emu_param_info(const emu_kernel *k, const size_t *off, size_t index, size_t *offset, size_t *size,
                        const char *call);

/* emu_library.c */
/* 1 if image is a CUDA image: a fat binary (its wrapper or its data), a
 * cubin (ELF for EM_CUDA) or PTX text. */
int emu_image_is_cuda(const void *image);
int emu_file_is_cuda_image(const char *path);
/* A module in ctx for a CUDA image: its kernels come from CUDAEMU_MODULES. */
CUresult emu_lib_module_load(CUcontext ctx, CUmodule *out);
/* cuModuleUnload of a module that belongs to a library. */
CUresult emu_lib_module_unload(CUmodule m);
/* Context teardown of a library's module m (of the dying context): m and
 * every function of the library's kernels in that context end; a module
 * made from a CUDA image ends with its hidden library. */
void emu_lib_module_ctx_destroyed(CUmodule m);
/* The function `name` of library lib in ctx (cuModuleGetFunction). */
CUresult emu_lib_function(struct CUlib_st *lib, CUcontext ctx, const char *name, CUfunction *out);
/* f, or the function of the CUkernel f in ctx (NULL: the current context);
 * INVALID_HANDLE if f is neither. */
CUresult emu_func_resolve(CUfunction f, CUcontext ctx, CUfunction *out);
/* Logs (once per name) that no module of CUDAEMU_MODULES provides the
 * kernel `name`, naming `call`; returns CUDA_ERROR_NO_BINARY_FOR_GPU. */
CUresult emu_kernel_missing(const char *name, const char *call);
/* Default attribute values of a function of kernel k on device dev. */
void emu_func_attr_init(int attr[CU_FUNC_ATTRIBUTE_MAX], const emu_kernel *k, int dev);
int emu_func_attr(CUfunction f, CUfunction_attribute a);

/* ------------------------------------------------------------------------
 * emu_event.c: events (shared so captures can hold their records)
 * ---------------------------------------------------------------------- */
struct emu_capture_event;           /* capture-time state, emu_capture.c */
struct CUevent_st {
    unsigned flags;
    emu_stream *stream;             /* stream of the last record, NULL if never */
    uint64_t seq;                   /* completion target on that stream */
    double time_ms;                 /* when the record completed */
    int recorded;
    struct emu_capture_event *cap;  /* non-NULL if last recorded during capture */
};

/* calloc that aborts with a message when host memory runs out (emu_stream.c). */
void *emu_xcalloc(size_t n, size_t size);

/* Event references for graph nodes (docs/emulator.md, "Event record and
 * wait nodes"): a node holds one, so the handle value is not given to a new
 * event while a node names it; emu_event_live says whether the program's
 * handle still exists (not destroyed, its context not torn down). */
int emu_event_live(CUevent ev);
void emu_event_ref(CUevent ev);
void emu_event_unref(CUevent ev);
CUcontext emu_event_ctx(CUevent ev);
/* What a graph launch on s queues for an event record node (a marker, as
 * cuEventRecord's) and for an event wait node (a wait for the event's most
 * recent record at this moment, as cuStreamWaitEvent's; NULL if there is
 * nothing to wait for). */
emu_work *emu_event_mark_work(CUevent ev, const char *what);
emu_work *emu_event_wait_work(CUevent ev, emu_stream *s, const char *what);
/* Queues w[0..n) on s in one piece (no other work between them, behind the
 * legacy stream's implicit synchronization); each marker among them
 * (emu_event_mark_work) becomes its event's most recent record, as
 * cuEventRecord's. Takes the works, also on failure. */
CUresult emu_event_enqueue_chain(emu_stream *s, emu_work **w, size_t n);

#endif /* EMU_INTERNAL_H */
