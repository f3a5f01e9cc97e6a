/* The ops along one dim and the normalisations: gather, narrow, norm_dim, logsumexp_dim,
 * max_dim, dropout and layer_norm. Forward values (and the backwards) against plain loops
 * written here or hand-derived values, the edge cases each op's header comment states,
 * bitwise determinism across thread counts, and errors (NULL, the right status, the op
 * named, nothing recorded). Each op's gradcheck is in test_gradcheck_ops.c. */
#include "ops/ops.h"
#include "testutil.h"


static sg_ctx *new_ctx(int threads)
{
    sg_ctx_opts o = {.threads = threads, .seed = 23};
    return sg_ctx_new(&o);
}

#define P64(ctx, lo, hi, ...) rnd(ctx, SG_F64, lo, hi, SHAPE(__VA_ARGS__))
#define P32(ctx, lo, hi, ...) rnd(ctx, SG_F32, lo, hi, SHAPE(__VA_ARGS__))
static sg_tensor *from64(sg_ctx *ctx, int ndim, const int64_t *shape, const double *v)
{
    return sg_tensor_requires_grad(sg_tensor_from_data(ctx, SG_F64, ndim, shape, v), 1);
}

/* Index tensor of dtype from int64 values. */
static sg_tensor *index_of(sg_ctx *ctx, sg_dtype dt, int ndim, const int64_t *shape, const int64_t *v)
{
    sg_tensor *t = sg_tensor_new(ctx, dt, ndim, shape);
    for (int64_t i = 0; t && i < sg_tensor_numel(t); i++) {
        if (dt == SG_I64) ((int64_t *)sg_tensor_data(t))[i] = v[i];
        else ((int32_t *)sg_tensor_data(t))[i] = (int32_t)v[i];
    }
    return t;
}

/* Backward of sum(y * g) for a fixed g of y's shape (values from [-1, 1)): x's gradient
 * is then the op's vector-Jacobian product with g. Returns g. */
static sg_tensor *backward_with_random(sg_tensor *y)
{
    sg_ctx *ctx = sg_tensor_ctx(y);
    sg_tensor *g = sg_tensor_new(ctx, sg_tensor_dtype(y), sg_tensor_ndim(y), sg_tensor_shape(y));
    sg_tensor_fill_uniform(g, -1, 1);
    CHECK_STATUS(ctx, sg_backward(sg_sum(sg_mul(y, g))), SG_OK);
    return g;
}

/* expr must fail with `code`, name `what` in the message and record no node. */
#define EXPECT_FAIL(ctx, expr, code, what)                                       \
    do {                                                                         \
        int64_t nodes_ = sg_tape_nodes(ctx);                                     \
        sg_ctx_clear_error(ctx);                                                 \
        sg_tensor *r_ = (expr);                                                  \
        CHECK(r_ == NULL);                                                       \
        CHECK_STATUS(ctx, sg_ctx_status(ctx), code);                             \
        if (!strstr(sg_ctx_message(ctx), what)) {                                \
            fprintf(stderr, "  line %d: message '%s' does not name %s\n", __LINE__, \
                    sg_ctx_message(ctx), what);                                  \
            tu_failures++;                                                       \
        }                                                                        \
        CHECK(sg_tape_nodes(ctx) == nodes_);                                     \
        sg_ctx_clear_error(ctx);                                                 \
    } while (0)

/* ---------------------------------------------------------------- gather */

/* x (A,B,C), index (I,J,K): out and x's scatter-add gradient by plain loops. */
static void naive_gather(const double *x, const int64_t *xs, const int64_t *ix, const int64_t *is, int dim,
                         const double *g, double *out, double *gx)
{
    for (int64_t i = 0; i < is[0]; i++)
        for (int64_t j = 0; j < is[1]; j++)
            for (int64_t k = 0; k < is[2]; k++) {
                int64_t e = (i * is[1] + j) * is[2] + k, c[3] = {i, j, k};
                c[dim] = ix[e];
                int64_t xe = (c[0] * xs[1] + c[1]) * xs[2] + c[2];
                out[e] = x[xe];
                gx[xe] += g[e];
            }
}

