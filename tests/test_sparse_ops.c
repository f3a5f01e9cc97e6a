/* Sparse ops with backward: what masked and non-masked gradchecks see (the classic
 * a = [[0,1],[2,3]] case, sum's non-masked backward), dense-vs-sparse equivalence of values
 * and gradients, duplicate-heavy and empty operands, and the O(nnz) gradients of sum and
 * spmm when a sparse_mask restricts them. Each op's own gradcheck is in
 * test_gradcheck_ops.c. */
#include "ops/ops.h"
#define TU_SEED 0x2545F4914F6CDD1Dull
#include "testutil.h"


static sg_tensor *rand_dense(sg_ctx *ctx, int ndim, const int64_t *shape)
{
    sg_tensor *t = sg_tensor_new(ctx, SG_F64, ndim, shape);
    double *d = sg_tensor_f64(t);
    for (int64_t i = 0; i < sg_tensor_numel(t); i++) d[i] = tu_rand_unit();
    return t;
}

static double max_diff(const double *a, const double *b, int64_t n)
{
    double w = 0;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(a[i] - b[i]) <= w)) w = fabs(a[i] - b[i]);
    return w;
}

/* The gradient of x as a dense array (zeros when none arrived). */
static double *grad_meaning(sg_tensor *x) { return tu_meaning(sg_tensor_grad(x), sg_tensor_numel(x)); }

static int gradcheck(sg_ctx *ctx, sg_gradcheck_fn f, void *ud, int n, sg_tensor **in, int masked,
                     sg_gradcheck_result *res)
{
    for (int i = 0; i < n; i++)
        if (sg_tensor_dtype(in[i]) == SG_F64) sg_tensor_requires_grad(in[i], 1);
    sg_gradcheck_opts o = {0, 1e-6, 1e-4, masked};
    sg_gradcheck_result r;
    int rc = sg_gradcheck(ctx, f, ud, n, in, &o, res ? res : &r);
    if (rc == SG_ERR_GRADCHECK && !res) /* an unexpected failure: say where */
        fprintf(stderr, "  gradcheck: %s\n", sg_ctx_message(ctx));
    if (rc == SG_ERR_GRADCHECK) sg_ctx_clear_error(ctx);
    return rc;
}

#define GC_OK(ctx, f, ud, n, in, masked) CHECK_STATUS(ctx, gradcheck(ctx, f, ud, n, in, masked, NULL), SG_OK)

/* ---- functions under test (inputs as the gradcheck passes them) */

typedef struct {
    sg_tensor *mask;
} fud;

static sg_tensor *f_dense_T(sg_ctx *c, sg_tensor *const *in, void *ud)
{
    (void)c, (void)ud;
    return sg_to_dense(sg_transpose(in[0], 0, 1));
}
/* Element k of transpose(a) (a 2x2), by flattening the dense form and selecting. */
static sg_tensor *f_T_elem(sg_ctx *c, sg_tensor *const *in, void *ud)
{
    int64_t k = *(int64_t *)ud;
    sg_tensor *idx = sg_tensor_new_tmp(c, SG_I64, 1, (int64_t[]){1});
    ((int64_t *)sg_tensor_data(idx))[0] = k;
    sg_tensor *flat = sg_reshape(sg_to_dense(sg_transpose(in[0], 0, 1)), 1, (int64_t[]){4});
    return sg_index_select(flat, 0, idx);
}
static sg_tensor *f_dense_T_mask(sg_ctx *c, sg_tensor *const *in, void *ud)
{
    (void)c;
    return sg_to_dense(sg_transpose(sg_sparse_mask(in[0], ((fud *)ud)->mask), 0, 1));
}
static sg_tensor *f_sum(sg_ctx *c, sg_tensor *const *in, void *ud)
{
    (void)c, (void)ud;
    return sg_sum(in[0]);
}
static sg_tensor *f_sum_mask(sg_ctx *c, sg_tensor *const *in, void *ud)
{
    (void)c;
    return sg_sum(sg_sparse_mask(in[0], ((fud *)ud)->mask));
}

/* ---- the classic case */

