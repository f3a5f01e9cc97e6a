/* Atomic file output (src/io/atomic.c): a committed save replaces the destination whole;
 * a save that fails at any byte (a write cut off after N bytes, ENOSPC, EIO) or is aborted
 * leaves the previous file byte for byte and no temporary file; short writes are resumed;
 * a directory or a missing directory as the destination is refused at open, before any
 * work; a FIFO, socket or device node (also behind a symlink) is refused and left as it
 * was; a replaced file keeps its permission bits and a new one gets 0666 minus the umask;
 * a symlink stays a link and its target gets the new contents, and a /proc link to an
 * open file leads to that file, however long its path. The expected contents are
 * the bytes the test itself wrote; modes are compared with the ones the test set. */
#define _XOPEN_SOURCE 700 /* mknod */
#include "io/io.h"
#include "io/io_test.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>

#include "testutil.h"

/* Saves n bytes of pattern seed to path through ctx, writing in pieces of 1000. */
static int save(sg_ctx *ctx, const char *path, size_t n, int seed)
{
    sg__out o;
    int rc = sg__out_open(ctx, path, &o);
    if (rc) return rc;
    unsigned char piece[1000];
    for (size_t off = 0; off < n && !rc; off += sizeof piece) {
        size_t k = n - off < sizeof piece ? n - off : sizeof piece;
        for (size_t i = 0; i < k; i++) piece[i] = (unsigned char)((off + i) * 31 + (size_t)seed);
        rc = sg__out_write(&o, piece, k);
    }
    if (rc) {
        sg__out_abort(&o);
        return rc;
    }
    return sg__out_commit(&o);
}

static int same_pattern(const unsigned char *b, size_t n, size_t want, int seed)
{
    if (n != want) return 0;
    for (size_t i = 0; i < n; i++)
        if (b[i] != (unsigned char)(i * 31 + (size_t)seed)) return 0;
    return 1;
}

TEST(commit_replaces_and_failures_keep_the_old_file)
{
    const char *path = tu_tmp_path("atomic");
    const size_t old_n = 150000, new_n = 200000; /* both larger than the output buffer */
    sg_ctx *plain = sg_ctx_new(NULL);
    CHECK_STATUS(plain, save(plain, path, old_n, 1), SG_OK);
    size_t n = 0;
    unsigned char *b = tu_slurp(path, &n);
    CHECK(b && same_pattern(b, n, old_n, 1));
    free(b);

    /* cut off after N bytes, for N across the whole file, with each errno */
    const int errs[3] = {ENOSPC, EIO, EFBIG};
    int trials = 0, kept = 0;
    for (long k = 0, cut = 0; cut <= (long)new_n; k++, cut = k * 4999 < (long)new_n ? k * 4999 : (long)new_n) {
        tu_fault f = {cut, errs[trials % 3], 0};
        sg_ctx *ctx = sg_ctx_new(NULL);
        sg__set_write_hook(ctx, tu_faulty_write, &f);
        int rc = save(ctx, path, new_n, 2);
        trials++;
        b = tu_slurp(path, &n);
        if (cut < (long)new_n) {
            CHECK(rc == SG_ERR_IO && strstr(sg_ctx_message(ctx), path));
            kept += b && same_pattern(b, n, old_n, 1);
        } else {
            CHECK(rc == SG_OK); /* the budget covered the whole file */
            CHECK(b && same_pattern(b, n, new_n, 2));
        }
        free(b);
        CHECK(tu_stray_temporaries(path) == 0);
        CHECK(sg_ctx_mem_stats(ctx).bytes_in_use == 0);
        sg_ctx_free(ctx);
        if (cut == (long)new_n) break; /* the last trial: exactly new_n */
    }
    CHECK(kept == trials - 1);

    /* short writes are resumed, not errors */
    tu_fault f = {-1, 0, 7};
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg__set_write_hook(ctx, tu_faulty_write, &f);
    CHECK_STATUS(ctx, save(ctx, path, new_n, 3), SG_OK);
    b = tu_slurp(path, &n);
    CHECK(b && same_pattern(b, n, new_n, 3));
    free(b);
    sg_ctx_free(ctx);

    /* an aborted save changes nothing */
    sg__out o;
    CHECK_STATUS(plain, sg__out_open(plain, path, &o), SG_OK);
    CHECK_STATUS(plain, sg__out_write(&o, "xyz", 3), SG_OK);
    sg__out_abort(&o);
    b = tu_slurp(path, &n);
    CHECK(b && same_pattern(b, n, new_n, 3));
    free(b);
    CHECK(tu_stray_temporaries(path) == 0);
    unlink(path);
    sg_ctx_free(plain);
}