TEST(gather_values_and_scatter_add_against_loops)
{
    sg_ctx *ctx = new_ctx(0);
    const int64_t xs[3] = {4, 5, 6}, is[3] = {3, 7, 6}; /* index: 9 along dim (> x's), not wider elsewhere */
    for (int dim = 0; dim < 3; dim++)
        for (int wide = 0; wide < 2; wide++) {
            int64_t ishape[3] = {is[0], is[1], is[2]};
            ishape[dim] = 9;
            if (dim != 1) ishape[1] = 5;
            int64_t n = ishape[0] * ishape[1] * ishape[2], v[9 * 5 * 6];
            for (int64_t e = 0; e < n; e++) v[e] = (int64_t)(tu_rand() % (uint64_t)xs[dim]);
            sg_tensor *x = P64(ctx, -1, 1, 4, 5, 6);
            sg_tensor *ix = index_of(ctx, wide ? SG_I64 : SG_I32, 3, ishape, v);
            sg_tensor *y = sg_gather(x, dim - 3 * wide, ix); /* dim negative when wide */
            CHECK(y && sg_tensor_ndim(y) == 3 && sg_tensor_numel(y) == n);
            if (!y) continue;
            sg_tensor *g = backward_with_random(y);
            double out[9 * 5 * 6], gx[4 * 5 * 6] = {0};
            naive_gather(sg_tensor_f64(x), xs, v, ishape, dim, sg_tensor_f64(g), out, gx);
            for (int64_t e = 0; e < n; e++) CHECK(sg_tensor_f64(y)[e] == out[e]);
            for (int64_t e = 0; e < 120; e++) CHECK_NEAR(sg_tensor_get(sg_tensor_grad(x), e), gx[e], 1e-14);
            sg_tape_reset(ctx);
        }
    /* f32, hand-derived: x = [[1,2],[3,4]], dim 1, index [[0,0],[1,0]] -> [[1,1],[4,3]] */
    sg_tensor *x = sg_tensor_from_data(ctx, SG_F32, SHAPE(2, 2), (float[]){1, 2, 3, 4});
    sg_tensor *y = sg_gather(x, 1, index_of(ctx, SG_I64, SHAPE(2, 2), (int64_t[]){0, 0, 1, 0}));
    CHECK(y && sg_tensor_dtype(y) == SG_F32);
    const double want[4] = {1, 1, 4, 3};
    for (int e = 0; y && e < 4; e++) CHECK(sg_tensor_get(y, e) == want[e]);
    sg_ctx_free(ctx);
}

/* A (300, 200) gather along dim 0 with repeats: bitwise the same gradient on 1 and 3
 * threads (the scatter-add has no atomics). */
static void gather_grad(int threads, double *out)
{
    sg_ctx *ctx = new_ctx(threads);
    sg_tensor *x = P64(ctx, -1, 1, 50, 200);
    int64_t *v = malloc(sizeof(int64_t) * 300 * 200);
    for (int64_t e = 0; e < 300 * 200; e++) v[e] = (e * 7919) % 50;
    sg_tensor *y = sg_gather(x, 0, index_of(ctx, SG_I64, SHAPE(300, 200), v));
    backward_with_random(y);
    memcpy(out, sg_tensor_f64(sg_tensor_grad(x)), sizeof(double) * 50 * 200);
    free(v);
    sg_ctx_free(ctx);
}

TEST(gather_backward_bitwise_identical_for_any_thread_count)
{
    double *a = malloc(sizeof(double) * 10000), *b = malloc(sizeof(double) * 10000);
    gather_grad(1, a);
    gather_grad(3, b);
    CHECK(memcmp(a, b, sizeof(double) * 10000) == 0);
    free(a);
    free(b);
}

