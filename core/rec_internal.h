/*
 * core/rec_internal.h: what the recorder's files share: rec_graph.c (the
 * table of graph records, the explicit graph API, the checks and fetches of
 * the exec side), capture.c and cap_record.c (captures in progress and the
 * stream operations they record; cap_internal.h) and rec_marks.c (streams whose kernels take
 * attributes). Not for the rest of core/: record.h is the
 * interface. Locks: record.h.
 */
#ifndef SG_REC_INTERNAL_H
#define SG_REC_INTERNAL_H

#include "record.h"

#include "lock.h"
#include "streams.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern int sg_rec_oom;                 /* set by uthash on a failed add (rec_lock held) */
#define uthash_nonfatal_oom(elt) (sg_rec_oom = 1)
#include "hash.h"

extern sg_lock sg_rec_lock;
extern int sg_rec_on;                  /* written once at start-up */

/* One graph's record. */
typedef struct sg_grecord {
    CUgraph graph;            /* the table's key; NULL while its capture is in progress */
    UT_hash_handle hh;
    struct sg_grecord *next_building;  /* captures in progress (rec_graph.c's list) */
    sg_fp fp;                 /* origin SG_FP_RECORDED, nodes in creation order */
    CUgraphNode *handles;     /* fp.n used; NULL entries: not known (captured nodes) */
    size_t handles_cap;
    size_t unknown;           /* nodes whose handle is not known */
    sg_readback why;          /* SG_READBACK_NONE while the record is complete */
    int checked;              /* counts checked against the driver since the last change */
} sg_grecord;

/* A record for a capture in progress (not in the table, but spoiled with
 * the others by sg_rec_taint). NULL if out of memory. */
sg_grecord *sg_grecord_building(void);
/* The capture ended with graph g: the record joins the table (replacing any
 * record of g). A capture that failed: sg_grecord_drop. */
void sg_grecord_finish(sg_grecord *r, CUgraph g);
void sg_grecord_drop(sg_grecord *r);
/* Forgets g's record, if any (rec_lock held): g is read back until it is
 * recorded again. */
void sg_grecord_forget_locked(CUgraph g);
/* 1 if g has a record, spoiled or not (rec_lock held): the library saw it
 * made (cuGraphCreate, a capture, cuGraphClone) and sees its end. */
int sg_grecord_known_locked(CUgraph g);
/* Appends a node (handle NULL if not known); its description is the
 * caller's to write. NULL if out of memory (r is then spoiled). */
sg_fp_node *sg_grecord_add(sg_grecord *r, CUgraphNode handle);
/* sg_grecord_add(r, NULL), inline while r has room for the node and its
 * handle and the node's slot already has a payload buffer (a record's
 * entries are reused from one capture to the next): every captured node
 * comes this way. */
static inline sg_fp_node *sg_grecord_add_captured(sg_grecord *r)
{
    size_t i = r->fp.n;
    if (__builtin_expect(i >= r->handles_cap || i >= r->fp.nodes_cap || i >= UINT32_MAX ||
                         !r->fp.nodes[i].pay, 0))
        return sg_grecord_add(r, NULL);
    sg_fp_node *n = &r->fp.nodes[i];
    r->fp.n = i + 1;
    n->len = 0;
    n->pi = NULL;
    r->handles[i] = NULL;
    r->unknown++;
    return n;
}
/* Node i of r, captured, has this handle (the driver named it as the only
 * last node of the stream that added it): setters naming it change r, and
 * execs of r's graph know it. A handle that contradicts one already known
 * spoils r. */
void sg_grecord_learn(sg_grecord *r, uint32_t i, CUgraphNode handle);
/* A malloc'd copy of r's node handles (NULL entries: not known), or NULL if
 * none is known or memory runs out (rec_lock held). */
static inline CUgraphNode *sg_grecord_handles(const sg_grecord *r)
{
    if (r->unknown >= r->fp.n) return NULL;
    CUgraphNode *h = malloc(r->fp.n * sizeof *h);
    if (h) memcpy(h, r->handles, r->fp.n * sizeof *h);
    return h;
}
/* r no longer describes its graph (the first reason stays). */
void sg_grecord_spoil(sg_grecord *r, sg_readback why);
/* Appends an edge between node indices; spoils r if out of memory (inline:
 * every captured node has one). */
static inline void sg_grecord_edge(sg_grecord *r, uint32_t from, uint32_t to, const void *data8)
{
    if (sg_fp_push_edge(&r->fp, from, to, data8) != 0) sg_grecord_spoil(r, SG_READBACK_OUT_OF_MEMORY);
}
/* A change the recorder cannot attribute to a graph: spoils every record
 * that has nodes of unknown handle, and every capture in progress. */
void sg_rec_taint(void);

/* Describes a memset / memcpy node from a stream operation or node
 * parameters. 0, or -1 if out of memory. */
int sg_rec_memset_desc(sg_fp_node *n, CUdeviceptr dst, size_t pitch, unsigned value, unsigned elem,
                       size_t width, size_t height, CUcontext ctx);
int sg_rec_copy2d_desc(sg_fp_node *n, const CUDA_MEMCPY2D *c, CUcontext ctx);
/* Describes the node a captured memset or copy (gb) adds; 0, or -1 if out
 * of memory (capture.c). */
int sg_rec_op_desc(sg_fp_node *n, const sg_gb *gb);

/* rec_marks.c: the streams whose captured kernels take launch attributes
 * the recorder does not model (rec_lock held). sg_rec_marked: why a capture
 * on (or joined by) stream key cannot be recorded, SG_READBACK_NONE if it
 * can; sg_rec_mark: why is STREAM_PRIORITY or STREAM_ATTRIBUTES (a mark it
 * cannot keep, out of memory, marks every stream); sg_rec_unmark: the
 * stream is gone; sg_rec_marks_reset: forgets them all (tests). */
sg_readback sg_rec_marked(sg_stream_id key);
void sg_rec_mark(sg_stream_id key, sg_readback why);
void sg_rec_unmark(sg_stream_id key);
void sg_rec_marks_reset(void);

/* rec_audit.c (STABLEGRAPH_AUDIT_RECORDS): sg_rec_audit_keep copies record
 * r for the audit (rec_lock held; nothing when auditing is off or memory
 * runs out; a->on says whether it did, and the caller sets it to 0 where it
 * does not call it); sg_rec_audit_run, after rec_lock is dropped, compares the copy
 * with graph g read back, counts and logs a difference, and frees the copy. */
typedef struct sg_rec_audit {
    int on;
    sg_fp fp;
    CUgraphNode *handles;
} sg_rec_audit;
void sg_rec_audit_keep(sg_rec_audit *a, const sg_grecord *r);
void sg_rec_audit_run(sg_rec_audit *a, CUgraph g);
void sg_rec_audit_reset(void);
void sg_rec_audit_init(int on);

/* Frees every record (tests). */
void sg_rec_graphs_reset(void);

/* Explicit graph calls (rec_graph.c), rec_lock not held: route(c) runs
 * first; on success the record follows. */
CUresult sg_rec_graph_op(const sg_call *c, CUresult (*route)(const sg_call *));

#endif /* SG_REC_INTERNAL_H */
