/* The hot kernels' per-CPU variants (SG__HOT_CLONES, src/core/core.h; docs/blas.md,
 * "Kernels per CPU"): every scenario below runs once at each level this build has and this
 * CPU runs (sg__kernels_force), and everything it computes (outputs, gradients, parameters
 * and optimizer state after a few steps, the NaN/Inf guard's verdicts) must be bitwise the
 * bytes of the base level. The scenarios reach every cloned kernel: the direct matmul
 * (forced) and rowdot, the sgns forward and its COO gradient, the fused SGD update (one
 * thread, owner parts on 2 threads, Hogwild), SGD plain / momentum and weight decay /
 * Nesterov (row, dense and flush paths), Adagrad, row-wise Adagrad, Adam and LazyAdam on
 * sparse and dense gradients, index-add (one range, parts, 2 sparse dims), the embedding
 * gathers (sg_embedding, sg_embedding_bag forward and backward), the elementwise binary
 * and unary ops forward and backward, transposes (sg_transpose; the direct matmul's
 * backward), and the finite scans.
 * Widths 37 and 100 leave vector remainders at every width. It prints a hash of the
 * results, for comparing builds: a -DSGRAD_NATIVE=ON build (base variant only, the whole
 * library on -march=native) must print the same one. Also: the level setter refuses what
 * the CPU lacks, and SGRAD_KERNELS caps the level. */
#define _POSIX_C_SOURCE 200809L
#include "ops/ops.h"
#include "testutil.h"

/* ---- what the scenarios produced: one FNV-1a hash per piece (a tensor, a verdict), in
 * order, and the bytes hashed */
typedef struct {
    uint64_t *h;
    size_t n, cap, bytes;
} dig;

static void dig_add(dig *d, const void *p, size_t n)
{
    if (d->n == d->cap) {
        d->cap = d->cap * 2 + 1024;
        d->h = realloc(d->h, d->cap * sizeof *d->h);
    }
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ull;
    d->h[d->n++] = h;
    d->bytes += n;
}

/* t's bytes (dense: its elements; COO: indices then values); a NULL tensor adds a marker. */
static void dig_tensor(dig *d, sg_tensor *t)
{
    if (!t) {
        dig_add(d, "null", 4);
        return;
    }
    if (sg_tensor_layout(t) == SG_COO) {
        dig_tensor(d, sg_coo_indices(t));
        dig_tensor(d, sg_coo_values(t));
        return;
    }
    dig_add(d, sg_tensor_data(t), (size_t)sg_tensor_numel(t) * sg_dtype_size(sg_tensor_dtype(t)));
}

static void dig_int(dig *d, int64_t v) { dig_add(d, &v, sizeof v); }

static sg_tensor *filled(sg_ctx *ctx, sg_dtype dt, int64_t r, int64_t c, double lo, double hi)
{
    sg_tensor *x = sg_tensor_new(ctx, dt, 2, (int64_t[]){r, c});
    sg_tensor_fill_uniform(x, lo, hi);
    return x;
}

/* n int64 indices in [0, range), from the context's generator: duplicates likely. */
static sg_tensor *indices(sg_ctx *ctx, int ndim, const int64_t *shape, int64_t range)
{
    sg_tensor *t = sg_tensor_new(ctx, SG_I64, ndim, shape);
    int64_t *p = sg_tensor_data(t);
    for (int64_t i = 0; i < sg_tensor_numel(t); i++) p[i] = (int64_t)(sg_rand_u64(ctx) % (uint64_t)range);
    return t;
}

static sg_ctx *ctx_of(int threads, int nondet)
{
    sg_ctx_opts o = {.threads = threads, .nondeterministic = nondet, .seed = 11};
    return sg_ctx_new(&o);
}

/* ---- scenarios: each adds what it computed to d */

