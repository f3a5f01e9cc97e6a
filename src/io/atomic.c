/* Atomic file output (io/io.h): temporary file in the destination's directory, fsync,
 * rename, fsync of the directory. Invariants: the destination path is only ever changed
 * by the rename of a complete, fsynced file; the destination is the file a path names
 * after its symlinks are followed (so a link stays a link), and only a regular file or
 * nothing is ever replaced; a replaced file keeps its permission bits. Writes go through
 * the context's write hook when a test set one (sg__set_write_hook, io_test.h). */
#define _POSIX_C_SOURCE 200809L
#include "io/io.h"
#include "io/io_test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
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

/* path with its symlinks followed (sg__malloc'd; the result may not exist yet), or NULL
 * with *err set (0: out of memory). */
static char *follow_links(sg_ctx *ctx, const char *path, int *err)
{
    char *cur = dup_str(ctx, path, NULL);
    *err = 0;
    for (int hops = 0; cur; hops++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) return cur;
        /* grown until the target fits with a byte to spare: a link's st_size is not its
         * target's length on /proc (64 for /proc/self/fd/N) */
        char *target = NULL;
        ssize_t k = -1;
        size_t cap = 128; /* the size of target once read */
        while (hops < 40 && cap < ((size_t)1 << 16)) {
            cap *= 2;
            sg__free(ctx, target);
            if (!(target = sg__malloc(ctx, cap))) break;
            k = readlink(cur, target, cap);
            if (k < 0 || (size_t)k < cap) break;
        }
        if (!target || k < 0 || (size_t)k >= cap) {
            *err = hops == 40 ? ELOOP : !target ? 0 : k < 0 ? errno : ENAMETOOLONG;
            sg__free(ctx, target);
            sg__free(ctx, cur);
            return NULL;
        }
        target[k] = '\0';
        char *next;
        if (target[0] == '/') {
            next = dup_str(ctx, target, NULL);
        } else { /* relative to the link's directory */
            char *dir = dir_of(ctx, cur);
            char *dir_slash = dir ? dup_str(ctx, dir, "/") : NULL;
            next = dir_slash ? dup_str(ctx, dir_slash, target) : NULL;
            sg__free(ctx, dir_slash);
            sg__free(ctx, dir);
        }
        sg__free(ctx, target);
        sg__free(ctx, cur);
        cur = next;
    }
    return NULL;
}

static const char *kind_of(mode_t m)
{
    return S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
         : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : "not a regular file";
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
    /* checked before anything is created, on the file the kernel finds (/proc's links to
     * pipes and terminals included): a device, FIFO or socket is never replaced */
    struct stat st;
    const bool exists = stat(path, &st) == 0;
    if (!exists && errno != ENOENT) { /* ELOOP, EACCES, ...: what is there cannot be told */
        o->ctx = NULL;
        return sg__failc(ctx, SG_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    }
    if (exists && !S_ISREG(st.st_mode)) {
        o->ctx = NULL;
        return sg__failc(ctx, SG_ERR_IO, "cannot write %s: it is %s", path,
                         S_ISDIR(st.st_mode) ? "a directory" : kind_of(st.st_mode));
    }
    int err;
    o->path = follow_links(ctx, path, &err);
    if (!o->path) {
        o->ctx = NULL;
        return err ? sg__failc(ctx, SG_ERR_IO, "cannot write %s: %s", path, strerror(err))
                   : sg__status_or_nomem(ctx);
    }
    /* the path the links lead to must be that file (or, for a new one, nothing), or the
     * rename would miss it (a /proc link to a deleted file reads "PATH (deleted)") */
    struct stat at;
    const bool there = stat(o->path, &at) == 0;
    if (!there && errno != ENOENT) { /* say, ENAMETOOLONG: the joined links pass PATH_MAX */
        int rc = sg__failc(ctx, SG_ERR_IO, "cannot write %s, a link to %s: %s", path, o->path, strerror(errno));
        release(o);
        o->ctx = NULL;
        return rc;
    }
    if (exists != there || (exists && (at.st_dev != st.st_dev || at.st_ino != st.st_ino))) {
        int rc = sg__failc(ctx, SG_ERR_IO, "cannot write %s: the file it names is not at %s, where it "
                                           "would be replaced", path, o->path);
        release(o);
        o->ctx = NULL;
        return rc;
    }
    o->buf = sg__malloc(ctx, SG__OUT_BUF);
    char suffix[64];
    static atomic_uint counter; /* saves may run on several threads at once */
    for (int attempt = 0; o->buf && attempt < 100; attempt++) {
        snprintf(suffix, sizeof suffix, ".tmp-%ld-%u", (long)getpid(), atomic_fetch_add(&counter, 1u));
        sg__free(ctx, o->tmp);
        o->tmp = dup_str(ctx, o->path, suffix); /* beside the target, for the rename */
        if (!o->tmp) break;
        /* a replacement is private until it has the old file's mode; a new file gets
         * 0666 minus the umask */
        o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, exists ? 0600 : 0666);
        if (o->fd >= 0 || errno != EEXIST) break;
    }
    int rc = SG_OK;
    if (o->fd < 0)
        rc = o->buf && o->tmp ? fail(o, "cannot create a temporary file beside", errno)
                              : sg__status_or_nomem(ctx);
    else if (exists && fchmod(o->fd, st.st_mode & 0777) != 0)
        rc = fail(o, "cannot give the old file's mode to a temporary file beside", errno);
    if (rc) {
        if (o->fd >= 0) {
            close(o->fd);
            unlink(o->tmp);
        }
        release(o);
        o->ctx = NULL;
    }
    return rc;
}

void sg__set_write_hook(sg_ctx *ctx, sg__write_fn fn, void *ud)
{
    if (!ctx) return;
    ctx->write_fn = fn;
    ctx->write_ud = fn ? ud : NULL;
}

/* Writes all of buf[0..n) to the temporary file, through the context's hook (io_test.h). */
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
