/* Output paths checked before the long work, resolved as the library's writers resolve
 * them (models/common/outfile.c), so that what is checked is what is written. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "tools.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The digits of a temporary name's counter (an unsigned int), at most (outfile.c's). */
#define TMP_COUNTER_DIGITS 10

int tc_check_output(const char *prog, const char *flag, const char *out, tc_out_kind kind, FILE *err)
{
    char *dest;
    struct stat st;
    bool exists;
    if (kind == TC_OUT_DIRECT && stat(out, &st) == 0 && S_ISREG(st.st_mode)) {
        /* opened through its own path, where the kernel finds it: no name is made beside it */
        if (access(out, W_OK) == 0) return 0;
        fprintf(err, "%s: cannot write %s %s: %s\n", prog, flag, out, strerror(errno));
        return -1;
    }
    if (tc_resolve_output(out, &dest, &st, &exists)) {
        fprintf(err, "%s: cannot write %s %s: %s\n", prog, flag, out, tc_out_strerror(errno));
        return -1;
    }
    /* the directory the links lead to is checked: the writers write there */
    char *dir = tc_dir_of(dest);
    const char *slash = strrchr(dest, '/');
    const char *name = slash ? slash + 1 : dest;
    int rc = -1, dir_status = 0;
    /* the temporary names beside it must fit too, or the run would fail only when it
     * writes: "NAME.tmp-PID-N" (this file's and the library's writers), or for a staged
     * file "NAME.staged-PID-N.tmp-PID-N" (its writer's temporary file beside it) */
    char pid[24];
    const size_t tmp = strlen(".tmp--") + (size_t)snprintf(pid, sizeof pid, "%ld", (long)getpid()) +
                       TMP_COUNTER_DIGITS;
    const size_t extra = kind == TC_OUT_DIRECT   ? 0
                         : kind == TC_OUT_ATOMIC ? tmp
                                                 : tmp + strlen(".staged--") + strlen(pid) + TMP_COUNTER_DIGITS;
    const long name_max = dir ? pathconf(dir, _PC_NAME_MAX) : -1;
    const long path_max = dir ? pathconf(dir, _PC_PATH_MAX) : -1;
    if (!dir) {
        fprintf(err, "%s: out of memory\n", prog);
    } else if ((dir_status = stat(dir, &st) ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR) != 0) {
        fprintf(err, "%s: cannot write %s %s: directory %s: %s\n", prog, flag, out, dir,
                dir_status == ENOENT ? "does not exist" : strerror(dir_status));
    } else if (access(dir, W_OK | X_OK) != 0) {
        fprintf(err, "%s: cannot write %s %s: directory %s: %s\n", prog, flag, out, dir, strerror(errno));
    } else if (name_max > 0 && strlen(name) + extra > (size_t)name_max) {
        if (!extra)
            fprintf(err, "%s: cannot write %s %s: its name is %zu bytes, and names in %s are at most "
                         "%ld bytes\n", prog, flag, out, strlen(name), dir, name_max);
        else
            fprintf(err, "%s: cannot write %s %s: its name is %zu bytes; the temporary file beside it "
                         "needs %zu more, and names in %s are at most %ld bytes\n",
                    prog, flag, out, strlen(name), extra, dir, name_max);
    } else if (kind != TC_OUT_DIRECT && path_max > 0 && strlen(dest) + extra >= (size_t)path_max) {
        fprintf(err, "%s: cannot write %s %s: the path %s with its temporary suffix is %zu bytes, and "
                     "paths are shorter than %ld bytes\n", prog, flag, out, dest, strlen(dest) + extra, path_max);
    } else {
        rc = 0;
    }
    free(dir);
    free(dest);
    return rc;
}
