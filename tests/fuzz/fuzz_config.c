/*
 * tests/fuzz/fuzz_config.c: libFuzzer target for the STABLEGRAPH_* parser
 * (sg_config_parse in core/config.c).
 *
 * The input is a little program that builds a fake environment: values for
 * up to FZ_SLOTS variables, slot i being the i-th distinct name the parser
 * asks for (so variables added to the table later are fuzzed too). Each
 * operation is one byte: slot = op & 7, then by (op >> 3) & 3:
 *   0  set the value to the next N bytes (N = next byte)
 *   1  append the next N bytes (N = next byte)
 *   2  append a unit of 1..4 bytes repeated up to 4199 times (overlong values)
 *   3  unset
 * Values are byte strings; an embedded NUL ends the C string getenv returns.
 *
 * Properties checked (FUZZ_ASSERT aborts): the parser only asks for
 * STABLEGRAPH_* names; its result is deterministic; every field is in range
 * and NUL-terminated; the effective policy is off exactly when there are
 * errors; and, for the variables this file knows, a reference model decides
 * whether the value is valid: a valid value is stored exactly and gives no
 * message, an invalid one leaves the default and gives one message that
 * names the variable and quotes the start of the value verbatim (so the
 * value was never used as a format).
 */
#include "core/config.h"
#include "fuzz_input.h"

#define FZ_SLOTS 8
#define FZ_VALUE_CAP 8192

typedef struct fz_value {
    int set;
    size_t len;
    char buf[FZ_VALUE_CAP + 1];
} fz_value;

static fz_value fz_vals[FZ_SLOTS];
static const char *fz_names[16];   /* the distinct names asked for, in order */
static int fz_nnames;

static const char *fake_getenv(const char *name)
{
    int i;
    FUZZ_ASSERT(name != NULL && strncmp(name, "STABLEGRAPH_", 12) == 0);
    for (i = 0; i < fz_nnames; i++)
        if (strcmp(fz_names[i], name) == 0) break;
    if (i == fz_nnames) {
        FUZZ_ASSERT(fz_nnames < (int)(sizeof fz_names / sizeof fz_names[0]));
        fz_names[fz_nnames++] = name;
    }
    return i < FZ_SLOTS && fz_vals[i].set ? fz_vals[i].buf : NULL;
}

static void append(fz_value *v, const uint8_t *bytes, size_t n)
{
    if (n > FZ_VALUE_CAP - v->len) n = FZ_VALUE_CAP - v->len;
    memcpy(v->buf + v->len, bytes, n);
    v->len += n;
    v->buf[v->len] = '\0';
    v->set = 1;
}

static void build_env(fuzz_in *in)
{
    memset(fz_vals, 0, sizeof fz_vals);
    while (!fuzz_empty(in)) {
        uint8_t op = fuzz_u8(in);
        fz_value *v = &fz_vals[op & 7];
        size_t got;
        const uint8_t *b;
        switch ((op >> 3) & 3) {
        case 0:
            v->len = 0;
            /* fall through */
        case 1:
            b = fuzz_bytes(in, fuzz_u8(in), &got);
            append(v, b, got);
            break;
        case 2: {
            size_t count = fuzz_uint(in, 2) % 4200;
            b = fuzz_bytes(in, fuzz_u8(in) % 4 + 1, &got);
            for (size_t i = 0; i < count && got; i++) append(v, b, got);
            v->set = 1;
            break;
        }
        case 3:
            v->set = 0;
            v->len = 0;
            v->buf[0] = '\0';
            break;
        }
    }
}

/* ---------------------------------------------------------------- model */

typedef enum { M_CHOICE, M_PATH, M_TEMPLATE, M_BYTES } model_kind;
typedef enum { F_POLICY, F_LOG, F_STRICT, F_LOG_FILE, F_REPORT, F_PLACE_MAX } model_field;

