/*
 * tests/e2e/adv_process.c: round 47, the process around the library. A
 * preloaded library holds resources of the process (its log, its report at
 * exit, sockets) and runs inside what the program does to its process:
 * descriptors closed, replaced or never open, signals without SA_RESTART,
 * small limits, exec with and without fork. Every mode runs the same graph
 * work (work(): one exec captured once, its kernel's input rotated by
 * cuGraphExecKernelNodeSetParams, launched; the library profiles it and
 * places its memory) and checks its result on the host, and where the
 * program has files of its own, writes known bytes into them and reads them
 * back byte for byte (a library that wrote its log or report into one, read
 * from it or closed it fails the check).
 *
 * Modes (argv[1]):
 *   closefrom  close_range(3, ~0U, 0) first (a daemon; the library may have
 *              opened its log already), then the program's own files, which
 *              get the numbers the library held; the work between writes.
 *   stdclosed  a child (fork, then exec of this program) starts with
 *              descriptors 0, 1 and 2 closed, opens its files (they get 0,
 *              1 and 2), works and exits; the parent checks the files. A
 *              second child the same, with its report sent to /dev/stdout
 *              and its log to a file, which must say why no report came.
 *   sigpipe    descriptor 2 becomes a pipe whose reader is gone, SIGPIPE at
 *              its default action; the work; exit 0 (a library line written
 *              to stderr must not kill the job).
 *   itimer     SIGPROF every 100 us (ITIMER_PROF) and SIGALRM every 1 ms
 *              (ITIMER_REAL), handlers without SA_RESTART, SIGALRM blocked
 *              in a second thread that works first; SIGCHLD ignored.
 *   nofile     descriptors above 2 closed (the library's log among them),
 *              the set-up, then RLIMIT_NOFILE lowered so that exactly
 *              FILES + 1 more descriptors fit; cuIpcGetMemHandle (the
 *              driver's export may hold one; the library logs a line), then
 *              the program opens its FILES files while it works: the
 *              library's log must take none of them.
 *   execself   the work, then execv of this program ("execself2") without
 *              fork: the second image works again and exits.
 *   spawn      children made by posix_spawn and by vfork + exec of this
 *              program ("child"), each working; the parent works too.
 *   env        a child (fork, exec) with umask 077, HOME and TMPDIR unset
 *              and its working folder removed, RLIMIT_CORE 0; it works.
 * Output: checks, CUresults (adv_common.h). Usage: adv_process MODE
 */
#include "adv_common.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>

extern char **environ;

#define N 2048u
#define INPUTS 3
#define STEPS 12
#define FILES 6

static CUcontext ctx;
static CUfunction mad;
static CUstream s;
static CUdeviceptr in[INPUTS], acc;
static CUgraphNode node;
static uint32_t hin[INPUTS][N], model[N];
static char dir[PATH_MAX];   /* this run's folder for the program's files */

/* The known content of the program's file k after line j. */
static void file_line(int k, int j, char *buf, size_t n)
{
    snprintf(buf, n, "file %d line %d: %08x\n", k, j, (unsigned)(k * 2654435761u + (unsigned)j));
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads path and compares it with lines 0..lines-1 of file k. */
static void check_file(const char *name, const char *path, int k, int lines)
{
    char want[8192], got[8192], line[64];
    size_t wn = 0, gn = 0;
    for (int j = 0; j < lines; j++) {
        file_line(k, j, line, sizeof line);
        wn += (size_t)snprintf(want + wn, sizeof want - wn, "%s", line);
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        for (;;) {
            ssize_t r = read(fd, got + gn, sizeof got - gn);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            gn += (size_t)r;
        }
        close(fd);
    }
    adv_check(name, fd >= 0 && gn == wn && memcmp(got, want, wn) == 0, "%d lines, %s", lines,
              fd < 0 ? "missing" : gn == wn && memcmp(got, want, wn) == 0 ? "byte for byte"
                                                                           : "different bytes");
}

static void setup(void)
{
    CUmodule mod;
    adv_open(&ctx, &mod);
    mad = adv_fn(mod, "mad_u32");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    adv_mad_buffers(N, in, &hin[0][0], &acc, model);
}

/* Captures the exec, runs it `steps` times over rotating inputs (between
 * steps, between(j) if given), checks the accumulator, destroys it. */
static void work(const char *what, int steps, void (*between)(int))
{
    uint64_t n = N;
    void *args0[] = { &in[0], &acc, &n };
    CUgraph g;
    CUgraphExec exec = adv_one_node_exec(s, mad, args0, &g, &node);
    for (int j = 0; j < steps; j++) {
        int k = j % INPUTS;
        void *args[] = { &in[k], &acc, &n };
        ADV_SET_KERNEL(exec, node, mad, args);
        R(cuGraphLaunch(exec, s));
        for (uint32_t i = 0; i < N; i++) model[i] = model[i] * 3u + hin[k][i];
        if (between) between(j);
    }
    R(cuStreamSynchronize(s));
    char name[96];
    snprintf(name, sizeof name, "%s: accumulator", what);
    adv_check_words(name, acc, model, N);
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
}

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/adv_process.XXXXXX");
    if (!mkdtemp(dir)) {
        printf("cannot make a folder\n");
        exit(2);
    }
}

