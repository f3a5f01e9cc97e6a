/* One contract for word-vector files: random tables with random words round-trip through
 * both formats bit for bit (the expected values are the test's own f32 numbers); every
 * table the reader would refuse (NaN/Inf, a repeated word, D = 0, empty, NUL-holding,
 * whitespace-holding or over-long words) is refused by the writer before the file is
 * touched; records past the header's V are an error; a sparse file whose header claims
 * 18,000,000 rows is refused with little memory; and a write cut off at any byte by the
 * context's write hook leaves the previous file byte for byte. */
#define _POSIX_C_SOURCE 200809L
#include "io/io_test.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <unistd.h>

static bool same_file(const char *path, const unsigned char *want, size_t n)
{
    size_t got_n;
    unsigned char *got = tu_slurp(path, &got_n);
    bool same = got && got_n == n && memcmp(got, want, n) == 0;
    free(got);
    return same;
}

/* A random finite f32 from random bits: subnormals, -0 and extreme exponents included. */
static float random_finite(void)
{
    for (;;) {
        uint32_t b = (uint32_t)tu_rand();
        float v;
        memcpy(&v, &b, 4);
        if (isfinite(v)) return v;
    }
}

/* A random word of 1..12 bytes from 1..255 without whitespace, made unique by a suffix. */
static void random_word(char *w, int i)
{
    int len = 1 + (int)(tu_rand() % 12), n = 0;
    while (n < len) {
        int c = 1 + (int)(tu_rand() % 255);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') continue;
        w[n++] = (char)c;
    }
    snprintf(w + n, 16, "_%d", i);
}

TEST(random_tables_round_trip_bit_for_bit)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    const char *p = tu_tmp_path("wv_contract_rt");
    int trials = 0, exact = 0;
    for (int trial = 0; trial < 60; trial++) {
        const int64_t V = trial % 10 == 0 ? 0 : (int64_t)(tu_rand() % 40) + 1;
        const int64_t D = (int64_t)(tu_rand() % 9) + 1;
        const int binary = trial % 2;
        int64_t shape[2] = {V, D};
        sg_tensor *t = sg_tensor_new(ctx, SG_F32, 2, shape);
        float *x = sg_tensor_f32(t);
        char(*words)[32] = malloc(sizeof *words * (size_t)(V + 1));
        const char **wp = malloc(sizeof *wp * (size_t)(V + 1));
        for (int64_t i = 0; i < V; i++) {
            random_word(words[i], (int)i);
            wp[i] = words[i];
            for (int64_t d = 0; d < D; d++) x[i * D + d] = random_finite();
        }
        CHECK_STATUS(ctx, sg_wordvec_write(p, t, wp, binary), SG_OK);
        /* the format given, and detected for text (binary bytes may look like text) */
        for (int mode = binary; mode >= (binary ? 1 : -1); mode--) {
            trials++;
            sg_wordvec *wv = sg_wordvec_read(ctx, p, mode);
            CHECK(wv != NULL);
            if (!wv) {
                fprintf(stderr, "  V %lld D %lld binary %d: %s\n", (long long)V, (long long)D,
                        binary, sg_ctx_message(ctx));
                sg_ctx_clear_error(ctx);
                continue;
            }
            bool ok = sg_wordvec_count(wv) == V && sg_wordvec_dim(wv) == D;
            for (int64_t i = 0; ok && i < V; i++)
                ok = strcmp(sg_wordvec_word(wv, i), wp[i]) == 0 && sg_wordvec_find(wv, wp[i]) == i;
            if (ok && V > 0)
                ok = memcmp(sg_tensor_f32(sg_wordvec_vectors(wv)), x, sizeof(float) * (size_t)(V * D)) == 0;
            CHECK(ok);
            exact += ok;
            sg_wordvec_free(wv);
        }
        free(words);
        free(wp);
        sg_tensor_free(t);
    }
    CHECK(exact == trials && trials > 60);
    remove(p);
    sg_ctx_free(ctx);
}