TEST(gather_errors_before_anything_is_written)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *x = P64(ctx, -1, 1, 3, 4);
    EXPECT_FAIL(ctx, sg_gather(x, 1, index_of(ctx, SG_I64, SHAPE(2, 2), (int64_t[]){0, 1, 4, 0})),
                SG_ERR_INDEX, "index 4 at position 2");
    EXPECT_FAIL(ctx, sg_gather(x, 0, index_of(ctx, SG_I32, SHAPE(1, 3), (int64_t[]){0, -1, 2})),
                SG_ERR_INDEX, "index -1");
    EXPECT_FAIL(ctx, sg_gather(x, 1, index_of(ctx, SG_I64, SHAPE(4), (int64_t[]){0, 1, 2, 3})), SG_ERR_SHAPE,
                "sg_gather");
    EXPECT_FAIL(ctx, sg_gather(x, 1, index_of(ctx, SG_I64, SHAPE(4, 1), (int64_t[]){0, 1, 2, 3})), SG_ERR_SHAPE,
                "sg_gather"); /* 4 rows > 3 along dim 0 */
    EXPECT_FAIL(ctx, sg_gather(x, 2, index_of(ctx, SG_I64, SHAPE(1, 1), (int64_t[]){0})), SG_ERR_ARG, "sg_gather");
    EXPECT_FAIL(ctx, sg_gather(x, 0, P64(ctx, 0, 1, 1, 1)), SG_ERR_DTYPE, "sg_gather");
    sg_tensor *ix = index_of(ctx, SG_I64, SHAPE(1, 1), (int64_t[]){0});
    EXPECT_FAIL(ctx, sg_gather(index_of(ctx, SG_I64, SHAPE(2, 2), (int64_t[]){0, 0, 0, 0}), 0, ix), SG_ERR_DTYPE,
                "sg_gather");
    sg_ctx *other = new_ctx(0);
    EXPECT_FAIL(ctx, sg_gather(x, 0, index_of(other, SG_I64, SHAPE(1, 1), (int64_t[]){0})), SG_ERR_ARG,
                "different contexts");
    sg_ctx_free(other);
    /* a bad index past many good ones: nothing allocated */
    int64_t *v = calloc(4000, sizeof(int64_t));
    v[3999] = 3;
    sg_tensor *big = index_of(ctx, SG_I64, SHAPE(1000, 4), v);
    sg_mem_stats m0 = sg_ctx_mem_stats(ctx);
    CHECK(sg_gather(x, 0, big) == NULL && sg_ctx_status(ctx) == SG_ERR_INDEX);
    CHECK(strstr(sg_ctx_message(ctx), "index 3 at position 3999") != NULL);
    sg_mem_stats m1 = sg_ctx_mem_stats(ctx);
    CHECK(m0.bytes_in_use == m1.bytes_in_use && m0.arena_bytes == m1.arena_bytes);
    free(v);
    CHECK(sg_gather(NULL, 0, ix) == NULL && sg_gather(x, 0, NULL) == NULL);
    sg_ctx_free(ctx);
}

/* ---------------------------------------------------------------- narrow */

TEST(narrow_values_and_gradient_against_loops)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *x = P64(ctx, -1, 1, 3, 7, 4);
    const double *X = sg_tensor_f64(x);
    const int dims[4] = {1, -1, 0, 1};
    const int64_t starts[4] = {2, -3, 1, 7}, lens[4] = {4, 2, 2, 0};
    for (int c = 0; c < 4; c++) {
        const int d = dims[c] < 0 ? dims[c] + 3 : dims[c];
        const int64_t s = starts[c] < 0 ? starts[c] + sg_tensor_dim(x, d) : starts[c];
        sg_tensor *y = sg_narrow(x, dims[c], starts[c], lens[c]);
        CHECK(y && sg_tensor_dim(y, d) == lens[c] && sg_tensor_numel(y) == 84 / sg_tensor_dim(x, d) * lens[c]);
        if (!y) continue;
        sg_tensor *g = backward_with_random(y);
        sg_tensor *gx = sg_tensor_grad(x);
        const int64_t *ys = sg_tensor_shape(y);
        for (int64_t i = 0; i < 3; i++)
            for (int64_t j = 0; j < 7; j++)
                for (int64_t k = 0; k < 4; k++) {
                    int64_t c3[3] = {i, j, k}, pos = c3[d] - s;
                    bool in = pos >= 0 && pos < lens[c];
                    c3[d] = pos;
                    int64_t ye = in ? (c3[0] * ys[1] + c3[1]) * ys[2] + c3[2] : -1;
                    if (in) CHECK(sg_tensor_f64(y)[ye] == X[(i * 7 + j) * 4 + k]);
                    CHECK(sg_tensor_get(gx, (i * 7 + j) * 4 + k) == (in ? sg_tensor_f64(g)[ye] : 0.0));
                }
        sg_tape_reset(ctx);
    }
    EXPECT_FAIL(ctx, sg_narrow(x, 1, 5, 3), SG_ERR_INDEX, "sg_narrow");
    EXPECT_FAIL(ctx, sg_narrow(x, 1, -8, 1), SG_ERR_INDEX, "start -8");
    EXPECT_FAIL(ctx, sg_narrow(x, 1, 0, -1), SG_ERR_INDEX, "sg_narrow");
    EXPECT_FAIL(ctx, sg_narrow(x, 3, 0, 1), SG_ERR_ARG, "sg_narrow");
    EXPECT_FAIL(ctx, sg_narrow(index_of(ctx, SG_I64, SHAPE(2), (int64_t[]){1, 2}), 0, 0, 1), SG_ERR_DTYPE,
                "sg_narrow");
    CHECK(sg_narrow(NULL, 0, 0, 1) == NULL);
    sg_ctx_free(ctx);
}