/* The direct (hand-written) product, forward and both gradients. */
static void sc_matmul(dig *d, sg_dtype dt, int threads)
{
    /* sizes off every vector width; the last one runs on 2 threads when there are 2 */
    static const int64_t shapes[][4] = {{0, 37, 131, 70}, {0, 5, 3, 7}, {3, 13, 17, 19},
                                        {0, 1, 33, 65},   {0, 600, 20, 100}};
    sg_ctx *ctx = ctx_of(threads, 0);
    sg__matmul_force(SG__MM_DIRECT);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t B = shapes[s][0], M = shapes[s][1], K = shapes[s][2], N = shapes[s][3];
        sg_tensor *a, *b;
        if (B) {
            a = sg_tensor_new(ctx, dt, 3, (int64_t[]){B, M, K});
            b = sg_tensor_new(ctx, dt, 3, (int64_t[]){B, K, N});
        } else {
            a = sg_tensor_new(ctx, dt, 2, (int64_t[]){M, K});
            b = sg_tensor_new(ctx, dt, 2, (int64_t[]){K, N});
        }
        sg_tensor_fill_uniform(a, -1, 1);
        sg_tensor_fill_uniform(b, -1, 1);
        sg_tensor_requires_grad(a, 1);
        sg_tensor_requires_grad(b, 1);
        sg_tensor *c = sg_matmul(a, b);
        CHECK(c != NULL);
        sg_tensor *g = sg_tensor_new(ctx, dt, sg_tensor_ndim(c), sg_tensor_shape(c));
        sg_tensor_fill_uniform(g, -1, 1);
        CHECK_STATUS(ctx, sg_backward_grad(c, g), SG_OK);
        dig_tensor(d, c);
        dig_tensor(d, sg_tensor_grad(a));
        dig_tensor(d, sg_tensor_grad(b));
        sg_tape_reset(ctx);
        sg_tensor_free(a);
        sg_tensor_free(b);
        sg_tensor_free(g);
    }
    sg__matmul_force(SG__MM_AUTO);
    sg_ctx_free(ctx);
}

static void sc_rowdot(dig *d, sg_dtype dt, int threads)
{
    sg_ctx *ctx = ctx_of(threads, 0);
    for (int64_t D = 1; D <= 100; D += 33) {
        sg_tensor *x = sg_tensor_requires_grad(filled(ctx, dt, 1500, D, -1, 1), 1);
        sg_tensor *y = sg_tensor_requires_grad(filled(ctx, dt, 1500, D, -1, 1), 1);
        sg_tensor *xy = sg_rowdot(x, y), *xx = sg_rowdot(x, x);
        CHECK(xy && xx);
        CHECK_STATUS(ctx, sg_backward(sg_sum(sg_add(xy, sg_mul(xx, xy)))), SG_OK);
        dig_tensor(d, xy);
        dig_tensor(d, xx);
        dig_tensor(d, sg_tensor_grad(x));
        dig_tensor(d, sg_tensor_grad(y));
        sg_tape_reset(ctx);
        sg_tensor_free(x);
        sg_tensor_free(y);
    }
    sg_ctx_free(ctx);
}

/* sgns: the loss, h's gradient and W's COO gradient (unfused); then fused into plain SGD
 * for three steps, with the guard on (its scans of the factored rows). */
static void sc_sgns(dig *d, sg_dtype dt, int threads, int nondet)
{
    sg_ctx *ctx = ctx_of(threads, nondet);
    for (int64_t D = 37; D <= 100; D += 63) {
        const int64_t B = 256, T = 6, V = 500;
        sg_tensor *h = sg_tensor_requires_grad(filled(ctx, dt, B, D, -0.5, 0.5), 1);
        sg_tensor *W = sg_tensor_requires_grad(filled(ctx, dt, V, D, -0.5, 0.5), 1);
        sg_tensor *tg = indices(ctx, 2, (int64_t[]){B, T}, V);
        if (!nondet) {
            sg_tensor *L = sg_sgns_loss(h, W, tg, NULL);
            CHECK(L != NULL);
            CHECK_STATUS(ctx, sg_backward(L), SG_OK);
            dig_tensor(d, L);
            dig_tensor(d, sg_tensor_grad(h));
            dig_tensor(d, sg_tensor_grad(W));
            sg_tape_reset(ctx);
        }
        sg_sgd_opts so = SG_SGD_OPTS_DEFAULT;
        so.lr = 0.05;
        sg_optim *opt = sg_optim_sgd(ctx, &so);
        CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
        sg_optim_set_check_finite(opt, 1);
        sg_sgns_opts fo = {.fused = opt};
        for (int step = 0; step < 3; step++) {
            sg_tensor *L = sg_sgns_loss(h, W, tg, &fo);
            CHECK(L != NULL);
            CHECK_STATUS(ctx, sg_backward(L), SG_OK);
            dig_tensor(d, L);
            sg_tape_reset(ctx);
        }
        dig_tensor(d, W);
        sg_optim_free(opt);
        sg_tensor_free(h);
        sg_tensor_free(W);
        sg_tensor_free(tg);
    }
    sg_ctx_free(ctx);
}

