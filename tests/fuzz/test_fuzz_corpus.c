/*
 * tests/fuzz/test_fuzz_corpus.c: the fuzz corpus as a regression test. Every
 * file under tests/fuzz/corpus/<target>/ goes through the same function the
 * libFuzzer target fuzz_<target>.c runs (built here without libFuzzer, its
 * LLVMFuzzerTestOneInput renamed sg_fuzz_<target>). Each input runs in a
 * forked child, so a property failure or crash names its file. Also checks
 * that every corpus folder has a target and no target has an empty corpus.
 *
 * The corpus is found under $SRC (set by tests/run.sh), else under the
 * source tree this was built from.
 */
#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define FUZZ_TARGET_LIST(X) X(config) X(report_path)

#define FUZZ_DECL_(t) int sg_fuzz_##t(const uint8_t *data, size_t size);
FUZZ_TARGET_LIST(FUZZ_DECL_)

typedef struct fuzz_target {
    const char *name;
    int (*fn)(const uint8_t *, size_t);
} fuzz_target;

#define FUZZ_ROW_(t) { #t, sg_fuzz_##t },
static const fuzz_target targets[] = { FUZZ_TARGET_LIST(FUZZ_ROW_) };
#define NTARGETS (sizeof targets / sizeof targets[0])

static char corpus_root[4096];

/* Reads a whole file into a malloc'ed buffer; NULL on error. */
static uint8_t *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t cap = 0;
    *size = 0;
    if (!f) return NULL;
    for (;;) {
        if (*size == cap) {
            uint8_t *nb = realloc(buf, cap = cap ? cap * 2 : 4096);
            if (!nb) { free(buf); fclose(f); return NULL; }
            buf = nb;
        }
        size_t r = fread(buf + *size, 1, cap - *size, f);
        if (r == 0) break;
        *size += r;
    }
    fclose(f);
    return buf;
}

/* Runs one input in a child; 0 if the target returned normally. */
static int replay_one(const fuzz_target *t, const char *path)
{
    size_t size;
    uint8_t *data = read_file(path, &size);
    if (!data) {
        printf("#   cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(t->fn(data, size) == 0 ? 0 : 1);
    free(data);
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    printf("#   %s: %s %d (reproduce: build/fuzz/fuzz_%s %s)\n", path,
           WIFSIGNALED(st) ? "killed by signal" : "exit status",
           WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), t->name, path);
    return -1;
}

static void replay_target(const fuzz_target *t)
{
    char dir[4200], path[4500];
    int files = 0, failed = 0;
    snprintf(dir, sizeof dir, "%s/%s", corpus_root, t->name);
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        files++;
        failed += replay_one(t, path) != 0;
    }
    closedir(d);
    printf("#   %s: %d corpus files, %d failed\n", t->name, files, failed);
    CHECK(files > 0);
    CHECK_EQ(failed, 0);
}

#define FUZZ_CASE_(t)                                                         \
    TEST(corpus_##t) { replay_target(&targets[fuzz_index(#t)]); }

static size_t fuzz_index(const char *name)
{
    for (size_t i = 0; i < NTARGETS; i++)
        if (strcmp(targets[i].name, name) == 0) return i;
    abort();
}
FUZZ_TARGET_LIST(FUZZ_CASE_)

/* Every folder of the corpus belongs to a target replayed here. */
TEST(every_corpus_has_a_target)
{
    DIR *d = opendir(corpus_root);
    CHECK(d != NULL);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        int known = 0;
        for (size_t i = 0; i < NTARGETS; i++) known |= strcmp(e->d_name, targets[i].name) == 0;
        if (!known) printf("#   corpus folder %s has no target in FUZZ_TARGET_LIST\n", e->d_name);
        CHECK(known);
    }
    closedir(d);
}

int main(void)
{
    const char *src = getenv("SRC");
    snprintf(corpus_root, sizeof corpus_root, "%s/tests/fuzz/corpus", src ? src : SG_SOURCE_DIR);
#define FUZZ_RUN_(t) RUN(corpus_##t);
    FUZZ_TARGET_LIST(FUZZ_RUN_)
    RUN(every_corpus_has_a_target);
    return check_done();
}
