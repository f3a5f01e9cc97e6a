/* Dense ops: every forward value against a naive loop written here, stability at extreme
 * inputs, bitwise determinism across thread counts, the COO dispatch of generic ops, error
 * handling (NULL result, the right status, no node recorded), sg_gradcheck itself and a
 * composite network's gradient. Each op's own gradcheck is in test_gradcheck_ops.c. */
#include "ops/ops.h"
#include "testutil.h"


static sg_ctx *new_ctx(int threads)
{
    sg_ctx_opts o = {.threads = threads, .seed = 11};
    return sg_ctx_new(&o);
}

#define P64(ctx, lo, hi, ...) rnd(ctx, SG_F64, lo, hi, SHAPE(__VA_ARGS__))
#define P32(ctx, lo, hi, ...) rnd(ctx, SG_F32, lo, hi, SHAPE(__VA_ARGS__))
static sg_tensor *scalar64(sg_ctx *ctx, double v)
{
    sg_tensor *t = sg_tensor_new(ctx, SG_F64, 0, NULL);
    sg_tensor_fill(t, v);
    return sg_tensor_requires_grad(t, 1);
}

static sg_tensor *targets(sg_ctx *ctx, sg_dtype dt, int n, const int64_t *v)
{
    sg_tensor *t = sg_tensor_new(ctx, dt, 1, (int64_t[]){n});
    for (int i = 0; i < n; i++) {
        if (dt == SG_I64) ((int64_t *)sg_tensor_data(t))[i] = v[i];
        else ((int32_t *)sg_tensor_data(t))[i] = (int32_t)v[i];
    }
    return t;
}

/* ---------------------------------------------------------------- gradcheck */

/* A deliberately wrong op: y = 2x whose backward claims dy/dx = 3. */
static int wrong_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *g = sg__tmp_like(gout, false);
    if (!g) return SG_ERR_NOMEM;
    for (int64_t i = 0; i < g->numel; i++) ((double *)g->data)[i] = n->scalar[0] * ((double *)gout->data)[i];
    return sg__accum_grad(n->in[0], g, true);
}
static sg_tensor *doubling(sg_ctx *ctx, sg_tensor *const *in, void *ud)
{
    sg_tensor *x = in[0];
    sg_tensor *y = sg__tmp_like(x, false);
    if (!y) return NULL;
    for (int64_t i = 0; i < x->numel; i++) ((double *)y->data)[i] = 2 * ((double *)x->data)[i];
    if (sg__needs_grad(ctx, 1, &x)) {
        sg_node *n = sg__node_new(ctx, wrong_backward, "doubling", y, 1, &x);
        if (!n) return NULL;
        n->scalar[0] = *(const double *)ud;
    }
    return y;
}

TEST(gradcheck_catches_a_wrong_backward)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *x = P64(ctx, -1, 1, 2, 2);
    sg_gradcheck_result r;
    double right = 2, wrong = 3;
    CHECK_STATUS(ctx, sg_gradcheck(ctx, doubling, &right, 1, &x, NULL, &r), SG_OK);
    CHECK(r.passed);
    CHECK_STATUS(ctx, sg_gradcheck(ctx, doubling, &wrong, 1, &x, NULL, &r), SG_ERR_GRADCHECK);
    CHECK(!r.passed);
    CHECK_NEAR(r.analytical, 3, 1e-12);
    CHECK_NEAR(r.numerical, 2, 1e-6);
    sg_ctx_free(ctx);
}

/* ---------------------------------------------------------------- forward values */

/* sg_add, sg_sub, sg_mul, sg_div and the same four in C. */
typedef sg_tensor *(*binary_fn)(sg_tensor *, sg_tensor *);
static const binary_fn binary_ops[4] = {sg_add, sg_sub, sg_mul, sg_div};
static double naive_bin(int op, double x, double y)
{
    return op == 0 ? x + y : op == 1 ? x - y : op == 2 ? x * y : x / y;
}

TEST(values_broadcast_against_naive_indexing)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *a = P64(ctx, -1, 1, 2, 1, 3); /* (2,1,3) op (4,1) -> (2,4,3) */
    sg_tensor *b = P64(ctx, 0.5, 2, 4, 1);
    const double *A = sg_tensor_f64(a), *B = sg_tensor_f64(b);
    for (int f = 0; f < 4; f++) {
        sg_tensor *y = binary_ops[f](a, b);
        CHECK(y && sg_tensor_ndim(y) == 3 && sg_tensor_dim(y, 0) == 2 && sg_tensor_dim(y, 1) == 4 &&
              sg_tensor_dim(y, 2) == 3);
        if (!y) continue;
        const double *Y = sg_tensor_f64(y);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 3; k++)
                    CHECK(Y[(i * 4 + j) * 3 + k] == naive_bin(f, A[i * 3 + k], B[j]));
    }
    /* f32, a long row with a scalar */
    sg_tensor *u = P32(ctx, -1, 1, 3, 1000);
    sg_tensor *v = sg_tensor_new(ctx, SG_F32, 0, NULL);
    sg_tensor_fill(v, 0.25);
    sg_tensor *y = sg_div(v, u);
    CHECK(y && sg_tensor_dtype(y) == SG_F32 && sg_tensor_numel(y) == 3000);
    for (int64_t i = 0; y && i < 3000; i++) CHECK(sg_tensor_f32(y)[i] == 0.25f / sg_tensor_f32(u)[i]);
    sg_ctx_free(ctx);
}

/* C (M,N) = A (M,K) @ B (K,N), i-j-k order in long double. */
static void naive_mm(const double *A, const double *B, double *C, int M, int K, int N)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            long double s = 0;
            for (int k = 0; k < K; k++) s += (long double)A[i * K + k] * B[k * N + j];
            C[i * N + j] = (double)s;
        }
}

TEST(values_matmul_against_naive_loop)
{
    sg_ctx *ctx = new_ctx(0);
    /* crosses the k- and column-blocks, with a k remainder that is not a multiple of 4 */
    const int M = 37, K = 301, N = 270;
    sg_tensor *a = P64(ctx, -1, 1, M, K), *b = P64(ctx, -1, 1, K, N);
    sg_tensor *c = sg_matmul(a, b);
    double *ref = malloc(sizeof(double) * M * N);
    naive_mm(sg_tensor_f64(a), sg_tensor_f64(b), ref, M, K, N);
    double worst = 0;
    for (int i = 0; c && i < M * N; i++) worst = fmax(worst, fabs(sg_tensor_f64(c)[i] - ref[i]));
    CHECK(c && worst < 1e-12);

    /* batched */
    sg_tensor *x = P64(ctx, -1, 1, 3, 5, 7), *w = P64(ctx, -1, 1, 3, 7, 4);
    sg_tensor *y = sg_matmul(x, w);
    CHECK(y && sg_tensor_ndim(y) == 3 && sg_tensor_dim(y, 1) == 5 && sg_tensor_dim(y, 2) == 4);
    for (int bi = 0; y && bi < 3; bi++) {
        double r[20];
        naive_mm(sg_tensor_f64(x) + bi * 35, sg_tensor_f64(w) + bi * 28, r, 5, 7, 4);
        for (int i = 0; i < 20; i++) CHECK_NEAR(sg_tensor_f64(y)[bi * 20 + i], r[i], 1e-13);
    }

    /* f32 */
    sg_tensor *p = P32(ctx, -1, 1, 9, 130), *q = P32(ctx, -1, 1, 130, 11);
    sg_tensor *pq = sg_matmul(p, q);
    for (int i = 0; pq && i < 9; i++)
        for (int j = 0; j < 11; j++) {
            double s = 0;
            for (int k = 0; k < 130; k++) s += (double)sg_tensor_f32(p)[i * 130 + k] * sg_tensor_f32(q)[k * 11 + j];
            CHECK_NEAR(sg_tensor_f32(pq)[i * 11 + j], s, 1e-4);
        }
    CHECK(pq != NULL);
    free(ref);
    sg_ctx_free(ctx);
}

/* (B,M,K)@(K,N) against a naive loop per batch, at sizes that cross the blocks; its
 * backward against naive products: dA[b] = G[b] @ B^T and dB = sum over b of A[b]^T @ G[b].
 * Also empty batches and an empty contraction. */
