/* Word-vector files (sg_wordvec_*): files written by hand in word2vec's text and binary
 * formats read back to the values written; sgrad's writer round trips through its reader
 * in both formats (f32 exactly); malformed files and bad arguments give the documented
 * errors. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <stdint.h>
#include <unistd.h>

static void write_text(const char *path, const char *text) { tu_write_bytes(path, text, strlen(text)); }

TEST(reads_handwritten_text)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    const char *p = tu_tmp_path("w2v_io_hand.txt");
    /* word2vec.c leaves a space after each value; CRLF line ends also occur */
    write_text(p, "3 2\nthe 0.5 -1.25 \nof 3e-2 4\r\ncaf\xc3\xa9 -0 1000\n");
    for (int mode = -1; mode <= 0; mode++) {
        sg_wordvec *wv = sg_wordvec_read(ctx, p, mode);
        CHECK(wv != NULL);
        if (!wv) continue;
        CHECK(sg_wordvec_count(wv) == 3 && sg_wordvec_dim(wv) == 2);
        CHECK(strcmp(sg_wordvec_word(wv, 0), "the") == 0);
        CHECK(strcmp(sg_wordvec_word(wv, 2), "caf\xc3\xa9") == 0);
        CHECK(sg_wordvec_word(wv, 3) == NULL && sg_wordvec_word(wv, -1) == NULL);
        CHECK(sg_wordvec_find(wv, "of") == 1);
        CHECK(sg_wordvec_find(wv, "caf\xc3\xa9") == 2);
        CHECK(sg_wordvec_find(wv, "cafe") == -1);
        const float want[6] = {0.5f, -1.25f, 3e-2f, 4.0f, 0.0f, 1000.0f};
        sg_tensor *v = sg_wordvec_vectors(wv);
        CHECK(sg_tensor_dim(v, 0) == 3 && sg_tensor_dim(v, 1) == 2);
        for (int i = 0; i < 6; i++) CHECK(sg_tensor_f32(v)[i] == want[i]);
        sg_wordvec_free(wv);
    }
    remove(p);
    sg_ctx_free(ctx);
}

TEST(reads_handwritten_binary)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    const char *p = tu_tmp_path("w2v_io_hand.bin");
    /* header, then "word" ' ' D little-endian float32 '\n' per word */
    unsigned char buf[256];
    size_t n = 0;
    const char *hdr = "2 3\n";
    memcpy(buf, hdr, strlen(hdr));
    n += strlen(hdr);
    const char *words[2] = {"king", "queen"};
    /* IEEE-754 bits written out by hand: 1.0 = 0x3f800000, -2.0 = 0xc0000000,
     * 0.5 = 0x3f000000, 0.25 = 0x3e800000, 3.0 = 0x40400000, -0.125 = 0xbe000000 */
    const uint32_t bits[6] = {0x3f800000u, 0xc0000000u, 0x3f000000u,
                              0x3e800000u, 0x40400000u, 0xbe000000u};
    const float want[6] = {1.0f, -2.0f, 0.5f, 0.25f, 3.0f, -0.125f};
    for (int w = 0; w < 2; w++) {
        memcpy(buf + n, words[w], strlen(words[w]));
        n += strlen(words[w]);
        buf[n++] = ' ';
        for (int d = 0; d < 3; d++) {
            uint32_t b = bits[w * 3 + d];
            for (int k = 0; k < 4; k++) buf[n++] = (unsigned char)(b >> (8 * k));
        }
        buf[n++] = '\n';
    }
    tu_write_bytes(p, buf, n);
    for (int mode = -1; mode <= 1; mode += 2) {
        sg_wordvec *wv = sg_wordvec_read(ctx, p, mode);
        CHECK(wv != NULL);
        if (!wv) continue;
        CHECK(sg_wordvec_count(wv) == 2 && sg_wordvec_dim(wv) == 3);
        CHECK(sg_wordvec_find(wv, "queen") == 1);
        for (int i = 0; i < 6; i++) CHECK(sg_tensor_f32(sg_wordvec_vectors(wv))[i] == want[i]);
        sg_wordvec_free(wv);
    }
    remove(p);
    sg_ctx_free(ctx);
}