#define FZ_NAME_(s, n) n,
static const char *const policy_names[] = { SG_POLICY_LIST(FZ_NAME_) NULL };
static const char *const log_names[] = { SG_LOG_LIST(FZ_NAME_) NULL };
static const char *const strict_names[] = { SG_STRICT_LIST(FZ_NAME_) NULL };

typedef struct model_var {
    const char *name;
    model_kind kind;
    model_field field;
    const char *const *choices;
} model_var;

/* The variables whose rules README.md documents. Names are spelled out here
 * (not taken from config.h) so that a renamed variable shows up as a
 * difference instead of silently following the code. */
static const model_var model_vars[] = {
    { "STABLEGRAPH_POLICY", M_CHOICE, F_POLICY, policy_names },
    { "STABLEGRAPH_LOG", M_CHOICE, F_LOG, log_names },
    { "STABLEGRAPH_STRICT", M_CHOICE, F_STRICT, strict_names },
    { "STABLEGRAPH_LOG_FILE", M_PATH, F_LOG_FILE, NULL },
    { "STABLEGRAPH_REPORT", M_TEMPLATE, F_REPORT, NULL },
    { "STABLEGRAPH_PLACE_MAX_BYTES", M_BYTES, F_PLACE_MAX, NULL },
};

static const model_var *model_find(const char *name)
{
    for (size_t i = 0; i < sizeof model_vars / sizeof model_vars[0]; i++)
        if (strcmp(model_vars[i].name, name) == 0) return &model_vars[i];
    return NULL;
}

/* "123", "64K", "2M", "1G", "1T" (powers of 1024), without overflow. */
static int model_bytes(const char *s, size_t *out)
{
    static const char units[] = "KMGT";
    unsigned __int128 v = 0;
    const char *p = s;
    if (*p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (unsigned)(*p - '0');
        if (v > SIZE_MAX) return -1;
    }
    if (*p) {
        const char *u = p[1] ? NULL : strchr(units, *p);
        if (!u) return -1;
        for (long i = 0; i <= u - units; i++) {
            v *= 1024;
            if (v > SIZE_MAX) return -1;
        }
    }
    *out = (size_t)v;
    return 0;
}

static int model_template(const char *s)
{
    if (!*s) return -1;
    for (; *s; s++)
        if (*s == '%' && (!*++s || !strchr("phr%", *s))) return -1;
    return 0;
}

/* Index of value in choices, or -1. */
static int model_choice(const char *const *choices, const char *value)
{
    for (int i = 0; choices[i]; i++)
        if (strcmp(choices[i], value) == 0) return i;
    return -1;
}

/* 0 if the model accepts value for v; *idx / *bytes get the parsed value. */
static int model_valid(const model_var *v, const char *value, int *idx, size_t *bytes)
{
    if (strlen(value) > SG_CONFIG_VALUE_MAX) return -1;
    switch (v->kind) {
    case M_CHOICE: return (*idx = model_choice(v->choices, value)) < 0 ? -1 : 0;
    case M_PATH: return *value ? 0 : -1;
    case M_TEMPLATE: return model_template(value);
    case M_BYTES: return model_bytes(value, bytes);
    }
    return -1;
}

/* ---------------------------------------------------------------- checks */

/* Number of messages about `name`; *msg gets the last one. */
static int messages_about(const sg_config *cfg, const char *name, const char **msg)
{
    int n = 0;
    size_t len = strlen(name);
    for (int i = 0; i < cfg->nerrors; i++) {
        if (strncmp(cfg->errors[i], name, len) == 0 && cfg->errors[i][len] == '=') {
            n++;
            *msg = cfg->errors[i];
        }
    }
    return n;
}