TEST(values_matmul_shared_right_operand_against_naive_loop)
{
    sg_ctx *ctx = new_ctx(0);
    const int Bn = 3, M = 17, K = 140, N = 260;
    sg_tensor *a = P64(ctx, -1, 1, Bn, M, K), *b = P64(ctx, -1, 1, K, N);
    sg_tensor *g = P64(ctx, -1, 1, Bn, M, N);
    sg_tensor_requires_grad(g, 0);
    sg_tensor *c = sg_matmul(a, b);
    CHECK(c && sg_tensor_ndim(c) == 3 && sg_tensor_dim(c, 0) == Bn && sg_tensor_dim(c, 1) == M &&
          sg_tensor_dim(c, 2) == N);
    const double *A = sg_tensor_f64(a), *B = sg_tensor_f64(b), *G = sg_tensor_f64(g);
    double *ref = malloc(sizeof(double) * M * N);
    double worst = 0;
    for (int bi = 0; c && bi < Bn; bi++) {
        naive_mm(A + bi * M * K, B, ref, M, K, N);
        for (int i = 0; i < M * N; i++) worst = fmax(worst, fabs(sg_tensor_f64(c)[bi * M * N + i] - ref[i]));
    }
    CHECK(c && worst < 1e-12);
    free(ref);

    CHECK_STATUS(ctx, sg_backward(sg_sum(sg_mul(g, c))), SG_OK);
    sg_tensor *ga = sg_tensor_grad(a), *gb = sg_tensor_grad(b);
    CHECK(ga && gb && sg_tensor_ndim(ga) == 3 && sg_tensor_ndim(gb) == 2);
    worst = 0;
    for (int bi = 0; ga && bi < Bn; bi++)
        for (int i = 0; i < M; i++)
            for (int k = 0; k < K; k++) {
                long double s = 0;
                for (int j = 0; j < N; j++) s += (long double)G[(bi * M + i) * N + j] * B[k * N + j];
                worst = fmax(worst, fabs(sg_tensor_get(ga, (bi * M + i) * K + k) - (double)s));
            }
    for (int k = 0; gb && k < K; k++)
        for (int j = 0; j < N; j++) {
            long double s = 0;
            for (int bi = 0; bi < Bn; bi++)
                for (int i = 0; i < M; i++) s += (long double)A[(bi * M + i) * K + k] * G[(bi * M + i) * N + j];
            worst = fmax(worst, fabs(sg_tensor_get(gb, k * N + j) - (double)s));
        }
    CHECK(worst < 1e-11);
    sg_tape_reset(ctx);

    sg_tensor *e = sg_matmul(P64(ctx, -1, 1, 0, 2, 3), P64(ctx, -1, 1, 3, 4));
    CHECK(e && sg_tensor_ndim(e) == 3 && sg_tensor_dim(e, 0) == 0 && sg_tensor_dim(e, 2) == 4);
    sg_tensor *k0 = sg_matmul(P64(ctx, -1, 1, 2, 2, 0), P64(ctx, -1, 1, 0, 3)); /* zeros */
    CHECK(k0 && sg_tensor_numel(k0) == 12);
    for (int i = 0; k0 && i < 12; i++) CHECK(sg_tensor_get(k0, i) == 0);
    sg_ctx_free(ctx);
}

/* Large backward (the blocked, transposed paths) against naive products:
 * loss = sum(G * (A @ B)) gives dA = G @ B^T and dB = A^T @ G. */
TEST(values_matmul_backward_against_naive_loop)
{
    sg_ctx *ctx = new_ctx(0);
    const int M = 33, K = 150, N = 260;
    sg_tensor *a = P64(ctx, -1, 1, M, K), *b = P64(ctx, -1, 1, K, N), *g = P64(ctx, -1, 1, M, N);
    sg_tensor_requires_grad(g, 0);
    CHECK_STATUS(ctx, sg_backward(sg_sum(sg_mul(g, sg_matmul(a, b)))), SG_OK);
    const double *A = sg_tensor_f64(a), *B = sg_tensor_f64(b), *G = sg_tensor_f64(g);
    sg_tensor *ga = sg_tensor_grad(a), *gb = sg_tensor_grad(b);
    CHECK(ga && gb);
    double worst = 0;
    for (int i = 0; ga && i < M; i++)
        for (int k = 0; k < K; k++) {
            double s = 0;
            for (int j = 0; j < N; j++) s += G[i * N + j] * B[k * N + j];
            worst = fmax(worst, fabs(sg_tensor_get(ga, i * K + k) - s));
        }
    for (int k = 0; gb && k < K; k++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int i = 0; i < M; i++) s += A[i * K + k] * G[i * N + j];
            worst = fmax(worst, fabs(sg_tensor_get(gb, k * N + j) - s));
        }
    CHECK(worst < 1e-11);
    sg_ctx_free(ctx);
}

TEST(values_reductions_against_naive_sums)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *x = P64(ctx, -1, 1, 3, 4, 5);
    const double *X = sg_tensor_f64(x);
    double all = 0;
    for (int i = 0; i < 60; i++) all += X[i];
    sg_tensor *s = sg_sum(x), *m = sg_mean(x);
    CHECK(s && sg_tensor_ndim(s) == 0 && m && sg_tensor_ndim(m) == 0);
    CHECK_NEAR(sg_tensor_get(s, 0), all, 1e-12);
    CHECK_NEAR(sg_tensor_get(m, 0), all / 60, 1e-12);
    const int dims[3] = {3, 4, 5};
    for (int dim = 0; dim < 3; dim++)
        for (int keep = 0; keep < 2; keep++) {
            sg_tensor *r = sg_sum_dim(x, dim, keep), *rm = sg_mean_dim(x, dim - 3, keep);
            CHECK(r && sg_tensor_ndim(r) == (keep ? 3 : 2) && rm);
            if (!r || !rm) continue;
            CHECK(!keep || sg_tensor_dim(r, dim) == 1);
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 4; j++)
                    for (int k = 0; k < 5; k++) {
                        int idx[3] = {i, j, k};
                        if (idx[dim]) continue; /* one output per reduced line */
                        double acc = 0;
                        for (int t = 0; t < dims[dim]; t++) {
                            idx[dim] = t;
                            acc += X[(idx[0] * 4 + idx[1]) * 5 + idx[2]];
                        }
                        idx[dim] = 0;
                        int64_t o = dim == 0 ? j * 5 + k : dim == 1 ? i * 5 + k : i * 4 + j;
                        CHECK_NEAR(sg_tensor_get(r, o), acc, 1e-12);
                        CHECK_NEAR(sg_tensor_get(rm, o), acc / dims[dim], 1e-12);
                    }
        }
    /* every length up to three lane groups (the tail of a chunk) */
    for (int64_t len = 1; len <= 25; len++) {
        sg_tensor *v = P64(ctx, -1, 1, len);
        double acc = 0;
        for (int64_t i = 0; i < len; i++) acc += sg_tensor_f64(v)[i];
        CHECK_NEAR(sg_tensor_get(sg_sum(v), 0), acc, 1e-13);
    }
    /* a long f32 sum: chunked in double, close to the exact value */
    sg_tensor *big = P32(ctx, 0, 1, 100003);
    double exact = 0;
    for (int i = 0; i < 100003; i++) exact += sg_tensor_f32(big)[i];
    CHECK_NEAR(sg_tensor_get(sg_sum(big), 0), exact, 1e-2);
    sg_ctx_free(ctx);
}

TEST(values_unary_against_libm)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *x = P64(ctx, -5, 5, 50), *p = P64(ctx, 0.01, 10, 50);
    const double *X = sg_tensor_f64(x), *Pv = sg_tensor_f64(p);
    sg_tensor *r = sg_relu(x), *s = sg_sigmoid(x), *t = sg_tanh(x), *e = sg_exp(x);
    sg_tensor *l = sg_log(p), *ls = sg_log_sigmoid(x);
    CHECK(r && s && t && e && l && ls);
    for (int i = 0; r && s && t && e && l && ls && i < 50; i++) {
        CHECK(sg_tensor_get(r, i) == (X[i] > 0 ? X[i] : 0));
        CHECK_NEAR(sg_tensor_get(s, i), 1 / (1 + exp(-X[i])), 1e-15);
        CHECK_NEAR(sg_tensor_get(t, i), tanh(X[i]), 1e-15);
        CHECK_NEAR(sg_tensor_get(e, i), exp(X[i]), 1e-13 * exp(X[i]));
        CHECK_NEAR(sg_tensor_get(l, i), log(Pv[i]), 1e-15);
        CHECK_NEAR(sg_tensor_get(ls, i), log(1 / (1 + exp(-X[i]))), 1e-13);
    }
    sg_tensor *x32 = P32(ctx, -3, 3, 7);
    sg_tensor *s32 = sg_sigmoid(x32);
    for (int i = 0; s32 && i < 7; i++)
        CHECK_NEAR(sg_tensor_f32(s32)[i], 1 / (1 + exp(-(double)sg_tensor_f32(x32)[i])), 1e-6);
    CHECK(s32 && sg_tensor_dtype(s32) == SG_F32);
    sg_ctx_free(ctx);
}