/* ---------------------------------------------------------------- norm_dim */

TEST(norm_dim_values_gradients_and_edges)
{
    sg_ctx *ctx = new_ctx(0);
    /* hand-derived: rows [3, -4, 0] and [0, 0, 0] */
    sg_tensor *x = from64(ctx, SHAPE(2, 3), (double[]){3, -4, 0, 0, 0, 0});
    for (int p = 1; p <= 2; p++) {
        sg_tensor *y = sg_norm_dim(x, p, 1, 1);
        CHECK(y && sg_tensor_ndim(y) == 2 && sg_tensor_dim(y, 1) == 1);
        if (!y) continue;
        CHECK(sg_tensor_get(y, 0) == (p == 1 ? 7 : 5) && sg_tensor_get(y, 1) == 0);
        CHECK_STATUS(ctx, sg_backward(sg_sum(y)), SG_OK);
        /* p = 1: sign(x), sign(0) = 0; p = 2: x / 5, and 0 for the zero row */
        const double want[2][6] = {{1, -1, 0, 0, 0, 0}, {0.6, -0.8, 0, 0, 0, 0}};
        for (int e = 0; e < 6; e++) CHECK_NEAR(sg_tensor_get(sg_tensor_grad(x), e), want[p - 1][e], 1e-15);
        sg_tape_reset(ctx);
    }
    /* random, every dim, against loops; f32 too */
    sg_tensor *a = P64(ctx, -1, 1, 3, 4, 5), *f = P32(ctx, -1, 1, 3, 4, 5);
    for (int dim = 0; dim < 3; dim++) {
        const int64_t *sh = sg_tensor_shape(a);
        int64_t outer = 1, inner = 1;
        for (int k = 0; k < dim; k++) outer *= sh[k];
        for (int k = dim + 1; k < 3; k++) inner *= sh[k];
        sg_tensor *y1 = sg_norm_dim(a, 1, dim, 0), *y2 = sg_norm_dim(a, 2, dim, 0);
        sg_tensor *y3 = sg_norm_dim(f, 2, dim, 0);
        CHECK(y1 && y2 && y3 && sg_tensor_ndim(y1) == 2);
        for (int64_t o = 0; y1 && y2 && y3 && o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                double s1 = 0, s2 = 0, s3 = 0;
                for (int64_t k = 0; k < sh[dim]; k++) {
                    int64_t e = (o * sh[dim] + k) * inner + i;
                    s1 += fabs(sg_tensor_f64(a)[e]);
                    s2 += sg_tensor_f64(a)[e] * sg_tensor_f64(a)[e];
                    s3 += (double)sg_tensor_f32(f)[e] * sg_tensor_f32(f)[e];
                }
                CHECK_NEAR(sg_tensor_get(y1, o * inner + i), s1, 1e-14);
                CHECK_NEAR(sg_tensor_get(y2, o * inner + i), sqrt(s2), 1e-14);
                CHECK_NEAR(sg_tensor_get(y3, o * inner + i), sqrt(s3), 1e-6);
            }
    }
    /* no overflow or underflow in the sum of squares */
    sg_tensor *big = from64(ctx, SHAPE(2, 2), (double[]){3e200, 4e200, 3e-200, -4e-200});
    sg_tensor *yb = sg_norm_dim(big, 2, -1, 0);
    CHECK(yb && fabs(sg_tensor_get(yb, 0) / 5e200 - 1) < 1e-15 && fabs(sg_tensor_get(yb, 1) / 5e-200 - 1) < 1e-15);
    sg_tensor *inf = from64(ctx, SHAPE(3), (double[]){1, INFINITY, 2});
    CHECK(isinf(sg_tensor_get(sg_norm_dim(inf, 2, 0, 0), 0)));
    EXPECT_FAIL(ctx, sg_norm_dim(a, 3, 0, 0), SG_ERR_ARG, "p = 3");
    EXPECT_FAIL(ctx, sg_norm_dim(a, 0, 0, 0), SG_ERR_ARG, "sg_norm_dim");
    EXPECT_FAIL(ctx, sg_norm_dim(a, 2, 3, 0), SG_ERR_ARG, "sg_norm_dim");
    CHECK(sg_norm_dim(NULL, 2, 0, 0) == NULL);
    sg_ctx_free(ctx);
}

