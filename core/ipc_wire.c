/*
 * core/ipc_wire.c: how the chunks of a placed block travel between
 * processes for legacy IPC (ipc.h): the CUipcMemHandle encoding, the
 * exporter's server thread and the importer's request. Operating-system
 * calls only: the driver is reached through the exporter's callbacks
 * (sg_ipc_source, ipc.c).
 *
 * The socket: SOCK_SEQPACKET, abstract name "stablegraph-ipc-<pid>-<tag>"
 * (tag: 64 random bits per server, carried by the handle, so that a reused
 * pid never reaches a wrong server). A request is one message (magic,
 * version, nonce); the answer one header (status, layout) then one message
 * per batch of at most SG_IPC_BATCH descriptors (SCM_RIGHTS). The server
 * answers one peer at a time, each within SG_IPC_TIMEOUT_S per message, and
 * only peers of its own effective user (SO_PEERCRED); the importer checks
 * that the server is the handle's pid.
 *
 * State: srv_lock guards srv (the listening socket, its tag); the server
 * thread reads only what it was started with (the socket, the source).
 */
#include "ipc.h"
#include "procio.h"
#include "util.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define WIRE_MAGIC 0x53474950u          /* handles, requests, replies */
#define WIRE_VERSION 1u
#define SG_IPC_TIMEOUT_S 5

enum { ST_OK, ST_UNKNOWN, ST_REFUSED, ST_FAILED };

/* ------------------------------------------------------------------ handle */

typedef struct handle_bytes {
    uint32_t magic;
    uint16_t version, zero16;
    uint32_t pid, zero32;
    uint64_t tag, nonce, size, offset;
    uint64_t check;                     /* FNV-1a of everything above */
} handle_bytes;
_Static_assert(sizeof(handle_bytes) <= CU_IPC_HANDLE_SIZE, "handle too large");

static uint64_t fnv(const void *p, size_t n) { return sg_fnv1a(SG_FNV_BASIS, p, n); }

void sg_ipc_encode(const sg_ipc_wire *w, CUipcMemHandle *h)
{
    handle_bytes b = { .magic = WIRE_MAGIC, .version = WIRE_VERSION, .pid = w->pid, .tag = w->tag,
                       .nonce = w->nonce, .size = w->size, .offset = w->offset };
    b.check = fnv(&b, offsetof(handle_bytes, check));
    memset(h, 0, sizeof *h);
    memcpy(h->reserved, &b, sizeof b);
}

int sg_ipc_decode(const CUipcMemHandle *h, sg_ipc_wire *w)
{
    handle_bytes b;
    memcpy(&b, h->reserved, sizeof b);
    if (b.magic != WIRE_MAGIC || b.version != WIRE_VERSION ||
        b.check != fnv(&b, offsetof(handle_bytes, check)))
        return -1;
    *w = (sg_ipc_wire){ b.pid, b.tag, b.nonce, b.size, b.offset };
    return 0;
}

/* ---------------------------------------------------------------- messages */

typedef struct request {
    uint32_t magic;
    uint32_t version;
    uint64_t nonce;
} request;

typedef struct reply {
    uint32_t magic, status;
    sg_ipc_layout layout;
} reply;

typedef struct batch {
    uint32_t magic, status, first, count;
} batch;

static int socket_name(uint32_t pid, uint64_t tag, struct sockaddr_un *a, socklen_t *len)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "stablegraph-ipc-%u-%016llx",
                     (unsigned)pid, (unsigned long long)tag);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    return 0;
}

static void set_timeouts(int fd)
{
    struct timeval tv = { SG_IPC_TIMEOUT_S, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* Sends one message of `len` bytes with n descriptors; 0 or -1. */
static int send_msg(int fd, const void *buf, size_t len, const int *fds, size_t n)
{
    char cbuf[CMSG_SPACE(sizeof(int) * SG_IPC_BATCH)];
    struct iovec iov = { (void *)buf, len };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (n) {
        memset(cbuf, 0, sizeof cbuf);
        m.msg_control = cbuf;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * n);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
    }
    ssize_t r;
    do r = sendmsg(fd, &m, MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    return r == (ssize_t)len ? 0 : -1;
}

/* Receives one message of exactly `len` bytes; its descriptors (at most
 * SG_IPC_BATCH) go to fds, *n their count. 0, or -1 (descriptors that came
 * with a bad message are closed). */
static int recv_msg(int fd, void *buf, size_t len, int *fds, size_t *n)
{
    char cbuf[CMSG_SPACE(sizeof(int) * SG_IPC_BATCH)];
    struct iovec iov = { buf, len };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                        .msg_controllen = sizeof cbuf };
    ssize_t r;
    do r = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
    while (r < 0 && errno == EINTR);
    size_t k = 0;
    for (struct cmsghdr *c = r > 0 ? CMSG_FIRSTHDR(&m) : NULL; c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < cnt; i++) {
            int d;
            memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof d);
            if (fds && k < SG_IPC_BATCH) fds[k++] = d;
            else close(d);
        }
    }
    int ok = r == (ssize_t)len && !(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC));
    if (!ok || !fds) {
        for (size_t i = 0; i < k; i++) close(fds[i]);
        k = 0;
    }
    if (n) *n = k;
    return ok ? 0 : -1;
}