TEST(values_softmax_against_naive)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *x = P64(ctx, -3, 3, 3, 4);
    const double *X = sg_tensor_f64(x);
    for (int dim = 0; dim < 2; dim++) {
        sg_tensor *y = sg_softmax(x, dim), *ly = sg_log_softmax(x, dim);
        CHECK(y && ly);
        for (int i = 0; y && ly && i < 3; i++)
            for (int j = 0; j < 4; j++) {
                double z = 0;
                if (dim == 1) for (int k = 0; k < 4; k++) z += exp(X[i * 4 + k]);
                else for (int k = 0; k < 3; k++) z += exp(X[k * 4 + j]);
                CHECK_NEAR(sg_tensor_get(y, i * 4 + j), exp(X[i * 4 + j]) / z, 1e-15);
                CHECK_NEAR(sg_tensor_get(ly, i * 4 + j), X[i * 4 + j] - log(z), 1e-14);
            }
    }
    /* huge logits: softmax(1000 + v) == softmax(v) */
    double big[3] = {1000, 1001, 1002}, z = exp(0.0) + exp(1.0) + exp(2.0);
    sg_tensor *b = sg_tensor_from_data(ctx, SG_F64, 1, (int64_t[]){3}, big);
    sg_tensor *sb = sg_softmax(b, 0), *lb = sg_log_softmax(b, -1);
    for (int i = 0; sb && lb && i < 3; i++) {
        CHECK_NEAR(sg_tensor_get(sb, i), exp((double)i) / z, 1e-15);
        CHECK_NEAR(sg_tensor_get(lb, i), i - log(z), 1e-12);
    }
    CHECK(sb && lb);
    sg_ctx_free(ctx);
}

TEST(values_losses_against_naive)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *x = P64(ctx, -3, 3, 4, 5);
    const int64_t tv[4] = {1, 4, 0, 1};
    sg_tensor *t = targets(ctx, SG_I32, 4, tv);
    const double *X = sg_tensor_f64(x);
    double ref = 0;
    for (int i = 0; i < 4; i++) {
        double z = 0;
        for (int c = 0; c < 5; c++) z += exp(X[i * 5 + c]);
        ref += -log(exp(X[i * 5 + tv[i]]) / z);
    }
    sg_tensor *ce = sg_cross_entropy(x, t);
    CHECK(ce && sg_tensor_ndim(ce) == 0);
    CHECK_NEAR(sg_tensor_get(ce, 0), ref / 4, 1e-14);

    sg_tensor *l = P64(ctx, -4, 4, 2, 3), *y = P64(ctx, 0, 1, 2, 3);
    ref = 0;
    for (int i = 0; i < 6; i++) {
        double p = 1 / (1 + exp(-sg_tensor_f64(l)[i])), tt = sg_tensor_f64(y)[i];
        ref += -(tt * log(p) + (1 - tt) * log(1 - p));
    }
    sg_tensor *b = sg_bce_with_logits(l, y);
    CHECK(b && sg_tensor_ndim(b) == 0);
    CHECK_NEAR(sg_tensor_get(b, 0), ref / 6, 1e-13);
    sg_ctx_free(ctx);
}

TEST(stable_at_extreme_inputs)
{
    sg_ctx *ctx = new_ctx(0);
    double v[4] = {-1000, 1000, -30, 30};
    sg_tensor *x = sg_tensor_requires_grad(sg_tensor_from_data(ctx, SG_F64, 1, (int64_t[]){4}, v), 1);
    sg_tensor *ls = sg_log_sigmoid(x);
    CHECK(ls);
    CHECK(ls && sg_tensor_get(ls, 0) == -1000);
    CHECK(ls && sg_tensor_get(ls, 1) == 0);
    CHECK_NEAR(sg_tensor_get(ls, 2), -30 - log1p(exp(-30.0)), 1e-12);
    CHECK_NEAR(sg_tensor_get(ls, 3), -log1p(exp(-30.0)), 1e-25);
    CHECK_STATUS(ctx, sg_backward(sg_sum(ls)), SG_OK);
    sg_tensor *g = sg_tensor_grad(x); /* d/dx log sigmoid = sigmoid(-x) */
    CHECK(g && sg_tensor_get(g, 0) == 1 && sg_tensor_get(g, 1) == 0);
    CHECK_NEAR(sg_tensor_get(g, 3), exp(-30.0) / (1 + exp(-30.0)), 1e-25);
    sg_tape_reset(ctx);

    sg_tensor *s = sg_sigmoid(x);
    CHECK(s && sg_tensor_get(s, 0) == 0 && sg_tensor_get(s, 1) == 1);

    /* BCE at |x| = 1000: per-element losses 0, 1000, 1000, 0 */
    double tv[4] = {0, 0, 1, 1}, lv[4] = {-1000, 1000, -1000, 1000};
    sg_tensor *lg = sg_tensor_requires_grad(sg_tensor_from_data(ctx, SG_F64, 1, (int64_t[]){4}, lv), 1);
    sg_tensor *tg = sg_tensor_from_data(ctx, SG_F64, 1, (int64_t[]){4}, tv);
    sg_tensor *bce = sg_bce_with_logits(lg, tg);
    CHECK(bce && isfinite(sg_tensor_get(bce, 0)));
    CHECK_NEAR(sg_tensor_get(bce, 0), 500, 1e-12);
    CHECK_STATUS(ctx, sg_backward(bce), SG_OK);
    g = sg_tensor_grad(lg); /* (sigmoid(x) - t) / 4 */
    const double want[4] = {0, 0.25, -0.25, 0};
    for (int i = 0; g && i < 4; i++) CHECK_NEAR(sg_tensor_get(g, i), want[i], 1e-15);
    CHECK(g != NULL);
    sg_tape_reset(ctx);

    /* cross-entropy with a logit of 1000: finite, log-sum-exp exact */
    double cv[3] = {1000, 0, -1000};
    sg_tensor *c = sg_tensor_from_data(ctx, SG_F64, 2, (int64_t[]){1, 3}, cv);
    sg_tensor *ce1 = sg_cross_entropy(c, targets(ctx, SG_I64, 1, (int64_t[]){0}));
    sg_tensor *ce2 = sg_cross_entropy(c, targets(ctx, SG_I64, 1, (int64_t[]){1}));
    CHECK(ce1 && sg_tensor_get(ce1, 0) == 0);
    CHECK(ce2 && sg_tensor_get(ce2, 0) == 1000);
    sg_ctx_free(ctx);
}

TEST(values_rowdot_reshape_transpose_concat)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *a = P64(ctx, -1, 1, 4, 3), *b = P64(ctx, -1, 1, 4, 3);
    sg_tensor *r = sg_rowdot(a, b);
    CHECK(r && sg_tensor_ndim(r) == 1 && sg_tensor_dim(r, 0) == 4);
    for (int i = 0; r && i < 4; i++) {
        double s = 0;
        for (int d = 0; d < 3; d++) s += sg_tensor_f64(a)[i * 3 + d] * sg_tensor_f64(b)[i * 3 + d];
        CHECK_NEAR(sg_tensor_get(r, i), s, 1e-15);
    }

    sg_tensor *v = sg_reshape(a, 3, (int64_t[]){2, -1, 3});
    CHECK(v && sg_tensor_ndim(v) == 3 && sg_tensor_dim(v, 1) == 2);
    CHECK(v && sg_tensor_data(v) == sg_tensor_data(a)); /* a view */
    sg_tensor *s0 = sg_reshape(sg_sum(a), 1, (int64_t[]){-1});
    CHECK(s0 && sg_tensor_ndim(s0) == 1 && sg_tensor_dim(s0, 0) == 1);

    sg_tensor *x = P64(ctx, -1, 1, 2, 3, 4);
    sg_tensor *t = sg_transpose(x, 0, 2);
    CHECK(t && sg_tensor_dim(t, 0) == 4 && sg_tensor_dim(t, 1) == 3 && sg_tensor_dim(t, 2) == 2);
    for (int i = 0; t && i < 4; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++)
                CHECK(sg_tensor_get(t, (i * 3 + j) * 2 + k) == sg_tensor_f64(x)[(k * 3 + j) * 4 + i]);
    sg_tensor *x2 = P32(ctx, -1, 1, 70, 45);
    sg_tensor *t2 = sg_transpose(x2, -1, -2);
    for (int i = 0; t2 && i < 45; i++)
        for (int j = 0; j < 70; j++) CHECK(sg_tensor_f32(t2)[i * 70 + j] == sg_tensor_f32(x2)[j * 45 + i]);
    CHECK(t2 != NULL);

    sg_tensor *c = sg_concat(3, (sg_tensor *[]){a, b, a});
    CHECK(c && sg_tensor_dim(c, 0) == 12 && sg_tensor_dim(c, 1) == 3);
    for (int i = 0; c && i < 12; i++)
        for (int d = 0; d < 3; d++)
            CHECK(sg_tensor_get(c, i * 3 + d) == sg_tensor_f64(i / 4 == 1 ? b : a)[(i % 4) * 3 + d]);
    /* integer tensors move too */
    sg_tensor *i1 = targets(ctx, SG_I64, 2, (int64_t[]){5, 6}), *i2 = targets(ctx, SG_I64, 1, (int64_t[]){7});
    sg_tensor *ic = sg_concat(2, (sg_tensor *[]){i1, i2});
    CHECK(ic && sg_tensor_dtype(ic) == SG_I64 && sg_tensor_get(ic, 2) == 7 && sg_tensor_get(ic, 0) == 5);
    sg_ctx_free(ctx);
}