/* An optimizer over an embedding table (sparse gradients, duplicate rows) and a dense
 * parameter (dense gradients): three steps with the guard on, a flush, then every
 * parameter and state tensor. kind: 0 SGD, 1 SGD momentum + weight decay, 2 Nesterov,
 * 3 Adagrad, 4 row-wise Adagrad, 5 Adam, 6 LazyAdam, 7 AdamW. */
static void sc_optim(dig *d, sg_dtype dt, int threads, int kind)
{
    sg_ctx *ctx = ctx_of(threads, 0);
    const int64_t V = 400, D = kind % 2 ? 37 : 100, B = 1000;
    sg_tensor *W = sg_tensor_requires_grad(filled(ctx, dt, V, D, -1, 1), 1);
    sg_tensor *P = sg_tensor_requires_grad(filled(ctx, dt, 300, D, -1, 1), 1);
    sg_optim *opt = NULL;
    if (kind <= 2) {
        sg_sgd_opts o = {0.1, kind ? 0.9 : 0, 0, kind ? 0.01 : 0, kind == 2};
        opt = sg_optim_sgd(ctx, &o);
    } else if (kind <= 4) {
        sg_adagrad_opts o = {0.1, 0.01, 0.001, 0.1, 1e-10};
        opt = kind == 3 ? sg_optim_adagrad(ctx, &o) : sg_optim_rowwise_adagrad(ctx, &o);
    } else {
        sg_adam_opts o = {0.01, 0.9, 0.999, 1e-8, 0.01, kind == 7};
        opt = kind == 6 ? sg_optim_lazy_adam(ctx, &o) : sg_optim_adam(ctx, &o);
    }
    CHECK(opt != NULL);
    CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
    if (kind != 4 && kind != 6) /* row-wise Adagrad and LazyAdam: sparse gradients only */
        CHECK_STATUS(ctx, sg_optim_add_param(opt, P), SG_OK);
    sg_optim_set_check_finite(opt, 1);
    sg_tensor *R = filled(ctx, dt, B, D, -1, 1);
    sg_tensor *Q = filled(ctx, dt, 300, D, -1, 1);
    for (int step = 0; step < 3; step++) {
        /* fewer rows at the second step: untouched rows lag and catch up (SGD) */
        sg_tensor *idx = indices(ctx, 1, (int64_t[]){B}, step == 1 ? V / 4 : V);
        sg_tensor *e = sg_embedding(W, idx, NULL);
        sg_tensor *L = sg_sum(sg_mul(e, R));
        if (kind != 4 && kind != 6) L = sg_add(L, sg_sum(sg_mul(sg_mul(P, P), Q)));
        CHECK(L != NULL);
        CHECK_STATUS(ctx, sg_backward(L), SG_OK);
        CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
        dig_tensor(d, L);
        sg_tape_reset(ctx);
        sg_tensor_free(idx);
    }
    CHECK_STATUS(ctx, sg_optim_flush(opt), SG_OK);
    sg_tensor *params[2] = {W, P};
    for (int p = 0; p < 2; p++) {
        dig_tensor(d, params[p]);
        int n = sg_optim_state_count(opt, params[p]);
        for (int i = 0; i < n; i++) dig_tensor(d, sg_optim_state(opt, params[p], i, NULL));
    }
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

/* embedding_bag forward and W's gradient rows: sum (with per-sample weights and padding),
 * mean, max. */
static void sc_bag(dig *d, sg_dtype dt, int threads)
{
    sg_ctx *ctx = ctx_of(threads, 0);
    const int64_t V = 300, D = 37, N = 4000, B = 700;
    sg_tensor *W = sg_tensor_requires_grad(filled(ctx, dt, V, D, -1, 1), 1);
    sg_tensor *idx = indices(ctx, 1, (int64_t[]){N}, V);
    sg_tensor *off = sg_tensor_new(ctx, SG_I64, 1, (int64_t[]){B});
    int64_t *o = sg_tensor_data(off);
    for (int64_t b = 0; b < B; b++) o[b] = b * N / B;
    sg_tensor *psw = sg_tensor_requires_grad(sg_tensor_new(ctx, dt, 1, (int64_t[]){N}), 1);
    sg_tensor_fill_uniform(psw, -1, 1);
    for (int mode = 0; mode < 3; mode++) {
        sg_embedding_bag_opts bo = SG_EMBEDDING_BAG_OPTS_DEFAULT;
        bo.mode = mode == 0 ? SG_BAG_SUM : mode == 1 ? SG_BAG_MEAN : SG_BAG_MAX;
        if (mode == 0) bo.per_sample_weights = psw;
        bo.padding_idx = 7;
        sg_tensor *y = sg_embedding_bag(W, idx, off, &bo);
        CHECK(y != NULL);
        sg_tensor *R = sg_tensor_new(ctx, dt, 2, (int64_t[]){B, D});
        sg_tensor_fill_uniform(R, -1, 1);
        CHECK_STATUS(ctx, sg_backward(sg_sum(sg_mul(y, R))), SG_OK);
        dig_tensor(d, y);
        dig_tensor(d, sg_tensor_grad(W));
        dig_tensor(d, sg_tensor_grad(psw));
        sg_tape_reset(ctx);
        sg_tensor_free(R);
    }
    sg_ctx_free(ctx);
}

/* The elementwise ops, forward and backward: binary ones with and without broadcasting
 * (a stretched operand's gradient sums on one thread), every unary one. */
static void sc_elementwise(dig *d, sg_dtype dt, int threads)
{
    sg_ctx *ctx = ctx_of(threads, 0);
    sg_tensor *a = sg_tensor_requires_grad(filled(ctx, dt, 500, 101, 0.1, 2), 1);
    sg_tensor *b = sg_tensor_requires_grad(filled(ctx, dt, 500, 101, 0.1, 2), 1);
    sg_tensor *r = sg_tensor_requires_grad(filled(ctx, dt, 1, 101, -1, 1), 1); /* a row */
    sg_tensor *c = sg_tensor_requires_grad(filled(ctx, dt, 500, 1, -1, 1), 1); /* a column */
    sg_tensor *(*const bin[])(sg_tensor *, sg_tensor *) = {sg_add, sg_sub, sg_mul, sg_div, sg_maximum, sg_minimum};
    for (size_t k = 0; k < sizeof bin / sizeof bin[0]; k++) {
        sg_tensor *y = sg_add(sg_add(bin[k](a, b), bin[k](a, r)), sg_add(bin[k](c, b), bin[k](a, a)));
        CHECK(y != NULL);
        CHECK_STATUS(ctx, sg_backward(sg_sum(sg_mul(y, y))), SG_OK);
        dig_tensor(d, y);
        sg_tensor *p[4] = {a, b, r, c};
        for (int i = 0; i < 4; i++) dig_tensor(d, sg_tensor_grad(p[i]));
        sg_tape_reset(ctx);
    }
    /* transposes (a strided gather) of f32/f64 and of 3-D, forward and backward */
    sg_tensor *t3 = sg_tensor_requires_grad(sg_tensor_new(ctx, dt, 3, (int64_t[]){7, 33, 45}), 1);
    sg_tensor_fill_uniform(t3, -1, 1);
    sg_tensor *tt[3] = {sg_transpose(a, 0, 1), sg_transpose(t3, 0, 2), sg_transpose(t3, 1, 2)};
    for (int i = 0; i < 3; i++) {
        CHECK(tt[i] != NULL);
        dig_tensor(d, tt[i]);
    }
    CHECK_STATUS(ctx, sg_backward(sg_add(sg_sum(sg_mul(tt[1], tt[1])), sg_sum(sg_mul(tt[2], tt[2])))), SG_OK);
    dig_tensor(d, sg_tensor_grad(t3));
    sg_tape_reset(ctx);
    sg_tensor *(*const un[])(sg_tensor *) = {sg_relu, sg_sigmoid, sg_tanh, sg_exp, sg_log, sg_log_sigmoid,
                                            sg_abs, sg_sqrt, sg_sin, sg_cos};
    sg_tensor *x = sg_tensor_requires_grad(filled(ctx, dt, 500, 101, -3, 3), 1);
    for (size_t k = 0; k < sizeof un / sizeof un[0] + 2; k++) {
        const double lo = -0.5, hi = 0.7;
        sg_tensor *in = k == 4 || k == 7 ? a : x; /* log, sqrt: positive */
        sg_tensor *y = k < sizeof un / sizeof un[0] ? un[k](in)
                       : k == sizeof un / sizeof un[0] ? sg_pow(a, 2.5) : sg_clamp(x, &lo, &hi);
        CHECK(y != NULL);
        CHECK_STATUS(ctx, sg_backward(sg_sum(sg_mul(y, b))), SG_OK);
        dig_tensor(d, y);
        dig_tensor(d, sg_tensor_grad(in));
        sg_tape_reset(ctx);
    }
    sg_ctx_free(ctx);
}

/* index-add, one sparse dim (every row, or parts on 2 threads) and two. */
static void sc_index_add(dig *d, sg_dtype dt, int threads)
{
    sg_ctx *ctx = ctx_of(threads, 0);
    for (int64_t D = 37; D <= 64; D += 27) {
        const int64_t V = 3000, nnz = 20000;
        sg_tensor *dst = filled(ctx, dt, V, D, -1, 1);
        sg_tensor *idx = indices(ctx, 2, (int64_t[]){1, nnz}, V);
        sg_tensor *val = filled(ctx, dt, nnz, D, -1, 1);
        sg_tensor *src = sg_coo_new(ctx, dt, 2, (int64_t[]){V, D}, 1, nnz, sg_tensor_data(idx), sg_tensor_data(val));
        CHECK(src != NULL);
        CHECK_STATUS(ctx, sg_index_add_(dst, src), SG_OK);
        CHECK_STATUS(ctx, sg_index_add_scaled_(dst, src, -0.7), SG_OK);
        dig_tensor(d, dst);
        sg_tensor_free(dst);
        sg_tensor_free(src);
        sg_tensor_free(idx);
        sg_tensor_free(val);
    }
    /* (20, 50, 16) with two sparse dims */
    const int64_t shape[3] = {20, 50, 16}, nnz = 3000;
    sg_tensor *dst = sg_tensor_new(ctx, dt, 3, shape);
    sg_tensor_fill_uniform(dst, -1, 1);
    sg_tensor *i0 = indices(ctx, 1, (int64_t[]){nnz}, 20), *i1 = indices(ctx, 1, (int64_t[]){nnz}, 50);
    int64_t *ix = malloc(2 * (size_t)nnz * sizeof *ix);
    memcpy(ix, sg_tensor_data(i0), (size_t)nnz * sizeof *ix);
    memcpy(ix + nnz, sg_tensor_data(i1), (size_t)nnz * sizeof *ix);
    sg_tensor *val = filled(ctx, dt, nnz, 16, -1, 1);
    sg_tensor *src = sg_coo_new(ctx, dt, 3, shape, 2, nnz, ix, sg_tensor_data(val));
    CHECK_STATUS(ctx, sg_index_add_scaled_(dst, src, 1.5), SG_OK);
    dig_tensor(d, dst);
    free(ix);
    sg_ctx_free(ctx);
}

/* The guard's scans: a NaN or an infinity at several places (vector lanes, remainders) in
 * a dense and a sparse gradient; the verdict and the message (which names the element)
 * go into the bytes, and must also say what the values say. */
static void sc_finite(dig *d, sg_dtype dt, int threads)
{
    sg_ctx *ctx = ctx_of(threads, 0);
    const int64_t where[] = {-1, 0, 15, 17, 33000, 39999};
    for (size_t w = 0; w < sizeof where / sizeof where[0]; w++) {
        sg_tensor *P = sg_tensor_requires_grad(filled(ctx, dt, 1000, 40, -1, 1), 1);
        sg_sgd_opts o = SG_SGD_OPTS_DEFAULT;
        sg_optim *opt = sg_optim_sgd(ctx, &o);
        sg_optim_add_param(opt, P);
        sg_optim_set_check_finite(opt, 1);
        sg_tensor *g = filled(ctx, dt, 1000, 40, -1e30, 1e30);
        if (where[w] >= 0) {
            double bad = w % 2 ? NAN : -INFINITY;
            if (dt == SG_F32) sg_tensor_f32(g)[where[w]] = (float)bad;
            else sg_tensor_f64(g)[where[w]] = bad;
        }
        CHECK_STATUS(ctx, sg_backward_grad(P, g), SG_OK);
        int rc = sg_optim_step(opt);
        CHECK(rc == (where[w] >= 0 ? SG_ERR_VALUE : SG_OK));
        dig_int(d, rc);
        dig_add(d, sg_ctx_message(ctx), strlen(sg_ctx_message(ctx)));
        sg_ctx_clear_error(ctx);
        sg_tape_reset(ctx);
        sg_optim_free(opt);
        sg_tensor_free(P);
        sg_tensor_free(g);
    }
    sg_ctx_free(ctx);
}

/* Everything, at the level now set. */
static void run_all(dig *d)
{
    for (int dti = 0; dti < 2; dti++) {
        const sg_dtype dt = dti ? SG_F64 : SG_F32;
        for (int threads = 1; threads <= 2; threads++) {
            sc_matmul(d, dt, threads);
            sc_rowdot(d, dt, threads);
            sc_sgns(d, dt, threads, 0);
            for (int kind = 0; kind < 8; kind++) sc_optim(d, dt, threads, kind);
            sc_index_add(d, dt, threads);
            sc_bag(d, dt, threads);
            sc_elementwise(d, dt, threads);
            sc_finite(d, dt, threads);
        }
        sc_sgns(d, dt, 1, 1); /* Hogwild on one thread: deterministic too */
    }
}

TEST(every_level_gives_the_same_bits)
{
    int levels[SG__KERNELS_LEVELS], n = 0;
    for (int l = 0; l < SG__KERNELS_LEVELS; l++)
        if (sg__kernels_has(l)) levels[n++] = l;
    printf("kernel levels this build and CPU run: ");
    for (int i = 0; i < n; i++) printf("%s%s", i ? ", " : "", sg__kernels_name(levels[i]));
    printf(" (default: %s)\n", sg__kernels_name(sg__kernels_level()));
    CHECK(n >= 1 && levels[0] == SG__KERNELS_BASE);
    CHECK(levels[n - 1] == sg__kernels_best());
    dig ref = {0};
    CHECK(sg__kernels_force(SG__KERNELS_BASE));
    run_all(&ref);
    /* one hash of everything, to compare builds: a -DSGRAD_NATIVE=ON build prints the same */
    uint64_t all = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < ref.n; i++) all = (all ^ ref.h[i]) * 0x100000001b3ull;
    printf("base: %zu pieces, %zu bytes of results, hash %016llx\n", ref.n, ref.bytes, (unsigned long long)all);
    for (int i = 1; i < n; i++) {
        dig got = {0};
        CHECK(sg__kernels_force(levels[i]));
        CHECK(sg__kernels_level() == levels[i]);
        run_all(&got);
        size_t first = 0;
        while (first < ref.n && first < got.n && ref.h[first] == got.h[first]) first++;
        const bool same = got.n == ref.n && got.bytes == ref.bytes && first == ref.n;
        printf("%s: %zu pieces, %zu bytes, %s", sg__kernels_name(levels[i]), got.n, got.bytes,
               same ? "bitwise equal to base\n" : "DIFFER");
        if (!same) printf(" from piece %zu\n", first);
        CHECK(same);
        free(got.h);
    }
    sg__kernels_force(-1);
    free(ref.h);
    if (n < 2) TU_SKIP("only the base variant here (a native build, or a CPU or compiler without the others)");
}