TEST(f64_tables_are_written_as_the_f32_the_reader_gives)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    const char *p = tu_tmp_path("wv_contract_f64");
    int64_t shape[2] = {2, 2};
    sg_tensor *t = sg_tensor_new(ctx, SG_F64, 2, shape);
    double *x = sg_tensor_data(t);
    x[0] = 0.1, x[1] = -1e-40, x[2] = 3.0e38, x[3] = 1.0 / 3.0;
    const char *w[2] = {"a", "b"};
    for (int binary = 0; binary <= 1; binary++) {
        CHECK_STATUS(ctx, sg_wordvec_write(p, t, w, binary), SG_OK);
        sg_wordvec *wv = sg_wordvec_read(ctx, p, binary);
        CHECK(wv != NULL);
        for (int i = 0; wv && i < 4; i++) CHECK(sg_tensor_f32(sg_wordvec_vectors(wv))[i] == (float)x[i]);
        sg_wordvec_free(wv);
    }
    /* 1e39 is finite in f64 but not in f32: the reader would refuse it, so must the writer */
    x[2] = 1e39;
    CHECK(sg_wordvec_write(p, t, w, 0) == SG_ERR_ARG);
    remove(p);
    sg_ctx_free(ctx);
}

/* Writes (V,D) table x with words w over a good file and expects `want` and the good file
 * left byte for byte. */
static void expect_refused(sg_ctx *ctx, int64_t V, int64_t D, const float *x, const char *const *w,
                           int want)
{
    const char *p = tu_tmp_path("wv_contract_refuse");
    const char *good = "1 1\ngood 1\n";
    tu_write_bytes(p, good, strlen(good));
    int64_t shape[2] = {V, D};
    sg_tensor *t = sg_tensor_new(ctx, SG_F32, 2, shape);
    if (V * D > 0) memcpy(sg_tensor_f32(t), x, sizeof(float) * (size_t)(V * D));
    for (int binary = 0; binary <= 1; binary++) {
        sg_ctx_clear_error(ctx);
        CHECK_STATUS(ctx, sg_wordvec_write(p, t, w, binary), want);
        CHECK(same_file(p, (const unsigned char *)good, strlen(good)));
    }
    CHECK(tu_stray_temporaries(p) == 0);
    sg_tensor_free(t);
    sg_ctx_clear_error(ctx);
    remove(p);
}

TEST(writer_refuses_what_the_reader_refuses)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    const float fin[4] = {1, 2, 3, 4};
    const float nan_[2] = {1, NAN}, inf[2] = {INFINITY, 1};
    const char *ab[2] = {"a", "b"}, *aa[2] = {"a", "a"};
    const char *empty[2] = {"a", ""}, *space[2] = {"a", "b c"}, *tab[2] = {"a\t", "b"};
    const char *vt[2] = {"a", "b\v"};
    static char longw[4097];
    memset(longw, 'x', 4096);
    const char *lw[2] = {"a", longw};
    expect_refused(ctx, 2, 1, nan_, ab, SG_ERR_ARG);
    expect_refused(ctx, 2, 1, inf, ab, SG_ERR_ARG);
    expect_refused(ctx, 2, 2, fin, aa, SG_ERR_ARG);
    expect_refused(ctx, 2, 0, fin, ab, SG_ERR_SHAPE);
    expect_refused(ctx, 2, 2, fin, empty, SG_ERR_ARG);
    expect_refused(ctx, 2, 2, fin, space, SG_ERR_ARG);
    expect_refused(ctx, 2, 2, fin, tab, SG_ERR_ARG);
    expect_refused(ctx, 2, 2, fin, vt, SG_ERR_ARG);
    expect_refused(ctx, 2, 2, fin, lw, SG_ERR_ARG);
    /* ... and the reader refuses the same things written by hand */
    const char *p = tu_tmp_path("wv_contract_hand");
    const char *bad[] = {"2 1\na 1\na 2\n", "2 1\na nan\nb 2\n", "2 1\na 1\nb inf\n", "1 0\n\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tu_write_bytes(p, bad[i], strlen(bad[i]));
        for (int mode = 0; mode <= 1; mode++) {
            sg_ctx_clear_error(ctx);
            CHECK(sg_wordvec_read(ctx, p, mode) == NULL);
            CHECK(sg_ctx_status(ctx) == SG_ERR_FORMAT);
        }
    }
    /* the longest word the writer accepts (4095 bytes) reads back */
    longw[4095] = '\0';
    int64_t shape[2] = {2, 2};
    sg_tensor *t = sg_tensor_new(ctx, SG_F32, 2, shape);
    memcpy(sg_tensor_f32(t), fin, sizeof fin);
    CHECK_STATUS(ctx, sg_wordvec_write(p, t, lw, 1), SG_OK);
    sg_wordvec *wv = sg_wordvec_read(ctx, p, 1);
    CHECK(wv && strcmp(sg_wordvec_word(wv, 1), longw) == 0);
    sg_wordvec_free(wv);
    sg_tensor_free(t);
    remove(p);
    sg_ctx_free(ctx);
}