/* f32 backward paths agree with f64 on a small network (both dtypes share every kernel). */
static sg_tensor *net(sg_tensor *x, sg_tensor *w, sg_tensor *b, sg_tensor *y)
{
    sg_tensor *h = sg_tanh(sg_add(sg_matmul(x, w), b));
    sg_tensor *z = sg_sub(sg_mul(sg_sigmoid(h), sg_exp(sg_scale(h, 0.5))), sg_log_sigmoid(h));
    sg_tensor *zz = sg_div(sg_transpose(sg_softmax(z, 0), 0, 1),
                           sg_exp(sg_scale(sg_relu(sg_transpose(h, 0, 1)), 0.3)));
    sg_tensor *q = sg_add(sg_log_softmax(sg_reshape(zz, 2, (int64_t[]){6, -1}), 1), sg_mean_dim(z, 0, 1));
    sg_tensor *r = sg_rowdot(sg_concat(2, (sg_tensor *[]){h, h}), sg_concat(2, (sg_tensor *[]){z, z}));
    return sg_add(sg_add(sg_cross_entropy(q, y), sg_mean(sg_sum_dim(q, 1, 0))), sg_sum(r));
}

TEST(f32_backward_matches_f64)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *p64[3] = {P64(ctx, -1, 1, 6, 5), P64(ctx, -1, 1, 5, 6), P64(ctx, -1, 1, 6)};
    sg_tensor *p32[3];
    for (int k = 0; k < 3; k++) {
        p32[k] = sg_tensor_new(ctx, SG_F32, sg_tensor_ndim(p64[k]), sg_tensor_shape(p64[k]));
        sg_tensor_copy(p32[k], p64[k]);
        sg_tensor_requires_grad(p32[k], 1);
    }
    sg_tensor *y = targets(ctx, SG_I64, 6, (int64_t[]){0, 5, 2, 3, 1, 4});
    sg_tensor *l64 = net(p64[0], p64[1], p64[2], y), *l32 = net(p32[0], p32[1], p32[2], y);
    CHECK(l64 && l32 && sg_tensor_dtype(l32) == SG_F32);
    CHECK_NEAR(sg_tensor_get(l32, 0), sg_tensor_get(l64, 0), 1e-4 * fabs(sg_tensor_get(l64, 0)) + 1e-4);
    CHECK_STATUS(ctx, sg_backward(l64), SG_OK);
    CHECK_STATUS(ctx, sg_backward(l32), SG_OK);
    for (int k = 0; k < 3; k++) {
        sg_tensor *g64 = sg_tensor_grad(p64[k]), *g32 = sg_tensor_grad(p32[k]);
        CHECK(g64 && g32);
        for (int64_t i = 0; g64 && g32 && i < sg_tensor_numel(g64); i++)
            CHECK_NEAR(sg_tensor_get(g32, i), sg_tensor_get(g64, i), 1e-3 * fabs(sg_tensor_get(g64, i)) + 1e-3);
    }
    sg_ctx_free(ctx);
}

static sg_tensor *net_fn(sg_ctx *ctx, sg_tensor *const *in, void *ud)
{
    (void)ctx;
    return net(in[0], in[1], in[2], ud);
}

TEST(grad_composite_network)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *in[3] = {P64(ctx, -1, 1, 6, 5), P64(ctx, -1, 1, 5, 6), P64(ctx, -1, 1, 6)};
    sg_tensor *y = targets(ctx, SG_I64, 6, (int64_t[]){0, 5, 2, 3, 1, 4});
    CHECK_STATUS(ctx, sg_gradcheck(ctx, net_fn, y, 3, in, NULL, NULL), SG_OK);
    sg_ctx_free(ctx);
}

/* ---------------------------------------------------------------- determinism */

/* Runs a few parallel kernels, forward and backward, and returns the bytes they produce. */
static size_t run_kernels(int threads, unsigned char *out, size_t cap)
{
    sg_ctx *ctx = new_ctx(threads);
    sg_tensor *a = P32(ctx, -1, 1, 2, 48, 200), *b = P32(ctx, -1, 1, 200, 150); /* b shared */
    sg_tensor *big = P32(ctx, -1, 1, 300, 400);
    sg_tensor *outs[8];
    outs[0] = sg_matmul(a, b);
    outs[1] = sg_sum(big);
    outs[2] = sg_sum_dim(big, 0, 0);
    outs[3] = sg_softmax(big, 0);
    outs[4] = sg_mul(big, sg_sum_dim(big, 1, 1));
    sg_backward(sg_add(sg_sum(sg_mul(outs[0], outs[0])), sg_mean(sg_log_softmax(outs[4], 0))));
    outs[5] = sg_tensor_grad(a);
    outs[6] = sg_tensor_grad(b);
    outs[7] = sg_tensor_grad(big);
    size_t n = 0;
    for (int k = 0; k < 8; k++) {
        if (!outs[k]) continue;
        size_t bytes = (size_t)sg_tensor_numel(outs[k]) * sizeof(float);
        if (n + bytes <= cap) memcpy(out + n, sg_tensor_data(outs[k]), bytes);
        n += bytes;
    }
    sg_ctx_free(ctx);
    return n;
}

TEST(bitwise_identical_for_any_thread_count)
{
    const size_t cap = 4u << 20;
    unsigned char *r1 = malloc(cap), *r3 = malloc(cap);
    size_t n1 = run_kernels(1, r1, cap), n3 = run_kernels(3, r3, cap);
    CHECK(n1 == n3 && n1 <= cap && n1 > 4 * 300 * 400);
    CHECK(n1 == n3 && memcmp(r1, r3, n1 < cap ? n1 : cap) == 0);
    free(r1);
    free(r3);
}

/* ---------------------------------------------------------------- COO operands */

TEST(coo_operands_dispatch_to_the_sparse_paths)
{
    sg_ctx *ctx = new_ctx(0);
    const int64_t idx[2 * 4] = {0, 2, 2, 1, /* rows */ 1, 3, 3, 0 /* cols */};
    const double val[4] = {1.5, -2, 0.25, 3};
    sg_tensor *s = sg_coo_new(ctx, SG_F64, 2, (int64_t[]){3, 4}, 2, 4, idx, val);
    CHECK(s != NULL);
    if (!s) {
        sg_ctx_free(ctx);
        return;
    }
    double dense[12] = {0};
    for (int e = 0; e < 4; e++) dense[idx[e] * 4 + idx[4 + e]] += val[e];

    sg_tensor *sum = sg_add(s, s);
    CHECK(sum && sg_tensor_layout(sum) == SG_COO);
    for (int i = 0; sum && i < 12; i++) CHECK_NEAR(sg_tensor_get(sum, i), 2 * dense[i], 1e-15);
    sg_tensor *sc = sg_scale(s, -3);
    CHECK(sc && sg_tensor_layout(sc) == SG_COO);
    for (int i = 0; sc && i < 12; i++) CHECK_NEAR(sg_tensor_get(sc, i), -3 * dense[i], 1e-15);
    sg_tensor *tr = sg_transpose(s, 0, 1);
    CHECK(tr && sg_tensor_dim(tr, 0) == 4 && sg_tensor_dim(tr, 1) == 3);
    for (int i = 0; tr && i < 4; i++)
        for (int j = 0; j < 3; j++) CHECK_NEAR(sg_tensor_get(tr, i * 3 + j), dense[j * 4 + i], 1e-15);
    sg_tensor *w = P64(ctx, -1, 1, 4, 2);
    sg_tensor *mm = sg_matmul(s, w);
    CHECK(mm && sg_tensor_layout(mm) == SG_DENSE && sg_tensor_dim(mm, 0) == 3);
    double ref[6];
    naive_mm(dense, sg_tensor_f64(w), ref, 3, 4, 2);
    for (int i = 0; mm && i < 6; i++) CHECK_NEAR(sg_tensor_get(mm, i), ref[i], 1e-14);
    sg_tensor *tot = sg_sum(s);
    CHECK(tot && sg_tensor_numel(tot) == 1);
    CHECK_NEAR(sg_tensor_get(tot, 0), 1.5 - 2 + 0.25 + 3, 1e-15);

    /* anywhere else a COO operand is a layout error */
    sg_tensor *d = P64(ctx, -1, 1, 3, 4);
    sg_tensor *bad[] = {sg_sub(d, s), sg_sub(s, d), sg_mul(s, s), sg_relu(s), sg_mean(s),
                        sg_matmul(w, s), sg_softmax(s, 0), sg_reshape(s, 1, (int64_t[]){12}),
                        sg_sum_dim(s, 0, 0), sg_concat(2, (sg_tensor *[]){d, s})};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) CHECK(bad[k] == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_LAYOUT);
    sg_ctx_free(ctx);
}

/* ---------------------------------------------------------------- errors */

