/*
 * core/procio.c: the library's output among the program's descriptors and
 * signals (procio.h).
 */
#include "procio.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct noted_fd {
    int fd;          /* -1: free */
    int open;        /* it was open when noted */
    dev_t dev;
    ino_t ino;
} noted_fd;

static noted_fd noted[SG_FD_NOTED] = { { -1, 0, 0, 0 }, { -1, 0, 0, 0 }, { -1, 0, 0, 0 },
                                       { -1, 0, 0, 0 } };

void sg_fd_note(int fd)
{
    struct stat st;
    noted_fd *n = NULL;
    for (int i = 0; i < SG_FD_NOTED && !n; i++)
        if (noted[i].fd == fd || noted[i].fd < 0) n = &noted[i];
    if (!n || fd < 0) return;
    int saved = errno;
    *n = (noted_fd){ fd, fstat(fd, &st) == 0, 0, 0 };
    if (n->open) {
        n->dev = st.st_dev;
        n->ino = st.st_ino;
    }
    errno = saved;
}

int sg_fd_unchanged(int fd)
{
    struct stat st;
    int saved = errno;
    int now = fd >= 0 && fstat(fd, &st) == 0;
    errno = saved;
    for (int i = 0; i < SG_FD_NOTED; i++)
        if (noted[i].fd == fd)
            return noted[i].open && now && st.st_dev == noted[i].dev && st.st_ino == noted[i].ino;
    return now;
}

int sg_fd_above_std(int fd)
{
    if (fd < 0 || fd > 2) return fd;
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    int saved = errno;
    close(fd);
    errno = saved;
    return high;
}

void sg_sigpipe_hold(sg_sigpipe_guard *g)
{
    sigset_t pipe_set, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &g->old);
    g->was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
}

void sg_sigpipe_release(sg_sigpipe_guard *g)
{
    sigset_t pipe_set, pending;
    int saved = errno;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    if (!g->was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
        const struct timespec now = { 0, 0 };
        sigtimedwait(&pipe_set, NULL, &now);
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
    errno = saved;
}