TEST(reader_refuses_nul_words_and_trailing_records)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    const char *p = tu_tmp_path("wv_contract_nul");
    /* "b\0c": as a C string it would be "b" (and a second "b" would not be caught) */
    const char nul_text[] = "2 1\na 1\nb\0c 2\n";
    const unsigned char nul_bin[] = {'1', ' ', '1', '\n', 'x', 0, 'y', ' ', 0, 0, 0x80, 0x3f, '\n'};
    const char *trailing[] = {"1 1\na 1\nb 2\n", "1 1\na 1\n\nb\n", "0 3\nx 1 2 3\n"};
    struct {
        const void *data;
        size_t n;
        int rec, binary;
    } cases[] = {{nul_text, sizeof nul_text - 1, 2, 0}, {nul_bin, sizeof nul_bin, 1, 1},
                 {trailing[0], strlen(trailing[0]), 2, 0}, {trailing[1], strlen(trailing[1]), 2, 0},
                 {trailing[2], strlen(trailing[2]), 1, 0}, {trailing[2], strlen(trailing[2]), 1, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tu_write_bytes(p, cases[i].data, cases[i].n);
        for (int mode = cases[i].binary; mode >= (cases[i].binary ? 1 : -1); mode--) {
            sg_ctx_clear_error(ctx);
            CHECK(sg_wordvec_read(ctx, p, mode) == NULL);
            CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_FORMAT);
            char want[32];
            snprintf(want, sizeof want, "record %d:", cases[i].rec);
            CHECK(strstr(sg_ctx_message(ctx), want) != NULL);
        }
    }
    /* trailing whitespace is not a record */
    tu_write_bytes(p, "1 1\na 1\n\n \n", 11);
    sg_wordvec *wv = sg_wordvec_read(ctx, p, 0);
    CHECK(wv && sg_wordvec_count(wv) == 1);
    sg_wordvec_free(wv);
    remove(p);
    sg_ctx_free(ctx);
}

TEST(sparse_file_with_a_huge_header_allocates_little)
{
    /* The file: a header of 18,000,000 rows, a few KB of records, and a size
     * (a hole, ftruncate) large enough for the header's V, so the size check passes. */
    tu_counting cnt = {0, 0};
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.allocator = {tu_count_alloc, tu_count_free, &cnt}});
    const char *p = tu_tmp_path("wv_contract_sparse");
    for (int binary = 0; binary <= 1; binary++) {
        FILE *f = fopen(p, "wb");
        fprintf(f, "18000000 4\n");
        for (int i = 0; i < 100; i++) {
            fprintf(f, "w%d", i);
            const float v[4] = {1, 2, 3, (float)i};
            if (binary) {
                fputc(' ', f);
                fwrite(v, 4, 4, f);
            } else {
                for (int d = 0; d < 4; d++) fprintf(f, " %g", (double)v[d]);
            }
            fputc('\n', f);
        }
        fclose(f);
        CHECK(truncate(p, (off_t)18000000 * 20) == 0);
        sg_ctx_clear_error(ctx);
        sg_ctx_reset_peak(ctx);
        CHECK(sg_wordvec_read(ctx, p, binary) == NULL);
        CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_FORMAT);
        CHECK(strstr(sg_ctx_message(ctx), "record 101:") != NULL);
        CHECK(sg_ctx_mem_stats(ctx).peak_bytes < ((size_t)8 << 20));
    }
    remove(p);
    sg_ctx_free(ctx);
}