/* ------------------------------------------------------------------ server */

static pthread_mutex_t srv_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int fd;                   /* listening; -1 when no server */
    uint64_t tag;
} srv = { .fd = -1 };

uint64_t sg_ipc_random(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v && v) return v;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return fnv(&ts, sizeof ts) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&v;
}

/* One request on connection c. */
static void serve_one(int c, const sg_ipc_source *src)
{
    struct ucred cr;
    socklen_t cl = sizeof cr;
    request rq;
    reply rp = { .magic = WIRE_MAGIC, .status = ST_OK };
    set_timeouts(c);
    if (recv_msg(c, &rq, sizeof rq, NULL, NULL) != 0 || rq.magic != WIRE_MAGIC ||
        rq.version != WIRE_VERSION)
        return;
    if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 || cr.uid != geteuid())
        rp.status = ST_REFUSED;
    else if (src->layout(rq.nonce, &rp.layout) != 0)
        rp.status = ST_UNKNOWN;
    if (send_msg(c, &rp, sizeof rp, NULL, 0) != 0 || rp.status != ST_OK) return;
    int fds[SG_IPC_BATCH];
    for (uint64_t first = 0; first < rp.layout.n; first += SG_IPC_BATCH) {
        size_t k = rp.layout.n - first < SG_IPC_BATCH ? (size_t)(rp.layout.n - first) : SG_IPC_BATCH;
        batch b = { WIRE_MAGIC, ST_OK, (uint32_t)first, (uint32_t)k };
        if (src->export_fds(rq.nonce, (size_t)first, k, fds) != 0) {
            b.status = ST_FAILED;
            b.count = 0;
            send_msg(c, &b, sizeof b, NULL, 0);
            return;
        }
        int sent = send_msg(c, &b, sizeof b, fds, k);
        for (size_t i = 0; i < k; i++) close(fds[i]);
        if (sent != 0) return;
    }
}

typedef struct srv_arg {
    int fd;
    sg_ipc_source src;
} srv_arg;

/* Waits in poll(2), not in accept(2): a blocked accept holds a descriptor
 * number of the process (Linux reserves the new connection's number before
 * it waits), so the server took two of the program's descriptors, and a
 * program that lowered RLIMIT_NOFILE to what it opens itself found one
 * missing (tests/e2e/adv_process.c, nofile). The listening socket is
 * non-blocking: a connection gone between the poll and the accept is
 * EAGAIN. */
static void *serve_loop(void *p)
{
    srv_arg a = *(srv_arg *)p;
    free(p);
    for (;;) {
        struct pollfd pf = { .fd = a.fd, .events = POLLIN };
        int n = poll(&pf, 1, -1);
        if (n < 0 && errno != EINTR) break;
        if (n > 0 && (pf.revents & POLLNVAL)) break;
        if (n <= 0 || !(pf.revents & POLLIN)) continue;
        int c = accept4(a.fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EBADF || errno == EINVAL || errno == ENOTSOCK) break;
            if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN) {
                struct timespec ts = { 0, 10 * 1000 * 1000 };   /* out of descriptors: retry */
                nanosleep(&ts, NULL);
            }
            continue;
        }
        serve_one(c, &a.src);
        close(c);
    }
    return NULL;
}

/* Starts the thread on listening socket fd (srv_lock held); 0 or -1. */
static int start_thread(int fd, const sg_ipc_source *src)
{
    srv_arg *a = malloc(sizeof *a);
    if (!a) return -1;
    *a = (srv_arg){ fd, *src };
    pthread_attr_t at;
    pthread_t t;
    sigset_t all, old;
    sigfillset(&all);
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_sigmask(SIG_SETMASK, &all, &old);    /* the program's signals stay with its threads */
    int rc = pthread_create(&t, &at, serve_loop, a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        free(a);
        return -1;
    }
    pthread_setname_np(t, "stablegraph-ipc");
    return 0;
}