TEST(bad_destinations_are_refused_at_open)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg__out o;
    CHECK_STATUS(ctx, sg__out_open(ctx, "/tmp", &o), SG_ERR_IO);
    CHECK(strstr(sg_ctx_message(ctx), "directory"));
    sg__out_abort(&o); /* inert: a no-op */
    CHECK_STATUS(ctx, sg__out_open(ctx, "/nonexistent-sgrad-dir/x.bin", &o), SG_ERR_IO);
    CHECK(strstr(sg_ctx_message(ctx), "/nonexistent-sgrad-dir/x.bin"));
    CHECK_STATUS(ctx, sg__out_open(ctx, "", &o), SG_ERR_ARG);
    CHECK(sg_ctx_mem_stats(ctx).bytes_in_use == 0);
    sg_ctx_free(ctx);
}

static mode_t mode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_mode & 07777 : (mode_t)-1;
}

static int is_pattern_file(const char *path, size_t want, int seed)
{
    size_t n = 0;
    unsigned char *b = tu_slurp(path, &n);
    int ok = b && same_pattern(b, n, want, seed);
    free(b);
    return ok;
}

TEST(a_replaced_file_keeps_its_mode_a_new_one_follows_the_umask)
{
    const char *path = tu_tmp_path("atomic_mode");
    sg_ctx *ctx = sg_ctx_new(NULL);
    unlink(path);
    mode_t old_mask = umask(027);
    CHECK_STATUS(ctx, save(ctx, path, 100, 1), SG_OK);
    CHECK(mode_of(path) == 0640); /* 0666 minus the umask */
    const mode_t modes[3] = {0600, 0604, 0755};
    for (int i = 0; i < 3; i++) { /* the umask (027) must not touch a replaced file's mode */
        CHECK(chmod(path, modes[i]) == 0);
        CHECK_STATUS(ctx, save(ctx, path, 300, 2 + i), SG_OK);
        CHECK(mode_of(path) == modes[i]);
        CHECK(is_pattern_file(path, 300, 2 + i));
    }
    umask(old_mask);
    /* the public writers: a private checkpoint saved again stays private */
    CHECK(chmod(path, 0600) == 0);
    int64_t sh[1] = {3};
    sg_tensor *t = sg_tensor_new(ctx, SG_F32, 1, sh);
    const char *nm[1] = {"t"};
    CHECK_STATUS(ctx, sg_checkpoint_save(ctx, path, &t, 1, nm, NULL, NULL), SG_OK);
    CHECK(mode_of(path) == 0600);
    CHECK(chmod(path, 0640) == 0);
    int64_t sw[2] = {2, 3};
    sg_tensor *w = sg_tensor_new(ctx, SG_F32, 2, sw);
    const char *words[2] = {"a", "b"};
    CHECK_STATUS(ctx, sg_wordvec_write(path, w, words, 0), SG_OK);
    CHECK(mode_of(path) == 0640);
    CHECK(tu_stray_temporaries(path) == 0);
    unlink(path);
    sg_ctx_free(ctx);
}

/* path is refused by the internal writer and the public ones with SG_ERR_IO and a message
 * naming `kind`; nothing is created beside it. */