static void file_path(int k, char *out, size_t n) { snprintf(out, n, "%s/f%d", dir, k); }

/* The program's files: FILES of them, opened, each fd recorded. */
static int files[FILES];
static int nfiles;

static void write_line(int k, int j)
{
    char line[64];
    file_line(k, j, line, sizeof line);
    if (write_all(files[k], line, strlen(line)) != 0) printf("write to file %d failed\n", k);
}

static void between_files(int j)
{
    for (int k = 0; k < nfiles; k++) write_line(k, j);
}

static void check_files(const char *what, int lines)
{
    for (int k = 0; k < nfiles; k++) {
        char p[PATH_MAX + 16], name[64];
        file_path(k, p, sizeof p);
        snprintf(name, sizeof name, "%s: file %d", what, k);
        check_file(name, p, k, lines);
        unlink(p);
    }
}

static int open_file(int k)
{
    char p[PATH_MAX + 16];
    file_path(k, p, sizeof p);
    return open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
}

/* ------------------------------------------------------------------ modes */

static void mode_closefrom(void)
{
    make_dir();
    close_range(3, ~0U, 0);
    for (nfiles = 0; nfiles < 3; nfiles++) files[nfiles] = open_file(nfiles);
    adv_check("closefrom: files open", files[0] >= 0 && files[1] >= 0 && files[2] >= 0, "3");
    setup();
    work("closefrom", STEPS, between_files);
    for (int k = 0; k < nfiles; k++) close(files[k]);
    check_files("closefrom", STEPS);
    rmdir(dir);
}

/* The child of stdclosed and env: works with its files, writes at exit. */
static int child_files(const char *what)
{
    for (nfiles = 0; nfiles < 3; nfiles++) files[nfiles] = open_file(nfiles);
    setup();
    work(what, STEPS, between_files);
    return adv_finish();
}

/* Runs this program with argv[1] = mode in a child (fork, exec), stdout
 * into a file whose lines the parent prints (after its own); the child's
 * descriptors 0-2 closed first if close_std. Returns the exit status. */
