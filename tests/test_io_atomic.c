/* Atomic file output (src/io/atomic.c): a committed save replaces the destination whole;
 * a save that fails at any byte (a write cut off after N bytes, ENOSPC, EIO) or is aborted
 * leaves the previous file byte for byte and no temporary file; short writes are resumed;
 * a directory or a missing directory as the destination is refused at open, before any
 * work. The expected contents are the bytes the test itself wrote. */
#define _POSIX_C_SOURCE 200809L
#include "io/io.h"

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
        sg_ctx_opts co = {.write = tu_faulty_write, .write_ud = &f};
        sg_ctx *ctx = sg_ctx_new(&co);
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
    sg_ctx_opts co = {.write = tu_faulty_write, .write_ud = &f};
    sg_ctx *ctx = sg_ctx_new(&co);
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

TEST_MAIN()
