/* Checkpoints (src/io/checkpoint.c). Exact resume: a run stopped after N steps, saved,
 * loaded into a fresh context with fresh tensors and optimizer and run M more steps is
 * bitwise the run of N + M steps without a stop (SGD with momentum, dampening and weight
 * decay under a changing schedule, fused and unfused; LazyAdam; Adagrad; row-wise Adagrad;
 * Adam), and a load without the optimizer state is not (the state matters). Saved values
 * of rows exact lazy SGD left behind equal sg_optim_flush's. Hostile files (every
 * truncation, flipped data bytes, flipped header bytes, crafted headers) are refused with
 * SG_ERR_FORMAT and change nothing; mismatched tensors and optimizers are refused. Saves
 * cut off by the write hook at many byte offsets, and a child killed with SIGKILL in the
 * middle of a large save, leave the previous checkpoint loadable. The file layout is also
 * checked by an independent reader here (header length, JSON, offsets, FNV-1a) and by
 * numpy in test_checkpoint_numpy.sh, which runs this program with --write-sample.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io/io_test.h"
#include "testutil.h"

/* ---------------------------------------------------------------- a small model */

enum { V = 40, D = 6, K = 3, B = 7 };

typedef enum { OPT_SGD, OPT_SGD_FUSED, OPT_LAZY_ADAM, OPT_ADAGRAD, OPT_ROWWISE_ADAGRAD, OPT_ADAM } opt_kind;

typedef struct {
    sg_ctx *ctx;
    sg_tensor *W, *M, *b; /* (V,D) table, (D,K), (K) */
    sg_optim *opt;
    int fused;
} model;

static const char *const names[3] = {"emb.weight", "proj.weight", "proj.bias"};

static sg_optim *make_optim(sg_ctx *ctx, opt_kind k)
{
    switch (k) {
    case OPT_SGD:
    case OPT_SGD_FUSED: {
        sg_sgd_opts o = {0.2, 0.9, 0.1, 0.01, 0};
        sg_optim *opt = sg_optim_sgd(ctx, &o);
        sg_lr_schedule s = {SG_LR_LINEAR, 30, 0.2, NULL, NULL}; /* lr changes every step */
        sg_optim_set_schedule(opt, &s);
        return opt;
    }
    case OPT_LAZY_ADAM: {
        sg_adam_opts o = {0.02, 0.9, 0.99, 1e-8, 0.01, 0};
        return sg_optim_lazy_adam(ctx, &o);
    }
    case OPT_ADAGRAD: {
        sg_adagrad_opts o = {0.1, 0.01, 0.001, 0.1, 1e-10};
        return sg_optim_adagrad(ctx, &o);
    }
    case OPT_ROWWISE_ADAGRAD: {
        sg_adagrad_opts o = {0.1, 0.01, 0.0, 0.1, 1e-10};
        return sg_optim_rowwise_adagrad(ctx, &o);
    }
    case OPT_ADAM: {
        sg_adam_opts o = {0.02, 0.9, 0.99, 1e-8, 0.01, 1};
        return sg_optim_adam(ctx, &o);
    }
    }
    return NULL;
}

static model make_model(opt_kind k, uint64_t seed)
{
    sg_ctx_opts co = {.threads = 2, .seed = seed};
    model m = {sg_ctx_new(&co), NULL, NULL, NULL, NULL, k == OPT_SGD_FUSED};
    int64_t sw[2] = {V, D}, sm[2] = {D, K}, sb[1] = {K};
    m.W = sg_tensor_requires_grad(sg_tensor_new(m.ctx, SG_F32, 2, sw), 1);
    m.M = sg_tensor_requires_grad(sg_tensor_new(m.ctx, SG_F32, 2, sm), 1);
    m.b = sg_tensor_requires_grad(sg_tensor_new(m.ctx, SG_F32, 1, sb), 1);
    sg_tensor_fill_uniform(m.W, -1, 1);
    sg_tensor_fill_uniform(m.M, -1, 1);
    sg_tensor_fill_uniform(m.b, -0.1, 0.1);
    m.opt = make_optim(m.ctx, k);
    sg_optim_add_param(m.opt, m.W);
    sg_optim_add_param(m.opt, m.M);
    sg_optim_add_param(m.opt, m.b);
    return m;
}

static void free_model(model *m)
{
    sg_optim_free(m->opt);
    sg_ctx_free(m->ctx);
}

/* Steps [from, to): rows drawn from the context's generator (so its state matters), a
 * target fixed by the step number; loss = mean(tanh(E M + b) * target). */
static int train(model *m, int from, int to)
{
    int fail = 0;
    for (int s = from; s < to; s++) {
        int64_t bs[1] = {B}, hs[2] = {B, K};
        sg_tensor *idx = sg_tensor_new_tmp(m->ctx, SG_I64, 1, bs);
        sg_tensor *tg = sg_tensor_new_tmp(m->ctx, SG_F32, 2, hs);
        int64_t *ix = sg_tensor_data(idx);
        float *t = sg_tensor_f32(tg);
        for (int i = 0; i < B; i++) ix[i] = (int64_t)(sg_rand_u64(m->ctx) % (i < 4 ? 8 : V)); /* hot rows */
        for (int i = 0; i < B * K; i++) t[i] = (float)sin(0.7 * s + i);
        sg_embedding_opts eo = {-1, 0, m->fused ? m->opt : NULL};
        sg_tensor *h = sg_tanh(sg_add(sg_matmul(sg_embedding(m->W, idx, &eo), m->M), m->b));
        sg_tensor *loss = sg_mean(sg_mul(h, tg));
        fail |= !loss || sg_backward(loss) != SG_OK || sg_optim_step(m->opt) != SG_OK;
        sg_tape_reset(m->ctx);
    }
    return fail;
}

static sg_tensor *const *params_of(model *m)
{
    static sg_tensor *p[3];
    p[0] = m->W;
    p[1] = m->M;
    p[2] = m->b;
    return p;
}

static int same_bits(sg_tensor *a, sg_tensor *b)
{
    return sg_tensor_numel(a) == sg_tensor_numel(b) && sg_tensor_dtype(a) == sg_tensor_dtype(b) &&
           !memcmp(sg_tensor_data(a), sg_tensor_data(b),
                   (size_t)sg_tensor_numel(a) * sg_dtype_size(sg_tensor_dtype(a)));
}

