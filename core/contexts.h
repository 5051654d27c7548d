/*
 * core/contexts.h: the one owner of context life cycle.
 *
 * A context record holds what core/ keeps per CUDA context: the device's VMM
 * set-up (made once, on first use) and one pointer per part of core/ that
 * keeps per-context state (memory.c's arena, slots.c's reservations). Records
 * are made on first use (sg_ctx_get) and reference counted: a thread that got
 * one may use it after the context is gone (the record is then dead and its
 * parts are gone); the last reference frees it.
 *
 * Teardown: when a context is destroyed (cuCtxDestroy succeeded) or a
 * device's primary context becomes inactive (after cuDevicePrimaryCtxRelease
 * or cuDevicePrimaryCtxReset, per cuDevicePrimaryCtxGetState), every part is
 * told, in this one order:
 *     0. SG_CTX_PART_CAPTURES capture.c forgets the captures the context's
 *                            destruction ended (and the function handles
 *                            its records cached: the parameter-layout
 *                            cache's epoch goes up in step 2);
 *     1. SG_CTX_PART_SLOTS   slots.c unmaps and frees its slot reservations;
 *     2. SG_CTX_PART_GRAPHS  graphs.c drops the records of the context's execs
 *                            (the driver destroyed them) and their variants,
 *                            and starts a new parameter-layout epoch (the
 *                            context's function handles may be reused);
 *     3. SG_CTX_PART_ARENA   memory.c unmaps, releases and forgets the arena;
 *     4. SG_CTX_PART_LAUNCH  mem_lazy.c clears the launch filter's tables the
 *                            context had (taken before its destroy was
 *                            forwarded) for the next context (not a primary
 *                            context's: it keeps its value).
 * A part's teardown makes no call on the dead context's objects: its events,
 * streams and execs went with it (their handles may already be reused by the
 * driver); only VMM memory, which outlives contexts, is unmapped and released,
 * and step 0 asks whether the streams that began captures still capture.
 * No lock of this module is held while a part tears down.
 *
 * Thread safety: table_lock guards the table of live records and the
 * primary-context table; rec->lock guards a record's VMM set-up and part
 * pointers; refs is atomic. Lock order: table_lock, then a record's lock;
 * neither is held across a driver call that can wait on the device.
 */
#ifndef SG_CONTEXTS_H
#define SG_CONTEXTS_H

#include <cuda.h>
#include <pthread.h>

#include "call.h"
#include "vmm.h"

typedef enum {
    SG_CTX_PART_CAPTURES, SG_CTX_PART_SLOTS, SG_CTX_PART_GRAPHS, SG_CTX_PART_ARENA, SG_CTX_PART_LAUNCH,
    SG_CTX_PARTS
} sg_ctx_part;

typedef struct sg_ctx {
    CUcontext ctx;
    int refs;                    /* atomic */
    int dead;                    /* atomic: torn down */
    pthread_mutex_t lock;        /* guards what follows */
    int vmm_state;               /* 0 not set up, 1 usable, -1 no VMM (forward everything) */
    sg_vmm_dev vmm;              /* when vmm_state == 1 */
    void *part[SG_CTX_PARTS];    /* owned by the parts */
    void *early[SG_CTX_PARTS];   /* during a cuCtxDestroy's teardown: what each part's
                                  * sg_ctx_on_take took before the driver's destroy */
    struct sg_ctx *next;         /* table (table_lock) */
} sg_ctx;

/* The record of ctx, made if missing, with a reference for the caller; NULL
 * if ctx is NULL or memory ran out. */
sg_ctx *sg_ctx_get(CUcontext ctx);
/* The record of ctx with a reference, or NULL if there is none. */
sg_ctx *sg_ctx_find(CUcontext ctx);
void sg_ctx_put(sg_ctx *c);

/* Sets up c's VMM facts once (c->lock held by the caller). Returns 1 if VMM
 * is usable, else 0 (logged once with the reason). */
int sg_ctx_vmm_locked(sg_ctx *c);

/* Registers the teardown of one part (at start-up, before any hook). */
void sg_ctx_on_teardown(sg_ctx_part part, void (*fn)(sg_ctx *c));
/* Registers what a part takes out of its tables before cuCtxDestroy is
 * forwarded (take: NULL for nothing), once the driver may give the
 * context's handle values to another thread's objects: the part's
 * teardown then finds it in c->early[part]; a destroy the driver refuses
 * hands it to give_back. (Round 44: the exec records were taken by context
 * after the driver returned, which took those of another thread's context
 * made on the value meanwhile, and let an instantiation on the value of one
 * of the dead context's execs recycle that exec's record as if its context
 * lived.) */
void sg_ctx_on_take(sg_ctx_part part, void *(*take)(CUcontext ctx), void (*give_back)(void *taken));

/* Calls fn(c, u) for every live record (each held by a reference, no lock
 * held during the call). */
void sg_ctx_foreach(void (*fn)(sg_ctx *c, void *u), void *u);

/* Handles CTX_DESTROY and PRIMARY_DROP (core.c makes PRIMARY_RETAIN, with
 * memory's retry, then tells sg_ctx_primary_retained). */
CUresult sg_ctx_call(const sg_call *c);
/* After a PRIMARY_RETAIN call the driver answered rc (core.c makes it, and
 * once more after a trim if it ran out of memory: memory.h): notes which
 * context is the device's primary one; returns rc. */
CUresult sg_ctx_primary_retained(const sg_call *c, CUresult rc);

/* The context that owns the memory allocated on stream s (CU_STREAM_LEGACY:
 * with ctx current; per_thread: the _ptsz flavour), ctx being the context
 * cuStreamGetCtx or cuCtxGetCurrent gave: ctx itself, except for a green
 * context's converted context (cuCtxFromGreenCtx), which is "treated as if
 * it were a primary context" for what does not depend on its resources:
 * what is allocated with it is the device's primary context's, and outlives
 * the green context. Found by cuStreamGetCtx_v2 (CUDA 12.5+; without it:
 * ctx); asked once per context (cached until its teardown), never for a
 * primary context the library saw retained. */
CUcontext sg_ctx_owner(CUcontext ctx, CUstream s, int per_thread);

/* Tears ctx down as if the driver had destroyed it (tests). */
void sg_ctx_teardown(CUcontext ctx);

/* Fork: 0 prepare (lock), 1 parent, 2 child (unlock). */
void sg_ctx_atfork(int phase);

/* Forgets every record and the teardown functions (unit tests). */
void sg_ctx_reset(void);

#endif /* SG_CONTEXTS_H */
