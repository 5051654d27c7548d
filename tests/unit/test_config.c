/*
 * tests/unit/test_config.c: the STABLEGRAPH_* parser (core/config.c): every
 * variable with good and bad values, defaults, overlong values, and the
 * fall-back to policy off after any error.
 */
#include "check.h"
#include "core/config.h"

#include <stdint.h>
#include <string.h>

/* A fake environment: NULL-terminated name/value pairs. */
static const char *const *fake_env;
static const char *fake_getenv(const char *name)
{
    for (int i = 0; fake_env && fake_env[i]; i += 2)
        if (strcmp(fake_env[i], name) == 0) return fake_env[i + 1];
    return NULL;
}

static sg_config cfg;
static int parse(const char *const *env)
{
    fake_env = env;
    return sg_config_parse(&cfg, fake_getenv);
}

TEST(defaults)
{
    const char *const env[] = { NULL };
    CHECK_EQ(parse(env), 0);
    CHECK_EQ(cfg.policy, SG_POLICY_SKIP_PROFILED);   /* the default since issue 5's acceptance */
    CHECK_EQ(cfg.log_level, SG_LOG_WARN);
    CHECK_EQ(cfg.strict, 0);
    CHECK(cfg.report[0] == '\0' && cfg.log_file[0] == '\0');
    CHECK(cfg.place_max_bytes == SIZE_MAX);
}

TEST(every_policy)
{
    static const char *names[] = { "off", "always_update", "skip_temp", "skip_profiled" };
    for (int i = 0; i < 4; i++) {
        const char *const env[] = { "STABLEGRAPH_POLICY", names[i], NULL };
        CHECK_EQ(parse(env), 0);
        CHECK_EQ(cfg.policy, i);
        CHECK(strcmp(sg_policy_name(cfg.policy), names[i]) == 0);
    }
}

TEST(every_log_level)
{
    static const char *names[] = { "error", "warn", "info", "debug" };
    for (int i = 0; i < 4; i++) {
        const char *const env[] = { "STABLEGRAPH_LOG", names[i], NULL };
        CHECK_EQ(parse(env), 0);
        CHECK_EQ(cfg.log_level, i);
        CHECK(strcmp(sg_log_level_name(cfg.log_level), names[i]) == 0);
    }
}

TEST(paths_and_strict)
{
    const char *const env[] = { "STABLEGRAPH_LOG_FILE", "/tmp/x.log", "STABLEGRAPH_REPORT",
                                "/tmp/r-%p-%h-%r-%%.json", "STABLEGRAPH_STRICT", "1",
                                "STABLEGRAPH_POLICY", "off", NULL };
    CHECK_EQ(parse(env), 0);
    CHECK(strcmp(cfg.log_file, "/tmp/x.log") == 0);
    CHECK(strcmp(cfg.report, "/tmp/r-%p-%h-%r-%%.json") == 0);
    CHECK_EQ(cfg.strict, 1);
    CHECK_EQ(cfg.policy, SG_POLICY_OFF);
    const char *const env0[] = { "STABLEGRAPH_STRICT", "0", NULL };
    CHECK_EQ(parse(env0), 0);
    CHECK_EQ(cfg.strict, 0);
}

/* One bad value: one message naming the variable, the value and the
 * accepted values; the policy falls back to off. */
static void check_bad(const char *var, const char *value, const char *accepted)
{
    const char *const env[] = { var, value, "STABLEGRAPH_POLICY", "always_update", NULL };
    const char *const env2[] = { var, value, NULL };
    int policy_var = strcmp(var, "STABLEGRAPH_POLICY") == 0;
    CHECK_EQ(parse(policy_var ? env2 : env), 1);
    CHECK_EQ(cfg.policy, SG_POLICY_OFF);
    CHECK(strstr(cfg.errors[0], var) != NULL);
    CHECK(strstr(cfg.errors[0], accepted) != NULL);
    char quoted[80];
    snprintf(quoted, sizeof quoted, "\"%.40s", value);
    CHECK(strstr(cfg.errors[0], quoted) != NULL);
}