static int same_model(model *a, model *b)
{
    return same_bits(a->W, b->W) && same_bits(a->M, b->M) && same_bits(a->b, b->b);
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static unsigned char *slurp(const char *path, long *n)
{
    *n = file_size(path);
    if (*n < 0) return NULL;
    unsigned char *b = malloc((size_t)*n + 1);
    FILE *f = fopen(path, "rb");
    if (!f || fread(b, 1, (size_t)*n, f) != (size_t)*n) *n = -1;
    if (f) fclose(f);
    return b;
}

/* ---------------------------------------------------------------- exact resume */

enum { N1 = 12, N2 = 15 };

static void check_resume(opt_kind k)
{
    const char *path = tu_tmp_path("ckpt_resume");
    model whole = make_model(k, 7), first = make_model(k, 7);
    CHECK(!train(&whole, 0, N1 + N2));
    CHECK(!train(&first, 0, N1));
    const char *mk[2] = {"epoch", "note"}, *mv[2] = {"3", "line\n\"quoted\" \\ caf\xc3\xa9"};
    sg_checkpoint_meta meta = {2, mk, mv};
    CHECK_STATUS(first.ctx, sg_checkpoint_save(first.ctx, path, params_of(&first), 3, names, first.opt, &meta), SG_OK);

    /* fresh context (another seed, so another generator state and other initial values) */
    model resumed = make_model(k, 99);
    /* the metadata alone, read first as a program does to decide what to build */
    sg_checkpoint_meta peek = {0, NULL, NULL};
    const uint64_t rng_before = sg_rand_u64(resumed.ctx);
    CHECK_STATUS(resumed.ctx, sg_checkpoint_read_meta(resumed.ctx, path, &peek), SG_OK);
    CHECK(peek.n == 2 && sg_checkpoint_meta_get(&peek, "note") && !strcmp(sg_checkpoint_meta_get(&peek, "note"), mv[1]));
    CHECK(sg_checkpoint_meta_get(&peek, "sgrad.checksum") == NULL);
    sg_checkpoint_meta_free(resumed.ctx, &peek);
    CHECK(sg_rand_u64(resumed.ctx) != rng_before); /* the generator went on: read_meta restored nothing */
    CHECK(!same_model(&resumed, &first));
    sg_checkpoint_meta got = {0, NULL, NULL};
    /* the metadata alone, before any tensor is made (changes no tensor) */
    CHECK_STATUS(resumed.ctx, sg_checkpoint_read_meta(resumed.ctx, path, &got), SG_OK);
    CHECK(got.n == 2 && sg_checkpoint_meta_get(&got, "note") && !strcmp(sg_checkpoint_meta_get(&got, "note"), mv[1]));
    CHECK(sg_checkpoint_meta_get(&got, "sgrad.format") == NULL);
    sg_checkpoint_meta_free(resumed.ctx, &got);
    CHECK(!same_model(&resumed, &first));
    tu_write_bytes(tu_tmp_path("ckpt_not"), "not a checkpoint at all", 23);
    CHECK_STATUS(resumed.ctx, sg_checkpoint_read_meta(resumed.ctx, tu_tmp_path("ckpt_not"), &got), SG_ERR_FORMAT);
    CHECK(got.n == 0);
    remove(tu_tmp_path("ckpt_not"));
    CHECK_STATUS(resumed.ctx, sg_checkpoint_load(resumed.ctx, path, params_of(&resumed), 3, names, resumed.opt, &got),
                 SG_OK);
    CHECK(sg_optim_steps(resumed.opt) == N1);
    CHECK(got.n == 2);
    CHECK(sg_checkpoint_meta_get(&got, "epoch") && !strcmp(sg_checkpoint_meta_get(&got, "epoch"), "3"));
    CHECK(sg_checkpoint_meta_get(&got, "note") && !strcmp(sg_checkpoint_meta_get(&got, "note"), mv[1]));
    CHECK(sg_checkpoint_meta_get(&got, "sgrad.format") == NULL); /* the library's keys stay inside */
    sg_checkpoint_meta_free(resumed.ctx, &got);
    CHECK(got.n == 0 && got.keys == NULL);
    CHECK(sg_optim_lr(resumed.opt) == sg_optim_lr(first.opt));
    CHECK(!train(&resumed, N1, N1 + N2));
    CHECK(same_model(&resumed, &whole));
    CHECK(sg_optim_steps(resumed.opt) == N1 + N2);

    /* the control: the same parameters without the optimizer state resume differently */
    model params_only = make_model(k, 99);
    CHECK_STATUS(params_only.ctx,
                 sg_checkpoint_load(params_only.ctx, path, params_of(&params_only), 3, names, NULL, NULL), SG_OK);
    CHECK(same_model(&params_only, &first) || k == OPT_SGD || k == OPT_SGD_FUSED); /* lazy rows: see below */
    CHECK(!train(&params_only, N1, N1 + N2));
    CHECK(!same_model(&params_only, &whole));

    free_model(&whole);
    free_model(&first);
    free_model(&resumed);
    free_model(&params_only);
    remove(path);
}

TEST(resume_sgd_momentum_weight_decay_schedule) { check_resume(OPT_SGD); }
TEST(resume_sgd_fused_embedding) { check_resume(OPT_SGD_FUSED); }
TEST(resume_lazy_adam) { check_resume(OPT_LAZY_ADAM); }
TEST(resume_adagrad) { check_resume(OPT_ADAGRAD); }
TEST(resume_rowwise_adagrad) { check_resume(OPT_ROWWISE_ADAGRAD); }
TEST(resume_adam) { check_resume(OPT_ADAM); }

/* Rows lazy SGD left behind are saved caught up: a parameters-only load equals the
 * flushed optimizer's parameters, and saving did not change the saver. */
TEST(lazy_sgd_rows_saved_as_flush_makes_them)
{
    const char *path = tu_tmp_path("ckpt_flush");
    model a = make_model(OPT_SGD, 5), twin = make_model(OPT_SGD, 5);
    CHECK(!train(&a, 0, N1));
    CHECK(!train(&twin, 0, N1));
    CHECK_STATUS(a.ctx, sg_checkpoint_save(a.ctx, path, params_of(&a), 3, names, a.opt, NULL), SG_OK);
    CHECK(same_model(&a, &twin)); /* the save changed nothing */
    sg_tensor *last = NULL;
    for (int i = 0; i < sg_optim_state_count(a.opt, a.W); i++) {
        const char *nm;
        sg_tensor *t = sg_optim_state(a.opt, a.W, i, &nm);
        if (!strcmp(nm, "last_step")) last = t;
    }
    int behind = 0;
    for (int r = 0; last && r < V; r++) behind += ((int64_t *)sg_tensor_data(last))[r] < N1;
    CHECK(behind > 0); /* the case is exercised */
    CHECK_STATUS(a.ctx, sg_optim_flush(a.opt), SG_OK);
    model b = make_model(OPT_SGD, 1);
    CHECK_STATUS(b.ctx, sg_checkpoint_load(b.ctx, path, params_of(&b), 3, names, NULL, NULL), SG_OK);
    CHECK(same_model(&a, &b));
    CHECK(!same_model(&a, &twin));
    free_model(&a);
    free_model(&twin);
    free_model(&b);
    remove(path);
}

/* ---------------------------------------------------------------- an independent reader */

static uint64_t fnv(const unsigned char *p, size_t n)
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* Signs the file b (n bytes) as format `version` by docs/formats.md, "Checkpoints": format 2's
 * checksum is the FNV-1a 64 of the whole file with its own 16 hex digits read as '0',
 * format 1's that of the data section. */
static void resign(unsigned char *b, long n, char version)
{
    uint64_t h = le64(b);
    char *json = calloc(h + 1, 1);
    memcpy(json, b + 8, h);
    const char *fk = "\"sgrad.format\":\"", *ck = "\"sgrad.checksum\":\"fnv1a64:";
    char *f = strstr(json, fk), *c = strstr(json, ck);
    CHECK(f && c);
    if (f && c) {
        b[8 + (f - json) + strlen(fk)] = (unsigned char)version;
        unsigned char *digits = b + 8 + (c - json) + strlen(ck);
        memset(digits, '0', 16);
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx",
                 (unsigned long long)(version == '1' ? fnv(b + 8 + h, (size_t)n - 8 - h) : fnv(b, (size_t)n)));
        memcpy(digits, hex, 16);
    }
    free(json);
}

