/*
 * core/graphs.h: graph execs (graphs.c, fingerprint.c).
 *
 * Keeps, per graph exec, a record of what the driver's exec holds (topology,
 * node kinds, functions, launch dimensions, shared memory, attributes,
 * argument bytes, memcpy and memset operands), so that an update that would
 * leave the exec exactly as it is can be answered without the driver under
 * skip_temp and skip_profiled, and counted as "would skip" under
 * always_update. Counts launches and updates per exec for the report.
 */
#ifndef SG_GRAPHS_H
#define SG_GRAPHS_H

#include <cuda.h>

#include "config.h"
#include "core.h"

/* Reads what it needs from the configuration. Called once by sg_core_init. */
void sg_graph_init(const sg_config *cfg);

/* Handles INSTANTIATE, LAUNCH, UPDATE_GRAPH, UPDATE_KERNEL, UPDATE_NODE,
 * EXEC_DIRTY and EXEC_DESTROY calls; returns what the program gets. */
CUresult sg_graph_call(const sg_call *c);

/* Context ctx was destroyed: drops the records of its execs (the driver
 * destroyed them) without destroying anything through the driver. */
void sg_graph_ctx_gone(CUcontext ctx);

#endif /* SG_GRAPHS_H */
