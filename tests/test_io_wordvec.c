/* Word-vector reading against damaged and hostile files: a bad record is reported by its
 * own number (counted by hand in the file written here); a header that claims more than
 * the file can hold fails before the table is allocated (checked with an allocator that
 * refuses large blocks and with the peak of bytes in use); a file whose size cannot be
 * known (a pipe) is read with a table that grows with the records, and gives the same
 * words and values as the same bytes from a regular file; there the first reservation is
 * bounded in bytes, not rows, and format detection, which must rewind, is refused. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* An allocator that refuses any block over `limit` bytes. */
typedef struct {
    size_t limit;
    long refused;
} capped;
static void *capped_alloc(void *ud, size_t n)
{
    capped *c = ud;
    if (n > c->limit) {
        c->refused++;
        return NULL;
    }
    return malloc(n);
}
static void capped_free(void *ud, void *p)
{
    (void)ud;
    free(p);
}

/* Reads `path` and expects SG_ERR_FORMAT with "record <rec>:" in the message. */
static void expect_bad_record(sg_ctx *ctx, const char *path, int binary, int rec)
{
    sg_ctx_clear_error(ctx);
    CHECK(sg_wordvec_read(ctx, path, binary) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_FORMAT);
    char want[32];
    snprintf(want, sizeof want, "record %d:", rec);
    if (!strstr(sg_ctx_message(ctx), want))
        fprintf(stderr, "  wanted \"%s\" in: %s\n", want, sg_ctx_message(ctx));
    CHECK(strstr(sg_ctx_message(ctx), want) != NULL);
}

TEST(bad_record_is_reported_by_its_own_number)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    const char *p = tu_tmp_path("io_wordvec_bad.txt");
    const char *text[4] = {
        "3 2\na 1 2\nb 1 x\nc 3 4\n",   /* record 2: not a number */
        "3 2\na 1 2\nb 1 2 3\nc 3 4\n", /* record 2: too many values */
        "3 2\na 1 2\nb 1\nc 3.0 4.0\n", /* record 2: too few values */
        "3 2\na 1 2\nb 1 2\nc 3 inf\n", /* record 3: not finite */
    };
    const int rec[4] = {2, 2, 2, 3};
    for (int i = 0; i < 4; i++) {
        tu_write_bytes(p, text[i], strlen(text[i]));
        expect_bad_record(ctx, p, 0, rec[i]);
    }
    /* binary: record 2's second value is a NaN (0x7fc00000) */
    const unsigned char bin[] = {'2', ' ', '2', '\n', 'a', ' ', 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, '\n',
                                 'b', ' ', 0, 0, 0x80, 0x3f, 0, 0, 0xc0, 0x7f, '\n'};
    tu_write_bytes(p, bin, sizeof bin);
    expect_bad_record(ctx, p, 1, 2);
    remove(p);
    sg_ctx_free(ctx);
}

TEST(header_beyond_the_file_fails_before_allocating)
{
    /* "3000000 300" is a 3.6 GB table: a file of a few bytes cannot hold it (text needs
     * at least 2 bytes per value, binary 4). Blocks over 64 MB are refused, so a reader
     * that allocates from the header reports NOMEM instead of FORMAT. */
    capped cap = {(size_t)64 << 20, 0};
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.allocator = {capped_alloc, capped_free, &cap}});
    const char *p = tu_tmp_path("io_wordvec_huge");
    const char *text = "3000000 300\nthe 0.5 0.25\n";
    tu_write_bytes(p, text, strlen(text));
    for (int mode = -1; mode <= 1; mode++) {
        sg_ctx_clear_error(ctx);
        sg_ctx_reset_peak(ctx);
        CHECK(sg_wordvec_read(ctx, p, mode) == NULL);
        CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_FORMAT);
        CHECK(sg_ctx_mem_stats(ctx).peak_bytes < ((size_t)1 << 20));
    }
    /* binary: 2 words of 3 values need 2 * (2 + 12) = 28 bytes after the header */
    unsigned char bin[64] = "2 3\n";
    size_t n = 4;
    const char *words[2] = {"x", "y"};
    for (int w = 0; w < 2; w++) {
        bin[n++] = (unsigned char)words[w][0];
        bin[n++] = ' ';
        for (int k = 0; k < 12; k++) bin[n++] = 0;
    }
    tu_write_bytes(p, bin, n - 1); /* one byte short */
    sg_ctx_clear_error(ctx);
    CHECK(sg_wordvec_read(ctx, p, 1) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_FORMAT);
    tu_write_bytes(p, bin, n); /* exactly enough */
    sg_wordvec *wv = sg_wordvec_read(ctx, p, 1);
    CHECK(wv && sg_wordvec_count(wv) == 2 && sg_wordvec_find(wv, "y") == 1);
    sg_wordvec_free(wv);
    /* text: "a 1\nb 2" is the least that holds 2 words of 1 value */
    tu_write_bytes(p, "2 1\na 1\nb 2", 11);
    wv = sg_wordvec_read(ctx, p, 0);
    CHECK(wv && sg_wordvec_count(wv) == 2 && sg_tensor_get(sg_wordvec_vectors(wv), 1) == 2.0);
    sg_wordvec_free(wv);
    CHECK(cap.refused == 0);
    remove(p);
    sg_ctx_free(ctx);
}