/* expr must fail with `code`, name `op` in the message and record no node. */
#define EXPECT_FAIL(ctx, expr, code, op)                                         \
    do {                                                                         \
        int64_t nodes_ = sg_tape_nodes(ctx);                                     \
        sg_ctx_clear_error(ctx);                                                 \
        sg_tensor *r_ = (expr);                                                  \
        CHECK(r_ == NULL);                                                       \
        CHECK_STATUS(ctx, sg_ctx_status(ctx), code);                             \
        if (!strstr(sg_ctx_message(ctx), op)) {                                  \
            fprintf(stderr, "  line %d: message '%s' does not name %s\n", __LINE__, \
                    sg_ctx_message(ctx), op);                                    \
            tu_failures++;                                                       \
        }                                                                        \
        CHECK(sg_tape_nodes(ctx) == nodes_);                                     \
    } while (0)

TEST(errors_shape_dtype_dim)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *a = P64(ctx, -1, 1, 2, 3), *b = P64(ctx, -1, 1, 4), *c = P64(ctx, -1, 1, 2, 3, 4);
    sg_tensor *f = P32(ctx, -1, 1, 2, 3);
    sg_tensor *i = targets(ctx, SG_I64, 2, (int64_t[]){0, 1});
    EXPECT_FAIL(ctx, sg_add(a, b), SG_ERR_SHAPE, "sg_add");
    EXPECT_FAIL(ctx, sg_div(b, a), SG_ERR_SHAPE, "(2,3)");
    EXPECT_FAIL(ctx, sg_mul(a, P64(ctx, -1, 1, 3, 3)), SG_ERR_SHAPE, "sg_mul");
    EXPECT_FAIL(ctx, sg_sub(a, f), SG_ERR_DTYPE, "sg_sub");
    EXPECT_FAIL(ctx, sg_relu(i), SG_ERR_DTYPE, "sg_relu");
    EXPECT_FAIL(ctx, sg_matmul(a, a), SG_ERR_SHAPE, "sg_matmul");
    EXPECT_FAIL(ctx, sg_matmul(c, a), SG_ERR_SHAPE, "sg_matmul");
    EXPECT_FAIL(ctx, sg_matmul(c, P64(ctx, -1, 1, 3, 4, 2)), SG_ERR_SHAPE, "sg_matmul");
    EXPECT_FAIL(ctx, sg_matmul(c, P64(ctx, -1, 1, 3, 2)), SG_ERR_SHAPE, "(K,N)"); /* K 4 vs 3 */
    EXPECT_FAIL(ctx, sg_matmul(P64(ctx, -1, 1, 2, 4), c), SG_ERR_SHAPE, "sg_matmul"); /* 2-D @ 3-D */
    EXPECT_FAIL(ctx, sg_matmul(c, b), SG_ERR_SHAPE, "sg_matmul");                      /* 1-D */
    EXPECT_FAIL(ctx, sg_matmul(P64(ctx, -1, 1, 1, 2, 3, 4), P64(ctx, -1, 1, 4, 2)), SG_ERR_SHAPE, "sg_matmul");
    EXPECT_FAIL(ctx, sg_matmul(a, f), SG_ERR_DTYPE, "sg_matmul");
    EXPECT_FAIL(ctx, sg_rowdot(a, P64(ctx, -1, 1, 2, 4)), SG_ERR_SHAPE, "sg_rowdot");
    EXPECT_FAIL(ctx, sg_rowdot(c, c), SG_ERR_SHAPE, "sg_rowdot");
    EXPECT_FAIL(ctx, sg_bce_with_logits(a, P64(ctx, 0, 1, 3, 2)), SG_ERR_SHAPE, "sg_bce_with_logits");
    EXPECT_FAIL(ctx, sg_sum_dim(a, 2, 0), SG_ERR_ARG, "sg_sum_dim");
    EXPECT_FAIL(ctx, sg_mean_dim(a, -3, 1), SG_ERR_ARG, "sg_mean_dim");
    EXPECT_FAIL(ctx, sg_softmax(a, 2), SG_ERR_ARG, "sg_softmax");
    EXPECT_FAIL(ctx, sg_log_softmax(scalar64(ctx, 1), 0), SG_ERR_ARG, "sg_log_softmax");
    EXPECT_FAIL(ctx, sg_transpose(a, 0, 5), SG_ERR_ARG, "sg_transpose");
    EXPECT_FAIL(ctx, sg_reshape(a, 2, (int64_t[]){4, 2}), SG_ERR_SHAPE, "sg_reshape");
    EXPECT_FAIL(ctx, sg_reshape(a, 2, (int64_t[]){-1, -1}), SG_ERR_ARG, "sg_reshape");
    EXPECT_FAIL(ctx, sg_reshape(a, 2, (int64_t[]){4, -1}), SG_ERR_SHAPE, "sg_reshape");
    EXPECT_FAIL(ctx, sg_reshape(a, 5, (int64_t[]){1, 1, 1, 2, 3}), SG_ERR_ARG, "sg_reshape");
    EXPECT_FAIL(ctx, sg_concat(2, (sg_tensor *[]){a, c}), SG_ERR_SHAPE, "sg_concat");
    EXPECT_FAIL(ctx, sg_concat(2, (sg_tensor *[]){a, P64(ctx, -1, 1, 2, 4)}), SG_ERR_SHAPE, "sg_concat");
    EXPECT_FAIL(ctx, sg_concat(2, (sg_tensor *[]){a, f}), SG_ERR_DTYPE, "sg_concat");
    EXPECT_FAIL(ctx, sg_concat(2, (sg_tensor *[]){scalar64(ctx, 1), scalar64(ctx, 2)}), SG_ERR_SHAPE, "sg_concat");

    /* operands from two contexts */
    sg_ctx *other = new_ctx(0);
    EXPECT_FAIL(ctx, sg_add(a, P64(other, -1, 1, 2, 3)), SG_ERR_ARG, "sg_add");
    sg_ctx_free(other);
    sg_ctx_free(ctx);
}

TEST(errors_cross_entropy_targets_checked_first)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *x = P64(ctx, -1, 1, 3, 4);
    EXPECT_FAIL(ctx, sg_cross_entropy(x, targets(ctx, SG_I64, 3, (int64_t[]){0, 4, 1})), SG_ERR_INDEX,
                "sg_cross_entropy");
    EXPECT_FAIL(ctx, sg_cross_entropy(x, targets(ctx, SG_I32, 3, (int64_t[]){0, 1, -1})), SG_ERR_INDEX,
                "targets[2]");
    EXPECT_FAIL(ctx, sg_cross_entropy(x, targets(ctx, SG_I64, 2, (int64_t[]){0, 1})), SG_ERR_SHAPE,
                "sg_cross_entropy");
    EXPECT_FAIL(ctx, sg_cross_entropy(x, P64(ctx, 0, 3, 3)), SG_ERR_DTYPE, "sg_cross_entropy");
    EXPECT_FAIL(ctx, sg_cross_entropy(P64(ctx, -1, 1, 3), targets(ctx, SG_I64, 3, (int64_t[]){0, 0, 0})),
                SG_ERR_SHAPE, "sg_cross_entropy");
    /* nothing was written: the arena did not grow past the targets built above */
    sg_tensor *t = targets(ctx, SG_I64, 3, (int64_t[]){0, 9, 1});
    sg_mem_stats m0 = sg_ctx_mem_stats(ctx);
    sg_tensor *r = sg_cross_entropy(x, t);
    sg_mem_stats m1 = sg_ctx_mem_stats(ctx);
    CHECK(r == NULL && m0.bytes_in_use == m1.bytes_in_use && m0.arena_bytes == m1.arena_bytes);
    sg_ctx_free(ctx);
}

TEST(errors_null_inputs_propagate)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *a = P64(ctx, -1, 1, 2, 3);
    sg_tensor *r[] = {sg_add(NULL, a), sg_sub(a, NULL), sg_mul(NULL, NULL), sg_div(a, NULL),
                      sg_scale(NULL, 2), sg_matmul(NULL, a), sg_sum(NULL), sg_mean(NULL),
                      sg_sum_dim(NULL, 0, 0), sg_mean_dim(NULL, 0, 1), sg_relu(NULL),
                      sg_sigmoid(NULL), sg_tanh(NULL), sg_exp(NULL), sg_log(NULL),
                      sg_log_sigmoid(NULL), sg_softmax(NULL, 0), sg_log_softmax(NULL, 0),
                      sg_cross_entropy(a, NULL), sg_bce_with_logits(NULL, a), sg_rowdot(a, NULL),
                      sg_reshape(NULL, 1, (int64_t[]){6}), sg_transpose(NULL, 0, 1),
                      sg_concat(2, (sg_tensor *[]){a, NULL}), sg_concat(0, NULL),
                      sg_relu(sg_add(a, sg_exp(NULL)))};
    for (size_t k = 0; k < sizeof r / sizeof r[0]; k++) CHECK(r[k] == NULL);
    /* a NULL input is not a new error: the chain reports the first failure */
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_OK);
    CHECK(sg_tape_nodes(ctx) == 0);
    sg_tensor *chain = sg_sum(sg_relu(sg_add(a, P64(ctx, -1, 1, 5))));
    CHECK(chain == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_SHAPE);
    sg_ctx_free(ctx);
}

