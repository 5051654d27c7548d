/*
 * core/profiled.h: the skip_profiled policy (profiled.c): per-exec profiling,
 * the decision, and exec variants ("generations") with pointer aliasing
 * through slots (slots.h). graphs.c owns the exec records and calls in here
 * with the record's mutex held; see profiled.c for the design.
 *
 * States of one exec (sg_prof):
 *   PROFILING    its first STABLEGRAPH_PROFILE_STEPS launches: updates are
 *                handled as under skip_temp (graphs.c), every forwarded
 *                update is timed, and each launch records where the logical
 *                state's pointers are and what they hold;
 *   PLAIN        decided: nothing varied that generations could serve (or a
 *                fallback): skip_temp behaviour for the exec's life;
 *   GENERATIONS  decided: updates whose differences are only kernel
 *                argument bytes and memcpy / memset addresses inside placed
 *                allocations of the exec's context are accepted without the
 *                driver; each launch picks (or makes) an exec variant whose
 *                driver state is the program's logical state translated
 *                through its slots. Anything else demotes the exec back to
 *                PROFILING (its own exec restored to the program's state).
 * Under always_update the same state machine runs without acting (no clone,
 * no variant, no slot) so that would_skip_profiled counts what skip_profiled
 * would have answered without the driver.
 *
 * Thread safety: an sg_prof belongs to one exec record and is used only with
 * that record's mutex held (graphs.c). Module settings (sg_prof_init,
 * sg_prof_set_slot_ops) are written before any concurrent use.
 */
#ifndef SG_PROFILED_H
#define SG_PROFILED_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "core.h"
#include "fingerprint.h"
#include "memory.h"
#include "slots.h"

typedef struct sg_prof sg_prof;

enum { SG_PROF_PROFILING, SG_PROF_PLAIN, SG_PROF_GENERATIONS };

/* Reads the skip_profiled settings. Called once by sg_graph_init. */
void sg_prof_init(const sg_config *cfg);

/* The slot API profiled.c uses (slots.h by default); unit tests substitute
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

/* How profiled.c finds the placed allocation holding an address
 * (sg_mem_view_* by default); unit tests substitute a fake. NULL restores
 * the default. */
typedef int (*sg_prof_find_fn)(CUdeviceptr p, sg_alloc_info *out);
void sg_prof_set_find(sg_prof_find_fn fn);

/* ------------------------------------------------------------ pointer discovery */

/* A pointer position: a word of node `node`'s payload at byte `off`. */
typedef struct sg_prof_pos {
    uint32_t node, off;
} sg_prof_pos;

/* Calls fn for every pointer position of fp (section C of the design):
 * each 8-byte-aligned word of a kernel node's canonical argument payload
 * whose value lies inside a placed allocation, interior pointers included,
 * and the srcDevice / dstDevice of a memcpy node (device memory type) and the
 * dst of a memset node when they lie inside one. In node, then offset order. */
void sg_prof_scan(const sg_fp *fp,
                  void (*fn)(void *u, sg_prof_pos pos, uint64_t value, const sg_alloc_info *ai),
                  void *u);

/* ------------------------------------------------------------ life cycle */

/* A new profile for exec, whose driver state is fp (graph's nodes, in fp's
 * order, are `nodes`). With clone (skip_profiled), keeps a clone of graph
 * (cuGraphClone) for instantiating variants; without (always_update), only
 * simulates. NULL if out of memory. */
sg_prof *sg_prof_new(CUgraphExec exec, CUgraph graph, const sg_fp *fp, const CUgraphNode *nodes,
                     int clone);

/* Destroys the variants, slots and clone (waiting for slots in use), and
 * frees p. */
void sg_prof_free(sg_prof *p);
/* The context the exec belongs to was destroyed (the driver destroyed the
 * exec, its variants and their memory with it): forgets the variants' driver
 * execs so that they are never destroyed again (the driver may hand their
 * handles out anew), and returns 1; 0 if p belongs to another context. */
