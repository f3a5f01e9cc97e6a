/* The programs' output files, all resolved and replaced the way the library's writers
 * (src/io/atomic.c) treat theirs, so that what is checked before training is what is
 * written after it:
 * - a destination is the file its path names once symlinks are followed (a link stays a
 *   link), and only a regular file or nothing is ever replaced;
 * - a replacement is written beside its destination, private until it has the old file's
 *   permission bits, fsynced, renamed over the destination, then the directory fsynced;
 * - on any failure the temporary files go and the destinations stay as they were.
 * tc_outfile is that for the files sgrad has no writer for (a vocabulary, k-means
 * classes); tc_staged replaces several files together, each written by such a writer;
 * the programs' tc_check_output (tools/common/checks.c) checks a destination before the
 * long work with tc_resolve_output. The vocabulary's writer is here rather than in
 * vocab.c, which so needs no other module.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The digits of a temporary name's counter (an unsigned int), at most. */
#define TMP_COUNTER_DIGITS 10

char *tc_follow_links(const char *path)
{
    char *cur = strdup(path);
    for (int hops = 0; cur; hops++) {
        struct stat st;
        if (lstat(cur, &st) || !S_ISLNK(st.st_mode)) return cur;
        /* grown until the target fits with a byte to spare: a link's st_size is not its
         * target's length on /proc (64 for /proc/self/fd/N) */
        char *target = NULL;
        ssize_t k = -1;
        size_t cap = 128; /* the size of target once read */
        while (hops < 40 && cap < ((size_t)1 << 16)) {
            cap *= 2;
            free(target);
            if (!(target = malloc(cap))) break;
            k = readlink(cur, target, cap);
            if (k < 0 || (size_t)k < cap) break;
        }
        if (!target || k < 0 || (size_t)k >= cap) {
            const int e = hops == 40 ? ELOOP : !target ? ENOMEM : k < 0 ? errno : ENAMETOOLONG;
            free(target);
            free(cur);
            errno = e;
            return NULL;
        }
        target[k] = '\0';
        const char *slash = strrchr(cur, '/');
        const size_t dir = target[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
        char *next = malloc(dir + (size_t)k + 1); /* relative: to the link's directory */
        if (next) {
            memcpy(next, cur, dir);
            memcpy(next + dir, target, (size_t)k + 1);
        }
        free(target);
        free(cur);
        cur = next;
    }
    errno = ENOMEM;
    return NULL;
}

const char *tc_out_strerror(int err)
{
    return err == EISDIR        ? "it is a directory"
           : err == TC_ENOTREG  ? "not a regular file"
           : err == TC_ENOTHERE ? "its links do not lead to the file it names, so it cannot be replaced"
                                : strerror(err);
}

/* Where an output goes: *st and *exists the file path names now (as the kernel finds it,
 * /proc's links to pipes and terminals included), *dest the path its links lead to, where
 * the writers write. 0, or -1 (errno: stat's, other than ENOENT; EISDIR; TC_ENOTREG for
 * another non-regular file; TC_ENOTHERE when the links do not lead to that file, as a
 * /proc link to a deleted file's "PATH (deleted)"; *dest NULL). */
int tc_resolve_output(const char *path, char **dest, struct stat *st, bool *exists)
{
    *dest = NULL;
    *exists = stat(path, st) == 0;
    if (!*exists && errno != ENOENT) return -1; /* ELOOP, EACCES, ...: what is there cannot be told */
    if (*exists && !S_ISREG(st->st_mode)) {
        errno = S_ISDIR(st->st_mode) ? EISDIR : TC_ENOTREG;
        return -1;
    }
    if (!(*dest = tc_follow_links(path))) return -1;
    struct stat at;
    const bool there = stat(*dest, &at) == 0;
    if (!there && errno != ENOENT) { /* say, ENAMETOOLONG: the joined links pass PATH_MAX */
        const int e = errno;
        free(*dest);
        *dest = NULL;
        errno = e;
        return -1;
    }
    if (*exists != there || (*exists && (at.st_dev != st->st_dev || at.st_ino != st->st_ino))) {
        free(*dest);
        *dest = NULL;
        errno = TC_ENOTHERE;
        return -1;
    }
    return 0;
}

/* The directory part of path ("." when it has none), malloc'd. */
char *tc_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    const size_t n = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, slash ? path : ".", n);
        d[n] = '\0';
    }
    return d;
}

/* The rename of path into its directory made durable (best effort: a failure here leaves
 * the complete new file in place). */