TEST(no_nodes_without_grad)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *a = P64(ctx, -1, 1, 2, 3);
    sg_tensor_requires_grad(a, 0);
    CHECK(sg_sum(sg_relu(sg_matmul(a, sg_transpose(a, 0, 1)))) != NULL);
    CHECK(sg_tape_nodes(ctx) == 0);
    sg_tensor_requires_grad(a, 1);
    int prev = sg_set_grad_enabled(ctx, 0);
    CHECK(sg_softmax(sg_mul(a, a), 1) != NULL);
    CHECK(sg_tape_nodes(ctx) == 0);
    sg_set_grad_enabled(ctx, prev);
    CHECK(sg_mul(a, a) != NULL && sg_tape_nodes(ctx) == 1);
    sg_ctx_free(ctx);
}

/* Broadcasting into an empty output: each operand's gradient keeps its own shape. */
TEST(broadcast_backward_with_an_empty_output)
{
    sg_ctx *ctx = new_ctx(1);
    sg_tensor *a = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){0, 1}), 1);
    sg_tensor *b = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){1, 5}), 1);
    sg_tensor *y = sg_sum(sg_add(a, b));
    CHECK(y != NULL);
    CHECK_STATUS(ctx, sg_backward(y), SG_OK);
    sg_tensor *ga = sg_tensor_grad(a), *gb = sg_tensor_grad(b);
    CHECK(ga && sg_tensor_ndim(ga) == 2 && sg_tensor_dim(ga, 0) == 0 && sg_tensor_dim(ga, 1) == 1);
    CHECK(gb && sg_tensor_dim(gb, 0) == 1 && sg_tensor_dim(gb, 1) == 5);
    for (int i = 0; gb && i < 5; i++) CHECK(sg_tensor_get(gb, i) == 0.0);
    sg_ctx_free(ctx);
}

/* COO + dense means the dense sum (its gradients: test_gradcheck_ops.c). */
TEST(add_coo_and_dense)
{
    sg_ctx *ctx = new_ctx(1);
    sg_tensor *s = sg_coo_new(ctx, SG_F64, 2, (int64_t[]){2, 3}, 2, 2, (int64_t[]){0, 1, 2, 0},
                              (double[]){5, 7});
    sg_tensor *d = sg_tensor_from_data(ctx, SG_F64, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
    sg_tensor_requires_grad(s, 1);
    sg_tensor_requires_grad(d, 1);
    for (int order = 0; order < 2; order++) {
        sg_tensor *y = order ? sg_add(d, s) : sg_add(s, d);
        CHECK(y && sg_tensor_layout(y) == SG_DENSE);
        double want[6] = {1, 2, 3 + 5, 4 + 7, 5, 6};
        for (int i = 0; y && i < 6; i++) CHECK_NEAR(sg_tensor_get(y, i), want[i], 0);
        sg_tape_reset(ctx);
    }
    sg_ctx_free(ctx);
}

/* ---------------------------------------------------------------- abs, sqrt, sin, cos, pow,
 * clamp, maximum, minimum, where */

static sg_tensor *vec64(sg_ctx *ctx, int n, const double *v)
{
    return sg_tensor_requires_grad(sg_tensor_from_data(ctx, SG_F64, 1, (int64_t[]){n}, v), 1);
}

/* Every element of t (n of them) equals want[i] bitwise as a double (NaN matches NaN). */
static void check_values(int line, sg_tensor *t, int n, const double *want)
{
    if (!t || sg_tensor_numel(t) != n) {
        fprintf(stderr, "  line %d: no tensor of %d elements\n", line, n);
        tu_failures++;
        return;
    }
    for (int i = 0; i < n; i++) {
        double v = sg_tensor_get(t, i);
        if (v == want[i] || (isnan(v) && isnan(want[i]))) continue;
        fprintf(stderr, "  line %d: [%d] = %.17g, want %.17g\n", line, i, v, want[i]);
        tu_failures++;
    }
}
#define CHECK_VALUES(t, ...)                                                     \
    check_values(__LINE__, t, (int)(sizeof((double[]){__VA_ARGS__}) / sizeof(double)), \
                 (double[]){__VA_ARGS__})

TEST(values_abs_sqrt_sin_cos_pow_clamp_against_libm)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *x = P64(ctx, -5, 5, 50), *p = P64(ctx, 0.01, 10, 50);
    const double *X = sg_tensor_f64(x), *Pv = sg_tensor_f64(p);
    sg_tensor *ab = sg_abs(x), *sq = sg_sqrt(p), *si = sg_sin(x), *co = sg_cos(x);
    CHECK(ab && sq && si && co);
    for (int i = 0; ab && sq && si && co && i < 50; i++) {
        CHECK(sg_tensor_get(ab, i) == fabs(X[i]));
        CHECK(sg_tensor_get(sq, i) == sqrt(Pv[i]));
        CHECK(sg_tensor_get(si, i) == sin(X[i]));
        CHECK(sg_tensor_get(co, i) == cos(X[i]));
    }
    const double e[8] = {2, 3, 0.5, -1, -1.5, 0, 1, 2.5};
    for (int k = 0; k < 8; k++) {
        volatile double ek = e[k]; /* no pow(x, 2) -> x * x rewrite here: libm's pow */
        /* exponents 3 and 1.5 are products (and a sqrt): within a few ulps of pow */
        const double tol = e[k] == 3 || e[k] == 1.5 ? 4e-16 : 0;
        sg_tensor *pp = sg_pow(p, ek), *px = sg_pow(x, ek);
        CHECK(pp && px);
        for (int i = 0; pp && px && i < 50; i++) {
            CHECK(fabs(sg_tensor_get(pp, i) - pow(Pv[i], ek)) <= tol * fabs(pow(Pv[i], ek)));
            if (e[k] == floor(e[k]))
                CHECK(fabs(sg_tensor_get(px, i) - pow(X[i], ek)) <= tol * fabs(pow(X[i], ek)));
            else CHECK(isnan(sg_tensor_get(px, i)) == (X[i] < 0)); /* negative ^ fraction */
        }
    }
    const double lo = -1.5, hi = 2;
    sg_tensor *cl = sg_clamp(x, &lo, &hi), *cmin = sg_clamp(x, &lo, NULL), *cmax = sg_clamp(x, NULL, &hi);
    CHECK(cl && cmin && cmax);
    for (int i = 0; cl && cmin && cmax && i < 50; i++) {
        CHECK(sg_tensor_get(cl, i) == fmin(fmax(X[i], lo), hi));
        CHECK(sg_tensor_get(cmin, i) == fmax(X[i], lo));
        CHECK(sg_tensor_get(cmax, i) == fmin(X[i], hi));
    }
    /* f32: the dtype's own functions */
    sg_tensor *x32 = P32(ctx, 0.01f, 9, 40);
    const float *F = sg_tensor_f32(x32);
    sg_tensor *s32 = sg_sqrt(x32), *p32 = sg_pow(x32, 1.7), *c32 = sg_cos(x32);
    CHECK(s32 && p32 && c32 && sg_tensor_dtype(p32) == SG_F32);
    for (int i = 0; s32 && p32 && c32 && i < 40; i++) {
        CHECK(sg_tensor_f32(s32)[i] == sqrtf(F[i]));
        CHECK(sg_tensor_f32(p32)[i] == powf(F[i], 1.7f));
        CHECK_NEAR(sg_tensor_f32(c32)[i], cos((double)F[i]), 1e-6);
    }
    /* edges */
    sg_tensor *ed = vec64(ctx, 5, (double[]){-0.0, 0, -1, INFINITY, NAN});
    CHECK_VALUES(sg_abs(ed), 0, 0, 1, INFINITY, NAN);
    CHECK(!signbit(sg_tensor_get(sg_abs(ed), 0)));
    CHECK_VALUES(sg_sqrt(ed), -0.0, 0, NAN, INFINITY, NAN);
    CHECK_VALUES(sg_sin(ed), -0.0, 0, sin(-1.0), NAN, NAN);
    CHECK_VALUES(sg_cos(ed), 1, 1, cos(-1.0), NAN, NAN);
    CHECK_VALUES(sg_pow(ed, 0), 1, 1, 1, 1, 1); /* C's pow: x^0 = 1 even for NaN */
    CHECK_VALUES(sg_pow(ed, -1), -INFINITY, INFINITY, -1, 0, NAN);
    CHECK_VALUES(sg_pow(ed, 0.5), 0, 0, NAN, INFINITY, NAN);
    sg_ctx_free(ctx);
}

/* PyTorch's conventions at the kinks, by hand: abs' gradient 0 at 0, sqrt's inf at 0, pow
 * with exponent 0 has gradient 0 everywhere, clamp passes at its bounds and nowhere when
 * min > max, maximum/minimum split a tie half and half (also into a broadcast operand). */
