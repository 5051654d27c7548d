/*
 * tests/unit/test_ipc.c: core/ipc.c and core/ipc_wire.c (legacy IPC of
 * placed memory) against the fake VMM of fake_vmm.h, in two processes: the
 * exporter is a fork()ed child of this test (it starts the server thread;
 * the test process itself never does, so each child starts from a clean
 * state), the importer is the test process.
 *
 *   codec: round trip; not ours (zeroes, another magic, version, a changed
 *     byte: the checksum).
 *   wire: a fetch of 130 chunks (three batches) in order; an unknown
 *     export; a handle whose size disagrees; an export failing in its
 *     second batch; an importer callback refusing (the rest closed, no
 *     descriptor leaks); a dead exporter; the right pid with another tag
 *     (a reused pid); a socket of that name held by another process; a peer
 *     of another user (refused; run as root only).
 *   ipc.c: chunks made shareable; cuIpcGetMemHandle of placed blocks (the
 *     same handle twice, from an interior pointer); opening in another
 *     process: each chunk imported and mapped in order at the block's
 *     offset, access for the current device (and its peer with
 *     LAZY_ENABLE_PEER_ACCESS), reference counting (same address, last
 *     close unmaps, a third close goes to the driver), pointer queries and
 *     range checks on the opened block, the driver's errors (exporting process, flags,
 *     NULL, no context), a handle that is not ours forwarded, a freed block
 *     and a gone exporter (INVALID_VALUE), a failing cuMemMap (nothing
 *     left mapped or reserved), the importer's context teardown; fork (the
 *     child makes its own export, the parent's still opens); a device
 *     without shareable memory, one that refuses it (placement goes on), a
 *     stream-ordered block (the driver's answer for pool memory).
 */
#include "check.h"
#include "core/contexts.h"
#include "core/ipc.h"
#include "core/memory.h"
#include "core/policy.h"
#include "fake_vmm.h"

#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------ helpers */

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

