/*
 * core/slots.h: stable slots (slots.c), the aliasing half of skip_profiled.
 *
 * A slot is a fixed virtual-address range, in a reservation the library owns
 * per context, at which the library maps a second time the physical handles
 * of one of the program's own-handle allocations (core/memory.h,
 * sg_mem_block_handles): virtual aliasing. A graph exec that references the
 * slot's address then reaches whatever buffer is bound to the slot when it
 * runs, so the program can feed it other buffers without a graph update.
 *
 * Slots come in generations: a generation is the set of slots one exec
 * variant uses (graphs.c keeps one driver exec per generation). All slots of
 * a generation are used by the same launches, so a generation has one
 * timeline: the events recorded after its latest launches (see Timeline
 * below). A generation is "idle" when those launches have completed.
 *
 * Rules the implementation keeps (they are what makes aliasing safe):
 *   - A slot's mapping is never changed (unmapped, remapped) while queued
 *     work may still use it: binding a slot of a busy generation first waits
 *     for that generation's last launch (a targeted event wait, never a
 *     device synchronization), or refuses with SG_SLOTS_BUSY when asked not
 *     to wait.
 *   - A slot that already maps the requested allocation (same allocation id,
 *     never the raw address: addresses are reused) is left alone: no driver
 *     call at all. Steady state with stable or rotating buffers (one
 *     generation per buffer set): zero cuMemMap/cuMemUnmap/cuMemSetAccess.
 *   - New mappings get read-write access for the context's device and every
 *     peer device that can access it.
 *   - The library's own driver calls run in relaxed stream-capture mode.
 *   - On any driver failure the slot is left empty (unmapped) and the call
 *     returns -1; the caller then falls back to forwarding updates.
 *
 * Timeline: a generation keeps one event per stream it was launched on
 * (a few; streams reuse entries once their event completed), so launches
 * of one generation on several streams are all waited for. The launches of
 * a generation must be launches of one driver exec, which the driver orders
 * one after another: with every entry busy, a new stream takes the entry
 * recorded longest ago (its new event completes after the old one). A
 * launch whose event could not be created or recorded (or an event wait
 * that failed) leaves the generation busy until a later record on that
 * stream succeeds; waiting then synchronizes the context (the only
 * non-targeted wait, a fallback for driver failures).
 *
 * Thread safety: one mutex per generation (bind, launched, idle, destroy);
 * the per-context record (contexts.c's part SLOTS: reservations, live and
 * retiring generations) has its own lock, taken before a generation's; a
 * global lock (generations whose context was torn down, creation and
 * destruction) is taken before both. No lock is held across an event wait,
 * and the library itself never waits (sg_slot_gen_bind without wait,
 * sg_slot_gen_retire). sg_slot_gen_bind may call sg_mem_find and
 * sg_mem_block_handles (memory.c's locks) with a generation's lock held;
 * memory.c calls into slots.c only through sg_mem_trim_hook (memory
 * pressure, set by sg_slots_init), with no lock held.
 */
#ifndef SG_SLOTS_H
#define SG_SLOTS_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "memory.h"
#include "streams.h"

#define SG_SLOTS_BUSY 1

typedef struct sg_slot_gen sg_slot_gen;

/* What a slot should show: an own-handle allocation (core/memory.h).
 * Normally {id, base}: the handles come from sg_mem_block_handles(base) and
 * the live allocation at base must be own-handle with this id. A caller
 * that owns its physical memory itself (tests, a future caller) lists the
 * handles instead (nhandles > 0): their offsets relative to base must start
 * at 0 and follow each other without gaps (each handle mapped whole). */
typedef struct sg_slot_bind {
    uint64_t id;            /* sg_alloc_info.id; 0 = leave the slot empty */
    CUdeviceptr base;       /* the allocation's base (to list its handles) */
    const sg_mem_handle *handles;   /* optional explicit handle list ... */
    size_t nhandles;        /* ... and its length; 0 = ask memory.c */
} sg_slot_bind;

