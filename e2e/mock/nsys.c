/* MOCK of the Nsight Systems CLI for the node test: no nsys can be installed on these machines.
 * It does just enough of `nsys profile` and `nsys export` for the agent's launch mode, so that
 * the test checks how the operator delivers nsys into a Pod and how the agent runs it, not
 * Nsight Systems.
 *
 *   nsys profile [options] --output=R [options] -- PROGRAM ARGS...
 *       runs PROGRAM (SIGTERM and SIGINT passed on), then writes a placeholder report at R and
 *       exits with PROGRAM's status, as nsys does;
 *   nsys export ... --output S REPORT
 *       copies mock-export.sqlite (a real nsys export, beside this executable) to S.
 *
 * Every call is printed on stderr as "MOCK nsys: ARGS...". Built by nsight_e2e::agent. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t child;

static void forward(int sig) {
    if (child > 0) kill(child, sig);
}

static int copy(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    if (!in || !out) {
        fprintf(stderr, "mock nsys: cannot copy %s to %s: %s\n", from, to, strerror(errno));
        return 1;
    }
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, out);
    fclose(in);
    return fclose(out) == 0 ? 0 : 1;
}

static int profile(int argc, char **argv) {
    const char *report = NULL;
    int i = 2, status = 0;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strncmp(argv[i], "--output=", 9) == 0) report = argv[i] + 9;
    if (i + 1 >= argc) {
        fprintf(stderr, "mock nsys: no program after --\n");
        return 2;
    }
    signal(SIGTERM, forward);
    signal(SIGINT, forward);
    child = fork();
    if (child == 0) {
        execvp(argv[i + 1], argv + i + 1);
        fprintf(stderr, "mock nsys: cannot run %s: %s\n", argv[i + 1], strerror(errno));
        _exit(127);
    }
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (report) {
        FILE *f = fopen(report, "w");
        if (f) {
            fputs("MOCK nsys-rep (not a real report)\n", f);
            fclose(f);
        }
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int export_sqlite(int argc, char **argv) {
    const char *output = NULL;
    char self[PATH_MAX], source[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    for (int i = 2; i + 1 < argc; i++)
        if (strcmp(argv[i], "--output") == 0) output = argv[i + 1];
    if (!output || n <= 0) {
        fprintf(stderr, "mock nsys: export needs --output PATH\n");
        return 2;
    }
    self[n] = '\0';
    snprintf(source, sizeof source, "%s/mock-export.sqlite", dirname(self));
    return copy(source, output);
}

int main(int argc, char **argv) {
    fputs("MOCK nsys:", stderr);
    for (int i = 1; i < argc; i++) fprintf(stderr, " %s", argv[i]);
    fputc('\n', stderr);
    if (argc >= 2 && strcmp(argv[1], "profile") == 0) return profile(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "export") == 0) return export_sqlite(argc, argv);
    fprintf(stderr, "mock nsys: unsupported command %s\n", argc >= 2 ? argv[1] : "(none)");
    return 2;
}