TEST(levels_the_cpu_lacks_are_refused)
{
    const int was = sg__kernels_level();
    CHECK(!sg__kernels_force(SG__KERNELS_LEVELS));
    CHECK(!sg__kernels_force(SG__KERNELS_LEVELS + 5));
    for (int l = 0; l < SG__KERNELS_LEVELS; l++) CHECK(sg__kernels_force(l) == sg__kernels_has(l));
    CHECK(sg__kernels_force(-1));
    CHECK(sg__kernels_level() == was);
    CHECK(strcmp(sg__kernels_name(SG__KERNELS_AVX2), "avx2") == 0);
    CHECK(strcmp(sg__kernels_name(7), "?") == 0);
}

TEST(environment_caps_the_level)
{
    const int best = sg__kernels_best();
    setenv("SGRAD_KERNELS", "base", 1);
    CHECK(sg__kernels_force(-1));
    CHECK(sg__kernels_level() == SG__KERNELS_BASE);
    setenv("SGRAD_KERNELS", "avx512", 1); /* a cap, never a level the CPU lacks */
    CHECK(sg__kernels_force(-1));
    CHECK(sg__kernels_level() <= best && sg__kernels_has(sg__kernels_level()));
    setenv("SGRAD_KERNELS", "avx2", 1);
    CHECK(sg__kernels_force(-1));
    CHECK(sg__kernels_level() <= SG__KERNELS_AVX2);
    setenv("SGRAD_KERNELS", "nonsense", 1); /* ignored */
    CHECK(sg__kernels_force(-1));
    CHECK(sg__kernels_level() == best);
    unsetenv("SGRAD_KERNELS");
    CHECK(sg__kernels_force(-1));
    CHECK(sg__kernels_level() == best);
}

TEST_MAIN()
