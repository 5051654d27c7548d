/*
 * core/ipc.h: legacy CUDA IPC (cuIpcGetMemHandle, cuIpcOpenMemHandle,
 * cuIpcCloseMemHandle) on memory the library placed (ipc.c), and the way
 * the physical chunks' descriptors travel between processes (ipc_wire.c).
 *
 * Legacy IPC does not work on VMM memory, and placed blocks are VMM memory:
 * the library's chunks are one granule each, created shareable as POSIX file
 * descriptors (vmm.c) when the device supports it.
 *
 *   Exporter (cuIpcGetMemHandle on any address of a placed block): records
 *   the block's chunks (mem_query.c lists them: sg_mem_block_handles) under
 *   a random 64-bit nonce and hands out a CUipcMemHandle that names them: magic,
 *   version, the exporter's pid and server tag, the nonce, the block's size
 *   and its offset in its first chunk, and a checksum. The same block gives
 *   the same handle; a freed block's export goes with it (the memory module
 *   calls sg_ipc_block_gone, sg_ipc_ctx_gone). A server thread, started by
 *   the first export, answers requests on an abstract unix socket named by
 *   the pid and tag: for a known nonce and a peer of the same user
 *   (SO_PEERCRED) it exports each chunk with cuMemExportToShareableHandle
 *   and sends the descriptors (SCM_RIGHTS), in batches, then closes its
 *   copies: the exporter keeps no descriptor open between requests.
 *
 *   Importer (cuIpcOpenMemHandle, cuIpcOpenMemHandle_v2): a handle without
 *   the magic goes to the driver unchanged. Ours: fetch the descriptors,
 *   import each (cuMemImportFromShareableHandle), map them in order into a
 *   new reservation, grant access to the current device (and its peers with
 *   CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), return the block's base there.
 *   cuIpcCloseMemHandle of that base unmaps; any other address goes to the
 *   driver.
 *
 * Why a socket and not pidfd_getfd(2): pidfd_getfd needs a ptrace "attach"
 * permission over the exporter (PTRACE_MODE_ATTACH_REALCREDS): same user
 * and, under Yama ptrace_scope 1 (Ubuntu's default), the importer must be
 * an ancestor of the exporter (or named by it with PR_SET_PTRACER); scope 2
 * needs CAP_SYS_PTRACE, scope 3 forbids it; Docker's and containerd's
 * default seccomp profiles allow the call only with CAP_SYS_PTRACE. Sibling
 * ranks (torchrun) or a server process (vLLM, SGLang) would fail there. A
 * socket needs neither: same user and same network namespace (abstract
 * socket names are per namespace).
 *
 * The driver's rules kept (cuda.h): Flags 0 or LAZY_ENABLE_PEER_ACCESS
 * (else CUDA_ERROR_INVALID_VALUE); opening in the exporting process:
 * CUDA_ERROR_INVALID_CONTEXT; no current context: CUDA_ERROR_INVALID_CONTEXT;
 * opening a handle the current context already opened returns the same
 * address and counts a reference, each close drops one, the last unmaps;
 * the memory stays valid in the importer until then (its imported handles
 * hold it), whatever the exporter does. A handle that cannot be opened
 * (exporter gone, block freed, another user, no library in the exporter):
 * CUDA_ERROR_INVALID_VALUE and one log line naming the cause; a VMM call
 * failing on the importer's side: CUDA_ERROR_MAP_FAILED.
 *
 * What the importer's pointer queries answer (mem_query.c, through
 * sg_ipc_lookup): the range, context, ids and attributes of a cuMemAlloc
 * block (as for placed memory), except IS_LEGACY_CUDA_IPC_CAPABLE = 0;
 * cuMemRetainAllocationHandle / cuMemGetAccess: CUDA_ERROR_INVALID_VALUE;
 * copies and memsets are range-checked against the block (its mapped
 * chunks reach past it).
 *
 * Locks: ipc_lock (ipc.c) guards the export and import tables; nothing else
 * is taken under it. The server thread makes its cuMemExportToShareableHandle
 * calls under it (they do not wait on the device), so that a block's chunks
 * cannot be released while exported; VMM calls of imports and closes run
 * with no lock held.
 */
#ifndef SG_IPC_H
#define SG_IPC_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "call.h"
#include "memory.h"