TEST(classic_transpose_case)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    /* a = [[0,1],[2,3]] made sparse: [0,0] is unspecified */
    sg_tensor *ad = sg_tensor_from_data(ctx, SG_F64, 2, (int64_t[]){2, 2}, (double[]){0, 1, 2, 3});
    sg_tensor *s = sg_to_sparse(ad, 2);
    CHECK(sg_coo_nnz(s) == 3);
    const int64_t *si = sg_tensor_data(sg_coo_indices(s));
    CHECK(si[0] == 0 && si[1] == 1 && si[2] == 1 && si[3] == 1 && si[4] == 0 && si[5] == 1);
    int64_t idx[6] = {0, 1, 1, 1, 0, 1};
    sg_tensor *a = sg_coo_new(ctx, SG_F64, 2, (int64_t[]){2, 2}, 2, 3, idx, (double[]){1, 2, 3});
    sg_tensor *mask = sg_coo_new(ctx, SG_F64, 2, (int64_t[]){2, 2}, 2, 3, idx, (double[]){1, 1, 1});
    fud u = {mask};
    int64_t k00 = 0, k01 = 1;
    sg_gradcheck_result r;

    /* non-masked: all pass */
    GC_OK(ctx, f_dense_T, NULL, 1, &a, 0);
    GC_OK(ctx, f_T_elem, &k00, 1, &a, 0);
    GC_OK(ctx, f_dense_T_mask, &u, 1, &a, 0);
    /* masked: the gradient of t(a)[0,0] reaches the unspecified a[0,0]: fails there */
    CHECK_STATUS(ctx, gradcheck(ctx, f_T_elem, &k00, 1, &a, 1, &r), SG_ERR_GRADCHECK);
    CHECK(!r.passed && r.input == 0 && r.element == 0);
    CHECK(r.analytical == 1.0 && r.numerical == 0.0);
    /* masked, but restricted to specified elements: pass */
    GC_OK(ctx, f_T_elem, &k01, 1, &a, 1);
    GC_OK(ctx, f_dense_T_mask, &u, 1, &a, 1);
    /* to_dense's backward is non-masked, so under masked checking it fails too */
    CHECK_STATUS(ctx, gradcheck(ctx, f_dense_T, NULL, 1, &a, 1, &r), SG_ERR_GRADCHECK);
    CHECK(r.element == 0);
    sg_ctx_free(ctx);
}

/* ---- sum's backward is non-masked (the non-masked checks pass: test_gradcheck_ops.c) */

TEST(masked_gradcheck_sees_the_non_masked_sum)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t sh[2] = {4, 3};
    sg_tensor *a = tu_rand_coo(ctx, 2, sh, 2, 6, 5);
    /* the unspecified elements get derivative 1, which masked checking does not perturb */
    sg_gradcheck_result r;
    CHECK_STATUS(ctx, gradcheck(ctx, f_sum, NULL, 1, &a, 1, &r), SG_ERR_GRADCHECK);
    CHECK(r.analytical == 1.0 && r.numerical == 0.0);
    /* a mask wider than x's pattern reaches x's unspecified elements: masked check fails */
    sg_tensor *xs = tu_rand_coo(ctx, 2, sh, 2, 7, 0);
    fud u = {tu_rand_coo(ctx, 2, sh, 2, 12, 0)};
    CHECK_STATUS(ctx, gradcheck(ctx, f_sum_mask, &u, 1, &xs, 1, &r), SG_ERR_GRADCHECK);
    CHECK(r.numerical == 0.0 && r.analytical == 1.0);
    sg_ctx_free(ctx);
}

/* ---- dense-vs-sparse equivalence: values and gradients of the same scalar loss */

/* loss = sum(w * y) for a fixed random w of y's shape (dense ops of the library). */
static sg_tensor *weighted(sg_ctx *ctx, sg_tensor *y, uint64_t seed)
{
    uint64_t keep = tu_rng_state;
    tu_rng_state = seed;
    sg_tensor *w = sg_tensor_new_tmp(ctx, SG_F64, sg_tensor_ndim(y), sg_tensor_shape(y));
    for (int64_t i = 0; i < sg_tensor_numel(w); i++) sg_tensor_f64(w)[i] = tu_rand_unit();
    tu_rng_state = keep;
    return sg_sum(sg_mul(sg_to_dense(y), w));
}

