/*
 * core/profiled.h: the skip_profiled policy: per-exec profiling, the
 * decision, exec variants ("generations") and, opt-in, aliasing of varying
 * buffers into slots (slots.h). It is an observer of graphs.c's exec records
 * (graphs.h); prof.h describes its parts.
 *
 * States of one exec:
 *   PROFILING  its first STABLEGRAPH_PROFILE_STEPS launches: updates are
 *              handled as under skip_temp, every forwarded update is timed,
 *              and each launch records where the logical state's pointers
 *              are and what they hold;
 *   PLAIN      decided: nothing varied that variants could serve (or a
 *              fallback): skip_temp behaviour for the exec's life;
 *   VARIANTS   decided: updates whose differences are only kernel argument
 *              bytes and memcpy / memset addresses inside placed allocations
 *              of the exec's context are accepted without the driver; each
 *              launch picks (or makes) an exec variant whose driver state is
 *              the program's logical state (translated through slots when
 *              aliasing). Anything else sends the exec back to PROFILING (its
 *              own exec restored to the program's state first).
 * What variants guarantee (issue 10):
 *   - launch order: launches of one program exec run in the order the
 *     program made them, on any streams, whichever variant serves each
 *     (an event after the latest launch, waited on by the next launch on
 *     another stream, once the program uses several; none while it stays on
 *     one stream);
 *   - state: an exec whose state no description carries (a disabled node, a
 *     setter of a node type not modeled) never uses variants again, and a
 *     node the library cannot read keeps it out of them;
 *   - no waits: the launch path never blocks the host on the GPU; a variant
 *     whose slots are busy is not remapped: another is used, or the
 *     program's own exec after an update.
 * Under always_update the same state machine runs without acting (no clone,
 * no variant, no slot) so that would_skip_profiled counts what skip_profiled
 * would have answered without the driver.
 *
 * Thread safety: the observer's functions run with the exec record's lock
 * held (graphs.h); the settings are written once at start-up.
 */
#ifndef SG_PROFILED_H
#define SG_PROFILED_H

#include <cuda.h>
#include <stdint.h>

#include "graphs.h"
#include "memory.h"
#include "policy.h"
#include "slots.h"

typedef struct sg_prof sg_prof;

/* Reads the policy's settings; returns the observer to hand to graphs.c, or
 * NULL if the policy does not profile. Called once at start-up. */
const sg_exec_observer *sg_prof_init(const sg_caps *caps);

/* The slot API the policy uses (slots.h by default); unit tests substitute
 * fakes. NULL restores the default. */
typedef struct sg_prof_slot_ops {
    int (*create)(CUcontext, CUdevice, const size_t *, size_t, sg_slot_gen **);
    CUdeviceptr (*addr)(const sg_slot_gen *, size_t);
    int (*matches)(const sg_slot_gen *, const sg_slot_bind *);
    int (*idle)(sg_slot_gen *);
    int (*bind)(sg_slot_gen *, const sg_slot_bind *, int);
    int (*launched)(sg_slot_gen *, CUstream, int);
    void (*destroy)(sg_slot_gen *);
    sg_slot_stats (*stats)(void);
} sg_prof_slot_ops;
void sg_prof_set_slot_ops(const sg_prof_slot_ops *ops);

/* How the policy finds the placed allocation holding an address
 * (sg_mem_view_* by default); unit tests substitute a fake. NULL restores
 * the default. */
typedef int (*sg_prof_find_fn)(CUdeviceptr p, sg_alloc_info *out);
void sg_prof_set_find(sg_prof_find_fn fn);

/* Bytes of STABLEGRAPH_VARIANT_MEMORY that no variant holds now (prof_rent.c). */
uint64_t sg_prof_mem_free(void);

/* A pointer position: a word of node `node`'s payload at byte `off`. */
typedef struct sg_prof_pos {
    uint32_t node, off;
} sg_prof_pos;

/* Calls fn for every pointer position of fp: each 8-byte-aligned word of a
 * kernel node's canonical argument payload whose value lies inside a placed
 * allocation, interior pointers included, and the srcDevice / dstDevice of a
 * memcpy node (device memory type) and the dst of a memset node when they
 * lie inside one. In node, then offset order. */
void sg_prof_scan(const sg_fp *fp,
                  void (*fn)(void *u, sg_prof_pos pos, uint64_t value, const sg_alloc_info *ai),
                  void *u);

#endif /* SG_PROFILED_H */
