/*
 * emu_mem.h: the memory state the memory files of the emulated CUDA driver
 * share (private to emu_mem.c, emu_vmm.c and emu_pool.c): the device-range
 * registry, reservations, physical allocation handles, per-device
 * accounting, the memory pools' state and graph allocations.
 *
 * Locking: emu_mem_lock guards everything in `emu_memory`. It is a leaf lock: nothing
 * that may take another emulator lock (emu_inflight_check,
 * emu_streams_sync_all, emu_capture_check_unsafe, emu_violation) is called
 * while it is held. Calls that must check in-flight work validate under the
 * lock, drop it, check, then take it again and validate once more before
 * changing anything.
 */
#ifndef EMU_MEM_H
#define EMU_MEM_H

#include "emu_internal.h"

/* Set by uthash when an add ran out of memory (emu_mem_lock held). */
extern int emu_mem_hash_oom;
#define uthash_nonfatal_oom(obj) (emu_mem_hash_oom = 1)
#include <uthash.h>

#define MEM_MAX_DEVICES 8         /* emu_cfg.devices is 1..8 */

/* An address interval; first member of everything kept in a span_vec. */
typedef struct span { CUdeviceptr base; size_t size; } span;

/* Non-overlapping spans sorted by base. */
typedef struct span_vec { span **v; size_t n, cap; } span_vec;

typedef enum range_kind {
    RK_ALLOC = 1,   /* cuMemAlloc */
    RK_ASYNC,       /* cuMemAllocAsync / FromPoolAsync */
    RK_MAP,         /* one cuMemMap */
    RK_HOST,        /* cuMemHostAlloc / cuMemAllocHost / cuMemHostRegister */
    RK_GRAPH,       /* a graph allocation while it is allocated (gmem) */
    RK_MANAGED,     /* cuMemAllocManaged */
    RK_IPC,         /* another process's cuMemAlloc block opened here (emu_ipc.c) */
    RK_EXT          /* a buffer mapped onto imported external memory (emu_ext.c) */
} range_kind;

/* A graph allocation (an allocation node's memory, emu_gmem_* in
 * emu_internal.h). Its address range is reserved (PROT_NONE) when the node
 * is made and stays reserved while a node refers to it (the graph's node and
 * each exec's copy); a launch of an exec allocates it (charged, readable, a
 * RK_GRAPH device range) until a free (free node, cuMemFreeAsync, cuMemFree)
 * releases it (contents dropped, PROT_NONE again). Each allocation by a
 * launch is one incarnation (gen); a free requested for an earlier
 * incarnation does nothing to a later one. */
typedef struct gmem {
    span s;                     /* the reserved range, requested size */
    size_t len;                 /* pages: reserved, and charged while live */
    int device;
    unsigned long refs;         /* nodes holding it */
    int live;                   /* allocated */
    int free_pending;           /* a free of this incarnation is queued */
    uint64_t gen;               /* incarnation */
    uint64_t owner_graph;       /* uid of the graph whose node made it */
    uint64_t freed_in;          /* uid of the graph with its free node, 0 if none */
} gmem;

/* A physical allocation made by cuMemCreate. Lives while it has references
 * (cuMemCreate, cuMemRetainAllocationHandle) or mappings. */
typedef struct mem_handle {
    unsigned long long id;      /* the CUmemGenericAllocationHandle value */
    int fd;                     /* memfd holding the bytes */
    size_t size;
    CUmemAllocationProp prop;
    unsigned long refs;         /* not yet released */
    unsigned long maps;         /* live mappings */
    unsigned long long block_id;
    int imported;               /* cuMemImportFromShareableHandle: memory charged by the original */
    UT_hash_handle hh;
} mem_handle;

typedef struct reservation {
    span s;                     /* the whole reservation */
} reservation;

