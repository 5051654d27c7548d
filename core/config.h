/*
 * core/config.h: every STABLEGRAPH_* environment variable, its accepted
 * values, and the table-driven parser that reads them.
 *
 * This is the one place that names the variables: scripts/stablegraph-run and
 * README.md mirror these lists, and tests/e2e/test_wrapper.sh checks that
 * the wrapper's accepted values are the ones listed here.
 *
 * Thread safety: sg_config_parse() fills a caller-owned struct and touches
 * no global state; the library parses once, at start-up, under its init guard.
 */
#ifndef SG_CONFIG_H
#define SG_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define SG_ENV_POLICY   "STABLEGRAPH_POLICY"
#define SG_ENV_LOG      "STABLEGRAPH_LOG"
#define SG_ENV_LOG_FILE "STABLEGRAPH_LOG_FILE"
#define SG_ENV_REPORT   "STABLEGRAPH_REPORT"
#define SG_ENV_STRICT   "STABLEGRAPH_STRICT"
#define SG_ENV_PLACE_MAX "STABLEGRAPH_PLACE_MAX_BYTES"
#define SG_ENV_PROFILE_STEPS "STABLEGRAPH_PROFILE_STEPS"
#define SG_ENV_ALIAS "STABLEGRAPH_ALIAS"
#define SG_ENV_ALIAS_MIN "STABLEGRAPH_ALIAS_MIN_BYTES"
#define SG_ENV_MAX_GENERATIONS "STABLEGRAPH_MAX_GENERATIONS"
#define SG_ENV_COSTS "STABLEGRAPH_COSTS"
#define SG_ENV_COST_TIMES "STABLEGRAPH_COST_TIMES"
#define SG_ENV_VARIANT_MEMORY "STABLEGRAPH_VARIANT_MEMORY"
#define SG_ENV_AUDIT_RECORDS "STABLEGRAPH_AUDIT_RECORDS"
#define SG_ENV_HEADROOM "STABLEGRAPH_HEADROOM"

/* Accepted values, in order: X(ENUM_SUFFIX, "name"). */
#define SG_POLICY_LIST(X)                                                     \
    X(OFF, "off")                                                             \
    X(ALWAYS_UPDATE, "always_update")                                         \
    X(SKIP_TEMP, "skip_temp")                                                 \
    X(SKIP_PROFILED, "skip_profiled")
#define SG_LOG_LIST(X)                                                        \
    X(ERROR, "error")                                                         \
    X(WARN, "warn")                                                           \
    X(INFO, "info")                                                           \
    X(DEBUG, "debug")
/* STABLEGRAPH_STRICT and STABLEGRAPH_AUDIT_RECORDS: off or on. */
#define SG_STRICT_LIST(X)                                                     \
    X(NO, "0")                                                                \
    X(YES, "1")
/* STABLEGRAPH_ALIAS (skip_profiled): whether varying pointers into
 * own-handle buffers are aliased into slots: never (the default: a kernel may
 * keep a slot address it was given, which the library cannot see; README
 * "Aliasing"), always, or auto (when the estimated remap cost is below the
 * measured update cost). always and auto are opt-ins. */
#define SG_ALIAS_LIST(X)                                                      \
    X(AUTO, "auto")                                                           \
    X(ALWAYS, "always")                                                       \
    X(NEVER, "never")
/* STABLEGRAPH_COST_TIMES (skip_profiled's purchase of variants, costs.h):
 * what an exec's forwarded updates cost: the times the library measured
 * (the default), or the cost table's figures only (reproducible). */
#define SG_COST_TIMES_LIST(X)                                                 \
    X(MEASURED, "measured")                                                   \
    X(TABLE, "table")

#define SG_ENUM_ITEM_(prefix, suffix) prefix##suffix,
#define SG_POLICY_ITEM_(s, n) SG_ENUM_ITEM_(SG_POLICY_, s)
#define SG_LOG_ITEM_(s, n) SG_ENUM_ITEM_(SG_LOG_, s)
#define SG_ALIAS_ITEM_(s, n) SG_ENUM_ITEM_(SG_ALIAS_, s)
#define SG_COST_TIMES_ITEM_(s, n) SG_ENUM_ITEM_(SG_COST_TIMES_, s)
typedef enum { SG_POLICY_LIST(SG_POLICY_ITEM_) SG_POLICY_COUNT } sg_policy;
typedef enum { SG_LOG_LIST(SG_LOG_ITEM_) SG_LOG_COUNT } sg_log_level;
typedef enum { SG_ALIAS_LIST(SG_ALIAS_ITEM_) SG_ALIAS_COUNT } sg_alias_mode;
typedef enum { SG_COST_TIMES_LIST(SG_COST_TIMES_ITEM_) SG_COST_TIMES_COUNT } sg_cost_times;