/* Layout by hand: length, 8-byte alignment of the data, the format version, the checksum
 * (recomputed by resign), and the offsets of one parameter whose values are known. */
TEST(layout_read_by_hand)
{
    const char *path = tu_tmp_path("ckpt_layout");
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t sh[2] = {2, 3};
    double v[6] = {1.5, -2, 3.25, 0, 1e300, -0.125};
    sg_tensor *t = sg_tensor_from_data(ctx, SG_F64, 2, sh, v);
    const char *nm[1] = {"x"};
    CHECK_STATUS(ctx, sg_checkpoint_save(ctx, path, &t, 1, nm, NULL, NULL), SG_OK);
    long n;
    unsigned char *b = slurp(path, &n);
    CHECK(n > 8);
    uint64_t h = le64(b);
    CHECK((8 + h) % 8 == 0 && 8 + h + sizeof v == (uint64_t)n);
    char *json = calloc(h + 1, 1);
    memcpy(json, b + 8, h);
    CHECK(strstr(json, "\"x\":{\"dtype\":\"F64\",\"shape\":[2,3],\"data_offsets\":[0,48]}"));
    CHECK(strstr(json, "\"__metadata__\":{\"sgrad.format\":\"2\",\"sgrad.checksum\":\"fnv1a64:"));
    unsigned char *signed_here = malloc((size_t)n);
    memcpy(signed_here, b, (size_t)n);
    memset(signed_here + 8 + (strstr(json, "fnv1a64:") - json) + 8, 'x', 16); /* resign must redo them */
    resign(signed_here, n, '2');
    CHECK(!memcmp(signed_here, b, (size_t)n));
    CHECK(!memcmp(b + 8 + h, v, sizeof v));
    free(signed_here);
    free(json);
    free(b);
    sg_ctx_free(ctx);
    remove(path);
}

/* ---------------------------------------------------------------- hostile files */

/* A small checkpoint of an SGD model at step N1 and, in *before, its bytes. */
static model saved_model(const char *path, unsigned char **bytes, long *n)
{
    model m = make_model(OPT_SGD, 3);
    train(&m, 0, N1);
    sg_checkpoint_save(m.ctx, path, params_of(&m), 3, names, m.opt, NULL);
    *bytes = slurp(path, n);
    return m;
}

/* Loads path into t (a model whose state must not change); returns the status. */
static int load_unchanged(model *t, model *ref, const char *path)
{
    int rc = sg_checkpoint_load(t->ctx, path, params_of(t), 3, names, t->opt, NULL);
    if (rc != SG_OK) {
        CHECK(same_model(t, ref));
        CHECK(sg_optim_steps(t->opt) == sg_optim_steps(ref->opt));
        CHECK(sg_rand_u64(t->ctx) == sg_rand_u64(ref->ctx));
    }
    return rc;
}

TEST(every_truncation_refused)
{
    const char *path = tu_tmp_path("ckpt_trunc"), *bad = tu_tmp_path("ckpt_trunc_bad");
    unsigned char *b;
    long n;
    model m = saved_model(path, &b, &n);
    model t = make_model(OPT_SGD, 11), ref = make_model(OPT_SGD, 11);
    int refused = 0;
    for (long len = 0; len < n; len++) {
        tu_write_bytes(bad, b, (size_t)len);
        int rc = load_unchanged(&t, &ref, bad);
        sg_checkpoint_meta peek = {0, NULL, NULL};
        CHECK(sg_checkpoint_read_meta(t.ctx, bad, &peek) == SG_ERR_FORMAT && peek.n == 0);
        refused += rc == SG_ERR_FORMAT;
    }
    CHECK(refused == n);
    printf("  %ld truncations refused of %ld\n", (long)refused, n);
    tu_write_bytes(bad, b, (size_t)n);
    CHECK_STATUS(t.ctx, sg_checkpoint_load(t.ctx, bad, params_of(&t), 3, names, t.opt, NULL), SG_OK);
    free(b);
    free_model(&m);
    free_model(&t);
    free_model(&ref);
    remove(path);
    remove(bad);
}

