/* Small pieces of the programs' command lines, output checks and batching rules (common.h). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool tc_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool tc_parse_real(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

int tc_row_hit_cap(double bound, double lr)
{
    const double cap = bound / lr;
    return cap >= TC_MAX_ROW_HITS ? TC_MAX_ROW_HITS : cap < 1 ? 1 : (int)cap;
}

/* An output written by rename from a temporary file beside it (or, for -log, opened for
 * writing): the path is not a directory or other non-regular file, its directory exists
 * and is writable, and the temporary file's longer name fits the directory's NAME_MAX. 0, or -1 with a message naming prog and flag. */
/* The digits of the writers' temporary-name counter (an unsigned int), at most. */
#define TC_TMP_COUNTER_DIGITS 10

int tc_check_output(const char *prog, const char *flag, const char *out, FILE *err)
{
    struct stat st;
    if (stat(out, &st) == 0 && !S_ISREG(st.st_mode)) {
        fprintf(err, "%s: cannot write %s %s: %s\n", prog, flag, out,
                S_ISDIR(st.st_mode) ? "it is a directory" : "not a regular file");
        return -1;
    }
    const char *slash = strrchr(out, '/');
    size_t dlen = !slash ? 1 : slash == out ? 1 : (size_t)(slash - out);
    char *dir = malloc(dlen + 1);
    if (!dir) {
        fprintf(err, "%s: out of memory\n", prog);
        return -1;
    }
    memcpy(dir, slash ? out : ".", dlen);
    dir[dlen] = '\0';
    int rc = 0;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(err, "%s: cannot write %s %s: directory %s %s\n", prog, flag, out, dir,
                errno == ENOENT || stat(dir, &st) != 0 ? "does not exist" : "is not a directory");
        rc = -1;
    } else if (access(dir, W_OK | X_OK) != 0) {
        fprintf(err, "%s: cannot write %s %s: directory %s: %s\n", prog, flag, out, dir, strerror(errno));
        rc = -1;
    } else {
        /* the writers' temporary name beside it, "NAME.tmp-PID-COUNTER" (src/io/atomic.c,
         * outfile.c), must fit too, or the run would fail only when it writes */
        char pid[24];
        const size_t extra = strlen(".tmp--") + (size_t)snprintf(pid, sizeof pid, "%ld", (long)getpid()) +
                             TC_TMP_COUNTER_DIGITS;
        const long name_max = pathconf(dir, _PC_NAME_MAX);
        const size_t name = strlen(slash ? slash + 1 : out);
        if (name_max > 0 && name + extra > (size_t)name_max) {
            fprintf(err, "%s: cannot write %s %s: its name is %zu bytes; the temporary file beside it "
                         "needs %zu more, and names in %s are at most %ld bytes\n",
                    prog, flag, out, name, extra, dir, name_max);
            rc = -1;
        }
    }
    free(dir);
    return rc;
}