static void sync_dir(const char *path)
{
    char *dir = tc_dir_of(path);
    const int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

/* Resolves path into *dest (resolve_output) and creates a new file beside it named
 * "DEST.TAG-PID-N", private (0600) when a file is there to replace, else 0666 minus the
 * umask: its name in *made, its descriptor returned; *mode gets the old file's permission
 * bits (-1: none). -1 with errno set (as resolve_output's, or open's). */
static int make_beside(const char *path, const char *tag, char **dest, char **made, int *mode)
{
    static unsigned counter;
    *made = NULL;
    *mode = -1;
    struct stat st;
    bool exists;
    if (tc_resolve_output(path, dest, &st, &exists)) return -1;
    if (exists) *mode = (int)(st.st_mode & 0777);
    const size_t len = strlen(*dest) + strlen(tag) + 48;
    if (!(*made = malloc(len))) return -1;
    int fd = -1;
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(*made, len, "%s.%s-%ld-%u", *dest, tag, (long)getpid(), counter++);
        fd = open(*made, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, *mode >= 0 ? 0600 : 0666);
        if (fd >= 0 || errno != EEXIST) break;
    }
    if (fd < 0) {
        const int e = errno;
        free(*made);
        *made = NULL;
        errno = e;
    }
    return fd;
}

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
    int mode;
    const int fd = make_beside(path, "tmp", &o->path, &o->tmp, &mode);
    int e = errno;
    if (fd >= 0 && (mode < 0 || fchmod(fd, (mode_t)mode) == 0) && (o->f = fdopen(fd, "w"))) return 0;
    if (fd >= 0) {
        e = errno;
        close(fd);
        unlink(o->tmp);
    }
    outfile_release(o);
    errno = e;
    return -1;
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
    sync_dir(o->path);
    outfile_release(o);
    return 0;
}

int tc_staged_open(tc_staged *s, const char *const *paths, int n)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    for (int i = 0; i < n; i++) {
        const int fd = make_beside(paths[i], "staged", &s->dest[i], &s->staged[i], &s->mode[i]);
        if (fd < 0 || close(fd)) {
            const int e = errno;
            s->failed = i;
            tc_staged_abort(s);
            errno = e;
            return -1;
        }
    }
    return 0;
}

void tc_staged_abort(tc_staged *s)
{
    for (int i = 0; i < s->n; i++) {
        if (s->staged[i]) unlink(s->staged[i]);
        free(s->staged[i]);
        free(s->dest[i]);
        s->staged[i] = s->dest[i] = NULL;
    }
}

int tc_staged_commit(tc_staged *s)
{
    int rc = 0;
    for (int i = 0; i < s->n && !rc; i++)
        if (s->mode[i] >= 0 && chmod(s->staged[i], (mode_t)s->mode[i])) rc = -1, s->failed = i;
    for (int i = 0; i < s->n && !rc; i++) {
        if (rename(s->staged[i], s->dest[i])) {
            rc = -1;
            s->failed = i;
            break;
        }
        free(s->staged[i]);
        s->staged[i] = NULL;
        s->renamed++;
        sync_dir(s->dest[i]);
    }
    const int e = errno;
    tc_staged_abort(s);
    errno = e;
    return rc;
}

int tc_path_identify(const char *path, tc_path_id *id)
{
    struct stat st;
    memset(id, 0, sizeof *id);
    if (stat(path, &st) == 0) { /* the kernel's view: /proc's links included */
        id->exists = true;
        id->dev = st.st_dev;
        id->ino = st.st_ino;
    }
    id->target = tc_follow_links(path);
    char *dir = id->target ? tc_dir_of(id->target) : NULL;
    const int rc = dir ? stat(dir, &st) : -1;
    free(dir);
    if (rc) /* an existing file is still known by its inode (say, in a deleted directory) */
        return id->exists ? 0 : -1;
    const char *slash = strrchr(id->target, '/');
    id->name = slash ? slash + 1 : id->target;
    id->dir_dev = st.st_dev;
    id->dir_ino = st.st_ino;
    return 0;
}

bool tc_path_same_entry(const tc_path_id *a, const tc_path_id *b)
{
    return a->name && b->name && a->dir_dev == b->dir_dev && a->dir_ino == b->dir_ino && !strcmp(a->name, b->name);
}

bool tc_path_same(const tc_path_id *a, const tc_path_id *b)
{
    return (a->exists && b->exists && a->dev == b->dev && a->ino == b->ino) || tc_path_same_entry(a, b);
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
