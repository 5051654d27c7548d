/*
 * interpose/init.c: the once-guards. Start-up happens in the constructor, or
 * earlier if another library's constructor calls a hook first: every hook
 * calls sg_ensure_init(), which runs sg_init_slow() until sg_ready is set.
 * core/ starts once (config_guard: configuration, policy, fork handlers and
 * the exit report are core/process.c's); the real driver is resolved on
 * first use of a hook, so a process that never touches CUDA never loads
 * libcuda because of us.
 *
 * Globals and their guards:
 *   sg_passthrough_all: written once under config_guard (core/ said it wants
 *     no call), then read-only.
 *   sg_ready: atomic (see hooks.h). sg_in_hook: thread-local.
 */
#include "hooks.h"

#include "../core/process.h"

#include <pthread.h>
#include <stdlib.h>

int sg_ready;
int sg_passthrough_all;
__thread int sg_in_hook __attribute__((tls_model("initial-exec")));

static pthread_once_t config_guard = PTHREAD_ONCE_INIT;

/* secure_getenv: in a secure-execution process (set-user-ID or with
 * capabilities, where the library can only come from /etc/ld.so.preload or
 * a set-user-ID library in a trusted folder) the caller's STABLEGRAPH_*
 * variables are not obeyed (a report path would be written with the
 * program's privileges): the defaults apply. */
static const char *env_get(const char *name) { return secure_getenv(name); }

static void config_once(void)
{
    sg_passthrough_all = !sg_process_start(env_get, sg_hook_names, sg_hook_counters, SG_HOOK_COUNT);
}

void sg_config_init(void)
{
    pthread_once(&config_guard, config_once);
}

void sg_init_slow(void)
{
    sg_config_init();
    sg_resolve_driver();
    __atomic_store_n(&sg_ready, 1, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void sg_constructor(void)
{
    sg_resolve_note_initial();
    sg_config_init();
}
