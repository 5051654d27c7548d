/*
 * core/process.c: start-up, fork handling and the exit report (process.h).
 *
 * Globals: cfg, env_get and report_path are written once by
 * sg_process_start (under interpose/'s once-guard), then read-only;
 * report_enabled is also written in the fork child.
 */
#include "process.h"

#include "core.h"
#include "costs.h"
#include "log.h"
#include "report.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static sg_config cfg;
static sg_getenv_fn env_get;
static int report_enabled;
/* cfg.report, made absolute at start-up (from_start_dir). */
static char report_path[PATH_MAX];

/* Nonzero if this process reached the driver through the library. */
static int used_driver(void)
{
    for (size_t i = 0; i < sg_stats_hook_count(); i++) {
        sg_hook_counter c = sg_stats_hook(i);
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
        if (sg_report_path_expand(report_path, &env, path, sizeof path) != 0)
            SG_ERROR("%s=%s expands to a path that is too long: no report", SG_ENV_REPORT,
                     cfg.report);
        else
            sg_report_write_file(path, policy, sg_policy_name(cfg.policy_asked), cfg.nerrors);
    }
    sg_report_summary(policy);
}

static void atfork_prepare(void) { sg_core_atfork(0); }
static void atfork_parent(void) { sg_core_atfork(1); }
static void atfork_child(void) { sg_core_atfork(2); }

/* Registered at start-up: a child forked before the driver was loaded
 * writes a report only if the path has %p, like any other child. */
static void atfork_child_report(void)
{
    report_enabled = cfg.report[0] && strstr(cfg.report, "%p");
}

/* The handlers of core/'s locks are registered after the driver is loaded,
 * not at start-up: prepare handlers run in the reverse order of
 * registration, and the library holds its locks across driver calls (a
 * launch on a capturing stream under the recorder's lock), so its prepare
 * must run before a driver's that takes the driver's own locks. Registered
 * at start-up, before a driver that the program (the CUDA runtime, JAX)
 * loads with dlopen afterwards, the driver's prepare ran first and held its
 * locks while the library's waited for a lock that another thread held
 * across a driver call waiting for them: fork() hung
 * (tests/e2e/adv_interpose.c, fork_dlopen). */
void sg_process_driver_loaded(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* Why path is no cost table without reading it: not a regular file (a
 * FIFO's open would block every process that inherits the variable, before
 * its main: tests/e2e/test_correctness.sh, i6/costs_fifo); NULL otherwise,
 * or if it cannot be opened (sg_costs_load says why). */
static const char *costs_not_regular(const char *path)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return NULL;
    int regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    close(fd);
    return regular ? NULL : "not a regular file";
}

/* The cost table (STABLEGRAPH_COSTS, costs.h): one that cannot be read is a
 * configuration error like a bad variable (policy off, or exit when strict). */
static void load_costs(sg_config *c)
{
    sg_costs_reset();
    if (!c->costs[0] || c->nerrors >= SG_CONFIG_NVARS) return;
    char err[SG_CONFIG_MSG_MAX - 64];
    const char *why = costs_not_regular(c->costs);
    if (why) snprintf(err, sizeof err, "%.*s: %s", (int)sizeof err / 2, c->costs, why);
    else if (sg_costs_load(c->costs, err, sizeof err) == 0) return;
    snprintf(c->errors[c->nerrors++], SG_CONFIG_MSG_MAX, "%s: not a cost table: %s", SG_ENV_COSTS, err);
    c->policy = SG_POLICY_OFF;
}

/* A relative report or log path names a file in the folder the program
 * started in, as the user who set it meant, not in the one the program is
 * in when the file is written (at exit, at the first line logged): a
 * program that changed folder (a daemon to /, a job into a scratch folder
 * it removes before exit) put the report elsewhere, or nowhere
 * (tests/e2e/test_lifecycle.sh, chdir). Into buf (size bytes), '%' of the
 * folder's name doubled when template (the report's %-escapes); path
 * itself if it is absolute, "-", or the folder's name is unknown or too
 * long. */
static const char *from_start_dir(const char *path, int template, char *buf, size_t size)
{
    char cwd[PATH_MAX];
    if (!path[0] || path[0] == '/' || strcmp(path, "-") == 0 || !getcwd(cwd, sizeof cwd))
        return path;
    size_t n = 0;
    const char *c = cwd;
    for (; *c && n + 2 < size; c++) {
        if (*c == '%' && template) buf[n++] = '%';
        buf[n++] = *c;
    }
    if (*c) return path;
    int m = snprintf(buf + n, size - n, "/%s", path);
    return m > 0 && (size_t)m < size - n ? buf : path;
}

int sg_process_start(sg_getenv_fn getenv_fn, const char *const *hook_names,
                     sg_hook_counter *counters, size_t nhooks)
{
    env_get = getenv_fn;
    sg_config_parse(&cfg, getenv_fn);
    load_costs(&cfg);
    char log_file[SG_CONFIG_VALUE_MAX + 1];   /* sg_log_init copies it */
    sg_log_init(cfg.log_level, from_start_dir(cfg.log_file, 0, log_file, sizeof log_file));
    const char *rp = from_start_dir(cfg.report, 1, report_path, sizeof report_path);
    if (rp != report_path) snprintf(report_path, sizeof report_path, "%s", rp);
    sg_report_note_start(report_path);
    for (int i = 0; i < cfg.nerrors; i++) sg_log(SG_LOG_ERROR, "%s", cfg.errors[i]);
    if (cfg.nerrors && cfg.strict) {
        sg_log(SG_LOG_ERROR, "%s=1: exiting with status 2", SG_ENV_STRICT);
        _exit(2);
    }
    if (cfg.nerrors)
        sg_log(SG_LOG_ERROR, "bad configuration: running with policy off "
               "(set %s=1 to stop instead)", SG_ENV_STRICT);
    report_enabled = cfg.report[0] != '\0';
    sg_stats_set_hooks(hook_names, counters, nhooks);
    sg_caps caps = sg_core_init(&cfg);
    pthread_atfork(NULL, NULL, atfork_child_report);
    atexit(at_exit);
    SG_INFO("loaded: policy %s, report %s", sg_policy_name(cfg.policy),
            cfg.report[0] ? cfg.report : "(none)");
    return caps.observe;
}
