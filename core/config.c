/*
 * core/config.c: the table-driven parser for the STABLEGRAPH_* variables.
 *
 * One row per variable says how to read it (one of a list of names, a path,
 * or a report-path template) and where the result goes. No global state; no
 * locks needed (see config.h).
 */
#include "config.h"
#include "pathtmpl.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define SG_NAME_ITEM_(s, n) n,
static const char *const policy_names[] = { SG_POLICY_LIST(SG_NAME_ITEM_) NULL };
static const char *const log_names[] = { SG_LOG_LIST(SG_NAME_ITEM_) NULL };
static const char *const strict_names[] = { SG_STRICT_LIST(SG_NAME_ITEM_) NULL };
static const char *const alias_names[] = { SG_ALIAS_LIST(SG_NAME_ITEM_) NULL };
static const char *const cost_times_names[] = { SG_COST_TIMES_LIST(SG_NAME_ITEM_) NULL };

typedef enum { SG_VAR_CHOICE, SG_VAR_PATH, SG_VAR_REPORT_PATH, SG_VAR_BYTES, SG_VAR_INT } sg_var_kind;

typedef struct {
    const char *env;
    sg_var_kind kind;
    const char *const *choices;  /* SG_VAR_CHOICE: accepted names, NULL-terminated */
    size_t offset;               /* where in sg_config the result goes */
    int lo, hi;                  /* SG_VAR_INT: accepted range (an int field) */
} sg_var;

static const sg_var vars[SG_CONFIG_NVARS] = {
    { SG_ENV_POLICY, SG_VAR_CHOICE, policy_names, offsetof(sg_config, policy_asked), 0, 0 },
    { SG_ENV_LOG, SG_VAR_CHOICE, log_names, offsetof(sg_config, log_level), 0, 0 },
    { SG_ENV_LOG_FILE, SG_VAR_PATH, NULL, offsetof(sg_config, log_file), 0, 0 },
    { SG_ENV_REPORT, SG_VAR_REPORT_PATH, NULL, offsetof(sg_config, report), 0, 0 },
    { SG_ENV_STRICT, SG_VAR_CHOICE, strict_names, offsetof(sg_config, strict), 0, 0 },
    { SG_ENV_PLACE_MAX, SG_VAR_BYTES, NULL, offsetof(sg_config, place_max_bytes), 0, 0 },
    { SG_ENV_PROFILE_STEPS, SG_VAR_INT, NULL, offsetof(sg_config, profile_steps), 1,
      SG_PROFILE_STEPS_MAX },
    { SG_ENV_ALIAS, SG_VAR_CHOICE, alias_names, offsetof(sg_config, alias), 0, 0 },
    { SG_ENV_ALIAS_MIN, SG_VAR_BYTES, NULL, offsetof(sg_config, alias_min_bytes), 0, 0 },
    { SG_ENV_MAX_GENERATIONS, SG_VAR_INT, NULL, offsetof(sg_config, max_generations), 1,
      SG_MAX_GENERATIONS_MAX },
    { SG_ENV_COSTS, SG_VAR_PATH, NULL, offsetof(sg_config, costs), 0, 0 },
    { SG_ENV_COST_TIMES, SG_VAR_CHOICE, cost_times_names, offsetof(sg_config, cost_times), 0, 0 },
    { SG_ENV_VARIANT_MEMORY, SG_VAR_BYTES, NULL, offsetof(sg_config, variant_memory), 0, 0 },
    { SG_ENV_AUDIT_RECORDS, SG_VAR_CHOICE, strict_names, offsetof(sg_config, audit_records), 0, 0 },
    { SG_ENV_HEADROOM, SG_VAR_BYTES, NULL, offsetof(sg_config, headroom_bytes), 0, 0 },
};

const char *sg_policy_name(sg_policy p)
{
    return (unsigned)p < SG_POLICY_COUNT ? policy_names[p] : "?";
}

const char *sg_log_level_name(sg_log_level l)
{
    return (unsigned)l < SG_LOG_COUNT ? log_names[l] : "?";
}

const char *sg_alias_name(sg_alias_mode a)
{
    return (unsigned)a < SG_ALIAS_COUNT ? alias_names[a] : "?";
}

const char *sg_cost_times_name(sg_cost_times t)
{
    return (unsigned)t < SG_COST_TIMES_COUNT ? cost_times_names[t] : "?";
}

/* Writes "a|b|c" for a choice list into buf. */
static void join_choices(const char *const *choices, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; choices[i] && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? "|" : "", choices[i]);
}