/* Reads `data` through a named pipe (whose size cannot be known in advance). */
static sg_wordvec *read_through_pipe(sg_ctx *ctx, const void *data, size_t n, int binary)
{
    const char *p = tu_tmp_path("io_wordvec_fifo");
    remove(p);
    if (mkfifo(p, 0600) != 0) return NULL;
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = fopen(p, "wb");
        if (f) {
            fwrite(data, 1, n, f);
            fclose(f);
        }
        _exit(0);
    }
    sg_wordvec *wv = pid > 0 ? sg_wordvec_read(ctx, p, binary) : NULL;
    if (pid > 0) waitpid(pid, NULL, 0);
    remove(p);
    return wv;
}

TEST(pipe_grows_the_table_with_the_records)
{
    capped cap = {(size_t)64 << 20, 0};
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.allocator = {capped_alloc, capped_free, &cap}});
    /* a hostile header through a pipe: the records end early, memory stays small */
    const char *hostile = "3000000 300\nthe 0.5 0.25\n";
    sg_ctx_reset_peak(ctx);
    CHECK(read_through_pipe(ctx, hostile, strlen(hostile), 0) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_FORMAT);
    CHECK(sg_ctx_mem_stats(ctx).peak_bytes < ((size_t)4 << 20));
    CHECK(cap.refused == 0);
    /* 5000 words (several doublings of the table and its hash) in both formats */
    enum { V = 5000, D = 3 };
    for (int binary = 0; binary <= 1; binary++) {
        size_t capb = (size_t)V * 64 + 64, n = 0;
        char *buf = malloc(capb);
        n += (size_t)snprintf(buf, capb, "%d %d\n", V, D);
        for (int w = 0; w < V; w++) {
            n += (size_t)snprintf(buf + n, capb - n, "w%d", w);
            for (int d = 0; d < D; d++) {
                float v = (float)(w * D + d) * 0.25f;
                if (binary) {
                    if (d == 0) buf[n++] = ' ';
                    uint32_t b;
                    memcpy(&b, &v, 4);
                    for (int k = 0; k < 4; k++) buf[n++] = (char)(b >> (8 * k)); /* little-endian */
                } else {
                    n += (size_t)snprintf(buf + n, capb - n, " %.9g", (double)v);
                }
            }
            buf[n++] = '\n';
        }
        sg_ctx_clear_error(ctx);
        sg_wordvec *wv = read_through_pipe(ctx, buf, n, binary);
        CHECK(wv != NULL);
        if (wv) {
            CHECK(sg_wordvec_count(wv) == V && sg_wordvec_dim(wv) == D);
            sg_tensor *vec = sg_wordvec_vectors(wv);
            CHECK(sg_tensor_dim(vec, 0) == V && sg_tensor_dim(vec, 1) == D);
            int bad = 0;
            char word[32];
            for (int w = 0; w < V; w++) {
                snprintf(word, sizeof word, "w%d", w);
                bad += sg_wordvec_find(wv, word) != w || strcmp(sg_wordvec_word(wv, w), word) != 0;
                for (int d = 0; d < D; d++) bad += sg_tensor_f32(vec)[w * D + d] != (float)(w * D + d) * 0.25f;
            }
            CHECK(bad == 0);
            CHECK(sg_wordvec_find(wv, "w5000") == -1);
        }
        sg_wordvec_free(wv);
        free(buf);
    }
    sg_ctx_free(ctx);
}

TEST(pipe_header_with_wide_rows_reserves_little)
{
    /* 3000000 rows of 2^20 values: a first reservation of 1024 rows would be 4 GB, and
     * blocks over 64 MB are refused, so a reader that reserves rows by count reports
     * NOMEM. The record is short, so the read ends in FORMAT after one row (4 MiB). */
    capped cap = {(size_t)64 << 20, 0};
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.allocator = {capped_alloc, capped_free, &cap}});
    const char *hostile = "3000000 1048576\nthe 0.5 0.25\n";
    sg_ctx_reset_peak(ctx);
    CHECK(read_through_pipe(ctx, hostile, strlen(hostile), 0) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_FORMAT);
    CHECK(sg_ctx_mem_stats(ctx).peak_bytes < ((size_t)8 << 20));
    CHECK(cap.refused == 0);
    sg_ctx_free(ctx);
}

TEST(pipe_refuses_format_detection)
{
    /* detection reads the first record and rewinds, which a pipe cannot do: the reader
     * must say so instead of losing the record ("record 2: file ends early") */
    sg_ctx *ctx = sg_ctx_new(NULL);
    const char *text = "2 2\na 1 2\nb 3 4\n";
    CHECK(read_through_pipe(ctx, text, strlen(text), -1) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_ARG);
    CHECK(strstr(sg_ctx_message(ctx), "binary 0") != NULL);
    /* the same bytes with the format given are read whole */
    sg_ctx_clear_error(ctx);
    sg_wordvec *wv = read_through_pipe(ctx, text, strlen(text), 0);
    CHECK(wv && sg_wordvec_count(wv) == 2 && sg_wordvec_find(wv, "b") == 1 &&
          sg_tensor_get(sg_wordvec_vectors(wv), 3) == 4.0);
    sg_wordvec_free(wv);
    /* a regular file is still detected */
    const char *p = tu_tmp_path("io_wordvec_detect.txt");
    tu_write_bytes(p, text, strlen(text));
    wv = sg_wordvec_read(ctx, p, -1);
    CHECK(wv && sg_wordvec_count(wv) == 2 && sg_tensor_get(sg_wordvec_vectors(wv), 0) == 1.0);
    sg_wordvec_free(wv);
    remove(p);
    sg_ctx_free(ctx);
}

TEST_MAIN()
