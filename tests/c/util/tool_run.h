/* tool_run.h — for the tests of the command-line tools (native builds with
 * KILN_TOOLS_BUILT only): a tool's path in <build>/bin next to
 * <build>/tests, and running it with arguments, output discarded. */
#ifndef KILN_TOOL_RUN_H
#define KILN_TOOL_RUN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* <build>/bin/name into out; false when this test's path is unknown or the tool is not there */
static inline bool tool_path(const char * name, char * out, size_t n) {
    char exe[4096];
    const ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len <= 0) return false;
    exe[len] = 0;
    char * slash = strrchr(exe, '/');
    if (!slash) return false;
    *slash = 0; /* <build>/tests */
    snprintf(out, n, "%s/../bin/%s", exe, name);
    return access(out, X_OK) == 0;
}

/* the tool's exit status (-1: it did not exit) */
static inline int tool_run(const char * tool, const char * args) {
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), "'%s' %s >/dev/null 2>&1", tool, args);
    const int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif
