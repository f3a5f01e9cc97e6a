/* Dense products and their two kernels (src/ops/matmul.c, docs/blas.md): the forward
 * C = A @ B and both input gradients (dA = G B^T, dB = A^T G) are bitwise identical on 1, 2,
 * 3 and 7 threads, f32 and f64, for 2-D, batched and broadcast (B,M,K)@(K,N) products whose
 * sizes are and are not multiples of the BLAS block (256), including matmul(x, x); in a
 * build with a BLAS, every BLAS-backed product is checked against the hand-written kernel
 * (the oracle, forced with sg__matmul_force) within the tolerance below, and the kernel
 * each shape takes under the library's rule is the one the rule names. */
#include "ops/ops.h"
#include "testutil.h"

#include <float.h>

typedef struct {
    int64_t batch; /* 0: (M,K) @ (K,N); else a (batch,M,K) @ b (K,N) when shared, b (batch,K,N) if not */
    bool shared;
    int64_t M, K, N;
} mm_shape;

/* Sizes around the 256-block grid, under and over the kernel crossover. */
static const mm_shape shapes[] = {
    {0, false, 300, 200, 260},  /* 2 x 2 blocks, both partial */
    {0, false, 512, 64, 256},   /* 2 x 1 whole blocks */
    {0, false, 1000, 40, 513},  /* 4 x 3 blocks, a 1-column last block */
    {0, false, 37, 301, 270},   /* 1 x 2 blocks, long K */
    {0, false, 700, 3, 90},     /* a short contraction */
    {0, false, 260, 260, 100},  /* square a: matmul(x, x) accumulates dB onto dA */
    {0, false, 4, 4, 1024},     /* forward direct (M K = 16), dA by BLAS */
    {0, false, 20, 20, 20},     /* under the crossover: direct everywhere */
    {3, false, 130, 70, 300},   /* batched */
    {2, true, 200, 90, 270},    /* broadcast: 400 stacked rows */
    {5, true, 7, 33, 129},      /* broadcast, small per batch */
};
#define N_SHAPES (int)(sizeof shapes / sizeof shapes[0])

/* The operands of shape s, persistent, filled from the context's generator (seeded). */
static void make(sg_ctx *ctx, sg_dtype dt, const mm_shape *s, sg_tensor **a, sg_tensor **b, sg_tensor **g)
{
    if (s->batch == 0) {
        *a = sg_tensor_new(ctx, dt, 2, (int64_t[]){s->M, s->K});
        *b = sg_tensor_new(ctx, dt, 2, (int64_t[]){s->K, s->N});
        *g = sg_tensor_new(ctx, dt, 2, (int64_t[]){s->M, s->N});
    } else {
        *a = sg_tensor_new(ctx, dt, 3, (int64_t[]){s->batch, s->M, s->K});
        *b = s->shared ? sg_tensor_new(ctx, dt, 2, (int64_t[]){s->K, s->N})
                       : sg_tensor_new(ctx, dt, 3, (int64_t[]){s->batch, s->K, s->N});
        *g = sg_tensor_new(ctx, dt, 3, (int64_t[]){s->batch, s->M, s->N});
    }
    sg_tensor_fill_uniform(*a, -1, 1);
    sg_tensor_fill_uniform(*b, -1, 1);
    sg_tensor_fill_uniform(*g, -1, 1);
    sg_tensor_requires_grad(*a, 1);
    sg_tensor_requires_grad(*b, 1);
}

static size_t nbytes(const sg_tensor *t)
{
    return (size_t)sg_tensor_numel(t) * (sg_tensor_dtype(t) == SG_F32 ? 4 : 8);
}

/* Appends t's bytes to buf (NULL t: nothing, and the caller's CHECK fails). */
static size_t put(unsigned char *buf, size_t at, sg_tensor *t)
{
    if (!t) return at;
    memcpy(buf + at, sg_tensor_data(t), nbytes(t));
    return at + nbytes(t);
}

/* C, dA and dB of shape s (and of matmul(a, a) when square) on `threads` threads, as bytes. */
static size_t run(int threads, sg_dtype dt, const mm_shape *s, unsigned char *buf)
{
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = threads, .seed = 5});
    sg_tensor *a, *b, *g;
    make(ctx, dt, s, &a, &b, &g);
    sg_tensor *c = sg_matmul(a, b);
    CHECK(c != NULL);
    CHECK_STATUS(ctx, sg_backward_grad(c, g), SG_OK);
    size_t n = put(buf, 0, c);
    n = put(buf, n, sg_tensor_grad(a));
    n = put(buf, n, sg_tensor_grad(b));
    CHECK(sg_tensor_grad(a) && sg_tensor_grad(b));
    sg_tape_reset(ctx);
    if (s->batch == 0 && s->M == s->K) { /* matmul(x, x): both gradients in one buffer */
        sg_tensor *x = sg_tensor_new(ctx, dt, 2, (int64_t[]){s->M, s->M});
        sg_tensor_fill_uniform(x, -1, 1);
        sg_tensor_requires_grad(x, 1);
        sg_tensor *xx = sg_matmul(x, x);
        CHECK_STATUS(ctx, sg_backward(sg_sum(sg_mul(xx, xx))), SG_OK);
        n = put(buf, n, xx);
        n = put(buf, n, sg_tensor_grad(x));
        sg_tensor_free(x);
    }
    sg_tensor_free(a);
    sg_tensor_free(b);
    sg_tensor_free(g);
    sg_ctx_free(ctx);
    return n;
}

TEST(bitwise_identical_on_1_2_3_7_threads)
{
    const size_t cap = 32u << 20;
    unsigned char *r1 = malloc(cap), *rt = malloc(cap);
    static const int threads[] = {2, 3, 7};
    for (int d = 0; d < 2; d++) {
        const sg_dtype dt = d ? SG_F64 : SG_F32;
        for (int k = 0; k < N_SHAPES; k++) {
            const mm_shape *s = &shapes[k];
            size_t n1 = run(1, dt, s, r1);
            CHECK(n1 > 0 && n1 <= cap);
            for (int t = 0; t < 3; t++) {
                size_t nt = run(threads[t], dt, s, rt);
                if (nt != n1 || memcmp(r1, rt, n1) != 0) {
                    fprintf(stderr, "  %s batch %lld%s (%lld,%lld)@(%lld,%lld): %d threads differ from 1\n",
                            d ? "f64" : "f32", (long long)s->batch, s->shared ? " shared" : "",
                            (long long)s->M, (long long)s->K, (long long)s->K, (long long)s->N, threads[t]);
                    tu_failures++;
                }
            }
        }
    }
    free(r1);
    free(rt);
}

/* The tolerance of the oracle: two sums of the same K products in any order (with or
 * without fused multiply-adds) each lie within gamma_K sum|a_k b_k| of the exact value,
 * gamma_K = K u / (1 - K u), u = eps / 2; so they differ by at most 2 gamma_K sum|a_k b_k|,
 * which is under 2 K eps sum|a_k b_k| for K eps < 1. Checked: |blas - direct| <=
 * 2 K eps sum_k |a_ik b_kj| element by element, for C, dA (K = N) and dB (K = M, or
 * batch M for a shared b). */
static double *to_f64(const sg_tensor *t)
{
    int64_t n = t ? sg_tensor_numel(t) : 0;
    double *v = malloc(sizeof(double) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) v[i] = sg_tensor_get(t, i);
    return v;
}

/* got and want (rows x cols) within 2 K eps sum_k |x[r xr + k xk] y[k yk + c yc]|; returns
 * the worst |got - want| / (K eps sum). */
static double check_within(const double *got, const double *want, int64_t rows, int64_t cols,
                           int64_t K, double eps, const double *x, int64_t xr, int64_t xk,
                           const double *y, int64_t yk, int64_t yc, const char *what)
{
    double worst = 0;
    int bad = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += fabs(x[r * xr + k * xk] * y[k * yk + c * yc]);
            const double d = fabs(got[r * cols + c] - want[r * cols + c]), unit = (double)K * eps * s;
            if (!(d <= 2 * unit) && bad++ < 3)
                fprintf(stderr, "  %s[%lld,%lld]: |%.17g - %.17g| > 2 K eps sum = %.3g\n", what,
                        (long long)r, (long long)c, got[r * cols + c], want[r * cols + c], 2 * unit);
            if (unit > 0 && d / unit > worst) worst = d / unit;
        }
    if (bad) tu_failures++;
    return worst;
}