/* Dense copy of COO a as a fresh persistent leaf, built from the naive meaning. */
static sg_tensor *dense_of(sg_ctx *ctx, sg_tensor *a)
{
    double *m = tu_meaning(a, sg_tensor_numel(a));
    sg_tensor *d = sg_tensor_from_data(ctx, SG_F64, sg_tensor_ndim(a), sg_tensor_shape(a), m);
    free(m);
    return d;
}

TEST(dense_vs_sparse_equivalence)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t M = 30, K = 20, N = 7;
    sg_tensor *a = sg_tensor_requires_grad(tu_rand_coo(ctx, 2, (int64_t[]){M, K}, 2, 400, 50), 1); /* ~8 dups a cell */
    sg_tensor *b = sg_tensor_requires_grad(tu_rand_coo(ctx, 2, (int64_t[]){M, K}, 1, 25, 10), 1);
    sg_tensor *ad = sg_tensor_requires_grad(dense_of(ctx, a), 1);
    sg_tensor *bd = sg_tensor_requires_grad(dense_of(ctx, b), 1);
    sg_tensor *B = sg_tensor_requires_grad(rand_dense(ctx, 2, (int64_t[]){K, N}), 1);
    sg_tensor *B2 = sg_tensor_requires_grad(dense_of(ctx, B), 1);
    int64_t n = M * K;

    /* each case: sparse path (with a, b, B) vs dense path (ad, bd, B2) */
    for (int c = 0; c < 5; c++) {
        sg_tensor *ys, *yd;
        switch (c) {
        case 0: ys = sg_add(a, b), yd = sg_add(ad, bd); break;
        case 1: ys = sg_scale(a, 0.75), yd = sg_scale(ad, 0.75); break;
        case 2: ys = sg_transpose(b, 0, 1), yd = sg_transpose(bd, 0, 1); break;
        case 3: ys = sg_matmul(a, B), yd = sg_matmul(ad, B2); break;
        default: ys = sg_scale(sg_sum(b), 1.0), yd = sg_sum(bd); break;
        }
        CHECK(ys != NULL && yd != NULL);
        if (!ys || !yd) continue;
        double *ms = tu_meaning(ys, sg_tensor_numel(ys)), *md = tu_meaning(yd, sg_tensor_numel(yd));
        CHECK(sg_tensor_numel(ys) == sg_tensor_numel(yd));
        CHECK(max_diff(ms, md, sg_tensor_numel(yd)) < 1e-10);
        free(ms), free(md);
        CHECK_STATUS(ctx, sg_backward(weighted(ctx, ys, 77 + c)), SG_OK);
        CHECK_STATUS(ctx, sg_backward(weighted(ctx, yd, 77 + c)), SG_OK);
        double *ga = grad_meaning(a), *gad = grad_meaning(ad), *gb = grad_meaning(b), *gbd = grad_meaning(bd);
        double *gB = grad_meaning(B), *gB2 = grad_meaning(B2);
        CHECK(max_diff(ga, gad, n) < 1e-10);
        CHECK(max_diff(gb, gbd, n) < 1e-10);
        CHECK(max_diff(gB, gB2, K * N) < 1e-10);
        free(ga), free(gad), free(gb), free(gbd), free(gB), free(gB2);
        sg_tape_reset(ctx);
    }

    /* to_sparse / to_dense round trip, and sparse_mask against a naive gather */
    sg_tensor *rt = sg_to_dense(sg_to_sparse(ad, 1));
    double *mrt = tu_meaning(rt, sg_tensor_numel(rt)), *mad = tu_meaning(ad, sg_tensor_numel(ad));
    CHECK(max_diff(mrt, mad, n) == 0);
    sg_tensor *m = sg_sparse_mask(ad, b);
    double *mm = tu_meaning(m, sg_tensor_numel(m)), *mb = tu_meaning(b, sg_tensor_numel(b));
    int bad = 0;
    for (int64_t i = 0; i < M; i++) {
        bool in_pattern = false;
        for (int64_t j = 0; j < K; j++) in_pattern |= mb[i * K + j] != 0; /* rows of b */
        for (int64_t j = 0; j < K; j++) bad += mm[i * K + j] != (in_pattern ? mad[i * K + j] : 0.0);
    }
    CHECK(bad == 0);
    CHECK(sg_coo_is_coalesced(m));
    free(mrt), free(mad), free(mm), free(mb);
    sg_ctx_free(ctx);
}