#define SG_POLICY_DEFAULT SG_POLICY_SKIP_PROFILED
#define SG_LOG_DEFAULT    SG_LOG_WARN
/* skip_profiled defaults (README, issue 5). */
#define SG_PROFILE_STEPS_DEFAULT 3
#define SG_PROFILE_STEPS_MAX     1000
#define SG_ALIAS_DEFAULT         SG_ALIAS_NEVER
#define SG_ALIAS_MIN_DEFAULT     ((size_t)1 << 20)
#define SG_MAX_GENERATIONS_DEFAULT 8
#define SG_MAX_GENERATIONS_MAX   16
#define SG_VARIANT_MEMORY_DEFAULT ((size_t)64 << 20)
/* STABLEGRAPH_HEADROOM unset: a sixteenth of each device's memory, at most
 * SG_HEADROOM_AUTO_MAX (mem_arena.c). */
#define SG_HEADROOM_AUTO         SIZE_MAX
#define SG_HEADROOM_AUTO_MAX     ((size_t)256 << 20)

/* Longest value accepted for any variable (longer values are rejected). */
#define SG_CONFIG_VALUE_MAX 1024
/* Room for one complaint about one variable. */
#define SG_CONFIG_MSG_MAX (SG_CONFIG_VALUE_MAX + 256)
#define SG_CONFIG_NVARS 15

typedef struct sg_config {
    sg_policy policy;          /* effective policy: SG_POLICY_OFF after any error */
    sg_policy policy_asked;    /* what STABLEGRAPH_POLICY said (or the default) */
    sg_log_level log_level;
    int strict;                /* STABLEGRAPH_STRICT=1 */
    /* STABLEGRAPH_PLACE_MAX_BYTES: allocations larger than this go to the
     * driver unchanged (never placed). A byte count with an optional K, M, G
     * or T suffix (powers of 1024). Default SIZE_MAX: no limit. */
    size_t place_max_bytes;
    /* STABLEGRAPH_HEADROOM: device memory the library keeps free for the
     * driver by giving back unused placed chunks (a byte count as for
     * PLACE_MAX_BYTES; 0: none kept; default SG_HEADROOM_AUTO). */
    size_t headroom_bytes;
    /* skip_profiled (core/profiled.h):
     * STABLEGRAPH_PROFILE_STEPS: launches profiled per exec before deciding
     *   (1..1000, default 3);
     * STABLEGRAPH_ALIAS: never | always | auto (default never: opt-in);
     * STABLEGRAPH_ALIAS_MIN_BYTES: allocations of at least this size get their
     *   own physical handles so that they can be aliased (byte count as for
     *   PLACE_MAX_BYTES; default 1M);
     * STABLEGRAPH_MAX_GENERATIONS: exec variants kept per exec (1..16,
     *   default 8: a rotation among up to 8 buffer sets is served without updates). */
    int profile_steps;
    sg_alias_mode alias;
    size_t alias_min_bytes;
    int max_generations;
    /* STABLEGRAPH_VARIANT_MEMORY: host memory the exec variants of all execs
     * may hold together, as the library estimates it (prof_rent.c): a byte
     * count as for PLACE_MAX_BYTES; default 64M; 0: no variants. */
    size_t variant_memory;
    /* STABLEGRAPH_COSTS: a cost table (core/costs.tsv format) read at
     * start-up instead of the built-in one ("" = built in); a table that
     * cannot be read is a configuration error. STABLEGRAPH_COST_TIMES:
     * measured | table (see SG_COST_TIMES_LIST). */
    char costs[SG_CONFIG_VALUE_MAX + 1];
    sg_cost_times cost_times;
    /* STABLEGRAPH_AUDIT_RECORDS=1: every capture-time record a decision
     * uses is also checked against the graph read back through the driver
     * (core/rec_audit.c; slow: a diagnosis of the library, default 0). */
    int audit_records;
    char log_file[SG_CONFIG_VALUE_MAX + 1];  /* "" = stderr */
    char report[SG_CONFIG_VALUE_MAX + 1];    /* "" = no report; template with %p %h %r %% */
    int nerrors;               /* number of variables with a bad value */
    char errors[SG_CONFIG_NVARS][SG_CONFIG_MSG_MAX]; /* one message per bad variable */
} sg_config;

typedef const char *(*sg_getenv_fn)(const char *name);

/* Fills *cfg from the variables that getenv_fn returns (NULL = unset).
 * Never fails: a bad value is recorded in cfg->errors (one message naming the
 * variable, the value and the accepted values), and then cfg->policy is
 * SG_POLICY_OFF. Returns cfg->nerrors. */
int sg_config_parse(sg_config *cfg, sg_getenv_fn getenv_fn);

/* Name of a policy or log level ("?" when out of range). */
const char *sg_policy_name(sg_policy p);
const char *sg_log_level_name(sg_log_level l);
const char *sg_alias_name(sg_alias_mode a);
const char *sg_cost_times_name(sg_cost_times t);

#endif /* SG_CONFIG_H */
