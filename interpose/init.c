/*
 * interpose/init.c: start-up and shut-down. The once-guards, configuration,
 * fork handling and the exit path that writes the report.
 *
 * Start-up happens in the constructor, or earlier if another library's
 * constructor calls a hook first: every hook calls sg_ensure_init(), which
 * runs sg_init_slow() until sg_ready is set. Configuration runs once
 * (config_guard); the real driver is resolved on first use of a hook, so a
 * process that never touches CUDA never loads libcuda because of us.
 *
 * Globals and their guards:
 *   cfg, sg_passthrough_all: written once under config_guard, then read-only.
 *   report_enabled: written under config_guard and in the fork child.
 *   sg_ready: atomic (see hooks.h). sg_in_hook: thread-local.
 */
#include "hooks.h"

#include "../core/config.h"
#include "../core/core.h"
#include "../core/log.h"
#include "../core/report.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int sg_ready;
int sg_passthrough_all;
__thread int sg_in_hook __attribute__((tls_model("initial-exec")));

static sg_config cfg;
static pthread_once_t config_guard = PTHREAD_ONCE_INIT;
static int report_enabled;

static const char *env_get(const char *name)
{
    return getenv(name);
}

/* Nonzero if this process reached the driver through us: a hook was called
 * or handed out. Processes that never did (a shell, srun, timeout running
 * the real program) write no report, so they cannot overwrite the report of
 * the process that did. */
static int used_driver(void)
{
    for (int i = 0; i < SG_HOOK_COUNT; i++) {
        sg_hook_counter c = sg_stats_hook((size_t)i);
        if (c.calls || c.resolved) return 1;
    }
    return 0;
}

static void at_exit(void)
{
    const char *policy = sg_policy_name(cfg.policy);
    if (!used_driver()) return;
    if (report_enabled) {
        char host[256], path[SG_CONFIG_VALUE_MAX * 4];
        if (gethostname(host, sizeof host) != 0) strcpy(host, "unknown");
        host[sizeof host - 1] = '\0';
        sg_path_env env = { (long)getpid(), host, sg_rank_from_env(env_get) };
        if (sg_report_path_expand(cfg.report, &env, path, sizeof path) != 0)
            SG_ERROR("%s=%s expands to a path that is too long: no report", SG_ENV_REPORT,
                     cfg.report);
        else
            sg_report_write_file(path, policy, sg_policy_name(cfg.policy_asked), cfg.nerrors);
    }
    sg_report_summary(policy);
}

/* A forked child starts from zero. It writes a report only if the path has
 * %p (otherwise it would overwrite its parent's). */
static void atfork_child(void)
{
    sg_stats_atfork_child();
    report_enabled = cfg.report[0] && strstr(cfg.report, "%p");
}

static void config_once(void)
{
    sg_config_parse(&cfg, env_get);
    sg_log_init(cfg.log_level, cfg.log_file);
    for (int i = 0; i < cfg.nerrors; i++) sg_log(SG_LOG_ERROR, "%s", cfg.errors[i]);
    if (cfg.nerrors && cfg.strict) {
        sg_log(SG_LOG_ERROR, "%s=1: exiting with status 2", SG_ENV_STRICT);
        _exit(2);
    }
    if (cfg.nerrors)
        sg_log(SG_LOG_ERROR, "bad configuration: running with policy off "
               "(set %s=1 to stop instead)", SG_ENV_STRICT);
    sg_passthrough_all = cfg.policy == SG_POLICY_OFF;
    report_enabled = cfg.report[0] != '\0';
    sg_stats_set_hooks(sg_hook_names, sg_hook_counters, SG_HOOK_COUNT);
    sg_core_init(&cfg);
    pthread_atfork(sg_stats_atfork_prepare, sg_stats_atfork_parent, atfork_child);
    atexit(at_exit);
    SG_INFO("loaded: policy %s, report %s", sg_policy_name(cfg.policy),
            cfg.report[0] ? cfg.report : "(none)");
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
    sg_config_init();
}
