/*
 * core/lock.h: sg_lock, the mutex of an exec record (rec->lock,
 * graph_internal.h), which every cuGraphLaunch takes: a futex word whose
 * uncontended lock and unlock are one atomic instruction each, inline. A
 * pthread mutex costs about 57 instructions for the pair (two calls through
 * the PLT), a fifth of a steady-state launch's budget (issue 11).
 *
 * Semantics of a default pthread mutex: not recursive, no owner check, not
 * robust; a waiter sleeps in the kernel (FUTEX_WAIT), it never spins, so the
 * lock may be held across driver calls as rec->lock is (docs/locking.md).
 * States (Drepper, "Futexes Are Tricky", mutex 3): 0 free, 1 held, 2 held
 * and a thread may be waiting (the unlock then wakes one). All-zero memory is
 * an unlocked lock; nothing to destroy. The acquire / release atomics give
 * the same ordering as a mutex (and ThreadSanitizer sees them).
 */
#ifndef SG_LOCK_H
#define SG_LOCK_H

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct sg_lock {
    int v;                       /* 0, 1, 2 (above) */
} sg_lock;

static __attribute__((noinline, unused)) void sg_lock_wait(sg_lock *l, int c)
{
    if (c != 2) c = __atomic_exchange_n(&l->v, 2, __ATOMIC_ACQUIRE);
    while (c != 0) {
        syscall(SYS_futex, &l->v, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
        c = __atomic_exchange_n(&l->v, 2, __ATOMIC_ACQUIRE);
    }
}

static __attribute__((noinline, unused)) void sg_lock_wake(sg_lock *l)
{
    syscall(SYS_futex, &l->v, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static inline void sg_lock_take(sg_lock *l)
{
    int c = 0;
    if (__builtin_expect(!__atomic_compare_exchange_n(&l->v, &c, 1, 0, __ATOMIC_ACQUIRE,
                                                      __ATOMIC_RELAXED), 0))
        sg_lock_wait(l, c);
}

static inline void sg_lock_drop(sg_lock *l)
{
    if (__builtin_expect(__atomic_exchange_n(&l->v, 0, __ATOMIC_RELEASE) == 2, 0)) sg_lock_wake(l);
}

#endif /* SG_LOCK_H */