/* y = spmm(a, B) (a given, or masked to a's pattern, which restricts its gradient) and the
 * gradients of a weighted sum of y, on `threads` threads: y, dB and da (dense) copied out. */
static void spmm_run(sg_tensor *a, int restricted, sg_tensor *B, int threads, double **out)
{
    sg_ctx *ctx = sg_tensor_ctx(a);
    sg_ctx_set_threads(ctx, threads);
    sg_tensor *ad = restricted ? sg_tensor_requires_grad(dense_of(ctx, a), 1) : NULL;
    sg_tensor *y = sg_matmul(restricted ? sg_sparse_mask(ad, a) : a, B);
    CHECK(y != NULL);
    CHECK_STATUS(ctx, sg_backward(weighted(ctx, y, 5)), SG_OK);
    out[0] = tu_meaning(y, sg_tensor_numel(y));
    out[1] = grad_meaning(B);
    out[2] = grad_meaning(restricted ? ad : a);
    sg_tape_reset(ctx);
    sg_tensor_free(ad);
}

TEST(spmm_bitwise_identical_across_thread_counts)
{
    /* enough work for several threads; ~4 duplicates a cell, so entry order matters */
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t M = 300, K = 200, N = 40;
    sg_tensor *B = sg_tensor_requires_grad(rand_dense(ctx, 2, (int64_t[]){K, N}), 1);
    sg_tensor *as[2] = {tu_rand_coo(ctx, 2, (int64_t[]){M, K}, 2, 8000, 2000),  /* entries */
                        tu_rand_coo(ctx, 2, (int64_t[]){M, K}, 1, 400, 100)};  /* rows */
    int64_t sizes[3] = {M * N, K * N, M * K};
    for (int c = 0; c < 4; c++) {
        sg_tensor *a = sg_tensor_requires_grad(as[c / 2], 1);
        double *ref[3], *got[3];
        spmm_run(a, c % 2, B, 1, ref);
        /* y against a naive loop over a's entries (in their order) */
        double *want = calloc((size_t)(M * N), sizeof *want);
        const int64_t *ai = sg_tensor_data(sg_coo_indices(a));
        const double *av = sg_tensor_data(sg_coo_values(a)), *Bd = sg_tensor_f64(B);
        int64_t nnz = sg_coo_nnz(a);
        for (int64_t e = 0; e < nnz; e++)
            for (int64_t k = 0; k < K; k++) {
                if (c / 2 == 0 && k != ai[nnz + e]) continue;
                double v = c / 2 == 0 ? av[e] : av[e * K + k];
                for (int64_t j = 0; j < N; j++) want[ai[e] * N + j] += v * Bd[k * N + j];
            }
        CHECK(max_diff(ref[0], want, M * N) < 1e-12);
        free(want);
        for (int threads = 2; threads <= 3; threads++) {
            spmm_run(a, c % 2, B, threads, got);
            for (int k = 0; k < 3; k++) {
                CHECK(memcmp(got[k], ref[k], (size_t)sizes[k] * sizeof(double)) == 0);
                free(got[k]);
            }
        }
        for (int k = 0; k < 3; k++) free(ref[k]);
    }
    sg_ctx_free(ctx);
}

TEST(restricted_gradients_cost_nnz_not_numel)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t V = 200000, D = 8;
    sg_tensor *x = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F32, 2, (int64_t[]){V, D}), 1);
    int64_t idx[3] = {5, 70000, 5};
    sg_tensor *mask = sg_coo_new(ctx, SG_F32, 2, (int64_t[]){V, D}, 1, 3, idx, (float[24]){0});
    sg_tensor_fill(x, 2);
    sg_ctx_reset_peak(ctx);
    size_t before = sg_ctx_mem_stats(ctx).bytes_in_use;
    sg_tensor *loss = sg_sum(sg_sparse_mask(x, mask));
    CHECK_NEAR(sg_tensor_get(loss, 0), 2.0 * 2 * D, 0); /* duplicates in the mask count once */
    CHECK_STATUS(ctx, sg_backward(loss), SG_OK);
    sg_tensor *g = sg_tensor_grad(x);
    CHECK(g != NULL && sg_tensor_layout(g) == SG_COO && sg_coo_nnz(g) == 2);
    CHECK(sg_tensor_get(g, 5 * D) == 1 && sg_tensor_get(g, 70000 * D + 7) == 1 && sg_tensor_get(g, 6 * D) == 0);
    CHECK(sg_ctx_mem_stats(ctx).peak_bytes - before < (size_t)V * D * sizeof(float) / 8);
    sg_ctx_free(ctx);
}