TEST(flipped_bytes)
{
    const char *path = tu_tmp_path("ckpt_flip"), *bad = tu_tmp_path("ckpt_flip_bad");
    unsigned char *b;
    long n;
    model m = saved_model(path, &b, &n);
    model t = make_model(OPT_SGD, 11), ref = make_model(OPT_SGD, 11);
    long h = (long)le64(b), data_refused = 0, header_refused = 0;
    for (long i = 8 + h; i < n; i++) { /* every data byte: the checksum */
        b[i] ^= 0x10;
        tu_write_bytes(bad, b, (size_t)n);
        data_refused += load_unchanged(&t, &ref, bad) == SG_ERR_FORMAT;
        sg_checkpoint_meta peek = {0, NULL, NULL};
        CHECK(sg_checkpoint_read_meta(t.ctx, bad, &peek) == SG_ERR_FORMAT); /* the checksum there too */
        b[i] ^= 0x10;
    }
    CHECK(data_refused == n - 8 - h);
    /* every header byte (length included), each changed three ways: the checksum covers
     * the header too (format 2) */
    const unsigned char masks[3] = {0x01, 0x20, 0x41};
    for (long i = 0; i < 8 + h; i++)
        for (int k = 0; k < 3; k++) {
            b[i] ^= masks[k];
            tu_write_bytes(bad, b, (size_t)n);
            int rc = load_unchanged(&t, &ref, bad);
            sg_checkpoint_meta peek = {0, NULL, NULL};
            int mrc = sg_checkpoint_read_meta(t.ctx, bad, &peek);
            header_refused += rc == SG_ERR_FORMAT && mrc == SG_ERR_FORMAT;
            if (rc != SG_ERR_FORMAT || mrc != SG_ERR_FORMAT) {
                fprintf(stderr, "  header byte %ld ^ 0x%02x: load %s, read_meta %s\n", i, masks[k],
                        sg_status_string(rc), sg_status_string(mrc));
                sg_checkpoint_meta_free(t.ctx, &peek);
                free_model(&t); /* a load that went through changed t */
                free_model(&ref);
                t = make_model(OPT_SGD, 11);
                ref = make_model(OPT_SGD, 11);
            }
            b[i] ^= masks[k];
        }
    CHECK(header_refused == 3 * (8 + h));
    printf("  %ld of %ld data flips and %ld of %ld header changes refused\n", data_refused, n - 8 - h,
           header_refused, 3 * (8 + h));
    free(b);
    free_model(&m);
    free_model(&t);
    free_model(&ref);
    remove(path);
    remove(bad);
}

/* The probe's case: SGD(lr=0.1) saved, one bit flipped so the metadata reads lr 1.1, loaded
 * into SGD(lr=0.1): refused, nothing changes. The same bytes signed by format 1's rule
 * (data only) still load, so old files keep working and the flip is one only format 2
 * sees. */
TEST(flipped_learning_rate_bit_refused_format_1_still_loads)
{
    const char *path = tu_tmp_path("ckpt_lr"), *bad = tu_tmp_path("ckpt_lr_bad");
    sg_sgd_opts so = {0.1, 0, 0, 0, 0};
    int64_t sh[2] = {4, 2};
    const char *nm[1] = {"W"};
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *w = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F32, 2, sh), 1);
    sg_tensor_fill(w, 1);
    sg_optim *opt = sg_optim_sgd(ctx, &so);
    sg_optim_add_param(opt, w);
    CHECK_STATUS(ctx, sg_checkpoint_save(ctx, path, &w, 1, nm, opt, NULL), SG_OK);
    long n;
    unsigned char *b = slurp(path, &n);
    const char *key = "\"sgrad.optim.lr\":\"0.10000000000000001\"";
    unsigned char *at = NULL; /* the '0' before ".1" */
    for (long i = 0; !at && i + (long)strlen(key) <= n; i++)
        if (!memcmp(b + i, key, strlen(key))) at = b + i + strlen("\"sgrad.optim.lr\":\"");
    CHECK(at != NULL);
    if (at) *at ^= 1; /* "0.1..." -> "1.1..." */

    sg_ctx *c2 = sg_ctx_new(NULL);
    sg_tensor *w2 = sg_tensor_requires_grad(sg_tensor_new(c2, SG_F32, 2, sh), 1);
    sg_optim *o2 = sg_optim_sgd(c2, &so);
    sg_optim_add_param(o2, w2);
    tu_write_bytes(bad, b, (size_t)n);
    CHECK_STATUS(c2, sg_checkpoint_load(c2, bad, &w2, 1, nm, o2, NULL), SG_ERR_FORMAT);
    CHECK(strstr(sg_ctx_message(c2), "checksum"));
    CHECK(sg_optim_lr(o2) == 0.1 && sg_tensor_get(w2, 0) == 0);

    resign(b, n, '1');
    tu_write_bytes(bad, b, (size_t)n);
    CHECK_STATUS(c2, sg_checkpoint_load(c2, bad, &w2, 1, nm, o2, NULL), SG_OK);
    CHECK(sg_optim_lr(o2) == 1.1 && sg_tensor_get(w2, 0) == 1);
    if (at) *at ^= 1; /* the unflipped file as format 1 */
    resign(b, n, '1');
    tu_write_bytes(bad, b, (size_t)n);
    sg_tensor_fill(w2, 0);
    CHECK_STATUS(c2, sg_checkpoint_load(c2, bad, &w2, 1, nm, o2, NULL), SG_OK);
    CHECK(sg_optim_lr(o2) == 0.1 && sg_tensor_get(w2, 7) == 1);
    b[n - 1] ^= 0x10; /* format 1 still checks its data */
    tu_write_bytes(bad, b, (size_t)n);
    CHECK_STATUS(c2, sg_checkpoint_load(c2, bad, &w2, 1, nm, o2, NULL), SG_ERR_FORMAT);
    free(b);
    sg_ctx_free(ctx);
    sg_ctx_free(c2);
    remove(path);
    remove(bad);
}

/* A file with the given header JSON (the checksum placeholder "@" replaced by the data's
 * FNV-1a) and data. */