TEST(bad_values)
{
    check_bad("STABLEGRAPH_POLICY", "fast", "off|always_update|skip_temp|skip_profiled");
    check_bad("STABLEGRAPH_POLICY", "", "off|always_update|skip_temp|skip_profiled");
    check_bad("STABLEGRAPH_POLICY", "OFF", "off|always_update");
    check_bad("STABLEGRAPH_LOG", "verbose", "error|warn|info|debug");
    check_bad("STABLEGRAPH_STRICT", "yes", "0|1");
    check_bad("STABLEGRAPH_REPORT", "/tmp/r-%q.json", "%p pid");
    check_bad("STABLEGRAPH_REPORT", "/tmp/r-%", "%p pid");
    check_bad("STABLEGRAPH_REPORT", "", "%p pid");
    check_bad("STABLEGRAPH_LOG_FILE", "", "a file path");
    check_bad("STABLEGRAPH_PLACE_MAX_BYTES", "", "a byte count");
    check_bad("STABLEGRAPH_PLACE_MAX_BYTES", "12Q", "a byte count");
    check_bad("STABLEGRAPH_PLACE_MAX_BYTES", "-1", "a byte count");
    check_bad("STABLEGRAPH_PLACE_MAX_BYTES", "1MB", "a byte count");
    check_bad("STABLEGRAPH_PLACE_MAX_BYTES", "99999999999999999999", "a byte count");
    check_bad("STABLEGRAPH_PLACE_MAX_BYTES", "16777216T", "a byte count");
}

