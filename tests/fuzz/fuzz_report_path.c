/*
 * tests/fuzz/fuzz_report_path.c: libFuzzer target for the report path
 * template (sg_report_path_check and sg_report_path_expand in
 * core/pathtmpl.c).
 *
 * Input: 2 bytes output size n (mod 6000, 0 allowed), 1 flag byte (bit 0:
 * no rank), 8 bytes pid, then template, host and rank as NUL-separated byte
 * strings (missing ones are empty).
 *
 * The output buffer is malloc'ed with exactly n bytes (so AddressSanitizer
 * sees a one-byte overflow) and filled with garbage first. Properties: the
 * result is NUL-terminated inside the buffer; on failure it is the empty
 * string; it is what a reference expansion gives ('/' in host and rank
 * turned into '_', %p the pid, %r "norank" without a rank, %% a '%') when
 * that is valid and shorter than n, and a failure otherwise; no '/' appears
 * that is not in the template's own text; sg_report_path_check accepts
 * exactly the non-empty templates whose % sequences are %p %h %r %% (checked
 * for templates up to SG_CONFIG_VALUE_MAX bytes, the longest the
 * configuration passes on; longer ones must at least never be accepted when
 * invalid).
 */
#include "core/config.h"
#include "core/pathtmpl.h"
#include "fuzz_input.h"

/* Reference expansion: returns the length (SIZE_MAX if tmpl is invalid) and
 * writes it to out when out is not NULL. */
static size_t model_expand(const char *tmpl, const sg_path_env *env, char *out)
{
    char pid[32];
    size_t len = 0;
    if (!*tmpl) return SIZE_MAX;
    snprintf(pid, sizeof pid, "%ld", env->pid);
    for (const char *t = tmpl; *t; t++) {
        const char *piece = t;
        size_t plen = 1;
        int sanitize = 0;
        if (*t == '%') {
            switch (*++t) {
            case 'p': piece = pid; plen = strlen(pid); break;
            case 'h': piece = env->host; plen = strlen(piece); sanitize = 1; break;
            case 'r':
                piece = env->rank ? env->rank : "norank";
                plen = strlen(piece);
                sanitize = 1;
                break;
            case '%': piece = "%"; break;
            default: return SIZE_MAX;
            }
        }
        for (size_t i = 0; out && i < plen; i++)
            out[len + i] = sanitize && piece[i] == '/' ? '_' : piece[i];
        len += plen;
    }
    if (out) out[len] = '\0';
    return len;
}

static size_t literal_slashes(const char *tmpl)
{
    size_t n = 0;
    for (const char *t = tmpl; *t; t++) {
        if (*t == '%' && t[1]) t++;
        else n += *t == '/';
    }
    return n;
}

static size_t count_char(const char *s, char c)
{
    size_t n = 0;
    for (; *s; s++) n += *s == c;
    return n;
}

static void check_expand(const char *tmpl, const sg_path_env *env, size_t n)
{
    char *out = malloc(n);   /* exactly n bytes: ASan catches any overflow */
    FUZZ_ASSERT(n == 0 || out != NULL);
    if (n) memset(out, 0xA5, n);
    int rc = sg_report_path_expand(tmpl, env, out, n);
    size_t want_len = model_expand(tmpl, env, NULL);
    FUZZ_ASSERT(rc == 0 || rc == -1);
    if (n == 0) {
        FUZZ_ASSERT(rc == -1);
    } else {
        FUZZ_ASSERT(memchr(out, 0, n) != NULL);
        if (rc != 0) FUZZ_ASSERT(out[0] == '\0');
    }
    if (want_len != SIZE_MAX && want_len < n) {
        char *want = malloc(want_len + 1);
        FUZZ_ASSERT(want != NULL);
        model_expand(tmpl, env, want);
        FUZZ_ASSERT(rc == 0);
        FUZZ_ASSERT(strcmp(out, want) == 0);
        FUZZ_ASSERT(count_char(out, '/') == literal_slashes(tmpl));
        free(want);
    } else {
        FUZZ_ASSERT(rc == -1);
    }
    free(out);
}

static void check_template(const char *tmpl)
{
    static const sg_path_env probe = { 1, "h", "0" };
    int valid = model_expand(tmpl, &probe, NULL) != SIZE_MAX;
    int rc = sg_report_path_check(tmpl);
    FUZZ_ASSERT(rc == 0 || rc == -1);
    if (strlen(tmpl) <= SG_CONFIG_VALUE_MAX) FUZZ_ASSERT(rc == (valid ? 0 : -1));
    else if (!valid) FUZZ_ASSERT(rc == -1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = { data, size };
    size_t n = (size_t)fuzz_uint(&in, 2) % 6000;
    uint8_t flags = fuzz_u8(&in);
    long pid = (long)fuzz_uint(&in, 8);
    char *tmpl = fuzz_cstr(&in), *host = fuzz_cstr(&in), *rank = fuzz_cstr(&in);
    sg_path_env env = { pid, host, flags & 1 ? NULL : rank };
    check_template(tmpl);
    check_expand(tmpl, &env, n);
    free(tmpl);
    free(host);
    free(rank);
    return 0;
}