/* Creates a generation of n slots for context ctx (device dev), slot i big
 * enough for sizes[i] bytes plus the offset of the allocation within its
 * first handle (rounded up to the granularity). Slots start empty. Returns 0,
 * or -1 if the driver refused the reservation (nothing is left behind). */
int sg_slot_gen_create(CUcontext ctx, CUdevice dev, const size_t *sizes, size_t n,
                       sg_slot_gen **out);

/* Address at which slot i shows byte 0 of the allocation bound to it (the
 * same for every allocation ever bound there: the slot base plus the offset
 * of an allocation's base within its first handle, which is 0 for own-handle
 * allocations). */
CUdeviceptr sg_slot_addr(const sg_slot_gen *g, size_t i);
size_t sg_slot_gen_count(const sg_slot_gen *g);

/* 1 if every slot i already shows allocation want[i].id (nothing to map). */
int sg_slot_gen_matches(const sg_slot_gen *g, const sg_slot_bind *want);

/* 1 if the generation's latest launch has completed (cuEventQuery, once per
 * completion: a generation known idle costs no driver call). */
int sg_slot_gen_idle(sg_slot_gen *g);

/* Makes slot i show want[i] for every i. Slots that already match are left
 * alone. If some slot must change and the generation is busy: with wait,
 * waits for its latest launch; without, returns SG_SLOTS_BUSY and changes
 * nothing. An allocation whose handles do not fit its slot, or that is not
 * an own-handle allocation, makes the call fail (-1, slot left empty).
 * Returns 0, SG_SLOTS_BUSY or -1. Counts the VMM calls and their time
 * (sg_slot_stats). */
int sg_slot_gen_bind(sg_slot_gen *g, const sg_slot_bind *want, int wait);

/* Records that a launch using this generation was just queued on stream
 * (per_thread: the _ptsz flavour), from the thread that queued it. Returns
 * 0, or -1 if the event could not be recorded (then the generation is
 * treated as busy until a later record on the same stream succeeds or a
 * wait synchronized the context). Not for a capturing stream (the record
 * would join the capture). */
int sg_slot_gen_launched(sg_slot_gen *g, CUstream stream, int per_thread);

/* Frees the generation: waits until it is idle, then unmaps its slots and
 * returns its address range. Waits for the GPU: never from a hook (tests and
 * tools only); the library uses sg_slot_gen_retire. */
void sg_slot_gen_destroy(sg_slot_gen *g);

/* Gives the generation up without waiting: if it is idle its slots are
 * unmapped now, else later, once its launches completed (checked at the
 * context's next slot operation) or the context goes. The caller must not
 * use g again. */
void sg_slot_gen_retire(sg_slot_gen *g);

/* Registers the context teardown (contexts.h, step 1): every generation of
 * the context is unmapped and its reservations freed, with no event call
 * (the context's events went with it); VMM errors are ignored. A generation
 * pointer the caller still holds stays valid but dead (bind and launched
 * return -1, idle 1) until sg_slot_gen_destroy / retire, which then only
 * frees it. Called once at start-up. */
void sg_slots_init(void);
/* Fork: 0 prepare (takes the global slots lock), 1 parent, 2 child. */
void sg_slots_atfork(int phase);

/* Bytes per reservation the slots of a context are carved from (rounded up
 * to the granularity; a generation larger than that gets a reservation of
 * its own size). 0 = the default: twice the device's memory, or 64 GiB if
 * the driver does not say. Applies to reservations made after the call. */
void sg_slots_set_reservation_size(size_t bytes);

/* Tears down every context's slots (as sg_slots_ctx_teardown), frees dead
 * generations, zeroes the statistics and restores the default reservation
 * size (unit tests). */
void sg_slots_reset(void);

/* Measured cost of the library's aliasing VMM work, for the profiling
 * decision and the report. */
typedef struct sg_slot_stats {
    unsigned long maps, unmaps, set_access, waits;   /* driver calls / event waits */
    unsigned long long map_ns, unmap_ns, access_ns;  /* time spent in them */
    unsigned long binds, binds_reused;               /* slot binds; of which no-ops */
} sg_slot_stats;
sg_slot_stats sg_slots_stats(void);

#endif /* SG_SLOTS_H */