/* A memfd holding the 8-byte value v (what the fakes export). */
static int memfd_of(uint64_t v)
{
    int fd = memfd_create("test-ipc", MFD_CLOEXEC);
    if (fd >= 0 && pwrite(fd, &v, sizeof v, 0) != (ssize_t)sizeof v) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static uint64_t value_of(int fd)
{
    uint64_t v = 0;
    return pread(fd, &v, sizeof v, 0) == (ssize_t)sizeof v ? v : 0;
}

/* An exporter child: runs fn(u, to_parent, from_parent) and exits with its
 * result; the parent reads what it writes from *rd and says when to end by
 * writing or closing *wr. */
typedef struct child {
    pid_t pid;
    int rd, wr;
} child;

static child fork_child(int (*fn)(void *u, int out, int in), void *u)
{
    int up[2], down[2];
    child c = { -1, -1, -1 };
    if (pipe(up) != 0 || pipe(down) != 0) return c;
    fflush(stdout);
    c.pid = fork();
    if (c.pid == 0) {
        close(up[0]);
        close(down[1]);
        _exit(fn(u, up[1], down[0]));
    }
    close(up[1]);
    close(down[0]);
    c.rd = up[0];
    c.wr = down[1];
    return c;
}

/* Ends the child (closing its pipe) and returns its exit status. */
static int end_child(child *c)
{
    int st = -1;
    close(c->wr);
    close(c->rd);
    if (c->pid > 0) waitpid(c->pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

static int read_all(int fd, void *buf, size_t n)
{
    for (size_t k = 0; k < n;) {
        ssize_t r = read(fd, (char *)buf + k, n - k);
        if (r <= 0) return -1;
        k += (size_t)r;
    }
    return 0;
}

static void wait_parent(int in)
{
    char b;
    while (read(in, &b, 1) > 0) {}
}

/* ------------------------------------------------------------ codec */

TEST(codec)
{
    sg_ipc_wire w = { 4242, 0x1122334455667788ull, 0xa5a5a5a5deadbeefull, 4096, 0x3000 }, r;
    CUipcMemHandle h, zero;
    sg_ipc_encode(&w, &h);
    CHECK_EQ(sg_ipc_decode(&h, &r), 0);
    CHECK(memcmp(&w, &r, sizeof w) == 0);
    memset(&zero, 0, sizeof zero);
    CHECK_EQ(sg_ipc_decode(&zero, &r), -1);
    for (size_t i = 0; i < 56; i++) {          /* any byte of magic, version, fields, checksum */
        CUipcMemHandle bad = h;
        bad.reserved[i] ^= 0x40;
        if (sg_ipc_decode(&bad, &r) != -1) {
            CHECK(!"a changed byte was accepted");
            printf("#   byte %zu\n", i);
        }
    }
    CUipcMemHandle tail = h;
    tail.reserved[60] = 1;                     /* the unused bytes are not checked */
    CHECK_EQ(sg_ipc_decode(&tail, &r), 0);
}

/* ------------------------------------------------------------ wire */

/* The wire exporter's exports: nonce 1: 130 chunks; nonce 2: 3 chunks whose
 * export fails from chunk 64 on (its second batch); anything else unknown. */
static int w_layout(uint64_t nonce, sg_ipc_layout *l)
{
    if (nonce == 1) *l = (sg_ipc_layout){ 130, FV_G, 129 * FV_G, 4096 };
    else if (nonce == 2) *l = (sg_ipc_layout){ 100, FV_G, 99 * FV_G, 0 };
    else return -1;
    return 0;
}

static int w_export(uint64_t nonce, size_t first, size_t n, int *fds)
{
    if (nonce == 2 && first >= 64) return -1;
    for (size_t i = 0; i < n; i++) fds[i] = memfd_of(1000 + first + i);
    return 0;
}

static int wire_exporter(void *u, int out, int in)
{
    (void)u;
    static const sg_ipc_source src = { w_layout, w_export };
    uint64_t tag = 0;
    const char *why = "";
    if (sg_ipc_serve(&src, &tag, &why) != 0) return 1;
    if (write(out, &tag, sizeof tag) != (ssize_t)sizeof tag) return 2;
    wait_parent(in);
    return 0;
}

typedef struct got {
    sg_ipc_layout l;
    size_t n, bad, refuse_at;
} got;

static int g_layout(void *u, const sg_ipc_layout *l)
{
    ((got *)u)->l = *l;
    return 0;
}

static int g_fd(void *u, size_t i, int fd)
{
    got *g = u;
    g->bad += value_of(fd) != 1000 + i || i != g->n;
    close(fd);
    if (g->refuse_at && i == g->refuse_at) return -1;
    g->n++;
    return 0;
}

static int fetch(const sg_ipc_wire *w, got *g, const char **why)
{
    memset(g, 0, sizeof *g);
    *why = "unset";
    return sg_ipc_fetch(w, g_layout, g_fd, g, why);
}

TEST(wire)
{
    child c = fork_child(wire_exporter, NULL);
    uint64_t tag = 0;
    CHECK_EQ(read_all(c.rd, &tag, sizeof tag), 0);
    sg_ipc_wire w = { (uint32_t)c.pid, tag, 1, 129 * FV_G, 4096 };
    got g;
    const char *why;
    int fds0 = open_fds();
    CHECK_EQ(fetch(&w, &g, &why), 0);
    CHECK_EQ(g.n, 130);
    CHECK_EQ(g.bad, 0);
    CHECK_EQ(g.l.chunk_size, FV_G);
    CHECK_EQ(g.l.offset, 4096);
    /* the importer stops at chunk 70: the rest are closed */
    memset(&g, 0, sizeof g);
    g.refuse_at = 70;
    why = "unset";
    CHECK_EQ(sg_ipc_fetch(&w, g_layout, g_fd, &g, &why), -1);
    CHECK(why == NULL);
    CHECK_EQ(g.n, 70);
    CHECK_EQ(open_fds(), fds0);
    /* a size that disagrees with the exporter's */
    sg_ipc_wire other = w;
    other.size -= 1;
    CHECK_EQ(fetch(&other, &g, &why), -1);
    CHECK(why && strstr(why, "does not match"));
    /* an unknown export */
    other = w;
    other.nonce = 7;
    CHECK_EQ(fetch(&other, &g, &why), -1);
    CHECK(why && strstr(why, "no longer has"));
    /* an export failing in its second batch: the first one came */
    sg_ipc_wire two = { (uint32_t)c.pid, tag, 2, 99 * FV_G, 0 };
    CHECK_EQ(fetch(&two, &g, &why), -1);
    CHECK(why && strstr(why, "could not export"));
    CHECK_EQ(g.n, 64);
    CHECK_EQ(open_fds(), fds0);
    /* the right pid with another tag: as after the pid was reused */
    other = w;
    other.tag ^= 1;
    CHECK_EQ(fetch(&other, &g, &why), -1);
    CHECK(why && strstr(why, "no such exporter"));
    /* a peer of another user is refused */
    if (geteuid() == 0) {
        fflush(stdout);
        pid_t p = fork();
        if (p == 0) {
            got g2;
            const char *why2;
            if (setuid(65534) != 0) _exit(3);
            _exit(fetch(&w, &g2, &why2) == -1 && why2 && strstr(why2, "another user") ? 0 : 1);
        }
        int st = -1;
        waitpid(p, &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    } else {
        printf("# not root: the other-user case is not run\n");
    }
    CHECK_EQ(end_child(&c), 0);
    /* the exporter is gone */
    CHECK_EQ(fetch(&w, &g, &why), -1);
    CHECK(why && strstr(why, "no such exporter"));
    CHECK_EQ(open_fds(), fds0 - 2);            /* less the child's two pipes */
}

/* A process listening under the socket name of (pid, tag) that is not pid. */
static int squatter(void *u, int out, int in)
{
    const sg_ipc_wire *w = u;
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "stablegraph-ipc-%u-%016llx",
                     (unsigned)w->pid, (unsigned long long)w->tag);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) != 0 ||
        listen(fd, 4) != 0)
        return 1;
    char ok = 1;
    if (write(out, &ok, 1) != 1) return 2;
    wait_parent(in);
    return 0;
}

TEST(wire_squatter)
{
    sg_ipc_wire w = { (uint32_t)getpid(), 0x5151, 1, FV_G, 0 };
    child c = fork_child(squatter, &w);
    char ok = 0;
    CHECK_EQ(read_all(c.rd, &ok, 1), 0);
    got g;
    const char *why;
    CHECK_EQ(fetch(&w, &g, &why), -1);
    CHECK(why && strstr(why, "another process"));
    CHECK_EQ(end_child(&c), 0);
}

/* ------------------------------------------------------------ ipc.c */

static struct {
    CUmemAllocationHandleType created_types;   /* what cuMemCreate was asked for last */
    CUmemAllocationHandleType types[64];       /* ... for each handle (by value % 64) */
    int exports, imports, fwd;
    int refuse_shareable;                      /* cuMemCreate refuses POSIX descriptors */
    CUmemGenericAllocationHandle imported[64]; /* the exporter's handle of each import */
} X;

static CUresult x_dev_attr(int *v, CUdevice_attribute a, CUdevice d)
{
    if (a == CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) {
        *v = 1;
        return CUDA_SUCCESS;
    }
    return fv_dev_attr(v, a, d);
}

static CUresult x_create(CUmemGenericAllocationHandle *h, size_t s, const CUmemAllocationProp *p,
                         unsigned long long fl)
{
    X.created_types = p->requestedHandleTypes;
    if (X.refuse_shareable && p->requestedHandleTypes) return CUDA_ERROR_NOT_SUPPORTED;
    CUresult rc = fv_create(h, s, p, fl);
    if (rc == CUDA_SUCCESS) X.types[*h % 64] = p->requestedHandleTypes;
    return rc;
}

static CUresult x_export(void *out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType t,
                         unsigned long long fl)
{
    if (t != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || fl ||
        !(X.types[h % 64] & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        return CUDA_ERROR_INVALID_VALUE;
    int fd = memfd_of(h);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(out, &fd, sizeof fd);
    __atomic_add_fetch(&X.exports, 1, __ATOMIC_RELAXED);   /* also from the server thread */
    return CUDA_SUCCESS;
}

/* The import's handle is 0x800 + its index; X.imported[i] what it came from. */
static CUresult x_import(CUmemGenericAllocationHandle *h, void *os, CUmemAllocationHandleType t)
{
    uint64_t v = value_of((int)(intptr_t)os);
    if (t != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || !v || X.imports >= 64) return CUDA_ERROR_INVALID_VALUE;
    X.imported[X.imports] = v;
    *h = 0x800 + (CUmemGenericAllocationHandle)X.imports++;
    return CUDA_SUCCESS;
}

static CUresult x_stream_ctx(CUstream s, CUcontext *c)
{
    (void)s;
    *c = FV.cur;
    return CUDA_SUCCESS;
}

/* The exporter's capture mode, per thread as the driver's (the server
 * thread relaxes its own; fake_vmm.h keeps one for the process). */
static __thread CUstreamCaptureMode x_mode;
static CUresult x_exchange(CUstreamCaptureMode *m)
{
    CUstreamCaptureMode old = x_mode;
    x_mode = *m;
    *m = old;
    return CUDA_SUCCESS;
}

static void x_install(void)
{
    fv_install();
    memset(&X, 0, sizeof X);
    FV.ndev = 2;
    FV.peer[1] = 1;                  /* device 1 can access device 0 */
    sg_driver d = sg_drv;
    d.cuDeviceGetAttribute = x_dev_attr;
    d.cuMemCreate = x_create;
    d.cuMemExportToShareableHandle = x_export;
    d.cuMemImportFromShareableHandle = x_import;
    d.cuStreamGetCtx = x_stream_ctx;
    sg_driver_set(&d);
}

/* The program's calls; forward() stands for the driver. */
static CUresult fwd(const void *args)
{
    (void)args;
    X.fwd++;
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult call(sg_call c)
{
    c.forward = fwd;
    c.args = &c;
    return sg_core_call(&c);
}

static void start_core(void)
{
    sg_core_reset();
    x_install();
    sg_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.policy = SG_POLICY_SKIP_TEMP;
    cfg.place_max_bytes = SIZE_MAX;
    sg_caps caps = sg_core_init(&cfg);
    (void)caps;
}

/* What the exporter tells the importer. */
typedef struct exported {
    CUipcMemHandle small, big;
    CUmemGenericAllocationHandle big_chunks[4];
    size_t nbig;
    int ok;                          /* the exporter's own checks held */
} exported;

/* The exporter: a 4 KiB and a 5 MiB block (3 chunks, the first shared with
 * the small block); sends both handles; on the parent's first byte frees
 * the small one and says so; ends when the parent closes. */
static int ipc_exporter(void *u, int out, int in)
{
    (void)u;
    start_core();
    sg_driver d = sg_drv;
    d.cuThreadExchangeStreamCaptureMode = x_exchange;
    sg_driver_set(&d);
    exported e;
    memset(&e, 0, sizeof e);
    CUdeviceptr small = 0, big = 0;
    CUipcMemHandle again;
    int ok = call((sg_call){ .kind = SG_CALL_ALLOC, .u.alloc = { .out = &small, .bytes = 4096 } }) == 0 &&
             call((sg_call){ .kind = SG_CALL_ALLOC, .u.alloc = { .out = &big, .bytes = 5 << 20 } }) == 0;
    ok = ok && X.created_types == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    ok = ok && call((sg_call){ .kind = SG_CALL_IPC_HANDLE, .u.ipc = { &e.small, small } }) == 0;
    ok = ok && call((sg_call){ .kind = SG_CALL_IPC_HANDLE, .u.ipc = { &e.big, big + 100 } }) == 0;
    ok = ok && call((sg_call){ .kind = SG_CALL_IPC_HANDLE, .u.ipc = { &again, big } }) == 0 &&
         memcmp(&again, &e.big, sizeof again) == 0;
    ok = ok && call((sg_call){ .kind = SG_CALL_IPC_HANDLE, .u.ipc = { NULL, big } }) == CUDA_ERROR_INVALID_VALUE;
    sg_mem_handle h[4];
    e.nbig = sg_mem_block_handles(big, h, 4);
    for (size_t i = 0; i < e.nbig && i < 4; i++) e.big_chunks[i] = h[i].handle;
    e.ok = ok && __atomic_load_n(&X.exports, __ATOMIC_RELAXED) == 2;   /* one trial export per block */
    if (write(out, &e, sizeof e) != (ssize_t)sizeof e) return 2;
    char b;
    if (read(in, &b, 1) == 1) {
        int freed = call((sg_call){ .kind = SG_CALL_FREE, .u.free = { .ptr = small } }) == 0;
        if (write(out, &freed, sizeof freed) != (ssize_t)sizeof freed) return 2;
    }
    wait_parent(in);
    return ok ? 0 : 1;
}

static CUresult ipc_open(CUdeviceptr *p, const CUipcMemHandle *h, unsigned flags)
{
    return call((sg_call){ .kind = SG_CALL_IPC_OPEN, .u.ipc_open = { p, h, flags } });
}

static CUresult ipc_close(CUdeviceptr p)
{
    return call((sg_call){ .kind = SG_CALL_IPC_CLOSE, .u.ipc_close = { p } });
}

TEST(open_close)
{
    child c = fork_child(ipc_exporter, NULL);
    exported e;
    CHECK_EQ(read_all(c.rd, &e, sizeof e), 0);
    CHECK(e.ok);
    CHECK_EQ(e.nbig, 3);
    start_core();
    sg_ipc_wire w;
    CHECK_EQ(sg_ipc_decode(&e.big, &w), 0);
    CHECK_EQ(w.pid, (uint32_t)c.pid);
    CHECK_EQ(w.size, 5 << 20);
    CHECK_EQ(w.offset, 4096);                 /* after the small block, in a shared chunk */

    CUdeviceptr p = 0, q = 0;
    int maps0 = FV.maps_ok, reserves0 = FV.reserves;
    CHECK_CU(ipc_open(&p, &e.big, 0), CUDA_SUCCESS);
    CHECK_EQ(FV.maps_ok - maps0, 3);
    CHECK_EQ(FV.reserves - reserves0, 1);
    CHECK_EQ(X.imports, 3);
    CUdeviceptr resv = p - 4096;
    for (int i = 0; i < 3; i++) {
        int k = fv_map_at(resv + (CUdeviceptr)i * FV_G);
        CHECK(k >= 0 && FV.map[k].access);
        CHECK(k >= 0 && FV.map[k].h == (CUmemGenericAllocationHandle)(0x800 + i));
        CHECK_EQ(X.imported[i], e.big_chunks[i]);   /* chunk i of the exporter's block */
    }
    CHECK_EQ(FV.ndesc, 1);                     /* flags 0: this device only */
    CHECK_EQ(FV.not_relaxed, 0);
    /* opened again in this context: the same address, nothing mapped */
    CHECK_CU(ipc_open(&q, &e.big, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_SUCCESS);
    CHECK(q == p);
    CHECK_EQ(FV.maps_ok - maps0, 3);
    /* what pointer queries find */
    sg_alloc_info ai;
    CHECK_EQ(sg_ipc_lookup(p + 100, &ai), 1);
    CHECK(ai.base == p && ai.size == (5u << 20) && ai.ctx == FV_CTX);
    CHECK_EQ(sg_ipc_lookup(resv, &ai), 0);     /* the shared chunk, before the block */
    CHECK_EQ(sg_ipc_lookup(resv + 3 * FV_G, &ai), -1);
    CUdeviceptr base = 0;
    size_t size = 0;
    int legacy = -1;
    CUcontext ctx = NULL;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_ADDR_RANGE, .u.range = { &base, &size, p + 7 } }), CUDA_SUCCESS);
    CHECK(base == p && size == (5u << 20));
    CHECK_CU(call((sg_call){ .kind = SG_CALL_PTR_ATTR, .u.attr = { &legacy,
                             CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p } }), CUDA_SUCCESS);
    CHECK_EQ(legacy, 0);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_PTR_ATTR, .u.attr = { &ctx, CU_POINTER_ATTRIBUTE_CONTEXT, p } }),
             CUDA_SUCCESS);
    CHECK(ctx == FV_CTX);
    CUmemGenericAllocationHandle rh;
    int fwd0 = X.fwd;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_RETAIN_HANDLE, .u.retain = { &rh, (void *)(uintptr_t)p } }),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(X.fwd, fwd0);                     /* answered, not forwarded */
    /* copies: the block, not the chunks around it */
    CHECK_CU(call((sg_call){ .kind = SG_CALL_MEMOP, .u.memop = { .kind = SG_OP_RANGES, .src = p + (5u << 20) - 8,
                             .src_bytes = 8 } }), CUDA_ERROR_INVALID_VALUE);    /* forwarded: the fake's error */
    CHECK_EQ(X.fwd, fwd0 + 1);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_MEMOP, .u.memop = { .kind = SG_OP_RANGES, .src = p + (5u << 20) - 8,
                             .src_bytes = 12 } }), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(X.fwd, fwd0 + 1);                 /* refused by the range check */
    CHECK_CU(call((sg_call){ .kind = SG_CALL_MEMOP, .u.memop = { .kind = SG_OP_RANGES, .dst = resv,
                             .dst_bytes = 4 } }), CUDA_ERROR_INVALID_VALUE);    /* before the block */
    CHECK_EQ(X.fwd, fwd0 + 1);
    fwd0 = X.fwd;
    /* closes: the first keeps it, the second unmaps, the third is the driver's */
    int unmaps0 = FV.unmaps_ok, frees0 = FV.addr_frees;
    FV.cur = NULL;
    CHECK_CU(ipc_close(p), CUDA_ERROR_INVALID_CONTEXT);    /* no context: nothing dropped */
    FV.cur = FV_CTX;
    CHECK_CU(ipc_close(p), CUDA_SUCCESS);
    CHECK_EQ(FV.unmaps_ok, unmaps0);
    CHECK_CU(ipc_close(p + 8), CUDA_ERROR_INVALID_VALUE);   /* not what open returned: forwarded */
    CHECK_EQ(X.fwd, fwd0 + 1);
    CHECK_CU(ipc_close(p), CUDA_SUCCESS);
    CHECK_EQ(FV.unmaps_ok - unmaps0, 3);
    CHECK_EQ(FV.addr_frees - frees0, 1);
    CHECK_CU(ipc_close(p), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(X.fwd, fwd0 + 2);
    CHECK_EQ(sg_ipc_lookup(p, &ai), -1);
    /* with LAZY_ENABLE_PEER_ACCESS: the device and its peer */
    CHECK_CU(ipc_open(&p, &e.small, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_SUCCESS);
    CHECK_EQ(FV.ndesc, 2);
    /* the driver's errors */
    sg_ipc_wire mine = w;
    mine.pid = (uint32_t)getpid();
    CUipcMemHandle own;
    sg_ipc_encode(&mine, &own);
    CHECK_CU(ipc_open(&q, &own, 0), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(ipc_open(&q, &e.big, 2), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(ipc_open(NULL, &e.big, 0), CUDA_ERROR_INVALID_VALUE);
    FV.cur = NULL;
    CHECK_CU(ipc_open(&q, &e.big, 0), CUDA_ERROR_INVALID_CONTEXT);
    FV.cur = FV_CTX;
    CUipcMemHandle drv;
    memset(&drv, 0x33, sizeof drv);
    fwd0 = X.fwd;
    CHECK_CU(ipc_open(&q, &drv, 0), CUDA_ERROR_INVALID_VALUE);   /* the fake driver's answer */
    CHECK_EQ(X.fwd, fwd0 + 1);
    /* a failing cuMemMap: nothing stays mapped or reserved */
    int live0 = FV.live_maps;
    reserves0 = FV.reserves;
    frees0 = FV.addr_frees;
    fv_fail("cuMemMap", 2, 0);
    CHECK_CU(ipc_open(&q, &e.big, 0), CUDA_ERROR_MAP_FAILED);
    fv_fail(NULL, 0, 0);
    CHECK_EQ(FV.live_maps, live0);
    CHECK_EQ(FV.reserves - reserves0, FV.addr_frees - frees0);
    /* the exporter frees the small block: its handle no longer opens */
    CHECK_CU(ipc_close(p), CUDA_SUCCESS);
    CHECK(write(c.wr, "f", 1) == 1);
    int freed = 0;
    CHECK_EQ(read_all(c.rd, &freed, sizeof freed), 0);
    CHECK(freed);
    CHECK_CU(ipc_open(&p, &e.small, 0), CUDA_ERROR_INVALID_VALUE);
    /* the importer's context goes: its opened blocks go with it */
    CHECK_CU(ipc_open(&p, &e.big, 0), CUDA_SUCCESS);
    live0 = FV.live_maps;
    sg_ctx_teardown(FV_CTX);
    CHECK_EQ(FV.live_maps, live0 - 3);
    CHECK_EQ(sg_ipc_lookup(p, &ai), -1);
    /* the exporter is gone */
    CHECK_EQ(end_child(&c), 0);
    CHECK_CU(ipc_open(&p, &e.big, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(FV.live_maps, 0);
    CHECK_EQ(FV.reserves, FV.addr_frees);
    sg_core_reset();
}

/* Fork: the exporter exports a block, forks (through sg_core_atfork, as the
 * pthread_atfork handlers of core/process.c do); the fork child does not own
 * the parent's export: asked for the same block, it makes its own (its pid,
 * another server tag, another nonce); the parent's export still opens
 * afterwards (its server kept running). */
static int fork_exporter(void *u, int out, int in)
{
    (void)u;
    start_core();
    sg_driver d = sg_drv;
    d.cuThreadExchangeStreamCaptureMode = x_exchange;
    sg_driver_set(&d);
    CUdeviceptr a = 0;
    CUipcMemHandle h1, h2;
    if (call((sg_call){ .kind = SG_CALL_ALLOC, .u.alloc = { .out = &a, .bytes = 4096 } }) != 0 ||
        call((sg_call){ .kind = SG_CALL_IPC_HANDLE, .u.ipc = { &h1, a } }) != 0)
        return 1;
    sg_core_atfork(0);
    fflush(stdout);
    pid_t g = fork();
    if (g == 0) {
        sg_core_atfork(2);
        sg_ipc_wire w1, w2;
        /* (its own server is not asked: a thread made in the child of a
         * multi-threaded fork is outside what POSIX defines, and the driver
         * is not usable there anyway) */
        int ok = call((sg_call){ .kind = SG_CALL_IPC_HANDLE, .u.ipc = { &h2, a } }) == 0 &&
                 sg_ipc_decode(&h1, &w1) == 0 && sg_ipc_decode(&h2, &w2) == 0 &&
                 w2.pid == (uint32_t)getpid() && w1.pid != w2.pid && w1.tag != w2.tag &&
                 w1.nonce != w2.nonce;
        _exit(ok ? 0 : 1);
    }
    sg_core_atfork(1);
    int st = -1;
    waitpid(g, &st, 0);
    int child_ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (write(out, &child_ok, sizeof child_ok) != (ssize_t)sizeof child_ok ||
        write(out, &h1, sizeof h1) != (ssize_t)sizeof h1)
        return 2;
    wait_parent(in);
    return 0;
}

TEST(fork_child_owns_no_export)
{
    child c = fork_child(fork_exporter, NULL);
    int child_ok = 0;
    CUipcMemHandle h1;
    CHECK_EQ(read_all(c.rd, &child_ok, sizeof child_ok), 0);
    CHECK_EQ(read_all(c.rd, &h1, sizeof h1), 0);
    CHECK(child_ok);
    start_core();
    CUdeviceptr p = 0;
    CHECK_CU(ipc_open(&p, &h1, 0), CUDA_SUCCESS);
    CHECK_CU(ipc_close(p), CUDA_SUCCESS);
    CHECK_EQ(end_child(&c), 0);
    sg_core_reset();
}

/* A device without shareable memory, a driver without the export: no
 * handle (CUDA_ERROR_INVALID_VALUE, a log line), no server started. */
TEST(export_not_shareable)
{
    sg_core_reset();
    fv_install();                    /* HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: 0 */
    memset(&X, 0, sizeof X);
    sg_driver d = sg_drv;
    d.cuMemExportToShareableHandle = x_export;
    d.cuMemCreate = x_create;
    sg_driver_set(&d);
    sg_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.policy = SG_POLICY_SKIP_TEMP;
    cfg.place_max_bytes = SIZE_MAX;
    sg_core_init(&cfg);
    CUdeviceptr a = 0;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_ALLOC, .u.alloc = { .out = &a, .bytes = 4096 } }), CUDA_SUCCESS);
    CHECK_EQ(X.created_types, CU_MEM_HANDLE_TYPE_NONE);
    CUipcMemHandle h;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_IPC_HANDLE, .u.ipc = { &h, a } }), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(X.exports, 0);
    d.cuMemExportToShareableHandle = NULL;   /* a driver without the entry point */
    sg_driver_set(&d);
    CUdeviceptr b = 0;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_ALLOC, .u.alloc = { .out = &b, .bytes = 4096 } }), CUDA_SUCCESS);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_IPC_HANDLE, .u.ipc = { &h, b } }), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_FREE, .u.free = { .ptr = b } }), CUDA_SUCCESS);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_IPC_HANDLE, .u.ipc = { &h, b } }), CUDA_ERROR_INVALID_VALUE);
    DIR *dir = opendir("/proc/self/task");
    int threads = 0;
    for (struct dirent *t; dir && (t = readdir(dir));) threads += t->d_name[0] != '.';
    if (dir) closedir(dir);
    CHECK_EQ(threads, 1);            /* no server thread */
    sg_core_reset();
}

