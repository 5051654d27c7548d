/*
 * core/slot_internal.h: what slots.c (generations, their timelines, life
 * and teardown) and slot_map.c (address ranges, mapping one slot, the VMM
 * calls and their statistics) share. Not for the rest of core/: slots.h is
 * the interface; the locks are described in slots.c.
 */
#ifndef SG_SLOT_INTERNAL_H
#define SG_SLOT_INTERNAL_H

#include "slots.h"
#include "streams.h"
#include "vmm.h"

#include <pthread.h>

#define SG_SLOT_TIMELINES 8
#define SG_SLOTS_RESV_FALLBACK ((size_t)64 << 30)
#define SG_SLOTS_STACK_HANDLES 8

/* ------------------------------------------------------------------ state */

typedef struct range {
    CUdeviceptr base;
    size_t size;
} range;

typedef struct resv {
    CUdeviceptr base;
    size_t size;
    range *free;                 /* sorted by base, coalesced */
    size_t nfree, capfree;
} resv;

typedef struct sg_slot_ctx {
    CUcontext ctx;
    sg_vmm_dev vmm;              /* the context's device, granularity, access */
    size_t gran;                 /* vmm.gran */
    pthread_mutex_t lock;        /* resvs, gens, retiring */
    resv *resvs;
    size_t nresvs, capresvs;
    sg_slot_gen *gens;
    sg_slot_gen *retiring;       /* released while busy: destroyed once idle */
    range *orphans;              /* mappings of destroyed slots whose unmap failed */
    size_t norphans, caporphans;
} sg_slot_ctx;

typedef struct piece {           /* one handle mapped at slot base + off */
    size_t off, size;
} piece;

typedef struct slot {
    CUdeviceptr base;
    size_t size;
    uint64_t id;                 /* allocation shown; 0 = none */
    CUdeviceptr abase;           /* its base, when memory.c listed its handles ... */
    int listed;                  /* ... (not the caller: sg_slot_bind.nhandles) */
    piece *pieces;               /* mapped (or failed to unmap) */
    size_t npieces, cappieces;
} slot;

typedef struct timeline {
    sg_stream_id key;            /* the stream (streams.h) */
    int used;
    CUevent ev;                  /* created on first use */
    int busy;                    /* recorded, completion not seen yet */
    int failed;                  /* a launch here was not followed by a record */
    unsigned long seq;           /* g->seq when last recorded */
} timeline;

struct sg_slot_gen {
    sg_slot_ctx *cx;
    pthread_mutex_t lock;
    int dead;                    /* context torn down */
    int unknown;                 /* a launch could not be tracked at all */
    unsigned long seq;           /* launches recorded (or attempted) */
    timeline tl[SG_SLOT_TIMELINES];
    CUdeviceptr base;            /* the generation's range */
    size_t span;
    sg_slot_gen *next;           /* cx->gens, or the dead list */
    size_t n;
    slot s[];
};

/* ctxs_lock guards dead_gens and resv_size, and is held across generation
 * creation and destruction (the context records are contexts.c's). */
extern sg_slot_stats sg_slot_stats_;   /* fields are atomics */
#define STAT_ADD(field, v) __atomic_add_fetch(&sg_slot_stats_.field, (v), __ATOMIC_RELAXED)

/* Address ranges of a context's reservations (cx->lock held): takes bytes
 * (0, or -1: nothing changed), gives a range back. reserve_size: bytes per
 * reservation (0: twice the device's memory). */
int sg_slot_range_take(sg_slot_ctx *cx, size_t bytes, size_t reserve_size, CUdeviceptr *out);
void sg_slot_range_give(sg_slot_ctx *cx, CUdeviceptr base, size_t bytes);
/* One slot (its generation's lock held): unmap every piece (0, or -1 if
 * some unmap failed: those stay listed); whether it shows want; make it show
 * want (0, or -1 with the slot empty). */
int sg_slot_unmap(slot *s);
int sg_slot_matches(const slot *s, const sg_slot_bind *want);
int sg_slot_rebind(const sg_slot_ctx *cx, slot *s, const sg_slot_bind *want);
/* Empties s if it shows a block memory.c listed that is no longer live (g->lock
 * held, generation idle); the bytes it unmapped. */
size_t sg_slot_drop_freed(slot *s);
/* Retries the unmaps that failed when slots of cx were destroyed (cx->lock
 * held). */
void sg_slot_orphans_retry(sg_slot_ctx *cx);

#endif /* SG_SLOT_INTERNAL_H */