static void craft(const char *path, const char *json, const void *data, size_t n, uint64_t hlen_override)
{
    char sum[32], hdr[4096];
    snprintf(sum, sizeof sum, "fnv1a64:%016llx", (unsigned long long)fnv(data, n));
    const char *at = strchr(json, '@');
    if (at) snprintf(hdr, sizeof hdr, "%.*s%s%s", (int)(at - json), json, sum, at + 1);
    else snprintf(hdr, sizeof hdr, "%s", json);
    size_t h = strlen(hdr);
    uint64_t hl = hlen_override ? hlen_override : h;
    unsigned char *f = malloc(8 + h + n + 1);
    for (int i = 0; i < 8; i++) f[i] = (unsigned char)(hl >> (8 * i));
    memcpy(f + 8, hdr, h);
    if (n) memcpy(f + 8 + h, data, n);
    tu_write_bytes(path, f, 8 + h + n);
    free(f);
}

TEST(crafted_headers_refused)
{
    const char *path = tu_tmp_path("ckpt_craft");
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t sh[1] = {2};
    float init[2] = {7, 8}, data[4] = {1, 2, 3, 4};
    sg_tensor *x = sg_tensor_from_data(ctx, SG_F32, 1, sh, init);
    const char *nm[1] = {"x"};
#define META "\"__metadata__\":{\"sgrad.format\":\"1\",\"sgrad.checksum\":\"@\",\"sgrad.rng\":\"" \
             "0000000000000001000000000000000200000000000000030000000000000004\"}"
    /* a good one first, so that the refusals below are about what each changes */
    craft(path, "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8, 0);
    CHECK_STATUS(ctx, sg_checkpoint_load(ctx, path, &x, 1, nm, NULL, NULL), SG_OK);
    CHECK(sg_tensor_get(x, 0) == 1 && sg_tensor_get(x, 1) == 2);
    sg_tensor_fill(x, 7);
    const char *cases[] = {
        "{",
        "[]",
        "{" META ",\"x\":}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}x",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],}}",
        "{" META ",\"x\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,2],\"data_offsets\":[0,8]}}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,8]}}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":1}}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[2]}}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"x\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}",
        "{" META "," META ",\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        "{\"__metadata__\":{\"sgrad.format\":\"1\",\"sgrad.checksum\":\"@\",\"sgrad.checksum\":\"@\"},\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        "{\"__metadata__\":{\"sgrad.format\":\"1\"},\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        "{\"__metadata__\":{\"sgrad.format\":\"2\",\"sgrad.checksum\":\"@\"},\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        "{\"__metadata__\":{\"sgrad.format\":\"3\",\"sgrad.checksum\":\"@\"},\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        "{\"__metadata__\":{\"sgrad.format\":\"1\",\"sgrad.checksum\":\"@\",\"sgrad.rng\":\"0\"},\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        "{" META ",\"x\\q\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        "{" META ",\"x\\ud800\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        "{" META ",\"x\\u0000\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        "{" META ",\"x\n\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"unterminated",
        "{" META ",\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
        "",
    };
    int nc = (int)(sizeof cases / sizeof *cases);
    for (int i = 0; i < nc; i++) {
        craft(path, cases[i], data, 8, 0);
        int rc = sg_checkpoint_load(ctx, path, &x, 1, nm, NULL, NULL);
        if (rc != SG_ERR_FORMAT) fprintf(stderr, "  case %d: %s (%s)\n", i, sg_status_string(rc), sg_ctx_message(ctx));
        CHECK(rc == SG_ERR_FORMAT);
        CHECK(sg_tensor_get(x, 0) == 7 && sg_tensor_get(x, 1) == 7);
    }
    /* header lengths the file cannot hold */
    const char *good = "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    uint64_t lens[] = {UINT64_MAX, (uint64_t)1 << 63, (uint64_t)1 << 40, strlen(good) + 9, 1};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        craft(path, good, data, 8, lens[i]);
        CHECK_STATUS(ctx, sg_checkpoint_load(ctx, path, &x, 1, nm, NULL, NULL), SG_ERR_FORMAT);
    }
    /* headers of no tensors (the loader once handed qsort and bsearch a NULL array here,
     * found by fuzz_checkpoint): the data section must then be empty, and the caller's
     * tensor is missing */
    craft(path, "{}", data, 8, 0);
    CHECK_STATUS(ctx, sg_checkpoint_load(ctx, path, &x, 1, nm, NULL, NULL), SG_ERR_FORMAT);
    craft(path, "{" META "}", data, 0, 0);
    CHECK_STATUS(ctx, sg_checkpoint_load(ctx, path, &x, 1, nm, NULL, NULL), SG_ERR_STATE);
    CHECK(sg_tensor_get(x, 0) == 7 && sg_tensor_get(x, 1) == 7);
    /* tensors the caller did not ask for, or of another shape or dtype */
    craft(path, "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"y\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}", data, 8, 0);
    CHECK_STATUS(ctx, sg_checkpoint_load(ctx, path, &x, 1, nm, NULL, NULL), SG_ERR_STATE);
    craft(path, "{" META ",\"y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8, 0);
    CHECK_STATUS(ctx, sg_checkpoint_load(ctx, path, &x, 1, nm, NULL, NULL), SG_ERR_STATE);
    craft(path, "{" META ",\"x\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]}}", data, 8, 0);
    CHECK_STATUS(ctx, sg_checkpoint_load(ctx, path, &x, 1, nm, NULL, NULL), SG_ERR_SHAPE);
    craft(path, "{" META ",\"x\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8, 0);
    CHECK_STATUS(ctx, sg_checkpoint_load(ctx, path, &x, 1, nm, NULL, NULL), SG_ERR_DTYPE);
    CHECK(sg_tensor_get(x, 0) == 7 && sg_tensor_get(x, 1) == 7);
    CHECK_STATUS(ctx, sg_checkpoint_load(ctx, "/nonexistent/ckpt", &x, 1, nm, NULL, NULL), SG_ERR_IO);
    CHECK_STATUS(ctx, sg_checkpoint_load(ctx, "/tmp", &x, 1, nm, NULL, NULL), SG_ERR_IO);
#undef META
    sg_ctx_free(ctx);
    remove(path);
}

TEST(mismatched_model_or_optimizer_refused)
{
    const char *path = tu_tmp_path("ckpt_mismatch");
    model m = make_model(OPT_SGD, 3);
    CHECK(!train(&m, 0, 4));
    CHECK_STATUS(m.ctx, sg_checkpoint_save(m.ctx, path, params_of(&m), 3, names, m.opt, NULL), SG_OK);
    model ref = make_model(OPT_SGD, 9);
    /* another kind */
    model t = make_model(OPT_LAZY_ADAM, 9);
    CHECK_STATUS(t.ctx, sg_checkpoint_load(t.ctx, path, params_of(&t), 3, names, t.opt, NULL), SG_ERR_STATE);
    CHECK(same_model(&t, &ref));
    free_model(&t);
    /* other hyperparameters */
    t = make_model(OPT_SGD, 9);
    sg_optim_free(t.opt);
    sg_sgd_opts o = {0.2, 0.8, 0.1, 0.01, 0};
    t.opt = sg_optim_sgd(t.ctx, &o);
    sg_optim_add_param(t.opt, t.W);
    sg_optim_add_param(t.opt, t.M);
    sg_optim_add_param(t.opt, t.b);
    CHECK_STATUS(t.ctx, sg_checkpoint_load(t.ctx, path, params_of(&t), 3, names, t.opt, NULL), SG_ERR_STATE);
    CHECK(same_model(&t, &ref));
    /* a parameter missing from the list, or a list without the optimizer's parameters */
    CHECK_STATUS(t.ctx, sg_checkpoint_load(t.ctx, path, params_of(&t), 2, names, t.opt, NULL), SG_ERR_ARG);
    CHECK_STATUS(t.ctx, sg_checkpoint_load(t.ctx, path, params_of(&t), 2, names, NULL, NULL), SG_ERR_STATE);
    CHECK(same_model(&t, &ref));
    free_model(&t);
    /* an optimizer when the file has none */
    CHECK_STATUS(m.ctx, sg_checkpoint_save(m.ctx, path, params_of(&m), 3, names, NULL, NULL), SG_OK);
    t = make_model(OPT_SGD, 9);
    CHECK_STATUS(t.ctx, sg_checkpoint_load(t.ctx, path, params_of(&t), 3, names, t.opt, NULL), SG_ERR_STATE);
    CHECK(same_model(&t, &ref));
    free_model(&t);
    free_model(&ref);
    free_model(&m);
    remove(path);
}

TEST(bad_save_arguments)
{
    const char *path = tu_tmp_path("ckpt_badargs");
    remove(path);
    model m = make_model(OPT_SGD, 3);
    sg_tensor *const *p = params_of(&m);
    const char *dup[3] = {"a", "b", "a"}, *empty[3] = {"a", "", "c"}, *res[3] = {"a", "optim/b", "c"},
               *md[3] = {"a", "__metadata__", "c"};
    CHECK_STATUS(m.ctx, sg_checkpoint_save(m.ctx, path, p, 3, dup, m.opt, NULL), SG_ERR_ARG);
    CHECK_STATUS(m.ctx, sg_checkpoint_save(m.ctx, path, p, 3, empty, m.opt, NULL), SG_ERR_ARG);
    CHECK_STATUS(m.ctx, sg_checkpoint_save(m.ctx, path, p, 3, res, m.opt, NULL), SG_ERR_ARG);
    CHECK_STATUS(m.ctx, sg_checkpoint_save(m.ctx, path, p, 3, md, m.opt, NULL), SG_ERR_ARG);
    CHECK_STATUS(m.ctx, sg_checkpoint_save(m.ctx, path, p, 2, names, m.opt, NULL), SG_ERR_ARG);
    CHECK_STATUS(m.ctx, sg_checkpoint_save(m.ctx, path, p, -1, names, NULL, NULL), SG_ERR_ARG);
    CHECK_STATUS(m.ctx, sg_checkpoint_save(m.ctx, NULL, p, 3, names, NULL, NULL), SG_ERR_NULL);
    CHECK(sg_checkpoint_save(NULL, path, p, 3, names, NULL, NULL) == SG_ERR_NULL);
    const char *k1[1] = {"sgrad.mine"}, *k2[2] = {"a", "a"}, *vv[2] = {"1", "2"};
    sg_checkpoint_meta reserved = {1, k1, vv}, twice = {2, k2, vv};
    CHECK_STATUS(m.ctx, sg_checkpoint_save(m.ctx, path, p, 3, names, NULL, &reserved), SG_ERR_ARG);
    CHECK_STATUS(m.ctx, sg_checkpoint_save(m.ctx, path, p, 3, names, NULL, &twice), SG_ERR_ARG);
    int64_t sh[2] = {3, 2}, ix[2] = {0, 2};
    double val[2] = {1, 2};
    sg_tensor *coo = sg_coo_new(m.ctx, SG_F64, 2, sh, 1, 1, ix, val);
    const char *cn[1] = {"c"};
    CHECK_STATUS(m.ctx, sg_checkpoint_save(m.ctx, path, &coo, 1, cn, NULL, NULL), SG_ERR_LAYOUT);
    CHECK(file_size(path) < 0); /* nothing was written */
    CHECK_STATUS(m.ctx, sg_checkpoint_save(m.ctx, "/tmp", p, 3, names, NULL, NULL), SG_ERR_IO);
    CHECK_STATUS(m.ctx, sg_checkpoint_save(m.ctx, "/nonexistent/dir/x", p, 3, names, NULL, NULL), SG_ERR_IO);
    free_model(&m);
}

/* Every allocation of a save and of a load failing in turn: an error (out of memory),
 * no leak (ASan), and on a failed load nothing changed. */
TEST(allocation_failures_handled)
{
    const char *path = tu_tmp_path("ckpt_oom");
    tu_counting c = {0, 0};
    sg_ctx_opts co = {.allocator = {tu_count_alloc, tu_count_free, &c}, .threads = 1, .seed = 5};
    model m = {sg_ctx_new(&co), NULL, NULL, NULL, NULL, 0};
    int64_t sw[2] = {V, D}, sm[2] = {D, K}, sb[1] = {K};
    m.W = sg_tensor_requires_grad(sg_tensor_new(m.ctx, SG_F32, 2, sw), 1);
    m.M = sg_tensor_requires_grad(sg_tensor_new(m.ctx, SG_F32, 2, sm), 1);
    m.b = sg_tensor_requires_grad(sg_tensor_new(m.ctx, SG_F32, 1, sb), 1);
    sg_tensor_fill_uniform(m.W, -1, 1);
    m.opt = make_optim(m.ctx, OPT_SGD);
    sg_optim_add_param(m.opt, m.W);
    sg_optim_add_param(m.opt, m.M);
    sg_optim_add_param(m.opt, m.b);
    CHECK(!train(&m, 0, 5));
    const char *mk[1] = {"k"}, *mv[1] = {"v"};
    sg_checkpoint_meta meta = {1, mk, mv}, got = {0, NULL, NULL};
    int saves = 0, loads = 0;
    for (long k = 1;; k++) {
        c.fail_at = c.calls + k;
        int rc = sg_checkpoint_save(m.ctx, path, params_of(&m), 3, names, m.opt, &meta);
        c.fail_at = 0;
        if (rc == SG_OK) break;
        CHECK(rc == SG_ERR_NOMEM);
        saves++;
    }
    float w0 = sg_tensor_f32(m.W)[0];
    for (long k = 1;; k++) {
        sg_tensor_f32(m.W)[0] = 42;
        c.fail_at = c.calls + k;
        int rc = sg_checkpoint_load(m.ctx, path, params_of(&m), 3, names, m.opt, &got);
        c.fail_at = 0;
        if (rc == SG_OK) break;
        CHECK(rc == SG_ERR_NOMEM && sg_tensor_f32(m.W)[0] == 42);
        loads++;
    }
    CHECK(sg_tensor_f32(m.W)[0] == w0 && got.n == 1);
    CHECK(saves > 3 && loads > 3);
    printf("  %d failing allocations in a save, %d in a load, all handled\n", saves, loads);
    sg_checkpoint_meta_free(m.ctx, &got);
    free_model(&m);
    remove(path);
}

/* ---------------------------------------------------------------- atomic saves */

static void remove_strays(const char *base)
{
    const char *name = strrchr(base, '/') + 1;
    DIR *d = opendir("/tmp");
    char p[512];
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, name, strlen(name)) && strstr(e->d_name, ".tmp-")) {
            snprintf(p, sizeof p, "/tmp/%s", e->d_name);
            remove(p);
        }
    if (d) closedir(d);
}

TEST(save_cut_off_at_many_offsets_keeps_the_previous_checkpoint)
{
    const char *path = tu_tmp_path("ckpt_cut");
    tu_fault f = {-1, ENOSPC, 0};
    sg_ctx_opts co = {.threads = 1, .seed = 5};
    sg_ctx *ctx = sg_ctx_new(&co);
    sg__set_write_hook(ctx, tu_faulty_write, &f);
    int64_t sh[2] = {64, 33};
    sg_tensor *x = sg_tensor_new(ctx, SG_F64, 2, sh), *y = sg_tensor_new(ctx, SG_F64, 2, sh);
    const char *nm[1] = {"x"};
    sg_tensor_fill_uniform(x, -1, 1);
    CHECK_STATUS(ctx, sg_checkpoint_save(ctx, path, &x, 1, nm, NULL, NULL), SG_OK); /* the previous one */
    CHECK_STATUS(ctx, sg_tensor_copy(y, x), SG_OK);
    long size = file_size(path);
    sg_tensor_fill_uniform(x, 2, 3); /* the new values */
    int trials = 0, kept = 0;
    for (long cut = 0; cut < size; cut += cut < 600 ? 7 : 211) {
        f.budget = cut;
        f.err = trials % 2 ? EIO : ENOSPC;
        int rc = sg_checkpoint_save(ctx, path, &x, 1, nm, NULL, NULL);
        f.budget = -1;
        sg_tensor *z = sg_tensor_new(ctx, SG_F64, 2, sh);
        int lrc = sg_checkpoint_load(ctx, path, &z, 1, nm, NULL, NULL);
        trials++;
        kept += rc == SG_ERR_IO && lrc == SG_OK && same_bits(z, y) && tu_stray_temporaries(path) == 0;
        sg_tensor_free(z);
    }
    CHECK(kept == trials);
    printf("  %d cut-off saves, previous checkpoint intact after %d\n", trials, kept);
    CHECK_STATUS(ctx, sg_checkpoint_save(ctx, path, &x, 1, nm, NULL, NULL), SG_OK);
    CHECK_STATUS(ctx, sg_checkpoint_load(ctx, path, &y, 1, nm, NULL, NULL), SG_OK);
    CHECK(same_bits(x, y));
    sg_ctx_free(ctx);
    remove(path);
}

/* Values of the large tensor of pattern `seed`. */
static void big_values(float *v, int64_t n, int seed)
{
    for (int64_t i = 0; i < n; i++) v[i] = (float)((i * 7 + seed * 13) % 1001) * 0.5f - (float)seed;
}

enum { BIG = 1 << 22 }; /* 16 MB of f32 */

typedef struct {
    long notify_after; /* bytes after which the parent is told (then the child sleeps) */
    long seen;
    int fd;
} notify;

static long notifying_write(void *ud, int fd, const void *buf, size_t n)
{
    notify *w = ud;
    if (w->notify_after >= 0 && w->seen + (long)n > w->notify_after) {
        size_t k = (size_t)(w->notify_after - w->seen);
        if (k) {
            long got = (long)write(fd, buf, k);
            if (got > 0) w->seen += got;
            return got;
        }
        char c = 'x';
        if (write(w->fd, &c, 1) != 1) return -1;
        for (;;) pause(); /* killed here, mid-save */
    }
    long got = (long)write(fd, buf, n);
    if (got > 0) w->seen += got;
    return got;
}

/* In a child: saves the big tensor of pattern 2 to path, telling the parent after `after`
 * bytes (< 0: never, then it saves in a loop). */
static void child_save(const char *path, long after, int pipe_fd)
{
    notify w = {after, 0, pipe_fd};
    sg_ctx_opts co = {.threads = 1, .seed = 5};
    sg_ctx *ctx = sg_ctx_new(&co);
    sg__set_write_hook(ctx, notifying_write, &w);
    int64_t sh[1] = {BIG};
    sg_tensor *t = sg_tensor_new(ctx, SG_F32, 1, sh);
    big_values(sg_tensor_f32(t), BIG, 2);
    const char *nm[1] = {"big"};
    char c = 's';
    if (after < 0 && write(pipe_fd, &c, 1) != 1) _exit(2);
    for (;;) {
        w.seen = 0;
        sg_checkpoint_save(ctx, path, &t, 1, nm, NULL, NULL);
    }
}

TEST(kill_9_during_a_large_save_keeps_the_previous_checkpoint)
{
    const char *path = tu_tmp_path("ckpt_kill");
    sg_ctx_opts co = {.threads = 1, .seed = 5};
    sg_ctx *ctx = sg_ctx_new(&co);
    int64_t sh[1] = {BIG};
    sg_tensor *t = sg_tensor_new(ctx, SG_F32, 1, sh);
    float *want1 = malloc(BIG * sizeof *want1), *want2 = malloc(BIG * sizeof *want2);
    big_values(want1, BIG, 1);
    big_values(want2, BIG, 2);
    memcpy(sg_tensor_f32(t), want1, BIG * sizeof *want1);
    const char *nm[1] = {"big"};
    CHECK_STATUS(ctx, sg_checkpoint_save(ctx, path, &t, 1, nm, NULL, NULL), SG_OK);
    long size = file_size(path);
    long at[] = {0, 8, 100, 4096, 65536, 1 << 20, 8 << 20, size - 4096, size - 1, -1, -1, -1};
    int trials = 0, intact = 0;
    for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
        int fds[2];
        if (pipe(fds) != 0) break;
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            child_save(path, at[i], fds[1]);
            _exit(0);
        }
        close(fds[1]);
        char c;
        int got = (int)read(fds[0], &c, 1);
        if (at[i] < 0) { /* somewhere in a save loop */
            struct timespec ts = {0, 20000000L + 15000000L * (long)(i % 4)};
            nanosleep(&ts, NULL);
        }
        kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        close(fds[0]);
        trials++;
        sg_tensor_fill(t, 0);
        int rc = sg_checkpoint_load(ctx, path, &t, 1, nm, NULL, NULL);
        const float *v = sg_tensor_f32(t);
        /* a coordinated kill leaves the previous file; a free-running one the previous or a
         * complete new one */
        int ok = got == 1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && rc == SG_OK &&
                 (!memcmp(v, want1, BIG * sizeof *v) || (at[i] < 0 && !memcmp(v, want2, BIG * sizeof *v)));
        if (!ok) fprintf(stderr, "  kill at %ld: %s %s\n", at[i], sg_status_string(rc), sg_ctx_message(ctx));
        intact += ok;
        remove_strays(path);
        if (at[i] < 0) { /* back to the previous file for the next trial */
            memcpy(sg_tensor_f32(t), want1, BIG * sizeof *want1);
            CHECK_STATUS(ctx, sg_checkpoint_save(ctx, path, &t, 1, nm, NULL, NULL), SG_OK);
        }
    }
    CHECK(trials == (int)(sizeof at / sizeof *at) && intact == trials);
    printf("  %d kill -9 trials during a %ld-byte save, checkpoint loadable after %d\n", trials, size, intact);
    free(want1);
    free(want2);
    sg_ctx_free(ctx);
    remove(path);
}

/* ---------------------------------------------------------------- numpy sample */

/* Writes a checkpoint of known tensors to path and their values as text to path.txt
 * ("name dtype shape... : values..."), for tests/test_checkpoint_numpy.sh. */
static int write_sample(const char *path)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t s1[2] = {5, 3}, s2[1] = {4}, s4[3] = {2, 0, 3};
    sg_tensor *t[5] = {sg_tensor_new(ctx, SG_F32, 2, s1), sg_tensor_new(ctx, SG_F64, 1, s2),
                       sg_tensor_new(ctx, SG_I64, 1, s2), sg_tensor_new(ctx, SG_I32, 0, NULL),
                       sg_tensor_new(ctx, SG_F32, 3, s4)};
    sg_tensor_fill_uniform(t[0], -3, 3);
    sg_tensor_fill_uniform(t[1], -1e10, 1e10);
    int64_t *i64 = sg_tensor_data(t[2]);
    for (int i = 0; i < 4; i++) i64[i] = (int64_t)sg_rand_u64(ctx) - INT64_MAX / 3;
    *(int32_t *)sg_tensor_data(t[3]) = -123456;
    const char *nm[5] = {"layer.0.weight", "sgrad \"quoted\" name", "ids", "scalar", "empty"};
    const char *mk[1] = {"epoch"}, *mv[1] = {"4"};
    sg_checkpoint_meta meta = {1, mk, mv};
    int rc = sg_checkpoint_save(ctx, path, t, 5, nm, NULL, &meta);
    char txt[600];
    snprintf(txt, sizeof txt, "%s.txt", path);
    FILE *f = fopen(txt, "w");
    for (int k = 0; f && k < 5; k++) {
        fprintf(f, "%s\t%d", nm[k], (int)sg_tensor_dtype(t[k]));
        fprintf(f, "\t");
        for (int d = 0; d < sg_tensor_ndim(t[k]); d++) fprintf(f, "%s%lld", d ? "," : "", (long long)sg_tensor_dim(t[k], d));
        fprintf(f, "\t");
        for (int64_t i = 0; i < sg_tensor_numel(t[k]); i++) {
            if (sg_tensor_dtype(t[k]) == SG_I64) fprintf(f, "%s%lld", i ? "," : "", (long long)i64[i]);
            else fprintf(f, "%s%.17g", i ? "," : "", sg_tensor_get(t[k], i));
        }
        fprintf(f, "\n");
    }
    if (f) fclose(f);
    if (rc) fprintf(stderr, "%s\n", sg_ctx_message(ctx));
    sg_ctx_free(ctx);
    return rc || !f;
}

#define main tu_run_tests
int tu_run_tests(int argc, char **argv);
TEST_MAIN()
#undef main

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--write-sample")) return write_sample(argv[2]);
    return tu_run_tests(argc, argv);
}