/* cuIpcGetMemHandle on the live placed block b (mem_query.c), whose n
 * chunks are chunk[] (sg_mem_block_handles; n = 0 if they could not be
 * had); first: the first time this block was asked (failures are logged
 * once per block). CUDA_SUCCESS and *out, or CUDA_ERROR_INVALID_VALUE. The
 * caller checks afterwards that b is still live (a free racing with the
 * export may have ended it before it was recorded) and ends the export
 * with sg_ipc_block_gone if not. ipc.c calls nothing of the memory code:
 * the memory code calls it. */
CUresult sg_ipc_export(CUipcMemHandle *out, const sg_alloc_info *b, const sg_mem_handle *chunk,
                       size_t n, int first);

/* The memory module: block `id` left the registry (freed), before its
 * range is reused; every block of ctx left it (context teardown), before
 * its chunks are released. Ends their exports (and ctx's imports). */
void sg_ipc_block_gone(uint64_t id);
void sg_ipc_ctx_gone(CUcontext ctx);

/* Handles IPC_OPEN and IPC_CLOSE calls; returns what the program gets. */
CUresult sg_ipc_call(const sg_call *c);

/* 1 and *out if p lies in a block opened here from another process's
 * handle; 0 if p lies in such a block's reservation but outside the block;
 * -1 otherwise. Thread-safe; no driver call. */
int sg_ipc_lookup(CUdeviceptr p, sg_alloc_info *out);

/* Sets CU_POINTER_ATTRIBUTE_SYNC_MEMOPS of the opened block containing p
 * if it is still block id: 1, else 0 (closed meanwhile). */
int sg_ipc_set_sync(CUdeviceptr p, uint64_t id, int on);

/* 1 if any block is open here (a lock-free hint for the range checks). */
int sg_ipc_opened(void);

/* Fork: 0 prepare (lock), 1 parent, 2 child (the child owns no export and
 * runs no server). */
void sg_ipc_atfork(int phase);
/* Drops every export and import (unit tests). */
void sg_ipc_reset(void);

/* ------------------------------------------------ the wire (ipc_wire.c) */

/* What a handle carries. */
typedef struct sg_ipc_wire {
    uint32_t pid;            /* the exporter */
    uint64_t tag;            /* its server's tag (names the socket) */
    uint64_t nonce;          /* the export */
    uint64_t size;           /* the block's bytes */
    uint64_t offset;         /* its base - the start of its first chunk */
} sg_ipc_wire;

/* Writes w into h (the unused bytes zero). */
void sg_ipc_encode(const sg_ipc_wire *w, CUipcMemHandle *h);
/* 0 and *w if h is one of ours (magic, version, checksum), else -1. */
int sg_ipc_decode(const CUipcMemHandle *h, sg_ipc_wire *w);

/* How an export's chunks lie: n chunks of chunk_size bytes, in address
 * order, the block at offset in the first. */
typedef struct sg_ipc_layout {
    uint64_t n, chunk_size, size, offset;
} sg_ipc_layout;

/* What the server asks the exporter (ipc.c), from its own thread. Both
 * return 0, or -1 if the export `nonce` is unknown (or gone); export fills
 * fds[0..n) with new descriptors of chunks [first, first + n) (which the
 * server closes after sending) or, failing, closes what it made. */
typedef struct sg_ipc_source {
    int (*layout)(uint64_t nonce, sg_ipc_layout *l);
    int (*export_fds)(uint64_t nonce, size_t first, size_t n, int *fds);
} sg_ipc_source;

/* 64 random bits (getrandom; a clock-based value if it fails). */
uint64_t sg_ipc_random(void);

/* Most descriptors in one message. */
#define SG_IPC_BATCH 64

/* Starts the server once (later calls only return its tag): 0 and *tag,
 * or -1 and *why. */
int sg_ipc_serve(const sg_ipc_source *src, uint64_t *tag, const char **why);

/* The importer's side of one request for export w: on_layout once (the
 * layout, already checked against w), then on_fd for each chunk in order
 * (the callee owns fd, closed or not); either may stop the fetch by
 * returning -1 (*why is then NULL: the callback knows why). 0 once every
 * descriptor was handed over; -1 and *why. */
int sg_ipc_fetch(const sg_ipc_wire *w, int (*on_layout)(void *u, const sg_ipc_layout *l),
                 int (*on_fd)(void *u, size_t i, int fd), void *u, const char **why);

/* Fork: 0 prepare (lock), 1 parent, 2 child: no server there (the
 * parent's thread did not come along); the next export starts one with a
 * new tag. */
void sg_ipc_wire_atfork(int phase);

#endif /* SG_IPC_H */