static void check_field(const sg_config *cfg, const model_var *v, int valid, const char *value,
                        int idx, size_t bytes)
{
    switch (v->field) {
    case F_POLICY: FUZZ_ASSERT((int)cfg->policy_asked == (valid ? idx : SG_POLICY_DEFAULT)); break;
    case F_LOG: FUZZ_ASSERT((int)cfg->log_level == (valid ? idx : SG_LOG_DEFAULT)); break;
    case F_STRICT: FUZZ_ASSERT(cfg->strict == (valid ? idx : 0)); break;
    case F_LOG_FILE:
        FUZZ_ASSERT(strcmp(cfg->log_file, valid ? value : "") == 0);
        break;
    case F_REPORT:
        FUZZ_ASSERT(strcmp(cfg->report, valid ? value : "") == 0);
        break;
    case F_PLACE_MAX: FUZZ_ASSERT(cfg->place_max_bytes == (valid ? bytes : SIZE_MAX)); break;
    }
}

static void check_known(const sg_config *cfg, const model_var *v, const char *value)
{
    int idx = -1;
    size_t bytes = 0;
    const char *msg = NULL;
    int valid = value && model_valid(v, value, &idx, &bytes) == 0;
    int nmsg = messages_about(cfg, v->name, &msg);
    if (!value || valid) {
        FUZZ_ASSERT(nmsg == 0);
        check_field(cfg, v, value != NULL, value, idx, bytes);
        return;
    }
    FUZZ_ASSERT(nmsg == 1);
    check_field(cfg, v, 0, value, idx, bytes);
    /* The message quotes the value's first 64 bytes literally. */
    size_t quoted = strlen(value) < 64 ? strlen(value) : 64;
    size_t head = strlen(v->name) + 2;   /* NAME=" */
    FUZZ_ASSERT(msg[head - 1] == '"');
    FUZZ_ASSERT(strlen(msg) >= head + quoted && memcmp(msg + head, value, quoted) == 0);
    FUZZ_ASSERT(strstr(msg + head + quoted, "accepted: ") != NULL);
}

static void check_config(const sg_config *cfg, int rc)
{
    int set_and_asked = 0;
    FUZZ_ASSERT(rc == cfg->nerrors);
    FUZZ_ASSERT(cfg->nerrors >= 0 && cfg->nerrors <= SG_CONFIG_NVARS);
    FUZZ_ASSERT((unsigned)cfg->policy_asked < SG_POLICY_COUNT);
    FUZZ_ASSERT(cfg->policy == (cfg->nerrors ? SG_POLICY_OFF : cfg->policy_asked));
    FUZZ_ASSERT((unsigned)cfg->log_level < SG_LOG_COUNT);
    FUZZ_ASSERT(cfg->strict == 0 || cfg->strict == 1);
    FUZZ_ASSERT(memchr(cfg->log_file, 0, sizeof cfg->log_file) != NULL);
    FUZZ_ASSERT(memchr(cfg->report, 0, sizeof cfg->report) != NULL);
    for (int i = 0; i < cfg->nerrors; i++) {
        FUZZ_ASSERT(memchr(cfg->errors[i], 0, sizeof cfg->errors[i]) != NULL);
        /* Every message names a variable that was set. */
        int named = 0;
        for (int j = 0; j < fz_nnames && j < FZ_SLOTS; j++) {
            size_t len = strlen(fz_names[j]);
            named |= fz_vals[j].set && strncmp(cfg->errors[i], fz_names[j], len) == 0 &&
                     cfg->errors[i][len] == '=';
        }
        FUZZ_ASSERT(named);
    }
    for (int j = 0; j < fz_nnames; j++) {
        const char *value = j < FZ_SLOTS && fz_vals[j].set ? fz_vals[j].buf : NULL;
        const model_var *v = model_find(fz_names[j]);
        set_and_asked += value != NULL;
        if (v) check_known(cfg, v, value);
    }
    FUZZ_ASSERT(cfg->nerrors <= set_and_asked);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sg_config cfg, again;
    fuzz_in in = { data, size };
    build_env(&in);
    fz_nnames = 0;
    int rc = sg_config_parse(&cfg, fake_getenv);
    check_config(&cfg, rc);
    FUZZ_ASSERT(sg_config_parse(&again, fake_getenv) == rc);
    FUZZ_ASSERT(memcmp(&cfg, &again, sizeof cfg) == 0);
    return 0;
}