int sg_ipc_serve(const sg_ipc_source *src, uint64_t *tag, const char **why)
{
    pthread_mutex_lock(&srv_lock);
    int rc = 0;
    if (srv.fd < 0) {
        struct sockaddr_un a;
        socklen_t len;
        uint64_t t = sg_ipc_random();
        int fd = sg_fd_above_std(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        socket_name((uint32_t)getpid(), t, &a, &len);
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, len) != 0 || listen(fd, 16) != 0) {
            *why = "the library's IPC server cannot open its unix socket";
            rc = -1;
        } else if (start_thread(fd, src) != 0) {
            *why = "the library cannot start its IPC server thread";
            rc = -1;
        }
        if (rc == 0) {
            srv.fd = fd;
            srv.tag = t;
        } else if (fd >= 0) {
            close(fd);
        }
    }
    if (rc == 0) *tag = srv.tag;
    pthread_mutex_unlock(&srv_lock);
    return rc;
}

void sg_ipc_wire_atfork(int phase)
{
    if (phase == 0) {
        pthread_mutex_lock(&srv_lock);
        return;
    }
    if (phase == 2 && srv.fd >= 0) {   /* the thread stayed with the parent */
        close(srv.fd);
        srv.fd = -1;
    }
    pthread_mutex_unlock(&srv_lock);
}

/* ------------------------------------------------------------------ client */

/* Connects to the server of w; the socket, or -1 and *why. */
static int connect_to(const sg_ipc_wire *w, const char **why)
{
    struct sockaddr_un a;
    socklen_t len;
    socket_name(w->pid, w->tag, &a, &len);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *why = "cannot open a unix socket";
        return -1;
    }
    set_timeouts(fd);
    int r;
    do r = connect(fd, (struct sockaddr *)&a, len);
    while (r < 0 && errno == EINTR);
    struct ucred cr;
    socklen_t cl = sizeof cr;
    if (r != 0) {
        *why = "no such exporter: it exited, runs without the library, or is in another "
               "network namespace";
    } else if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 || (uint32_t)cr.pid != w->pid) {
        *why = "the socket of that handle belongs to another process";
        r = -1;
    }
    if (r != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads the answer's header and checks it against w; 0 or -1 (*why). */
static int read_layout(int fd, const sg_ipc_wire *w, sg_ipc_layout *l, const char **why)
{
    reply rp;
    if (recv_msg(fd, &rp, sizeof rp, NULL, NULL) != 0 || rp.magic != WIRE_MAGIC) {
        *why = "the exporter did not answer";
        return -1;
    }
    if (rp.status != ST_OK) {
        *why = rp.status == ST_REFUSED ? "the exporter refused: it runs as another user"
                                       : "the exporter no longer has that allocation (freed?)";
        return -1;
    }
    *l = rp.layout;
    if (l->n == 0 || l->chunk_size == 0 || l->size != w->size || l->offset != w->offset ||
        l->n > UINT64_MAX / l->chunk_size || l->offset > l->n * l->chunk_size ||
        l->size > l->n * l->chunk_size - l->offset) {
        *why = "the exporter's answer does not match the handle";
        return -1;
    }
    return 0;
}

int sg_ipc_fetch(const sg_ipc_wire *w, int (*on_layout)(void *u, const sg_ipc_layout *l),
                 int (*on_fd)(void *u, size_t i, int fd), void *u, const char **why)
{
    int fd = connect_to(w, why);
    if (fd < 0) return -1;
    request rq = { WIRE_MAGIC, WIRE_VERSION, w->nonce };
    sg_ipc_layout l;
    int rc = -1;
    if (send_msg(fd, &rq, sizeof rq, NULL, 0) != 0) {
        *why = "the exporter did not take the request";
    } else if (read_layout(fd, w, &l, why) == 0) {
        rc = on_layout(u, &l);
        if (rc != 0) *why = NULL;
    }
    for (uint64_t got = 0; rc == 0 && got < l.n;) {
        batch b = { 0, ST_OK, 0, 0 };
        int fds[SG_IPC_BATCH];
        size_t k = 0;
        if (recv_msg(fd, &b, sizeof b, fds, &k) != 0 || b.magic != WIRE_MAGIC || b.status != ST_OK ||
            b.first != got || b.count != k || k == 0 || got + k > l.n) {
            *why = b.status == ST_FAILED ? "the exporter could not export the memory (freed meanwhile?)"
                                         : "the exporter's answer was cut short";
            for (size_t i = 0; i < k; i++) close(fds[i]);
            rc = -1;
            break;
        }
        for (size_t i = 0; i < k; i++) {
            if (rc == 0 && on_fd(u, (size_t)(got + i), fds[i]) != 0) {
                *why = NULL;
                rc = -1;
            } else if (rc != 0) {
                close(fds[i]);
            }
        }
        got += k;
    }
    close(fd);
    return rc;
}