int sg_prof_ctx_gone(sg_prof *p, CUcontext ctx);

int sg_prof_state(const sg_prof *p);

/* ------------------------------------------------------------ updates (graphs.c) */

/* Whether a state change from a to b (whole graph) or old to nw (one node;
 * attributes are not compared) consists only of differences GENERATIONS mode
 * accepts without the driver: same topology, functions, dimensions,
 * attributes; kernel argument bytes may differ; memcpy / memset nodes may
 * differ only in device addresses that lie in placed allocations of the
 * exec's context. */
int sg_prof_lazy_ok(const sg_prof *p, const sg_fp *a, const sg_fp *b);
int sg_prof_lazy_node_ok(const sg_prof *p, const sg_fp_node *old, const sg_fp_node *nw);

/* GENERATIONS: the logical state L is about to become b (whole graph; call
 * before swapping) / node i of L was just replaced. Marks what changed. */
void sg_prof_accept_graph(sg_prof *p, const sg_fp *L, const sg_fp *b);
void sg_prof_accept_node(sg_prof *p, size_t i);
/* GENERATIONS: after L was updated (sg_fp_swap, node copy), compares the
 * changed nodes with every generation now, so that this work is part of the
 * accepted update and the launch that follows only checks its buffers. */
void sg_prof_settle(sg_prof *p, const sg_fp *L);

/* A forwarded update of a PROFILING exec took ns nanoseconds. */
void sg_prof_timed_update(sg_prof *p, unsigned long long ns);

/* An update that GENERATIONS mode cannot accept arrived (or the exec's
 * content became unknown: L NULL): brings the program's exec back to the
 * logical state L (only if it does not hold it already; always, even before
 * the program's own whole-graph update, because that update may fail and
 * leave the exec as it was), destroys the variants and goes back to
 * PROFILING. The restore tries three independent paths (profiled.c,
 * "Restoring the program's exec"): one cuGraphExecUpdate from the clone set
 * through the per-type node setters; per-node exec updates of the nodes
 * that differ; the clone set through cuGraphNodeSetParams. Returns
 * CUDA_SUCCESS, or, when every path failed, an error the program's own call
 * could have got (CUDA_ERROR_OUT_OF_MEMORY, or the driver's error when it
 * says the context is unusable): the exec is then PLAIN and "X_0 stale":
 * it keeps generation 0's slots, and no launch runs it before a restore
 * (retried at each launch and each demote) or a forwarded whole-graph
 * update of the program has brought it to the program's state. Also called
 * outside GENERATIONS: retries the restore of a stale X_0. */
CUresult sg_prof_demote(sg_prof *p, const sg_fp *L);

/* Whether the program's exec is stale (see sg_prof_demote). */
int sg_prof_x0_stale(const sg_prof *p);

/* A program's update of the exec was forwarded and succeeded: whole graph
 * (i < 0; the exec now holds what the program asked) or node i, which now
 * holds L's node i (L: the record after the update, NULL if unknown). */
void sg_prof_forwarded(sg_prof *p, const sg_fp *L, long i);

/* ------------------------------------------------------------ launch (graphs.c) */

/* Handles a launch of the exec: L is the logical state (NULL if unknown).
 * PROFILING records and forwards; the launch after the last profiled one
 * decides; PLAIN forwards; GENERATIONS picks a variant and launches it with
 * the program's launch variant. A stale program's exec (sg_prof_demote) is
 * restored first, or not launched at all (the restore's error, as
 * sg_prof_demote returns it). Returns what the program gets. */
CUresult sg_prof_launch(sg_prof *p, const sg_fp *L, const sg_call *c);

/* Frees nothing: the clock (CLOCK_MONOTONIC) in nanoseconds. */
unsigned long long sg_prof_now_ns(void);

#endif /* SG_PROFILED_H */