/* ---------------------------------------------------------------- logsumexp_dim */

TEST(logsumexp_dim_values_edges_and_softmax_gradient)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *a = P64(ctx, -3, 3, 4, 6);
    sg_tensor *y = sg_logsumexp_dim(a, 0, 0);
    CHECK(y && sg_tensor_ndim(y) == 1 && sg_tensor_dim(y, 0) == 6);
    sg_tensor *g = y ? backward_with_random(y) : NULL;
    for (int j = 0; g && j < 6; j++) {
        double s = 0;
        for (int i = 0; i < 4; i++) s += exp(sg_tensor_f64(a)[i * 6 + j]);
        CHECK_NEAR(sg_tensor_get(y, j), log(s), 1e-14);
        for (int i = 0; i < 4; i++) /* g softmax */
            CHECK_NEAR(sg_tensor_get(sg_tensor_grad(a), i * 6 + j),
                       sg_tensor_f64(g)[j] * exp(sg_tensor_f64(a)[i * 6 + j]) / s, 1e-14);
    }
    sg_tape_reset(ctx);
    /* rows: all -inf, one +inf, a NaN, huge logits (exp overflows), and -inf beside finite */
    const double ni = -INFINITY;
    sg_tensor *e = from64(ctx, SHAPE(5, 3), (double[]){ni, ni, ni, 1, INFINITY, INFINITY, 1, NAN, 2,
                                                       1000, 1000, 999, ni, 0, 0});
    sg_tensor *ye = sg_logsumexp_dim(e, 1, 1);
    CHECK(ye && sg_tensor_dim(ye, 1) == 1);
    if (ye) {
        CHECK(sg_tensor_get(ye, 0) == -INFINITY);
        CHECK(sg_tensor_get(ye, 1) == INFINITY);
        CHECK(isnan(sg_tensor_get(ye, 2)));
        CHECK_NEAR(sg_tensor_get(ye, 3), 1000 + log(2 + exp(-1)), 1e-12);
        CHECK_NEAR(sg_tensor_get(ye, 4), log(2), 1e-15);
    }
    sg_tensor *f = sg_tensor_from_data(ctx, SG_F32, SHAPE(2), (float[]){100, 100});
    CHECK_NEAR(sg_tensor_get(sg_logsumexp_dim(f, 0, 0), 0), 100 + log(2), 1e-5);
    EXPECT_FAIL(ctx, sg_logsumexp_dim(a, -3, 0), SG_ERR_ARG, "sg_logsumexp_dim");
    CHECK(sg_logsumexp_dim(NULL, 0, 0) == NULL);
    sg_ctx_free(ctx);
}

/* ---------------------------------------------------------------- max_dim */