static int run_child(const char *mode, int close_std, void (*before_exec)(void))
{
    char exe[PATH_MAX], outp[PATH_MAX + 16];
    adv_path("adv_process", exe, sizeof exe);
    snprintf(outp, sizeof outp, "%s/out", dir);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (close_std) {
            close(0);
            close(1);
            close(2);
        } else {
            int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            dup2(o, 1);
            close(o);
        }
        if (before_exec) before_exec();
        char *av[] = { exe, (char *)mode, dir, NULL };
        execv(exe, av);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (!close_std) {
        FILE *f = fopen(outp, "r");
        char line[256];
        while (f && fgets(line, sizeof line, f)) printf("child: %s", line);
        if (f) fclose(f);
        unlink(outp);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The second child's report goes to /dev/stdout: its descriptor 1, closed
 * at start, is its file 1 by then; its log goes to a file (in its folder). */
static void report_to_stdout(void)
{
    char log[PATH_MAX + 16];
    snprintf(log, sizeof log, "%s/log", dir);
    setenv("STABLEGRAPH_REPORT", "/dev/stdout", 1);
    setenv("STABLEGRAPH_LOG_FILE", log, 1);
}

/* The second child's log: absent (no library), or it says why there is no
 * report (descriptor 1 is no longer what it was at start-up). */
static void check_report_said(void)
{
    char log[PATH_MAX + 16], buf[16384];
    snprintf(log, sizeof log, "%s/log", dir);
    FILE *f = fopen(log, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
    unlink(log);
    adv_check("stdclosed: no report into the program's descriptor 1, said why", !f ||
              strstr(buf, "not writing the report to /dev/stdout: descriptor 1 names another file"),
              "no library, or its log says why");
}

static void mode_stdclosed(void)
{
    make_dir();
    for (int r = 0; r < 2; r++) {
        int st = run_child("stdclosed_child", 1, r ? report_to_stdout : NULL);
        adv_check("stdclosed: child's exit status", st == 0, "child %d: %d", r, st);
        nfiles = 3;
        check_files("stdclosed", STEPS);
    }
    check_report_said();
    rmdir(dir);
}

/* The child with 0, 1, 2 closed: its files get those numbers; its results
 * and checks go into its files only (its stdout is file 1: the parent reads
 * the lines it knows, so the child reports by its exit status). */
static int mode_stdclosed_child(const char *d)
{
    snprintf(dir, sizeof dir, "%s", d);
    for (nfiles = 0; nfiles < 3; nfiles++) files[nfiles] = open_file(nfiles);
    int numbers_ok = files[0] == 0 && files[1] == 1 && files[2] == 2;
    /* adv_common.h prints into stdout (file 1): keep it off */
    FILE *null = fopen("/dev/null", "w");
    if (!null) return 2;
    adv_tout = null;
    setup();
    work("stdclosed child", STEPS, between_files);
    return numbers_ok && adv_nwrong == 0 ? 0 : 3;
}

static void mode_sigpipe(void)
{
    int p[2];
    signal(SIGPIPE, SIG_DFL);
    if (pipe(p) != 0) exit(2);
    close(p[0]);
    fflush(stderr);
    dup2(p[1], 2);
    close(p[1]);
    setup();
    work("sigpipe", STEPS, NULL);
}

/* Counted from whichever thread takes the signal: atomics, errno kept. */
static int prof_ticks, alarm_ticks;
static void on_prof(int sig)
{
    int e = errno;
    (void)sig;
    __atomic_fetch_add(&prof_ticks, 1, __ATOMIC_RELAXED);
    errno = e;
}
static void on_alarm(int sig)
{
    int e = errno;
    (void)sig;
    __atomic_fetch_add(&alarm_ticks, 1, __ATOMIC_RELAXED);
    errno = e;
}
static int ticks(int *n) { return __atomic_load_n(n, __ATOMIC_RELAXED); }

static void *itimer_thread(void *arg)
{
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    /* a stream and an exec of its own */
    CUstream s2;
    CUdeviceptr a2;
    uint32_t want[N], got[N];
    uint64_t n = N;
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&a2, N * 4));
    MUST(cuMemsetD32(a2, 0, N));
    memset(want, 0, sizeof want);
    void *args0[] = { &in[0], &a2, &n };
    CUgraph g;
    CUgraphNode nd;
    CUgraphExec e = adv_one_node_exec(s2, mad, args0, &g, &nd);
    for (int j = 0; j < STEPS; j++) {
        int k = (j + 1) % INPUTS;
        void *args[] = { &in[k], &a2, &n };
        ADV_SET_KERNEL(e, nd, mad, args);
        R(cuGraphLaunch(e, s2));
        for (uint32_t i = 0; i < N; i++) want[i] = want[i] * 3u + hin[k][i];
    }
    R(cuStreamSynchronize(s2));
    R(cuMemcpyDtoH(got, a2, sizeof got));
    int ok = memcmp(got, want, sizeof got) == 0;
    R(cuGraphExecDestroy(e));
    R(cuGraphDestroy(g));
    R(cuMemFree(a2));
    R(cuStreamDestroy(s2));
    return (void *)(intptr_t)ok;
}

static void mode_itimer(void)
{
    struct sigaction sa = { 0 };
    sa.sa_handler = on_prof;   /* no SA_RESTART */
    sigaction(SIGPROF, &sa, NULL);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    signal(SIGCHLD, SIG_IGN);
    struct itimerval prof = { { 0, 100 }, { 0, 100 } }, real = { { 0, 1000 }, { 0, 1000 } };
    setitimer(ITIMER_PROF, &prof, NULL);
    setitimer(ITIMER_REAL, &real, NULL);
    setup();
    pthread_t t;
    void *ok = NULL;
    /* one after the other: a capture (global mode) in one thread forbids
     * the other's synchronization */
    if (pthread_create(&t, NULL, itimer_thread, NULL) != 0) exit(2);
    pthread_join(t, &ok);
    for (int r = 0; r < 3; r++) work("itimer", STEPS, NULL);
    adv_check("itimer: second thread's accumulator", ok != NULL, "%d steps", STEPS);
    /* wait for a few signals of each kind (the work may be shorter than a tick) */
    for (int spin = 0; spin < 200000000 && (ticks(&prof_ticks) < 3 || ticks(&alarm_ticks) < 3); spin++) {
        struct timespec t1 = { 0, 100000 };
        if (ticks(&alarm_ticks) < 3) nanosleep(&t1, NULL);
    }
    struct itimerval off = { { 0, 0 }, { 0, 0 } };
    setitimer(ITIMER_PROF, &off, NULL);
    setitimer(ITIMER_REAL, &off, NULL);
    adv_check("itimer: signals arrived", ticks(&prof_ticks) >= 3 && ticks(&alarm_ticks) >= 3, "SIGPROF, SIGALRM");
}

static void between_open(int j)
{
    if (j < FILES) {
        files[j] = open_file(j);
        if (files[j] < 0) printf("step %d: open failed: %s\n", j, strerror(errno));
        nfiles = j + 1;
    }
    for (int k = 0; k < nfiles; k++)
        if (files[k] >= 0) write_line(k, j - k);
}

static void mode_nofile(void)
{
    make_dir();
    close_range(3, ~0U, 0);
    setup();
    /* the FILES + 1 lowest free numbers (one for the driver's IPC export);
     * the limit just above the last */
    int free_seen = 0, fd = 0;
    for (; free_seen < FILES + 1; fd++)
        if (fcntl(fd, F_GETFD) < 0) free_seen++;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = (rlim_t)fd;
    adv_check("nofile: limit set", setrlimit(RLIMIT_NOFILE, &rl) == 0, "%d more", FILES + 1);
    CUipcMemHandle h;
    R(cuIpcGetMemHandle(&h, acc));
    work("nofile", STEPS, between_open);
    for (int k = 0; k < nfiles; k++) close(files[k]);
    for (int k = 0; k < nfiles; k++) {
        char p[PATH_MAX + 16], name[64];
        file_path(k, p, sizeof p);
        snprintf(name, sizeof name, "nofile: file %d", k);
        check_file(name, p, k, STEPS - k);
        unlink(p);
    }
    rmdir(dir);
}

static void mode_spawn(void)
{
    make_dir();
    char exe[PATH_MAX], outp[PATH_MAX + 16];
    adv_path("adv_process", exe, sizeof exe);
    setup();
    work("spawn parent", STEPS, NULL);
    snprintf(outp, sizeof outp, "%s/out", dir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    char *av[] = { exe, "child", NULL };
    pid_t pid;
    fflush(stdout);
    int rc = posix_spawn(&pid, exe, &fa, NULL, av, environ);
    posix_spawn_file_actions_destroy(&fa);
    int st = -1;
    if (rc == 0) waitpid(pid, &st, 0);
    adv_check("spawn: posix_spawn child", rc == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "status %d", st);
    pid = vfork();
    if (pid == 0) {
        execv(exe, av);
        _exit(127);
    }
    st = -1;
    if (pid > 0) waitpid(pid, &st, 0);
    adv_check("spawn: vfork child", pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "status %d", st);
    unlink(outp);
    work("spawn parent again", STEPS, NULL);
    rmdir(dir);
}

static void env_before_exec(void)
{
    char sub[PATH_MAX + 16];
    snprintf(sub, sizeof sub, "%s/cwd", dir);
    umask(077);
    unsetenv("HOME");
    unsetenv("TMPDIR");
    struct rlimit core = { 0, 0 };
    setrlimit(RLIMIT_CORE, &core);
    if (mkdir(sub, 0700) != 0 || chdir(sub) != 0 || rmdir(sub) != 0) _exit(126);
}

static void mode_env(void)
{
    make_dir();
    int st = run_child("env_child", 0, env_before_exec);
    adv_check("env: child's exit status", st == 0, "%d", st);
    nfiles = 3;
    check_files("env", STEPS);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    const char *m = argc > 1 ? argv[1] : "";
    if (strcmp(m, "stdclosed_child") == 0 && argc > 2) return mode_stdclosed_child(argv[2]);
    if (strcmp(m, "env_child") == 0 && argc > 2) {
        snprintf(dir, sizeof dir, "%s", argv[2]);
        return child_files("env child");
    }
    if (strcmp(m, "child") == 0) {
        setup();
        work("spawned child", STEPS, NULL);
        return adv_finish() ? 3 : 0;
    }
    if (strcmp(m, "execself2") == 0) {
        printf("second image\n");
        setup();
        work("execself second image", STEPS / 2, NULL);
        return adv_finish();
    }
    if (strcmp(m, "closefrom") == 0) mode_closefrom();
    else if (strcmp(m, "stdclosed") == 0) mode_stdclosed();
    else if (strcmp(m, "sigpipe") == 0) mode_sigpipe();
    else if (strcmp(m, "itimer") == 0) mode_itimer();
    else if (strcmp(m, "nofile") == 0) mode_nofile();
    else if (strcmp(m, "spawn") == 0) mode_spawn();
    else if (strcmp(m, "env") == 0) mode_env();
    else if (strcmp(m, "execself") == 0) {
        setup();
        work("execself first image", STEPS, NULL);
        char exe[PATH_MAX];
        adv_path("adv_process", exe, sizeof exe);
        /* the first image's lines: printed, then replaced */
        printf("driver calls before exec: %lu\n", adv_ncalls);
        printf("checks before exec: %d, wrong: %d\n", adv_nchecks, adv_nwrong);
        fflush(stdout);
        char *av[] = { exe, "execself2", NULL };
        execv(exe, av);
        printf("exec failed\n");
        return 2;
    } else {
        printf("usage: adv_process closefrom|stdclosed|sigpipe|itimer|nofile|execself|spawn|env\n");
        return 4;
    }
    return adv_finish();
}
