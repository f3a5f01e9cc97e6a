/* Atomic file output (io/io.h): temporary file in the destination's directory, fsync,
 * rename, fsync of the directory. Invariant: the destination path is only ever changed
 * by the rename of a complete, fsynced file. */
#define _POSIX_C_SOURCE 200809L
#include "io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static char *dup_str(sg_ctx *ctx, const char *s, const char *suffix)
{
    size_t a = strlen(s), b = suffix ? strlen(suffix) : 0;
    char *p = sg__malloc(ctx, a + b + 1);
    if (!p) return NULL;
    memcpy(p, s, a);
    if (b) memcpy(p + a, suffix, b);
    p[a + b] = '\0';
    return p;
}

/* The directory part of path ("." when it has none). */
static char *dir_of(sg_ctx *ctx, const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return dup_str(ctx, ".", NULL);
    if (slash == path) return dup_str(ctx, "/", NULL);
    char *d = dup_str(ctx, path, NULL);
    if (d) d[slash - path] = '\0';
    return d;
}

static void release(sg__out *o)
{
    if (!o->ctx) return;
    sg__free(o->ctx, o->buf);
    sg__free(o->ctx, o->path);
    sg__free(o->ctx, o->tmp);
    o->buf = NULL;
    o->path = o->tmp = NULL;
}

static int fail(sg__out *o, const char *what, int err)
{
    if (o->status == SG_OK)
        o->status = sg__failc(o->ctx, SG_ERR_IO, "%s %s: %s", what, o->path ? o->path : "?", strerror(err));
    return o->status;
}

int sg__out_open(sg_ctx *ctx, const char *path, sg__out *o)
{
    *o = (sg__out){ctx, -1, NULL, NULL, NULL, 0, 0, SG_OK};
    if (!path || !*path) {
        o->ctx = NULL;
        return sg__failc(ctx, SG_ERR_ARG, "no output path given");
    }
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        o->ctx = NULL;
        return sg__failc(ctx, SG_ERR_IO, "cannot write %s: it is a directory", path);
    }
    o->path = dup_str(ctx, path, NULL);
    o->buf = o->path ? sg__malloc(ctx, SG__OUT_BUF) : NULL;
    char suffix[64];
    static unsigned counter;
    for (int attempt = 0; o->buf && attempt < 100; attempt++) {
        snprintf(suffix, sizeof suffix, ".tmp-%ld-%u", (long)getpid(), counter++);
        sg__free(ctx, o->tmp);
        o->tmp = dup_str(ctx, path, suffix);
        if (!o->tmp) break;
        o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (o->fd >= 0 || errno != EEXIST) break;
    }
    if (o->fd < 0) {
        int rc = o->buf && o->tmp ? fail(o, "cannot create a temporary file beside", errno)
                                  : sg__status_or_nomem(ctx);
        release(o);
        o->ctx = NULL;
        return rc;
    }
    return SG_OK;
}

/* Writes all of buf[0..n) to the temporary file, through the context's hook. */
static int write_all(sg__out *o, const unsigned char *p, size_t n)
{
    while (n > 0) {
        long k = o->ctx->write_fn ? o->ctx->write_fn(o->ctx->write_ud, o->fd, p, n)
                                  : (long)write(o->fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return fail(o, "cannot write", errno);
        if (k == 0) return fail(o, "cannot write", EIO);
        p += k;
        n -= (size_t)k;
    }
    return SG_OK;
}

int sg__out_write(sg__out *o, const void *data, size_t n)
{
    if (!o->ctx) return SG_ERR_STATE;
    if (o->status) return o->status;
    const unsigned char *p = data;
    o->written += n;
    if (o->used + n > SG__OUT_BUF) {
        if (write_all(o, o->buf, o->used)) return o->status;
        o->used = 0;
        if (n >= SG__OUT_BUF) return write_all(o, p, n);
    }
    memcpy(o->buf + o->used, p, n);
    o->used += n;
    return SG_OK;
}

void sg__out_abort(sg__out *o)
{
    if (!o->ctx) return;
    if (o->fd >= 0) close(o->fd);
    o->fd = -1;
    if (o->tmp) unlink(o->tmp);
    release(o);
    o->ctx = NULL;
}

int sg__out_commit(sg__out *o)
{
    if (!o->ctx) return SG_ERR_STATE;
    int rc = o->status;
    if (!rc && o->used) rc = write_all(o, o->buf, o->used);
    if (!rc && fsync(o->fd) != 0) rc = fail(o, "cannot sync", errno);
    if (!rc) {
        int fd = o->fd;
        o->fd = -1;
        if (close(fd) != 0) rc = fail(o, "cannot close", errno);
    }
    if (!rc && rename(o->tmp, o->path) != 0) rc = fail(o, "cannot rename a temporary file to", errno);
    if (rc) {
        sg__out_abort(o);
        return rc;
    }
    /* The rename is durable once the directory is synced; a failure here leaves the new
     * file in place, so it is not an error of the save. */
    char *dir = dir_of(o->ctx, o->path);
    int dfd = dir ? open(dir, O_RDONLY | O_CLOEXEC) : -1;
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    sg__free(o->ctx, dir);
    release(o);
    o->ctx = NULL;
    return SG_OK;
}