TEST(blas_products_match_the_direct_kernel)
{
    if (!sg__matmul_blas()) TU_SKIP("no BLAS in this build (SGRAD_BLAS=OFF or none found)");
    double worst[2] = {0, 0};
    for (int d = 0; d < 2; d++) {
        const sg_dtype dt = d ? SG_F64 : SG_F32;
        const double eps = d ? DBL_EPSILON : FLT_EPSILON;
        for (int k = 0; k < N_SHAPES; k++) {
            const mm_shape *s = &shapes[k];
            sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 2, .seed = 9});
            sg_tensor *a, *b, *g;
            double *res[2][3];
            make(ctx, dt, s, &a, &b, &g);
            for (int kern = 0; kern < 2; kern++) { /* 0: BLAS, 1: direct (the oracle) */
                sg__matmul_force(kern ? SG__MM_DIRECT : SG__MM_BLAS);
                sg_tensor *c = sg_matmul(a, b);
                CHECK(c && sg_backward_grad(c, g) == SG_OK);
                CHECK(sg_tensor_grad(a) && sg_tensor_grad(b));
                res[kern][0] = to_f64(c);
                res[kern][1] = to_f64(sg_tensor_grad(a));
                res[kern][2] = to_f64(sg_tensor_grad(b));
                sg_tape_reset(ctx);
            }
            sg__matmul_force(SG__MM_AUTO);
            double *A = to_f64(a), *B = to_f64(b), *G = to_f64(g);
            const int64_t nb = s->batch ? s->batch : 1, M = s->M, K = s->K, N = s->N;
            double w = 0;
            for (int64_t bi = 0; bi < nb; bi++) {
                const double *Ab = A + bi * M * K, *Bb = s->shared || !s->batch ? B : B + bi * K * N;
                const double *Gb = G + bi * M * N;
                /* C[b] (M,N) = A[b] @ B[b]: K terms */
                w = fmax(w, check_within(res[0][0] + bi * M * N, res[1][0] + bi * M * N, M, N, K, eps,
                                         Ab, K, 1, Bb, N, 1, "C"));
                /* dA[b] (M,K) = G[b] @ B[b]^T: N terms */
                w = fmax(w, check_within(res[0][1] + bi * M * K, res[1][1] + bi * M * K, M, K, N, eps,
                                         Gb, N, 1, Bb, 1, N, "dA"));
                if (!s->shared) /* dB[b] (K,N) = A[b]^T @ G[b]: M terms */
                    w = fmax(w, check_within(res[0][2] + bi * K * N, res[1][2] + bi * K * N, K, N, M,
                                             eps, Ab, 1, K, Gb, N, 1, "dB"));
            }
            if (s->shared) /* dB (K,N) = sum over the batch of A[b]^T G[b]: batch M terms */
                w = fmax(w, check_within(res[0][2], res[1][2], K, N, nb * M, eps, A, 1, K, G, N, 1, "dB"));
            worst[d] = fmax(worst[d], w);
            for (int kern = 0; kern < 2; kern++)
                for (int j = 0; j < 3; j++) free(res[kern][j]);
            free(A);
            free(B);
            free(G);
            sg_tensor_free(a);
            sg_tensor_free(b);
            sg_tensor_free(g);
            sg_ctx_free(ctx);
        }
    }
    printf("     BLAS (%s) against the direct kernel: largest |difference| / (K eps sum|a b|) "
           "%.3f (f32), %.3f (f64); the bound is 2\n", sg__matmul_blas(), worst[0], worst[1]);
}

/* Under the library's rule (no forcing) each product takes the kernel sg__matmul_kernel
 * names for its shape: bitwise the result of forcing that kernel. */
TEST(each_shape_takes_the_kernel_the_rule_names)
{
    CHECK(sg__matmul_kernel(16, 16, 16) == SG__MM_DIRECT);
    CHECK(sg__matmul_kernel(4, 1024, 4) == SG__MM_DIRECT); /* M K = 16 */
    CHECK(sg__matmul_kernel(0, 300, 300) == SG__MM_DIRECT);
    CHECK(sg__matmul_kernel(300, 300, 0) == SG__MM_DIRECT);
    const int want = sg__matmul_blas() ? SG__MM_BLAS : SG__MM_DIRECT;
    CHECK(sg__matmul_kernel(32, 32, 32) == want);
    CHECK(sg__matmul_kernel(1024, 512, 100) == want);
    CHECK(sg__matmul_kernel(256, 1, 256) == want); /* matrix @ vector */
    sg__matmul_force(SG__MM_DIRECT);
    CHECK(sg__matmul_kernel(1024, 512, 100) == SG__MM_DIRECT);
    sg__matmul_force(SG__MM_AUTO);

    const size_t cap = 8u << 20;
    unsigned char *auto_ = malloc(cap), *forced = malloc(cap);
    const mm_shape *picks[] = {&shapes[0], &shapes[6], &shapes[7], &shapes[9]};
    for (int k = 0; k < 4; k++) {
        const mm_shape *s = picks[k];
        const int64_t rows = s->shared ? s->batch * s->M : s->M;
        /* one kernel for the whole case only where the rule gives all three products one */
        const int kf = sg__matmul_kernel(rows, s->N, s->K), ka = sg__matmul_kernel(rows, s->K, s->N),
                  kb = sg__matmul_kernel(s->K, s->N, rows);
        if (kf != ka || kf != kb) continue;
        size_t na = run(2, SG_F32, s, auto_);
        sg__matmul_force(kf);
        size_t nf = run(2, SG_F32, s, forced);
        sg__matmul_force(SG__MM_AUTO);
        CHECK(na == nf && memcmp(auto_, forced, na) == 0);
    }
    free(auto_);
    free(forced);
}

TEST_MAIN()