/* A placed cuMemAllocAsync block: the driver's answer for pool memory
 * (CUDA_ERROR_INVALID_VALUE), nothing exported. */
TEST(stream_ordered_block)
{
    start_core();
    CUdeviceptr a = 0;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_ALLOC,
                             .u.alloc = { .out = &a, .bytes = 4096, .stream = (CUstream)0xa, .async = 1 } }),
             CUDA_SUCCESS);
    CHECK(sg_mem_find(a, NULL));
    CUipcMemHandle h;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_IPC_HANDLE, .u.ipc = { &h, a + 8 } }), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(X.exports, 0);
    sg_core_reset();
}

/* A device that reports shareable memory but refuses it: placement goes on
 * (the chunk is made without), legacy IPC of the block fails cleanly. */
TEST(shareable_refused)
{
    start_core();
    X.refuse_shareable = 1;
    CUdeviceptr a = 0;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_ALLOC, .u.alloc = { .out = &a, .bytes = 4096 } }), CUDA_SUCCESS);
    CHECK(sg_mem_find(a, NULL));                 /* placed */
    CHECK_EQ(FV.creates, 1);
    CHECK_EQ(X.created_types, CU_MEM_HANDLE_TYPE_NONE);   /* the second try */
    CUipcMemHandle h;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_IPC_HANDLE, .u.ipc = { &h, a } }), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(X.exports, 0);
    sg_core_reset();
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    RUN(codec);
    RUN(wire);
    RUN(wire_squatter);
    RUN(open_close);
    RUN(fork_child_owns_no_export);
    RUN(export_not_shareable);
    RUN(shareable_refused);
    RUN(stream_ordered_block);
    return check_done();
}