static void check_refused(sg_ctx *ctx, const char *path, const char *kind)
{
    sg__out o;
    CHECK_STATUS(ctx, sg__out_open(ctx, path, &o), SG_ERR_IO);
    CHECK(strstr(sg_ctx_message(ctx), kind) && strstr(sg_ctx_message(ctx), path));
    sg__out_abort(&o); /* inert */
    int64_t sh[2] = {2, 3};
    sg_tensor *t = sg_tensor_new(ctx, SG_F32, 2, sh);
    const char *nm[1] = {"t"}, *words[2] = {"a", "b"};
    CHECK_STATUS(ctx, sg_checkpoint_save(ctx, path, &t, 1, nm, NULL, NULL), SG_ERR_IO);
    CHECK(strstr(sg_ctx_message(ctx), kind));
    CHECK_STATUS(ctx, sg_wordvec_write(path, t, words, 1), SG_ERR_IO);
    CHECK(strstr(sg_ctx_message(ctx), kind));
    sg_tensor_free(t);
}

TEST(fifos_sockets_and_devices_are_refused_and_kept)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    struct stat st;
    const char *fifo = tu_tmp_path("atomic_fifo");
    unlink(fifo);
    CHECK(mkfifo(fifo, 0644) == 0);
    check_refused(ctx, fifo, "FIFO");
    CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode) && (st.st_mode & 0777) == 0644);
    CHECK(tu_stray_temporaries(fifo) == 0);
    unlink(fifo);

    const char *sock = tu_tmp_path("atomic_sock");
    unlink(sock);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    check_refused(ctx, sock, "socket");
    CHECK(lstat(sock, &st) == 0 && S_ISSOCK(st.st_mode));
    CHECK(tu_stray_temporaries(sock) == 0);
    if (fd >= 0) close(fd);
    unlink(sock);

    /* /dev/null is only stat'ed: refused before anything is opened. As root a writer that
     * replaced it would do harm, so root checks a clone of it in /tmp instead (made where
     * mknod is allowed). */
    const char *dev = "/dev/null";
    if (geteuid() == 0) {
        dev = tu_tmp_path("atomic_devnull");
        unlink(dev);
        if (mknod(dev, S_IFCHR | 0666, makedev(1, 3)) != 0) dev = NULL;
    }
    if (dev) {
        check_refused(ctx, dev, "character device");
        CHECK(lstat(dev, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3));
        if (strcmp(dev, "/dev/null")) unlink(dev);
    }
    sg_ctx_free(ctx);
}

/* A write hook that records the file it writes to (Linux's /proc/self/fd). */
static long recording_write(void *ud, int fd, const void *buf, size_t n)
{
    char fdpath[64], *seen = ud;
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fd);
    ssize_t k = readlink(fdpath, seen, 255);
    seen[k > 0 ? k : 0] = '\0';
    return (long)write(fd, buf, n);
}