TEST(max_dim_values_indices_ties_nan_and_gradient)
{
    sg_ctx *ctx = new_ctx(0);
    /* rows: a tie (first wins), a NaN after the max (NaN wins), plain */
    sg_tensor *x = from64(ctx, SHAPE(3, 4), (double[]){1, 5, 2, 5, 3, 9, NAN, 1, -2, -1, -7, -3});
    sg_tensor *idx = NULL;
    sg_tensor *y = sg_max_dim(x, 1, 0, &idx);
    CHECK(y && idx && sg_tensor_dtype(idx) == SG_I64 && sg_tensor_ndim(idx) == 1 && sg_tensor_dim(idx, 0) == 3);
    if (y && idx) {
        const int64_t *I = sg_tensor_data(idx);
        CHECK(I[0] == 1 && I[1] == 2 && I[2] == 1);
        CHECK(sg_tensor_get(y, 0) == 5 && isnan(sg_tensor_get(y, 1)) && sg_tensor_get(y, 2) == -1);
        CHECK_STATUS(ctx, sg_backward_grad(y, sg_tensor_from_data(ctx, SG_F64, SHAPE(3), (double[]){2, 3, 4})),
                     SG_OK);
        const double want[12] = {0, 2, 0, 0, 0, 0, 3, 0, 0, 4, 0, 0}; /* the first max only */
        for (int e = 0; e < 12; e++) CHECK(sg_tensor_get(sg_tensor_grad(x), e) == want[e]);
    }
    sg_tape_reset(ctx);
    /* random, along dim 0 with keepdim, against a loop; f32 */
    sg_tensor *a = P32(ctx, -1, 1, 5, 3, 2);
    sg_tensor *ya = sg_max_dim(a, 0, 1, &idx);
    CHECK(ya && sg_tensor_ndim(ya) == 3 && sg_tensor_dim(ya, 0) == 1 && sg_tensor_dim(idx, 0) == 1);
    for (int i = 0; ya && i < 6; i++) {
        int best = 0;
        for (int k = 1; k < 5; k++)
            if (sg_tensor_f32(a)[k * 6 + i] > sg_tensor_f32(a)[best * 6 + i]) best = k;
        CHECK(((int64_t *)sg_tensor_data(idx))[i] == best);
        CHECK(sg_tensor_f32(ya)[i] == sg_tensor_f32(a)[best * 6 + i]);
    }
    CHECK(sg_max_dim(a, 2, 0, NULL) != NULL); /* indices not asked for */
    idx = a;
    EXPECT_FAIL(ctx, sg_max_dim(sg_tensor_new(ctx, SG_F64, SHAPE(2, 0)), 1, 0, &idx), SG_ERR_SHAPE, "empty");
    CHECK(idx == NULL);
    EXPECT_FAIL(ctx, sg_max_dim(a, 3, 0, NULL), SG_ERR_ARG, "sg_max_dim");
    CHECK(sg_max_dim(NULL, 0, 0, NULL) == NULL);
    sg_ctx_free(ctx);
}

/* ---------------------------------------------------------------- dropout */

/* sg_dropout(x, p, 1) of a (n) f32 tensor of ones on a context of `threads` threads, seed
 * 99, after `skip` earlier calls: the output into out. */
static void dropout_ones(int threads, double p, int skip, int64_t n, float *out)
{
    sg_ctx_opts o = {.threads = threads, .seed = 99};
    sg_ctx *ctx = sg_ctx_new(&o);
    sg_tensor *x = sg_tensor_new(ctx, SG_F32, SHAPE(n));
    sg_tensor_fill(x, 1);
    for (int k = 0; k < skip; k++) sg_dropout(x, p, 1);
    sg_tensor *y = sg_dropout(x, p, 1);
    CHECK(y != NULL);
    if (y) memcpy(out, sg_tensor_f32(y), sizeof(float) * (size_t)n);
    sg_ctx_free(ctx);
}

TEST(dropout_mask_same_for_any_thread_count_and_fraction_kept)
{
    enum { N = 300000 }; /* several chunks of SG__GRAIN */
    float *m1 = malloc(sizeof(float) * N), *m2 = malloc(sizeof(float) * N), *m3 = malloc(sizeof(float) * N);
    const double ps[2] = {0.3, 0.9};
    for (int c = 0; c < 2; c++) {
        dropout_ones(1, ps[c], 0, N, m1);
        dropout_ones(2, ps[c], 0, N, m2);
        dropout_ones(3, ps[c], 0, N, m3);
        CHECK(memcmp(m1, m2, sizeof(float) * N) == 0 && memcmp(m1, m3, sizeof(float) * N) == 0);
        int64_t kept = 0;
        const float scale = (float)(1.0 / (1.0 - ps[c]));
        for (int64_t i = 0; i < N; i++) {
            CHECK(m1[i] == 0 || m1[i] == scale);
            kept += m1[i] != 0;
        }
        /* binomial: 1 - p within 6 standard deviations */
        const double sd = sqrt(ps[c] * (1 - ps[c]) / N);
        CHECK(fabs((double)kept / N - (1 - ps[c])) < 6 * sd);
    }
    /* the next call draws another mask */
    dropout_ones(2, 0.5, 1, N, m2);
    dropout_ones(2, 0.5, 0, N, m1);
    CHECK(memcmp(m1, m2, sizeof(float) * N) != 0);
    free(m1);
    free(m2);
    free(m3);
}