TEST(grad_conventions_at_kinks_and_ties)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *x = vec64(ctx, 5, (double[]){-2, -0.0, 0, 3, NAN});
    CHECK_STATUS(ctx, sg_backward(sg_sum(sg_abs(x))), SG_OK);
    CHECK_VALUES(sg_tensor_grad(x), -1, 0, 0, 1, 0);
    sg_tape_reset(ctx);

    sg_tensor *s = vec64(ctx, 3, (double[]){0, 4, -1});
    CHECK_STATUS(ctx, sg_backward(sg_sum(sg_sqrt(s))), SG_OK);
    CHECK_VALUES(sg_tensor_grad(s), INFINITY, 0.25, NAN);
    sg_tape_reset(ctx);

    /* pow: d/dx x^e = e x^(e-1); exponent 0 gives 0 even at x = 0 (0 * inf otherwise) */
    sg_tensor *q = vec64(ctx, 4, (double[]){0, -2, 4, 0.25});
    const double e[5] = {0, 1, 2, 0.5, -1};
    const double want[5][4] = {{0, 0, 0, 0},
                               {1, 1, 1, 1},
                               {0, -4, 8, 0.5},
                               {INFINITY, NAN, 0.25, 1},
                               {-INFINITY, -0.25, -0.0625, -16}};
    for (int k = 0; k < 5; k++) {
        CHECK_STATUS(ctx, sg_backward(sg_sum(sg_pow(q, e[k]))), SG_OK);
        check_values(__LINE__, sg_tensor_grad(q), 4, want[k]);
        sg_tape_reset(ctx);
    }

    /* clamp: the bounds themselves pass the gradient; NaN stays NaN and gets 0 */
    sg_tensor *c = vec64(ctx, 6, (double[]){-2, -1, 0, 1, 2, NAN});
    const double m1 = -1, p1 = 1, z = 0;
    const double *lo[4] = {&m1, &z, NULL, &p1}, *hi[4] = {&p1, NULL, &z, &m1};
    const double vals[4][6] = {{-1, -1, 0, 1, 1, NAN},
                               {0, 0, 0, 1, 2, NAN},
                               {-2, -1, 0, 0, 0, NAN},
                               {-1, -1, -1, -1, -1, NAN}}; /* min > max: max everywhere */
    const double grads[4][6] = {{0, 1, 1, 1, 0, 0}, {0, 0, 1, 1, 1, 0}, {1, 1, 1, 0, 0, 0}, {0}};
    for (int k = 0; k < 4; k++) {
        sg_tensor *y = sg_clamp(c, lo[k], hi[k]);
        check_values(__LINE__, y, 6, vals[k]);
        CHECK_STATUS(ctx, sg_backward(sg_sum(y)), SG_OK);
        check_values(__LINE__, sg_tensor_grad(c), 6, grads[k]);
        sg_tape_reset(ctx);
    }

    /* maximum / minimum: ties split g/2 and g/2; a NaN operand wins and both get g.
     * Weights w make the incoming gradient non-uniform; a sum's is uniform. */
    sg_tensor *a = vec64(ctx, 4, (double[]){1, 2, 3, NAN}), *b = vec64(ctx, 4, (double[]){1, 5, 0, 1});
    sg_tensor *w = sg_tensor_from_data(ctx, SG_F64, 1, (int64_t[]){4}, (double[]){2, 4, 8, 16});
    CHECK_VALUES(sg_maximum(a, b), 1, 5, 3, NAN);
    CHECK_VALUES(sg_minimum(a, b), 1, 2, 0, NAN);
    CHECK_VALUES(sg_maximum(b, a), 1, 5, 3, NAN);
    CHECK_STATUS(ctx, sg_backward(sg_sum(sg_mul(sg_maximum(a, b), w))), SG_OK);
    CHECK_VALUES(sg_tensor_grad(a), 1, 0, 8, 16);
    CHECK_VALUES(sg_tensor_grad(b), 1, 4, 0, 16);
    sg_tape_reset(ctx);
    CHECK_STATUS(ctx, sg_backward(sg_sum(sg_minimum(a, b))), SG_OK);
    CHECK_VALUES(sg_tensor_grad(a), 0.5, 1, 0, 1);
    CHECK_VALUES(sg_tensor_grad(b), 0.5, 0, 1, 1);
    sg_tape_reset(ctx);
    sg_tensor *two = scalar64(ctx, 2), *v = vec64(ctx, 3, (double[]){1, 2, 3});
    CHECK_VALUES(sg_maximum(v, two), 2, 2, 3);
    CHECK_STATUS(ctx, sg_backward(sg_sum(sg_maximum(v, two))), SG_OK);
    CHECK_VALUES(sg_tensor_grad(v), 0, 0.5, 1);
    CHECK_VALUES(sg_tensor_grad(two), 1.5);
    sg_tape_reset(ctx);
    CHECK_STATUS(ctx, sg_backward(sg_sum(sg_minimum(two, v))), SG_OK);
    CHECK_VALUES(sg_tensor_grad(v), 1, 0.5, 0);
    CHECK_VALUES(sg_tensor_grad(two), 1.5);
    sg_tape_reset(ctx);
    CHECK_STATUS(ctx, sg_backward(sg_sum(sg_maximum(v, v))), SG_OK); /* max(v, v) = v */
    CHECK_VALUES(sg_tensor_grad(v), 1, 1, 1);
    sg_ctx_free(ctx);
}

TEST(values_maximum_minimum_where_broadcast_against_naive_indexing)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *a = P64(ctx, -1, 1, 2, 1, 3), *b = P64(ctx, -1, 1, 4, 1); /* -> (2,4,3) */
    const double *A = sg_tensor_f64(a), *B = sg_tensor_f64(b);
    sg_tensor *mx = sg_maximum(a, b), *mn = sg_minimum(b, a);
    CHECK(mx && mn && sg_tensor_ndim(mx) == 3 && sg_tensor_dim(mx, 1) == 4 && sg_tensor_dim(mn, 2) == 3);
    for (int i = 0; mx && mn && i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++) {
                CHECK(sg_tensor_get(mx, (i * 4 + j) * 3 + k) == fmax(A[i * 3 + k], B[j]));
                CHECK(sg_tensor_get(mn, (i * 4 + j) * 3 + k) == fmin(A[i * 3 + k], B[j]));
            }
    sg_tensor *u = P32(ctx, -1, 1, 3, 500), *h = sg_tensor_new(ctx, SG_F32, 0, NULL);
    sg_tensor_fill(h, 0.25);
    sg_tensor *m32 = sg_maximum(h, u);
    CHECK(m32 && sg_tensor_dtype(m32) == SG_F32);
    for (int64_t i = 0; m32 && i < 1500; i++) CHECK(sg_tensor_f32(m32)[i] == fmaxf(0.25f, sg_tensor_f32(u)[i]));

    /* where: cond (4,1) i32, x (2,1,3), y (3) -> (2,4,3) */
    const int32_t cv[4] = {1, 0, 0, 1};
    sg_tensor *cond = sg_tensor_from_data(ctx, SG_I32, 2, (int64_t[]){4, 1}, cv);
    sg_tensor *y = P64(ctx, -1, 1, 3);
    const double *Y = sg_tensor_f64(y);
    sg_tensor *wh = sg_where(cond, a, y);
    CHECK(wh && sg_tensor_ndim(wh) == 3 && sg_tensor_dim(wh, 0) == 2 && sg_tensor_dim(wh, 1) == 4);
    for (int i = 0; wh && i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++)
                CHECK(sg_tensor_get(wh, (i * 4 + j) * 3 + k) == (cv[j] ? A[i * 3 + k] : Y[k]));
    /* backward by hand: loss = sum(W * where) gives x (a): W summed over j where cond is
     * 1; y: W summed over i and j where it is 0 */
    sg_tensor *W = P64(ctx, -1, 1, 2, 4, 3);
    sg_tensor_requires_grad(W, 0);
    CHECK_STATUS(ctx, sg_backward(sg_sum(sg_mul(W, wh))), SG_OK);
    const double *Wd = sg_tensor_f64(W);
    double ga[2][3] = {{0}}, gy[3] = {0};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++) {
                if (cv[j]) ga[i][k] += Wd[(i * 4 + j) * 3 + k];
                else gy[k] += Wd[(i * 4 + j) * 3 + k];
            }
    CHECK(sg_tensor_grad(a) && sg_tensor_grad(y));
    for (int k = 0; k < 3; k++) {
        CHECK_NEAR(sg_tensor_get(sg_tensor_grad(a), k), ga[0][k], 1e-14);
        CHECK_NEAR(sg_tensor_get(sg_tensor_grad(a), 3 + k), ga[1][k], 1e-14);
        CHECK_NEAR(sg_tensor_get(sg_tensor_grad(y), k), gy[k], 1e-14);
    }
    sg_tape_reset(ctx);
    /* a float mask; -0.0 is 0; the gradient of a sum (uniform) */
    sg_tensor *fm = sg_tensor_from_data(ctx, SG_F32, 1, (int64_t[]){3}, (float[]){1, -0.0f, 0});
    sg_tensor *x3 = vec64(ctx, 3, (double[]){10, 20, 30}), *y3 = vec64(ctx, 3, (double[]){-1, -2, -3});
    CHECK_VALUES(sg_where(fm, x3, y3), 10, -2, -3);
    CHECK_STATUS(ctx, sg_backward(sg_sum(sg_where(fm, x3, y3))), SG_OK);
    CHECK_VALUES(sg_tensor_grad(x3), 1, 0, 0);
    CHECK_VALUES(sg_tensor_grad(y3), 0, 1, 1);
    sg_tape_reset(ctx);
    CHECK_STATUS(ctx, sg_backward(sg_sum(sg_where(fm, x3, x3))), SG_OK); /* where(c, x, x) = x */
    CHECK_VALUES(sg_tensor_grad(x3), 1, 1, 1);
    sg_ctx_free(ctx);
}