/* Records the complaint about one variable. */
static void bad_value(sg_config *cfg, const sg_var *v, const char *value, const char *why)
{
    char accepted[256];
    char *msg = cfg->errors[cfg->nerrors++];
    if (v->kind == SG_VAR_CHOICE) {
        join_choices(v->choices, accepted, sizeof accepted);
    } else if (v->kind == SG_VAR_INT) {
        snprintf(accepted, sizeof accepted, "an integer from %d to %d", v->lo, v->hi);
    } else {
        snprintf(accepted, sizeof accepted, "%s",
                 v->kind == SG_VAR_PATH    ? "a file path"
                 : v->kind == SG_VAR_BYTES ? "a byte count, optionally with K, M, G or T "
                                             "(powers of 1024)"
                                           : "a file path; %p pid, %h host, %r rank, %% a literal %");
    }
    /* Show at most 64 characters of an overlong value. */
    snprintf(msg, SG_CONFIG_MSG_MAX, "%s=\"%.*s%s\" is not valid (%s); accepted: %s",
             v->env, 64, value, strlen(value) > 64 ? "..." : "", why, accepted);
}

/* Reads "123", "64K", "2M", "1G", "1T" (powers of 1024) into *out.
 * 0 on success, -1 if malformed or too large for size_t. */
static int parse_bytes(const char *value, size_t *out)
{
    static const char units[] = "KMGT";
    size_t v = 0;
    const char *p = value;
    if (*p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        size_t d = (size_t)(*p - '0');
        if (v > (SIZE_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    if (*p) {
        const char *u = strchr(units, *p);
        if (!u || p[1]) return -1;
        for (long i = 0; i <= u - units; i++) {
            if (v > SIZE_MAX / 1024) return -1;
            v *= 1024;
        }
    }
    *out = v;
    return 0;
}

/* Parses one variable; returns 0 on success, -1 after recording a complaint. */
static int parse_var(sg_config *cfg, const sg_var *v, const char *value)
{
    char *dst = (char *)cfg + v->offset;
    size_t len = strlen(value);
    if (len > SG_CONFIG_VALUE_MAX) {
        bad_value(cfg, v, value, "too long");
        return -1;
    }
    switch (v->kind) {
    case SG_VAR_CHOICE:
        for (int i = 0; v->choices[i]; i++) {
            if (strcmp(v->choices[i], value) == 0) {
                memcpy(dst, &i, sizeof i);  /* enum fields and int share a size */
                return 0;
            }
        }
        bad_value(cfg, v, value, "unknown value");
        return -1;
    case SG_VAR_REPORT_PATH:
        if (sg_report_path_check(value) != 0) {
            bad_value(cfg, v, value, "unknown or incomplete % sequence, or empty");
            return -1;
        }
        break;
    case SG_VAR_PATH:
        if (len == 0) {
            bad_value(cfg, v, value, "empty");
            return -1;
        }
        break;
    case SG_VAR_BYTES: {
        size_t bytes;
        if (parse_bytes(value, &bytes) != 0) {
            bad_value(cfg, v, value, "not a byte count, or too large");
            return -1;
        }
        memcpy(dst, &bytes, sizeof bytes);
        return 0;
    }
    case SG_VAR_INT: {
        size_t n;   /* digits only: no sign, no suffix */
        if (strspn(value, "0123456789") != len || parse_bytes(value, &n) != 0 ||
            n < (size_t)v->lo || n > (size_t)v->hi) {
            bad_value(cfg, v, value, "not an integer in range");
            return -1;
        }
        int i = (int)n;
        memcpy(dst, &i, sizeof i);
        return 0;
    }
    }
    memcpy(dst, value, len + 1);
    return 0;
}

int sg_config_parse(sg_config *cfg, sg_getenv_fn getenv_fn)
{
    _Static_assert(sizeof(sg_policy) == sizeof(int) && sizeof(sg_log_level) == sizeof(int) &&
                   sizeof(sg_alias_mode) == sizeof(int) && sizeof(sg_cost_times) == sizeof(int),
                   "choice fields are written as int");
    memset(cfg, 0, sizeof *cfg);
    cfg->policy_asked = SG_POLICY_DEFAULT;
    cfg->log_level = SG_LOG_DEFAULT;
    cfg->place_max_bytes = SIZE_MAX;
    cfg->headroom_bytes = SG_HEADROOM_AUTO;
    cfg->profile_steps = SG_PROFILE_STEPS_DEFAULT;
    cfg->alias = SG_ALIAS_DEFAULT;
    cfg->alias_min_bytes = SG_ALIAS_MIN_DEFAULT;
    cfg->max_generations = SG_MAX_GENERATIONS_DEFAULT;
    cfg->variant_memory = SG_VARIANT_MEMORY_DEFAULT;
    for (size_t i = 0; i < SG_CONFIG_NVARS; i++) {
        const char *value = getenv_fn(vars[i].env);
        if (value) parse_var(cfg, &vars[i], value);
    }
    /* a headroom of SIZE_MAX bytes asked for is more than any device, not
     * the default that SG_HEADROOM_AUTO (the same value) stands for (round 25) */
    if (cfg->headroom_bytes == SG_HEADROOM_AUTO && getenv_fn(SG_ENV_HEADROOM)) cfg->headroom_bytes = SIZE_MAX - 1;
    cfg->policy = cfg->nerrors ? SG_POLICY_OFF : cfg->policy_asked;
    return cfg->nerrors;
}