TEST(a_symlink_stays_and_its_target_is_replaced)
{
    char dir[200], target[256], link1[256], link2[256], name[300], seen[256] = "";
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg__set_write_hook(ctx, recording_write, seen);
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("atomic_dir")); /* the target lives here */
    snprintf(target, sizeof target, "%s/target", dir);
    snprintf(link1, sizeof link1, "%s", tu_tmp_path("atomic_link1"));
    snprintf(link2, sizeof link2, "%s", tu_tmp_path("atomic_link2"));
    unlink(target);
    rmdir(dir);
    unlink(link1);
    unlink(link2);
    CHECK(mkdir(dir, 0700) == 0);
    CHECK_STATUS(ctx, save(ctx, target, 500, 1), SG_OK);
    CHECK(chmod(target, 0640) == 0);
    /* link2 -> link1 (absolute) -> "DIR/target" (relative to /tmp) */
    char rel[256];
    snprintf(rel, sizeof rel, "%s/target", strrchr(dir, '/') + 1);
    CHECK(symlink(rel, link1) == 0 && symlink(link1, link2) == 0);
    seen[0] = '\0';
    CHECK_STATUS(ctx, save(ctx, link2, 700, 2), SG_OK);
    /* the temporary file was beside the target (where /proc shows it; only without /proc
     * is this not checked) */
    snprintf(name, sizeof name, "%s.tmp-", target);
    CHECK(access("/proc/self/fd", R_OK) != 0 || (seen[0] && !strncmp(seen, name, strlen(name))));
    struct stat st;
    CHECK(lstat(link1, &st) == 0 && S_ISLNK(st.st_mode) && lstat(link2, &st) == 0 && S_ISLNK(st.st_mode));
    ssize_t k = readlink(link1, name, sizeof name - 1);
    CHECK(k > 0 && (name[k] = '\0', !strcmp(name, rel)));
    CHECK(is_pattern_file(target, 700, 2) && mode_of(target) == 0640);
    CHECK(tu_stray_temporaries(link1) == 0 && tu_stray_temporaries(link2) == 0);
    /* a dangling link: its target is created, the link kept */
    unlink(target);
    CHECK_STATUS(ctx, save(ctx, link1, 50, 3), SG_OK);
    CHECK(lstat(link1, &st) == 0 && S_ISLNK(st.st_mode) && is_pattern_file(target, 50, 3));
    /* a link to a FIFO is refused, the FIFO and the link kept */
    unlink(target);
    CHECK(mkfifo(target, 0600) == 0);
    check_refused(ctx, link2, "FIFO");
    CHECK(lstat(target, &st) == 0 && S_ISFIFO(st.st_mode) && lstat(link2, &st) == 0 && S_ISLNK(st.st_mode));
    /* a loop of links */
    unlink(target);
    CHECK(symlink(link2, target) == 0); /* link1 -> target -> link2 -> link1 */
    sg__out o;
    CHECK_STATUS(ctx, sg__out_open(ctx, link1, &o), SG_ERR_IO);
    sg__out_abort(&o);
    CHECK(lstat(target, &st) == 0 && S_ISLNK(st.st_mode));
    unlink(target);
    CHECK(rmdir(dir) == 0); /* empty: no temporary file left beside the target */
    unlink(link1);
    unlink(link2);
    CHECK(sg_ctx_mem_stats(ctx).bytes_in_use == 0);
    sg_ctx_free(ctx);
}

/* /proc's links to open files (/dev/stdout is one): a regular file is found at its path,
 * however long (the link's own size says 64), and replaced there; a pipe is refused. */
TEST(a_proc_link_leads_to_the_file_it_names)
{
    if (access("/proc/self/fd", R_OK) != 0) return; /* not Linux: nothing to test */
    sg_ctx *ctx = sg_ctx_new(NULL);
    char dir[400], file[500], fdpath[64];
    snprintf(dir, sizeof dir, "%s_%0100d", tu_tmp_path("atomic_deep"), 0); /* > 64 bytes */
    snprintf(file, sizeof file, "%s/out", dir);
    unlink(file);
    rmdir(dir);
    CHECK(mkdir(dir, 0700) == 0);
    const int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", fd);
    CHECK_STATUS(ctx, save(ctx, fdpath, 3000, 4), SG_OK);
    CHECK(is_pattern_file(file, 3000, 4) && mode_of(file) == 0600);
    CHECK(tu_stray_temporaries(file) == 0);
    close(fd);
    int p[2];
    CHECK(pipe(p) == 0);
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", p[1]);
    check_refused(ctx, fdpath, "FIFO");
    close(p[0]);
    close(p[1]);
    unlink(file);
    CHECK(rmdir(dir) == 0);
    CHECK(sg_ctx_mem_stats(ctx).bytes_in_use == 0);
    sg_ctx_free(ctx);
}

TEST_MAIN()