TEST(write_cut_off_at_any_byte_keeps_the_previous_file)
{
    tu_fault c = {-1, ENOSPC, 0};
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg__set_write_hook(ctx, tu_faulty_write, &c);
    const char *p = tu_tmp_path("wv_contract_cut");
    /* the previous file: 300 words of 50 values (binary, about 60 KB; text, about 200 KB,
     * more than the writer's 64 KB buffer, so writes happen mid-table) */
    enum { V = 300, D = 50 };
    int64_t shape[2] = {V, D};
    sg_tensor *t = sg_tensor_new(ctx, SG_F32, 2, shape);
    char(*words)[16] = malloc(sizeof *words * V);
    const char *wp[V];
    for (int i = 0; i < V; i++) {
        snprintf(words[i], 16, "word%d", i);
        wp[i] = words[i];
        for (int d = 0; d < D; d++) sg_tensor_f32(t)[i * D + d] = (float)tu_rand_unit();
    }
    int runs = 0, kept = 0;
    for (int binary = 0; binary <= 1; binary++) {
        const char *old = "2 1\nold 1\nfile 2\n";
        tu_write_bytes(p, old, strlen(old));
        /* the full size of the new file, for the cut-off points */
        const char *q = tu_tmp_path("wv_contract_full");
        c.budget = -1;
        CHECK_STATUS(ctx, sg_wordvec_write(q, t, wp, binary), SG_OK);
        size_t full_n;
        unsigned char *full = tu_slurp(q, &full_n);
        remove(q);
        const int errs[3] = {ENOSPC, EIO, EFBIG};
        for (int k = 0; k <= 40; k++) {
            c.budget = (long)(full_n * (size_t)k / 41);
            c.err = errs[k % 3];
            sg_ctx_clear_error(ctx);
            runs++;
            int rc = sg_wordvec_write(p, t, wp, binary);
            CHECK(rc == SG_ERR_IO);
            bool same = same_file(p, (const unsigned char *)old, strlen(old));
            CHECK(same);
            kept += same && rc == SG_ERR_IO;
        }
        CHECK(tu_stray_temporaries(p) == 0);
        /* unlimited: the new file replaces the old one whole */
        c.budget = -1;
        CHECK_STATUS(ctx, sg_wordvec_write(p, t, wp, binary), SG_OK);
        CHECK(same_file(p, full, full_n));
        free(full);
    }
    CHECK(kept == runs);
    fprintf(stderr, "  %d cut-off writes, %d kept the previous file\n", runs, kept);
    free(words);
    sg_tensor_free(t);
    remove(p);
    sg_ctx_free(ctx);
}

TEST(empty_table_round_trips)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    const char *p = tu_tmp_path("wv_contract_empty");
    int64_t shape[2] = {0, 3};
    sg_tensor *t = sg_tensor_new(ctx, SG_F32, 2, shape);
    for (int binary = 0; binary <= 1; binary++) {
        CHECK_STATUS(ctx, sg_wordvec_write(p, t, (const char *const *)&p, binary), SG_OK);
        sg_wordvec *wv = sg_wordvec_read(ctx, p, binary);
        CHECK(wv && sg_wordvec_count(wv) == 0 && sg_wordvec_dim(wv) == 3);
        sg_wordvec_free(wv);
    }
    sg_tensor_free(t);
    remove(p);
    sg_ctx_free(ctx);
}

TEST_MAIN()