TEST(errors_new_elementwise_ops)
{
    sg_ctx *ctx = new_ctx(0);
    sg_tensor *a = P64(ctx, -1, 1, 2, 3), *f = P32(ctx, -1, 1, 2, 3);
    sg_tensor *i = targets(ctx, SG_I64, 2, (int64_t[]){0, 1});
    sg_tensor *s = sg_coo_new(ctx, SG_F64, 2, (int64_t[]){2, 3}, 2, 1, (int64_t[]){0, 1}, (double[]){1});
    const double one = 1, nan = NAN;
    EXPECT_FAIL(ctx, sg_clamp(a, NULL, NULL), SG_ERR_ARG, "sg_clamp");
    EXPECT_FAIL(ctx, sg_clamp(a, &nan, &one), SG_ERR_VALUE, "min");
    EXPECT_FAIL(ctx, sg_clamp(a, NULL, &nan), SG_ERR_VALUE, "sg_clamp");
    EXPECT_FAIL(ctx, sg_clamp(i, &one, NULL), SG_ERR_DTYPE, "sg_clamp");
    EXPECT_FAIL(ctx, sg_abs(i), SG_ERR_DTYPE, "sg_abs");
    EXPECT_FAIL(ctx, sg_sqrt(s), SG_ERR_LAYOUT, "sg_sqrt");
    EXPECT_FAIL(ctx, sg_pow(i, 2), SG_ERR_DTYPE, "sg_pow");
    EXPECT_FAIL(ctx, sg_sin(s), SG_ERR_LAYOUT, "sg_sin");
    EXPECT_FAIL(ctx, sg_cos(i), SG_ERR_DTYPE, "sg_cos");
    EXPECT_FAIL(ctx, sg_maximum(a, P64(ctx, -1, 1, 4)), SG_ERR_SHAPE, "sg_maximum");
    EXPECT_FAIL(ctx, sg_minimum(a, f), SG_ERR_DTYPE, "sg_minimum");
    EXPECT_FAIL(ctx, sg_maximum(s, a), SG_ERR_LAYOUT, "sg_maximum");
    EXPECT_FAIL(ctx, sg_minimum(i, i), SG_ERR_DTYPE, "sg_minimum");

    sg_tensor *c = sg_tensor_from_data(ctx, SG_I32, 2, (int64_t[]){2, 3}, (int32_t[]){1, 0, 1, 1, 0, 0});
    EXPECT_FAIL(ctx, sg_where(c, a, f), SG_ERR_DTYPE, "sg_where");
    EXPECT_FAIL(ctx, sg_where(c, i, i), SG_ERR_DTYPE, "sg_where");
    EXPECT_FAIL(ctx, sg_where(c, a, P64(ctx, -1, 1, 2)), SG_ERR_SHAPE, "sg_where");
    EXPECT_FAIL(ctx, sg_where(targets(ctx, SG_I64, 2, (int64_t[]){1, 0}), a, a), SG_ERR_SHAPE, "(2)");
    EXPECT_FAIL(ctx, sg_where(s, a, a), SG_ERR_LAYOUT, "sg_where");
    EXPECT_FAIL(ctx, sg_where(a, s, a), SG_ERR_LAYOUT, "sg_where");
    /* cond values other than 0 and 1, the first one named */
    EXPECT_FAIL(ctx, sg_where(targets(ctx, SG_I64, 3, (int64_t[]){1, 2, 5}), a, a), SG_ERR_VALUE, "2 at [1]");
    EXPECT_FAIL(ctx, sg_where(targets(ctx, SG_I32, 3, (int64_t[]){0, 1, -1}), a, a), SG_ERR_VALUE, "[2]");
    sg_tensor *half = sg_tensor_from_data(ctx, SG_F64, 1, (int64_t[]){3}, (double[]){1, 0.5, 0});
    EXPECT_FAIL(ctx, sg_where(half, a, a), SG_ERR_VALUE, "0.5");
    sg_tensor *nanc = sg_tensor_from_data(ctx, SG_F32, 1, (int64_t[]){3}, (float[]){0, 1, NAN});
    EXPECT_FAIL(ctx, sg_where(nanc, a, a), SG_ERR_VALUE, "nan");
    sg_mem_stats m0 = sg_ctx_mem_stats(ctx); /* a bad cond writes nothing */
    CHECK(sg_where(half, a, a) == NULL);
    sg_mem_stats m1 = sg_ctx_mem_stats(ctx);
    CHECK(m0.bytes_in_use == m1.bytes_in_use && m0.arena_bytes == m1.arena_bytes);
    sg_ctx *other = new_ctx(0);
    EXPECT_FAIL(ctx, sg_where(targets(other, SG_I64, 3, (int64_t[]){1, 0, 1}), a, a), SG_ERR_ARG, "sg_where");
    EXPECT_FAIL(ctx, sg_maximum(a, P64(other, -1, 1, 2, 3)), SG_ERR_ARG, "sg_maximum");
    sg_ctx_free(other);

    /* NULL inputs: NULL out, no new error, no node */
    sg_ctx_clear_error(ctx);
    int64_t nodes = sg_tape_nodes(ctx);
    sg_tensor *r[] = {sg_abs(NULL), sg_sqrt(NULL), sg_sin(NULL), sg_cos(NULL), sg_pow(NULL, 2),
                      sg_clamp(NULL, &one, NULL), sg_clamp(NULL, NULL, NULL), sg_maximum(a, NULL),
                      sg_minimum(NULL, a), sg_where(NULL, a, a), sg_where(c, NULL, a),
                      sg_where(c, a, NULL)};
    for (size_t k = 0; k < sizeof r / sizeof r[0]; k++) CHECK(r[k] == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_OK);
    CHECK(sg_tape_nodes(ctx) == nodes);
    sg_ctx_free(ctx);
}

/* The new kernels, forward and backward (broadcast operands summed serially), give the
 * same bytes on 1 and 3 threads. */
static size_t run_select_kernels(int threads, unsigned char *out, size_t cap)
{
    sg_ctx *ctx = new_ctx(threads);
    sg_tensor *x = P32(ctx, -2, 2, 300, 400), *row = P32(ctx, -2, 2, 400), *col = P32(ctx, -2, 2, 300, 1);
    sg_tensor *cond = sg_tensor_new(ctx, SG_I64, 2, (int64_t[]){300, 1});
    for (int i = 0; i < 300; i++) ((int64_t *)sg_tensor_data(cond))[i] = i % 3 == 0;
    const double lo = -1, hi = 1.5;
    sg_tensor *outs[6];
    outs[0] = sg_where(cond, sg_maximum(x, row), col); /* col: a stretched operand */
    outs[1] = sg_add(sg_clamp(x, &lo, &hi), sg_pow(sg_abs(x), 1.5));
    outs[2] = sg_mul(sg_minimum(col, sg_sqrt(sg_abs(x))), sg_add(sg_sin(x), sg_cos(row)));
    sg_backward(sg_sum(sg_mul(sg_add(sg_add(outs[0], outs[1]), outs[2]), x)));
    outs[3] = sg_tensor_grad(x);
    outs[4] = sg_tensor_grad(row);
    outs[5] = sg_tensor_grad(col);
    size_t n = 0;
    for (int k = 0; k < 6; k++) {
        if (!outs[k]) continue;
        size_t bytes = (size_t)sg_tensor_numel(outs[k]) * sizeof(float);
        if (n + bytes <= cap) memcpy(out + n, sg_tensor_data(outs[k]), bytes);
        n += bytes;
    }
    sg_ctx_free(ctx);
    return n;
}

TEST(new_elementwise_ops_bitwise_identical_for_any_thread_count)
{
    const size_t cap = 4u << 20;
    unsigned char *r1 = malloc(cap), *r3 = malloc(cap);
    size_t n1 = run_select_kernels(1, r1, cap), n3 = run_select_kernels(3, r3, cap);
    CHECK(n1 == n3 && n1 <= cap && n1 > 4 * (2 * 300 * 400 + 700));
    CHECK(n1 == n3 && memcmp(r1, r3, n1 < cap ? n1 : cap) == 0);
    free(r1);
    free(r3);
}

TEST_MAIN()