TEST(dropout_backward_uses_the_forward_mask_and_edges)
{
    sg_ctx *ctx = new_ctx(2);
    sg_tensor *x = P64(ctx, 0.5, 1.5, 200, 300); /* no zeros: kept <=> y != 0 */
    sg_tensor *y = sg_dropout(x, 0.25, 1);
    CHECK(y && y != x);
    sg_tensor *g = y ? backward_with_random(y) : NULL;
    for (int64_t i = 0; g && i < 60000; i++) {
        const double yi = sg_tensor_f64(y)[i], want = yi != 0 ? sg_tensor_f64(g)[i] * (1 / 0.75) : 0;
        CHECK(yi == 0 || yi == sg_tensor_f64(x)[i] * (1 / 0.75));
        CHECK(sg_tensor_get(sg_tensor_grad(x), i) == want);
    }
    sg_tape_reset(ctx);
    /* identity: x itself, no node, no draw */
    uint64_t before[4];
    memcpy(before, ctx->rng, sizeof before);
    CHECK(sg_dropout(x, 0.5, 0) == x && sg_dropout(x, 0, 1) == x && sg_tape_nodes(ctx) == 0);
    CHECK(memcmp(before, ctx->rng, sizeof before) == 0);
    /* p == 1: all zeros, a zero gradient, no draw */
    sg_tensor *z = sg_dropout(x, 1, 1);
    CHECK(z && sg_tape_nodes(ctx) == 1 && memcmp(before, ctx->rng, sizeof before) == 0);
    CHECK_STATUS(ctx, sg_backward(sg_sum(z)), SG_OK);
    for (int64_t i = 0; z && i < 60000; i++)
        CHECK(sg_tensor_f64(z)[i] == 0 && sg_tensor_get(sg_tensor_grad(x), i) == 0);
    sg_tape_reset(ctx);
    EXPECT_FAIL(ctx, sg_dropout(x, 1.5, 1), SG_ERR_ARG, "sg_dropout");
    EXPECT_FAIL(ctx, sg_dropout(x, -0.1, 0), SG_ERR_ARG, "sg_dropout");
    EXPECT_FAIL(ctx, sg_dropout(x, NAN, 1), SG_ERR_ARG, "sg_dropout");
    sg_tensor *ints = index_of(ctx, SG_I32, SHAPE(1), (int64_t[]){1});
    EXPECT_FAIL(ctx, sg_dropout(ints, 0.5, 1), SG_ERR_DTYPE, "sg_dropout");
    CHECK(sg_dropout(NULL, 0.5, 1) == NULL);
    sg_ctx_free(ctx);
}

/* ---------------------------------------------------------------- layer_norm */

/* Rows of D: y = (x - mean) / sqrt(var + eps) * w + b, and the gradients for g by the
 * textbook formulas, in long double. */
static void naive_layer_norm(const double *x, const double *w, const double *b, const double *g, int64_t R,
                             int64_t D, double eps, double *y, double *dx, double *dw, double *db)
{
    for (int64_t j = 0; j < D; j++) dw[j] = db[j] = 0;
    for (int64_t r = 0; r < R; r++) {
        const double *xr = x + r * D, *gr = g + r * D;
        long double mean = 0, var = 0, a = 0, c = 0;
        for (int64_t j = 0; j < D; j++) mean += xr[j];
        mean /= D;
        for (int64_t j = 0; j < D; j++) var += (xr[j] - mean) * (xr[j] - mean);
        var /= D;
        const long double rstd = 1 / sqrtl(var + eps);
        for (int64_t j = 0; j < D; j++) {
            const long double xh = (xr[j] - mean) * rstd, gy = gr[j] * (w ? w[j] : 1);
            y[r * D + j] = (double)(xh * (w ? w[j] : 1) + (b ? b[j] : 0));
            a += gy;
            c += gy * xh;
            dw[j] += (double)(gr[j] * xh);
            db[j] += gr[j];
        }
        for (int64_t j = 0; j < D; j++) {
            const long double xh = (xr[j] - mean) * rstd, gy = gr[j] * (w ? w[j] : 1);
            dx[r * D + j] = (double)(rstd * (gy - a / D - xh * c / D));
        }
    }
}

