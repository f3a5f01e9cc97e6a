/* Atomic text output of the programs, for files the library has no writer for (a
 * vocabulary, k-means classes): a temporary file beside the destination, written through
 * stdio, fsynced, renamed over the destination, then the directory fsynced. The
 * vocabulary's writer is here rather than in vocab.c, which so needs no other module.
 *
 * Invariant: the destination is only ever changed by the rename of a complete, fsynced
 * file; on any failure the temporary file is removed and the destination is untouched.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void outfile_release(tc_outfile *o)
{
    free(o->path);
    free(o->tmp);
    o->path = o->tmp = NULL;
    o->f = NULL;
}

int tc_outfile_open(tc_outfile *o, const char *path)
{
    memset(o, 0, sizeof *o);
    const size_t n = strlen(path);
    o->path = malloc(n + 1);
    o->tmp = malloc(n + 40);
    if (!o->path || !o->tmp) {
        outfile_release(o);
        errno = ENOMEM;
        return -1;
    }
    memcpy(o->path, path, n + 1);
    static unsigned counter;
    int fd = -1;
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(o->tmp, n + 40, "%s.tmp-%ld-%u", path, (long)getpid(), counter++);
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) break;
    }
    if (fd >= 0 && !(o->f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        unlink(o->tmp);
        errno = e;
    }
    if (!o->f) {
        int e = errno;
        outfile_release(o);
        errno = e;
        return -1;
    }
    return 0;
}

void tc_outfile_abort(tc_outfile *o)
{
    if (!o->f) return;
    fclose(o->f);
    unlink(o->tmp);
    outfile_release(o);
}

int tc_outfile_commit(tc_outfile *o)
{
    if (!o->f) {
        errno = EBADF;
        return -1;
    }
    int rc = fflush(o->f) || ferror(o->f) || fsync(fileno(o->f)) ? -1 : 0;
    int e = errno;
    if (fclose(o->f) && !rc) rc = -1, e = errno;
    o->f = NULL;
    if (!rc && rename(o->tmp, o->path)) rc = -1, e = errno;
    if (rc) {
        unlink(o->tmp);
        outfile_release(o);
        errno = e ? e : EIO;
        return -1;
    }
    /* the rename is durable once the directory is synced (best effort, as a failure here
     * leaves the complete new file in place) */
    char *slash = strrchr(o->path, '/');
    if (slash == o->path) slash[1] = '\0';
    else if (slash) *slash = '\0';
    int dfd = open(slash ? o->path : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    outfile_release(o);
    return 0;
}

int tc_vocab_save(const tc_vocab *v, const char *path)
{
    tc_outfile o;
    if (tc_outfile_open(&o, path)) return -1;
    for (int64_t i = 0; i < v->size; i++)
        if (fprintf(o.f, "%s %lld\n", v->words[i], (long long)v->counts[i]) < 0) {
            int e = errno;
            tc_outfile_abort(&o);
            errno = e;
            return -1;
        }
    return tc_outfile_commit(&o);
}