/* A device range: one allocation, mapping or pinned host block. */
typedef struct mem_range {
    span s;                     /* base and requested size */
    size_t mapped;              /* bytes of the underlying mmap */
    range_kind kind;
    int device;
    CUcontext ctx;              /* allocating context (NULL for VMM) */
    unsigned long long buffer_id;
    unsigned host_flags;        /* RK_HOST */
    int registered;             /* RK_HOST: the program's memory (cuMemHostRegister), not unmapped */
    int sync_memops;            /* CU_POINTER_ATTRIBUTE_SYNC_MEMOPS (cuPointerSetAttribute) */
    mem_handle *handle;         /* RK_MAP */
    span resv;                  /* RK_MAP: the reservation it lies in */
    CUmemAccess_flags access[MEM_MAX_DEVICES]; /* RK_MAP */
    int free_pending;           /* RK_ASYNC: cuMemFreeAsync queued, not yet reached */
    emu_stream *free_stream;    /* RK_ASYNC, free_pending: the freeing stream (a reference) */
    uint64_t free_seq;          /*   and the free's work there (emu_mem_free_async_queued) */
    size_t claim;               /*   bytes an allocation took over before the free (claims) */
    CUmemoryPool pool;          /* RK_ASYNC: the pool it came from */
    int pool_gone;              /* RK_ASYNC, detached: the last block of a destroyed pool
                                 * (block_release gives the pool's handle memory back) */
    gmem *g;                    /* RK_GRAPH */
    const void *ext;            /* RK_EXT: the external memory object it was mapped onto */
    size_t map_off;             /* RK_EXT: s.base - the start of its mmap (a page offset) */
    int ext_gone;               /* RK_EXT: that object was destroyed (cuDestroyExternalMemory):
                                 * not accessible any more, to be freed by cuMemFree */
} mem_range;

/* A memory pool's memory: its bytes are charged to its device while in use
 * and while held after being freed. */
typedef struct pool_state {
    size_t used;                /* live allocations (pages) */
    size_t held;                /* freed, kept by the pool, still charged */
    size_t used_high, reserved_high;
    cuuint64_t threshold;       /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */
    int reuse[3];               /* the three REUSE_* attributes (INTERNAL_DEPENDENCIES: claims) */
} pool_state;

/* A memory pool: a device's default pool (emu_pool.c, never destroyed) or
 * one cuMemPoolCreate made (handle memory of kind EMU_K_POOL). Everything
 * but `device`, `created` and `max_size` is guarded by emu_mem_lock. A
 * destroyed pool with allocations left (live, or freed and not yet reached)
 * is no longer a valid handle but stays until its last allocation is freed
 * (cuMemPoolDestroy: "the resources associated with the pool will be
 * released automatically once there are no more outstanding allocations"). */
struct CUmemPoolHandle_st {
    int device;
    int created;                /* by cuMemPoolCreate (0: a default pool) */
    size_t max_size;            /* CUmemPoolProps.maxSize: most bytes reserved (0: the device's) */
    int destroyed;              /* cuMemPoolDestroy called */
    size_t blocks;              /* allocations not yet freed or whose free is not reached */
    pool_state st;
    CUmemAccess_flags access[MEM_MAX_DEVICES];  /* cuMemPoolSetAccess (the owner: read-write) */
    struct CUmemPoolHandle_st *next;            /* emu_memory.pools */
};

typedef struct mem_state {      /* all guarded by emu_mem_lock */
    span_vec ranges;            /* mem_range, every live device range */
    span_vec resvs;             /* reservation */
    mem_handle *handles;        /* uthash by id */
    size_t used[MEM_MAX_DEVICES];   /* charged bytes per device (cuMemGetInfo) */
    span_vec gmems;             /* gmem, every graph allocation's reservation */
    size_t graph_used[MEM_MAX_DEVICES], graph_high[MEM_MAX_DEVICES];
    struct CUmemPoolHandle_st *pools;           /* every pool not yet released */
    struct CUmemPoolHandle_st *current[MEM_MAX_DEVICES];  /* cuDeviceSetMemPool; NULL: the default */
    unsigned long long next_buffer_id;
    unsigned long long next_handle_id;
    unsigned long long *free_ids;   /* released handle ids, the last released on top: the
                                     * next handle takes it (emu_vmm.c handle_id_take) */
    size_t nfree_ids, cap_free_ids;
} mem_state;

/* emu_mem.c */
extern pthread_mutex_t emu_mem_lock;
extern mem_state emu_memory;

/* Helpers (emu_mem.c); the span and range ones need emu_mem_lock. */
size_t emu_page_size(void);
size_t emu_round_up(size_t n, size_t a);
size_t emu_span_lower(const span_vec *sv, CUdeviceptr p);
span *emu_span_find(const span_vec *sv, CUdeviceptr p);
span *emu_span_overlap(const span_vec *sv, CUdeviceptr lo, CUdeviceptr hi);
int emu_span_insert(span_vec *sv, span *s);
void emu_span_remove(span_vec *sv, span *s);
mem_range *emu_range_find(CUdeviceptr p);
int emu_usage_take(int dev, size_t bytes);
void emu_mem_live(unsigned long long out[4]);

/* emu_vmm.c: reserves `size` bytes of PROT_NONE address space aligned to
 * `align`, at `hint` if that is free and aligned; NULL if the address space
 * is full. */
void *emu_va_reserve(size_t size, size_t align, CUdeviceptr hint);

#endif /* EMU_MEM_H */