TEST(layer_norm_values_and_gradients_against_loops)
{
    sg_ctx *ctx = new_ctx(0);
    enum { R = 6, D = 7 };
    for (int variant = 0; variant < 4; variant++) {
        sg_tensor *x = P64(ctx, -2, 3, 2, 3, D);
        sg_tensor *w = variant & 1 ? P64(ctx, 0.5, 1.5, D) : NULL, *b = variant & 2 ? P64(ctx, -1, 1, D) : NULL;
        sg_tensor *y = sg_layer_norm(x, D, w, b, 1e-5);
        CHECK(y && sg_tensor_ndim(y) == 3);
        if (!y) continue;
        sg_tensor *g = backward_with_random(y);
        double ry[R * D], rdx[R * D], rdw[D], rdb[D];
        naive_layer_norm(sg_tensor_f64(x), w ? sg_tensor_f64(w) : NULL, b ? sg_tensor_f64(b) : NULL,
                         sg_tensor_f64(g), R, D, 1e-5, ry, rdx, rdw, rdb);
        for (int e = 0; e < R * D; e++) {
            CHECK_NEAR(sg_tensor_f64(y)[e], ry[e], 1e-13);
            CHECK_NEAR(sg_tensor_get(sg_tensor_grad(x), e), rdx[e], 1e-13);
        }
        for (int j = 0; j < D; j++) {
            if (w) CHECK_NEAR(sg_tensor_get(sg_tensor_grad(w), j), rdw[j], 1e-13);
            if (b) CHECK_NEAR(sg_tensor_get(sg_tensor_grad(b), j), rdb[j], 1e-13);
        }
        sg_tape_reset(ctx);
    }
    /* hand-derived: [1, 3] -> mean 2, var 1 -> [-1, 1] / sqrt(1 + eps); f32 */
    sg_tensor *f = sg_tensor_from_data(ctx, SG_F32, SHAPE(1, 2), (float[]){1, 3});
    sg_tensor *yf = sg_layer_norm(f, 2, NULL, NULL, 0);
    CHECK(yf && sg_tensor_f32(yf)[0] == -1 && sg_tensor_f32(yf)[1] == 1);
    sg_tensor *x = P64(ctx, -1, 1, 3, 4);
    EXPECT_FAIL(ctx, sg_layer_norm(x, 3, NULL, NULL, 1e-5), SG_ERR_SHAPE, "normalized_size 3");
    EXPECT_FAIL(ctx, sg_layer_norm(x, 4, P64(ctx, 0, 1, 3), NULL, 1e-5), SG_ERR_SHAPE, "weight");
    EXPECT_FAIL(ctx, sg_layer_norm(x, 4, NULL, P64(ctx, 0, 1, 1, 4), 1e-5), SG_ERR_SHAPE, "bias");
    EXPECT_FAIL(ctx, sg_layer_norm(x, 4, P32(ctx, 0, 1, 4), NULL, 1e-5), SG_ERR_DTYPE, "sg_layer_norm");
    EXPECT_FAIL(ctx, sg_layer_norm(x, 4, NULL, NULL, -1), SG_ERR_ARG, "eps");
    EXPECT_FAIL(ctx, sg_layer_norm(sg_tensor_new(ctx, SG_F64, 0, NULL), 1, NULL, NULL, 0), SG_ERR_SHAPE,
                "sg_layer_norm");
    CHECK(sg_layer_norm(NULL, 4, NULL, NULL, 1e-5) == NULL);
    sg_ctx_free(ctx);
}

/* Many rows (several chunks): the weight's and bias's gradients, sums over rows, are
 * bitwise the same on 1 and 3 threads. */
static void layer_norm_grads(int threads, double *out)
{
    sg_ctx *ctx = new_ctx(threads);
    sg_tensor *x = P64(ctx, -1, 1, 3000, 48), *w = P64(ctx, 0.5, 1.5, 48), *b = P64(ctx, -1, 1, 48);
    backward_with_random(sg_layer_norm(x, 48, w, b, 1e-5));
    memcpy(out, sg_tensor_f64(sg_tensor_grad(w)), sizeof(double) * 48);
    memcpy(out + 48, sg_tensor_f64(sg_tensor_grad(b)), sizeof(double) * 48);
    memcpy(out + 96, sg_tensor_f64(sg_tensor_grad(x)), sizeof(double) * 3000 * 48);
    sg_ctx_free(ctx);
}

TEST(layer_norm_bitwise_identical_for_any_thread_count)
{
    const size_t n = 96 + 3000 * 48;
    double *a = malloc(sizeof(double) * n), *b = malloc(sizeof(double) * n);
    layer_norm_grads(1, a);
    layer_norm_grads(3, b);
    CHECK(memcmp(a, b, sizeof(double) * n) == 0);
    free(a);
    free(b);
}

TEST_MAIN()