/* STABLEGRAPH_PLACE_MAX_BYTES: plain counts and binary suffixes. */
TEST(place_max_bytes)
{
    static const struct { const char *v; size_t want; } cases[] = {
        { "0", 0 }, { "4096", 4096 }, { "64K", 64u << 10 }, { "2M", 2u << 20 },
        { "3G", (size_t)3 << 30 }, { "1T", (size_t)1 << 40 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *const env[] = { "STABLEGRAPH_PLACE_MAX_BYTES", cases[i].v, NULL };
        CHECK_EQ(parse(env), 0);
        CHECK(cfg.place_max_bytes == cases[i].want);
        CHECK_EQ(cfg.policy, SG_POLICY_DEFAULT);         /* a good value keeps the policy */
    }
}

/* The skip_profiled variables: defaults, good values, bad values rejected. */
TEST(skip_profiled_vars)
{
    const char *const none[] = { NULL };
    CHECK_EQ(parse(none), 0);
    CHECK_EQ(cfg.profile_steps, 3);
    CHECK_EQ(cfg.alias, SG_ALIAS_NEVER);            /* aliasing is an opt-in (issue 10) */
    CHECK(cfg.alias_min_bytes == (size_t)1 << 20);
    CHECK_EQ(cfg.max_generations, 8);
    CHECK_EQ(cfg.costs[0], 0);                      /* the built-in cost table */
    CHECK_EQ(cfg.cost_times, SG_COST_TIMES_MEASURED);
    CHECK_EQ(cfg.audit_records, 0);                 /* off unless asked */
    CHECK(cfg.variant_memory == (size_t)64 << 20);
    const char *const good[] = { "STABLEGRAPH_PROFILE_STEPS", "1000", "STABLEGRAPH_ALIAS", "never",
                                 "STABLEGRAPH_ALIAS_MIN_BYTES", "64K",
                                 "STABLEGRAPH_MAX_GENERATIONS", "16", NULL };
    CHECK_EQ(parse(good), 0);
    CHECK_EQ(cfg.profile_steps, 1000);
    CHECK_EQ(cfg.alias, SG_ALIAS_NEVER);
    CHECK(cfg.alias_min_bytes == 64u << 10);
    CHECK_EQ(cfg.max_generations, 16);
    const char *const always[] = { "STABLEGRAPH_ALIAS", "always", "STABLEGRAPH_PROFILE_STEPS", "1",
                                   "STABLEGRAPH_MAX_GENERATIONS", "1", NULL };
    CHECK_EQ(parse(always), 0);
    CHECK_EQ(cfg.alias, SG_ALIAS_ALWAYS);
    CHECK_EQ(cfg.profile_steps, 1);
    CHECK_EQ(cfg.max_generations, 1);
    CHECK(strcmp(sg_alias_name(SG_ALIAS_ALWAYS), "always") == 0);
    const char *const costs[] = { "STABLEGRAPH_COSTS", "/tmp/costs-measured.tsv",
                                  "STABLEGRAPH_COST_TIMES", "table", NULL };
    CHECK_EQ(parse(costs), 0);
    CHECK(strcmp(cfg.costs, "/tmp/costs-measured.tsv") == 0);
    CHECK_EQ(cfg.cost_times, SG_COST_TIMES_TABLE);
    CHECK(strcmp(sg_cost_times_name(SG_COST_TIMES_TABLE), "table") == 0);
    check_bad("STABLEGRAPH_COSTS", "", "a file path");
    check_bad("STABLEGRAPH_COST_TIMES", "both", "measured|table");
    const char *const audit[] = { "STABLEGRAPH_AUDIT_RECORDS", "1", NULL };
    CHECK_EQ(parse(audit), 0);
    CHECK_EQ(cfg.audit_records, 1);
    check_bad("STABLEGRAPH_AUDIT_RECORDS", "yes", "0|1");
    check_bad("STABLEGRAPH_PROFILE_STEPS", "0", "an integer from 1 to 1000");
    check_bad("STABLEGRAPH_PROFILE_STEPS", "1001", "an integer from 1 to 1000");
    check_bad("STABLEGRAPH_PROFILE_STEPS", "3K", "an integer from 1 to 1000");
    check_bad("STABLEGRAPH_PROFILE_STEPS", "-3", "an integer from 1 to 1000");
    check_bad("STABLEGRAPH_PROFILE_STEPS", "", "an integer from 1 to 1000");
    check_bad("STABLEGRAPH_MAX_GENERATIONS", "17", "an integer from 1 to 16");
    check_bad("STABLEGRAPH_MAX_GENERATIONS", "99999999999999999999999", "an integer from 1 to 16");
    check_bad("STABLEGRAPH_ALIAS", "sometimes", "auto|always|never");
    check_bad("STABLEGRAPH_ALIAS_MIN_BYTES", "1MB", "a byte count");
    const char *const mem[] = { "STABLEGRAPH_VARIANT_MEMORY", "1G", NULL };
    CHECK_EQ(parse(mem), 0);
    CHECK(cfg.variant_memory == (size_t)1 << 30);
    const char *const nomem[] = { "STABLEGRAPH_VARIANT_MEMORY", "0", NULL };
    CHECK_EQ(parse(nomem), 0);
    CHECK(cfg.variant_memory == 0);
    check_bad("STABLEGRAPH_VARIANT_MEMORY", "lots", "a byte count");
    check_bad("STABLEGRAPH_VARIANT_MEMORY", "-1", "a byte count");
    const char *const unset[] = { NULL };
    CHECK_EQ(parse(unset), 0);
    CHECK(cfg.headroom_bytes == SG_HEADROOM_AUTO);           /* unset: per device */
    const char *const room[] = { "STABLEGRAPH_HEADROOM", "512M", NULL };
    CHECK_EQ(parse(room), 0);
    CHECK(cfg.headroom_bytes == (size_t)512 << 20);
    const char *const noroom[] = { "STABLEGRAPH_HEADROOM", "0", NULL };
    CHECK_EQ(parse(noroom), 0);
    CHECK(cfg.headroom_bytes == 0);
    const char *const maxroom[] = { "STABLEGRAPH_HEADROOM", "18446744073709551615", NULL };
    CHECK_EQ(parse(maxroom), 0);
    CHECK(cfg.headroom_bytes != SG_HEADROOM_AUTO && cfg.headroom_bytes >= SIZE_MAX - 1);  /* not the default */
    check_bad("STABLEGRAPH_HEADROOM", "auto", "a byte count");
    check_bad("STABLEGRAPH_HEADROOM", "1.5G", "a byte count");
    check_bad("STABLEGRAPH_HEADROOM", "16MB", "a byte count");
    check_bad("STABLEGRAPH_HEADROOM", "18446744073709551616", "a byte count");
    check_bad("STABLEGRAPH_HEADROOM", "16777216T", "a byte count");
}

TEST(bad_log_keeps_default_level)
{
    const char *const env[] = { "STABLEGRAPH_LOG", "loud", NULL };
    CHECK_EQ(parse(env), 1);
    CHECK_EQ(cfg.log_level, SG_LOG_WARN);
}

TEST(overlong_values)
{
    static char big[SG_CONFIG_VALUE_MAX + 2];
    memset(big, 'a', sizeof big - 1);
    const char *const env[] = { "STABLEGRAPH_REPORT", big, NULL };
    CHECK_EQ(parse(env), 1);
    CHECK(strstr(cfg.errors[0], "too long") != NULL);
    CHECK(cfg.report[0] == '\0');
    big[SG_CONFIG_VALUE_MAX] = '\0';  /* exactly the maximum is fine */
    CHECK_EQ(parse(env), 0);
    CHECK_EQ(strlen(cfg.report), SG_CONFIG_VALUE_MAX);
}

TEST(several_bad_values)
{
    const char *const env[] = { "STABLEGRAPH_POLICY", "x", "STABLEGRAPH_LOG", "y",
                                "STABLEGRAPH_STRICT", "1", NULL };
    CHECK_EQ(parse(env), 2);
    CHECK_EQ(cfg.strict, 1);
    CHECK(strstr(cfg.errors[0], "STABLEGRAPH_POLICY") != NULL);
    CHECK(strstr(cfg.errors[1], "STABLEGRAPH_LOG") != NULL);
}

int main(void)
{
    RUN(defaults);
    RUN(every_policy);
    RUN(every_log_level);
    RUN(paths_and_strict);
    RUN(bad_values);
    RUN(place_max_bytes);
    RUN(skip_profiled_vars);
    RUN(bad_log_keeps_default_level);
    RUN(overlong_values);
    RUN(several_bad_values);
    return check_done();
}