TEST(empty_and_duplicate_heavy_operands)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t sh[2] = {6, 5};
    sg_tensor *e = sg_tensor_requires_grad(sg_coo_new(ctx, SG_F64, 2, sh, 2, 0, NULL, NULL), 1);
    sg_tensor *B = sg_tensor_requires_grad(rand_dense(ctx, 2, (int64_t[]){5, 3}), 1);
    sg_tensor *y = sg_matmul(e, B);
    CHECK(y != NULL && sg_tensor_numel(y) == 18);
    for (int64_t i = 0; i < 18; i++) CHECK(sg_tensor_get(y, i) == 0);
    CHECK_STATUS(ctx, sg_backward(sg_sum(y)), SG_OK);
    double *gB = grad_meaning(B);
    for (int64_t i = 0; i < 15; i++) CHECK(gB[i] == 0);
    free(gB);
    CHECK(sg_tensor_get(sg_sum(e), 0) == 0);
    CHECK(sg_coo_nnz(sg_transpose(e, 0, 1)) == 0 && sg_coo_nnz(sg_add(e, e)) == 0);
    sg_tensor *z = sg_tensor_new(ctx, SG_F64, 2, sh);
    CHECK(sg_coo_nnz(sg_to_sparse(z, 1)) == 0);
    CHECK(sg_coo_nnz(sg_sparse_mask(z, e)) == 0);
    sg_tape_reset(ctx);

    /* one cell repeated 500 times */
    int64_t n = 500;
    int64_t *idx = malloc((size_t)(2 * n) * sizeof *idx);
    double *val = malloc((size_t)n * sizeof *val);
    double want = 0;
    for (int64_t i = 0; i < n; i++) idx[i] = 2, idx[n + i] = 3, val[i] = tu_rand_unit(), want += val[i];
    sg_tensor *d = sg_coo_new(ctx, SG_F64, 2, sh, 2, n, idx, val);
    CHECK_NEAR(sg_tensor_get(sg_to_dense(d), 2 * 5 + 3), want, 1e-12);
    CHECK_NEAR(sg_tensor_get(sg_to_dense(sg_transpose(d, 0, 1)), 3 * 6 + 2), want, 1e-12);
    sg_tensor *c = sg_coalesce(d);
    CHECK(sg_coo_nnz(c) == 1);
    CHECK_NEAR(sg_tensor_get(sg_coo_values(c), 0), want, 1e-12);
    sg_tensor *mk = sg_sparse_mask(sg_to_dense(d), d);
    CHECK(sg_coo_nnz(mk) == 1);
    CHECK_NEAR(sg_tensor_get(mk, 2 * 5 + 3), want, 1e-12);
    free(idx), free(val);
    sg_ctx_free(ctx);
}

TEST(errors_are_reported)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *a = tu_rand_coo(ctx, 2, (int64_t[]){3, 4}, 2, 5, 0);
    sg_tensor *b = tu_rand_coo(ctx, 2, (int64_t[]){4, 3}, 2, 5, 0);
    sg_tensor *d = rand_dense(ctx, 2, (int64_t[]){3, 4});
    CHECK(sg_add(a, b) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_SHAPE);
    CHECK(sg_matmul(a, a) == NULL);
    CHECK(sg_ctx_status(ctx) != SG_OK);
    sg_ctx_clear_error(ctx);
    CHECK(sg_matmul(a, d) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_SHAPE);
    CHECK(sg__sparse_transpose(a, 0, 2) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_ARG);
    CHECK(sg_sparse_mask(d, d) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_LAYOUT);
    CHECK(sg_sparse_mask(d, b) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_SHAPE);
    CHECK(sg_to_sparse(d, 3) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_ARG);
    CHECK(sg_to_sparse(a, 1) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_LAYOUT);
    CHECK(sg_to_sparse(a, 2) == a && sg_to_dense(d) == d);
    CHECK(sg_to_dense(NULL) == NULL && sg_sparse_mask(NULL, a) == NULL && sg__sparse_sum(NULL) == NULL);
    sg_ctx_free(ctx);
}

TEST_MAIN()
