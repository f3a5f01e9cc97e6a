/* sgrad-bench matmul: (M,K)@(K,N) in f32 through the library, forward alone and forward
 * plus backward (dA = G B^T, dB = A^T G). Each case is timed three ways in the same run:
 * the library as built (the kernel its rule picks for the shape: BLAS in a build with one,
 * src/ops/matmul.c), the library with the hand-written kernel forced on every product,
 * and the plainest triple loops doing the same products (the reference; square sizes only,
 * ref_ms null on the others, where the loops would take seconds). Cases: square
 * sizes 64, 256, 512, then (1000,200)@(200,1000), (2048,512)@(512,256) and a fastText-like
 * output layer, batch 1024, dim 100, 512 outputs: (1024,100)@(100,512) (--quick: 64, 128
 * and the fastText-like one); --shape MxKxN runs that one case. One thread unless
 * --threads is given, so that ratio compares kernels rather than core counts.
 * Extra fields: gflops (the library as built), direct_gflops (the hand-written kernel),
 * ref_gflops (the loops, or null), kernel (of the forward product: "blas" or "direct"), blas
 * (the BLAS the build calls, or null), and the largest difference of the forward result
 * from the loops' (or from the hand-written kernel's where the loops are skipped). */
#include "bench.h"
#include "ops/ops.h" /* sg__matmul_force: the hand-written kernel on demand */
#include "sgrad.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    sg_ctx *ctx;
    sg_tensor *a, *b, *g; /* A (M,K), B (K,N), G (M,N): the incoming gradient */
    int M, K, N;
    float *c, *ga, *gb; /* reference outputs */
    int failed;
} mm_case;

static void lib_fwd(void *ud)
{
    mm_case *m = ud;
    sg_tensor *c = sg_matmul(m->a, m->b);
    if (!c) m->failed = 1;
    else sgb_sink(sg_tensor_get(c, 0));
    sg_tape_reset(m->ctx);
}

static void lib_fwd_bwd(void *ud)
{
    mm_case *m = ud;
    sg_tensor *c = sg_matmul(m->a, m->b);
    if (!c || sg_backward_grad(c, m->g)) m->failed = 1;
    else sgb_sink(sg_tensor_get(sg_tensor_grad(m->a), 0) + sg_tensor_get(sg_tensor_grad(m->b), 0));
    sg_tape_reset(m->ctx);
}

/* C = A @ B: for each output, a dot product over k. */
static void ref_product(const mm_case *m)
{
    const float *A = sg_tensor_f32(m->a), *B = sg_tensor_f32(m->b);
    const int M = m->M, K = m->K, N = m->N;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            m->c[i * N + j] = s;
        }
}

static void ref_fwd(void *ud)
{
    mm_case *m = ud;
    ref_product(m);
    sgb_sink(m->c[0]);
}

static void ref_fwd_bwd(void *ud)
{
    mm_case *m = ud;
    ref_product(m);
    const float *A = sg_tensor_f32(m->a), *B = sg_tensor_f32(m->b), *G = sg_tensor_f32(m->g);
    const int M = m->M, K = m->K, N = m->N;
    for (int i = 0; i < M; i++) /* dA = G B^T */
        for (int k = 0; k < K; k++) {
            float s = 0;
            for (int j = 0; j < N; j++) s += G[i * N + j] * B[k * N + j];
            m->ga[i * K + k] = s;
        }
    for (int k = 0; k < K; k++) /* dB = A^T G */
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int i = 0; i < M; i++) s += A[i * K + k] * G[i * N + j];
            m->gb[k * N + j] = s;
        }
    sgb_sink(m->c[0] + m->ga[0] + m->gb[0]);
}

/* Largest |library - reference| over the forward product: the loops' result, or with
 * against_direct the hand-written kernel's. */
static double fwd_diff(mm_case *m, int against_direct)
{
    sg_tensor *c = sg_matmul(m->a, m->b);
    double worst = c ? 0 : INFINITY;
    if (against_direct) {
        sg__matmul_force(SG__MM_DIRECT);
        sg_tensor *d = sg_matmul(m->a, m->b);
        sg__matmul_force(SG__MM_AUTO);
        for (int i = 0; c && d && i < m->M * m->N; i++) m->c[i] = sg_tensor_f32(d)[i];
        if (!d) worst = INFINITY;
    } else {
        ref_product(m);
    }
    for (int i = 0; c && i < m->M * m->N; i++) {
        double d = fabs((double)sg_tensor_f32(c)[i] - (double)m->c[i]);
        if (d > worst) worst = d;
    }
    sg_tape_reset(m->ctx);
    return worst;
}

/* The library with the hand-written kernel forced on every product. */
static double direct_ms(void (*fn)(void *), mm_case *m, int reps)
{
    sg__matmul_force(SG__MM_DIRECT);
    double ms = sgb_median_ms(fn, m, reps);
    sg__matmul_force(SG__MM_AUTO);
    return ms;
}

