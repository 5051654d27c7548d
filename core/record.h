/*
 * core/record.h: graph fingerprints recorded while the program builds its
 * graphs (issue 11), so that deciding an update costs no driver call per
 * node.
 *
 * A record is the fingerprint (fingerprint.h, origin SG_FP_RECORDED) of one
 * CUgraph, built from the calls that made it:
 *   - stream capture (capture.c): every operation on a capturing stream that
 *     adds a node (kernel launches, async memsets and 1D/2D/3D copies), with
 *     the dependencies the driver gives it (the stream's last nodes; events
 *     recorded and waited on carry them from stream to stream, so fork and
 *     join across streams are followed);
 *   - the explicit graph API (rec_graph.c): cuGraphCreate, the kernel,
 *     memcpy, memset and empty nodes (cuGraphAdd*Node, cuGraphAddNode of
 *     those types), their setters, cuGraphKernelNodeSetAttribute,
 *     cuGraphAddDependencies, cuGraphClone of a recorded graph.
 * Nodes are numbered in creation order. A captured node's handle becomes
 * known when the program asks cuStreamGetCaptureInfo_v2/_v3 for the stream's
 * last nodes and the driver names one, the record having one there too
 * (capture.c); setters naming it then change the record like an explicit
 * node's. Kernels come from cuLaunchKernel, cuLaunchCooperativeKernel (the
 * cooperative attribute) and cuLaunchKernelEx (its attributes, those a node
 * keeps; any other id makes the record incomplete). A captured kernel also
 * takes its stream's launch attributes, which a record does not read: it
 * holds them at their defaults, and a capture on (or joined by) a stream made
 * with a priority or given attributes is not recorded (rec_marks.c).
 *
 * A record is incomplete (and the decision reads the graph back through the
 * driver, as before records existed, counted in the report with the reason)
 * when anything it does not model reached the graph: a stream operation of
 * another kind during the capture (host functions, value waits and writes,
 * external events, cuStreamUpdateCaptureDependencies, ...), a capture into an
 * existing graph, a node type or attribute it does not model, a node handle
 * it does not know (a setter naming a captured node whose handle was never
 * learned taints every record that has such nodes), and every other call
 * that changes a graph or one of its nodes (hooks.def hooks them all:
 * dependency removal, event, child-graph, semaphore and batch memop nodes,
 * attribute copies; a change made after the counts were checked would
 * otherwise go unseen). Before a record is
 * first used it is checked against the driver with one node count and one
 * edge count query (cuGraphGetNodes, cuGraphGetEdges_v2, no arrays): a node
 * or edge the record missed makes it incomplete.
 *
 * Thread safety: one lock (rec_lock, rec_internal.h; a futex lock, lock.h,
 * as every captured node takes it) guards every record, the
 * captures in progress, the streams and events they involve and the node
 * table. It is held across the forward of an asynchronous operation on a
 * capturing stream (which adds a node and never waits on the device), so that
 * the record's order is the driver's; never across any other driver call
 * that can wait. It is taken after a graph exec record's lock and before the
 * fingerprint cache's.
 */
#ifndef SG_RECORD_H
#define SG_RECORD_H

#include "call.h"
#include "fingerprint.h"

/* Why a decision could not use a record: X(ENUM, "report name"). */
#define SG_READBACK_LIST(X)                                                   \
    X(NOT_RECORDED, "not_recorded")                                           \
    X(UNMODELED_CALL, "unmodeled_call")                                       \
    X(CAPTURE_TO_GRAPH, "capture_to_graph")                                   \
    X(STREAM_PRIORITY, "stream_priority")                                     \
    X(STREAM_ATTRIBUTES, "stream_attributes")                                 \
    X(UNKNOWN_NODE, "unknown_node")                                           \
    X(COUNT_MISMATCH, "count_mismatch")                                       \
    X(MODULE_UNLOADED, "module_unloaded")                                     \
    X(NO_HANDLES, "no_node_handles")                                          \
    X(OUT_OF_MEMORY, "out_of_memory")
#define SG_READBACK_ITEM_(s, n) SG_READBACK_##s,
typedef enum { SG_READBACK_NONE = -1, SG_READBACK_LIST(SG_READBACK_ITEM_) SG_READBACK_COUNT } sg_readback;
extern const char *const sg_readback_names[SG_READBACK_COUNT];

/* Handles SG_CALL_CAPTURE_BEGIN / END and SG_CALL_KERNEL, and every call
 * with a gb facet: route(c) does what the call would do without the
 * recorder (the router's own handling) and is called exactly once. */
CUresult sg_rec_call(const sg_call *c, CUresult (*route)(const sg_call *));

/* The graph goes: called before cuGraphDestroy is forwarded. Once the
 * driver frees the handle, another thread's cuGraphCreate may get the value
 * and record its graph, which a forget made after would take (its execs'
 * updates then read back, not comparable with records; round 40,
 * windowrec). A refused destroy (a graph being captured) loses its record:
 * the graph is read back until a capture or a build records it again. */
void sg_rec_graph_gone(CUgraph g);
/* A stream is being destroyed (before the driver destroys it): 1 if a
 * capture in progress began on it (its record is dropped), else 0. */
int sg_rec_stream_gone(CUstream s);
/* A stream on which a capture began (sg_rec_stream_gone said 1) was
 * destroyed: that capture no longer counts as in progress. */
void sg_capture_abandoned(void);
/* A context may be destroyed by the call about to be forwarded (cuCtxDestroy,
 * cuDevicePrimaryCtxRelease / Reset): every capture in progress learns its
 * context now, while its stream lives, so that the teardown ends it. */
void sg_rec_ctx_may_go(void);

/* The record of graph g, for a decision: copies it into *fp (buffers
 * reused) and, if handles is not NULL and some node handle is known, a
 * malloc'd array of them into *handles (NULL entries: not known; *handles
 * NULL if none is). Returns
 * SG_READBACK_NONE, or why there is none (fp is then unusable). */
sg_readback sg_rec_fetch(CUgraph g, sg_fp *fp, CUgraphNode **handles);

/* Compares fp (the state of an exec, from a record) with the record of
 * graph g in one pass: *reason is sg_fp_compare's answer and d holds the
 * record's nodes that differ (d->valid: fp with d applied is the record).
 * Returns SG_READBACK_NONE if the record could be used (d may still be
 * invalid: the caller then fetches it whole), else why not. */
sg_readback sg_rec_delta(CUgraph g, const sg_fp *fp, sg_fp_delta *d, int *reason);

/* Counts a decision made by reading a graph back, and why (report). */
void sg_rec_count_readback(sg_readback why);
/* The counts so far (report): SG_READBACK_COUNT of them. */
void sg_rec_readback_counts(unsigned long *out);
/* Decisions made on a record (report). */
unsigned long sg_rec_used(void);

/* STABLEGRAPH_AUDIT_RECORDS (rec_audit.c): the records audited against a
 * read-back, and those that differed from it (report). */
void sg_rec_audit_counts(unsigned long *audited, unsigned long *mismatches);

/* Start-up (recording on: a policy that decides updates; audit:
 * STABLEGRAPH_AUDIT_RECORDS), fork, tests. */
void sg_rec_init(int on, int audit);
void sg_rec_atfork(int phase);
void sg_rec_reset(void);

#endif /* SG_RECORD_H */
