/*
 * core/procio.h: the library's output among the program's descriptors and
 * signals (docs/design.md, "The process around the library").
 *
 * A program may close stdout or stderr, start with them closed, or open its
 * own files on their numbers; it may leave SIGPIPE at its default action
 * while stderr is a pipe whose reader has gone. The library writes into a
 * descriptor of the process (stderr for its log, stdout or /dev/fd/N for
 * its report) only while that descriptor names the file it named when the
 * library started (sg_fd_note at start-up, sg_fd_unchanged before each
 * write), and with SIGPIPE held (sg_sigpipe_hold / sg_sigpipe_release).
 *
 * State: the noted identities, written by sg_fd_note at start-up (under
 * interpose/'s once-guard, before any hook runs concurrently), then read.
 */
#ifndef SG_PROCIO_H
#define SG_PROCIO_H

#include <signal.h>

/* Records what descriptor fd names now (or that it is closed). At most
 * SG_FD_NOTED descriptors; a later note of the same fd replaces it. */
#define SG_FD_NOTED 4
void sg_fd_note(int fd);

/* 1 if fd names the file it named when noted; 0 if it was closed then, is
 * closed now, or names another file (the program closed it and opened one
 * of its own there, or put another on it with dup2). A descriptor never
 * noted: 1 if it is open. */
int sg_fd_unchanged(int fd);

/* fd, moved above 2 if it is 0, 1 or 2 (a descriptor the library opened
 * while the program runs without stdin, stdout or stderr must not become
 * one: the program's writes to its closed stdout would go into it, a dup2
 * of its own onto that number would close it): the new descriptor
 * (close-on-exec), or -1 (fd closed) if it cannot be moved. A negative fd
 * is returned as it is. */
int sg_fd_above_std(int fd);

/* SIGPIPE blocked in this thread while the library writes into a pipe or a
 * socket; release takes back one that the writes raised (one pending
 * before is left) and restores the mask: a reader that went away gives the
 * write EPIPE instead of killing the program. */
typedef struct sg_sigpipe_guard {
    sigset_t old;
    int was_pending;
} sg_sigpipe_guard;
void sg_sigpipe_hold(sg_sigpipe_guard *g);
void sg_sigpipe_release(sg_sigpipe_guard *g);

#endif