static int run_size(const sgb_cfg *cfg, sg_ctx *ctx, int threads, int M, int K, int N, int reps)
{
    mm_case m = {ctx, NULL, NULL, NULL, M, K, N, NULL, NULL, NULL, 0};
    m.a = sg_tensor_new(ctx, SG_F32, 2, (int64_t[]){M, K});
    m.b = sg_tensor_new(ctx, SG_F32, 2, (int64_t[]){K, N});
    m.g = sg_tensor_new(ctx, SG_F32, 2, (int64_t[]){M, N});
    m.c = malloc(sizeof(float) * (size_t)M * N);
    m.ga = malloc(sizeof(float) * (size_t)M * K);
    m.gb = malloc(sizeof(float) * (size_t)K * N);
    int rc = 1;
    if (!m.a || !m.b || !m.g || !m.c || !m.ga || !m.gb) goto done;
    sg_tensor_fill_uniform(m.a, -1, 1);
    sg_tensor_fill_uniform(m.b, -1, 1);
    sg_tensor_fill_uniform(m.g, -1, 1);
    sg_tensor_requires_grad(m.a, 1);
    sg_tensor_requires_grad(m.b, 1);

    const double flops = 2.0 * M * K * N;
    const int with_ref = M == K && K == N; /* the loops take seconds on the others */
    const double diff = fwd_diff(&m, !with_ref);
    char params[96], extra[320], blas[32];
    snprintf(params, sizeof params, "{\"M\":%d,\"K\":%d,\"N\":%d}", M, K, N);
    snprintf(blas, sizeof blas, sg__matmul_blas() ? "\"%s\"" : "null", sg__matmul_blas());
    const char *kernel = sg__matmul_kernel(M, N, K) == SG__MM_BLAS ? "blas" : "direct";

    for (int bwd = 0; bwd < 2; bwd++) {
        void (*lib)(void *) = bwd ? lib_fwd_bwd : lib_fwd;
        const double f = bwd ? 3 * flops : flops; /* the backward is two more products */
        const double ms = sgb_median_ms(lib, &m, reps), dms = direct_ms(lib, &m, reps);
        const double ref = with_ref ? sgb_median_ms(bwd ? ref_fwd_bwd : ref_fwd, &m, reps) : 0;
        char refg[32];
        snprintf(refg, sizeof refg, with_ref ? "%.4g" : "null", f / (ref * 1e6));
        int n = snprintf(extra, sizeof extra,
                         "\"gflops\":%.4g,\"direct_gflops\":%.4g,\"ref_gflops\":%s,\"kernel\":\"%s\","
                         "\"blas\":%s",
                         f / (ms * 1e6), f / (dms * 1e6), refg, kernel, blas);
        if (!bwd) snprintf(extra + n, sizeof extra - (size_t)n, ",\"max_abs_diff\":%.3g", diff);
        sgb_emit("matmul", bwd ? "fwd_bwd" : "fwd", params, ms, ref, threads, extra);
    }
    rc = m.failed;
    if (m.failed) fprintf(stderr, "matmul: %s\n", sg_ctx_message(ctx));
done:
    free(m.c);
    free(m.ga);
    free(m.gb);
    sg_tensor_free(m.a);
    sg_tensor_free(m.b);
    sg_tensor_free(m.g);
    (void)cfg;
    return rc;
}

int sgb_matmul(const sgb_cfg *cfg)
{
    const int threads = cfg->threads > 0 ? cfg->threads : 1;
    static const int full[][3] = {{64, 64, 64},     {256, 256, 256},  {512, 512, 512},
                                  {1000, 200, 1000}, {2048, 512, 256}, {1024, 100, 512}};
    static const int quick[][3] = {{64, 64, 64}, {128, 128, 128}, {1024, 100, 512}};
    int one[1][3];
    const int(*cases)[3] = cfg->quick ? quick : full;
    int n = cfg->quick ? 3 : 6;
    if (cfg->shape) {
        if (sscanf(cfg->shape, "%dx%dx%d", &one[0][0], &one[0][1], &one[0][2]) != 3 || one[0][0] < 1 ||
            one[0][1] < 1 || one[0][2] < 1) {
            fprintf(stderr, "matmul: --shape %s: want MxKxN, e.g. 1024x100x512\n", cfg->shape);
            return 1;
        }
        cases = (const int(*)[3])one;
        n = 1;
    }
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = threads});
    if (!ctx) return 1;
    int rc = 0;
    for (int s = 0; s < n && !rc; s++) {
        const double flops = 2.0 * cases[s][0] * cases[s][1] * cases[s][2];
        const int reps = sgb_reps(cfg, flops <= 2 * 64 * 64 * 64 ? 50 : flops <= 2e8 ? 10 : 5);
        rc = run_size(cfg, ctx, threads, cases[s][0], cases[s][1], cases[s][2], reps);
    }
    sg_ctx_free(ctx);
    return rc;
}