TEST(round_trip_both_formats)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    enum { V = 50, D = 7 };
    int64_t shape[2] = {V, D};
    sg_tensor *t = sg_tensor_new(ctx, SG_F32, 2, shape);
    float *x = sg_tensor_f32(t);
    /* values with long mantissas and a wide range of exponents */
    for (int i = 0; i < V * D; i++) x[i] = (float)((i % 2 ? -1 : 1) * (i + 1) / 3.0 * pow(10, i % 9 - 4));
    char names[V][16];
    const char *words[V];
    for (int i = 0; i < V; i++) {
        snprintf(names[i], sizeof names[i], "w%d_%c", i, 'a' + i % 26);
        words[i] = names[i];
    }
    for (int binary = 0; binary <= 1; binary++) {
        const char *p = tu_tmp_path(binary ? "w2v_io_rt.bin" : "w2v_io_rt.txt");
        CHECK_STATUS(ctx, sg_wordvec_write(p, t, words, binary), SG_OK);
        sg_wordvec *wv = sg_wordvec_read(ctx, p, -1);
        CHECK(wv != NULL);
        if (wv) {
            CHECK(sg_wordvec_count(wv) == V && sg_wordvec_dim(wv) == D);
            const float *y = sg_tensor_f32(sg_wordvec_vectors(wv));
            int diff = 0;
            for (int i = 0; i < V * D; i++) diff += y[i] != x[i];
            CHECK(diff == 0);
            for (int i = 0; i < V; i++) {
                CHECK(strcmp(sg_wordvec_word(wv, i), words[i]) == 0);
                CHECK(sg_wordvec_find(wv, words[i]) == i);
            }
            sg_wordvec_free(wv);
        }
        /* the header is the text line "V D" in both formats */
        FILE *f = fopen(p, "rb");
        char line[64] = "";
        CHECK(f && fgets(line, sizeof line, f));
        if (f) fclose(f);
        CHECK(strcmp(line, "50 7\n") == 0);
        remove(p);
    }
    /* f64 tables are written as float32 values */
    sg_tensor *t64 = sg_tensor_new(ctx, SG_F64, 2, shape);
    CHECK_STATUS(ctx, sg_tensor_copy(t64, t), SG_OK);
    const char *p = tu_tmp_path("w2v_io_f64.bin");
    CHECK_STATUS(ctx, sg_wordvec_write(p, t64, words, 1), SG_OK);
    sg_wordvec *wv = sg_wordvec_read(ctx, p, 1);
    CHECK(wv && memcmp(sg_tensor_f32(sg_wordvec_vectors(wv)), x, sizeof(float) * V * D) == 0);
    sg_wordvec_free(wv);
    remove(p);
    sg_ctx_free(ctx);
}

TEST(bad_files_are_format_errors)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    const char *p = tu_tmp_path("w2v_io_bad");
    struct {
        const char *text;
        int mode;
    } cases[] = {
        {"", 0},                               /* no header */
        {"2\nfoo 1\n", 0},                     /* header without D */
        {"x 2\n", 0},                          /* header not numbers */
        {"2 2\nfoo 1 2\n", 0},                 /* file ends early */
        {"1 3\nfoo 1 2\n", 0},                 /* too few values */
        {"1 2\nfoo 1 2 3\n", 0},               /* too many values */
        {"1 2\nfoo 1 abc\n", 0},               /* not a number */
        {"2 1\nfoo 1\nfoo 2\n", 0},            /* duplicate word */
        {"1 2\nfoo 1 nan\n", 0},               /* not finite */
        {"1 2\nfoo \x01\x02\x03", 1},          /* binary vector cut short */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_text(p, cases[i].text);
        sg_ctx_clear_error(ctx);
        sg_wordvec *wv = sg_wordvec_read(ctx, p, cases[i].mode);
        if (wv) fprintf(stderr, "  case %zu was accepted\n", i);
        CHECK(wv == NULL);
        CHECK(sg_ctx_status(ctx) == SG_ERR_FORMAT);
        sg_wordvec_free(wv);
    }
    remove(p);
    sg_ctx_clear_error(ctx);
    CHECK(sg_wordvec_read(ctx, "/nonexistent/dir/vectors.txt", -1) == NULL);
    CHECK(sg_ctx_status(ctx) == SG_ERR_IO);
    sg_wordvec_free(NULL);
    CHECK(sg_wordvec_find(NULL, "x") == -1);
    sg_mem_stats m = sg_ctx_mem_stats(ctx);
    CHECK(m.bytes_in_use < 4096); /* failed reads gave their memory back */
    sg_ctx_free(ctx);
}

TEST(writer_checks_before_writing)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t shape[2] = {2, 3};
    sg_tensor *t = sg_tensor_new(ctx, SG_F32, 2, shape);
    const char *p = tu_tmp_path("w2v_io_w");
    remove(p);
    const char *spaced[2] = {"ok", "two words"};
    CHECK_STATUS(ctx, sg_wordvec_write(p, t, spaced, 0), SG_ERR_ARG);
    const char *empty[2] = {"ok", ""};
    CHECK_STATUS(ctx, sg_wordvec_write(p, t, empty, 1), SG_ERR_ARG);
    CHECK(access(p, F_OK) != 0); /* nothing was created */
    int64_t s1[1] = {6};
    sg_tensor *flat = sg_tensor_new(ctx, SG_F32, 1, s1);
    const char *good[2] = {"a", "b"};
    CHECK_STATUS(ctx, sg_wordvec_write(p, flat, good, 0), SG_ERR_SHAPE);
    sg_tensor *ints = sg_tensor_new(ctx, SG_I32, 2, shape);
    CHECK_STATUS(ctx, sg_wordvec_write(p, ints, good, 0), SG_ERR_DTYPE);
    CHECK_STATUS(ctx, sg_wordvec_write("/nonexistent/dir/v.txt", t, good, 0), SG_ERR_IO);
    sg_ctx_free(ctx);
}

TEST_MAIN()
