/* sgrad-bench matmul: (M,K)@(K,N) in f32 through the library, forward alone and forward
 * plus backward (dA = G B^T, dB = A^T G), against the plainest triple loops doing the same
 * products in the same run. Square sizes 64, 256, 512 (--quick: 64 and 128). One thread
 * unless --threads is given, so that ratio compares kernels rather than core counts.
 * Extra fields: gflops of the library path and of the reference, and the largest
 * difference between the two forward results (a sanity check of what is timed). */
#include "bench.h"
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

/* Largest |library - reference| over the forward product. */
static double fwd_diff(mm_case *m)
{
    sg_tensor *c = sg_matmul(m->a, m->b);
    double worst = c ? 0 : INFINITY;
    ref_product(m);
    for (int i = 0; c && i < m->M * m->N; i++) {
        double d = fabs((double)sg_tensor_f32(c)[i] - (double)m->c[i]);
        if (d > worst) worst = d;
    }
    sg_tape_reset(m->ctx);
    return worst;
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

    const double diff = fwd_diff(&m);
    const double flops = 2.0 * M * K * N;
    char params[96], extra[160];
    snprintf(params, sizeof params, "{\"M\":%d,\"K\":%d,\"N\":%d}", M, K, N);

    double ms = sgb_median_ms(lib_fwd, &m, reps), ref = sgb_median_ms(ref_fwd, &m, reps);
    snprintf(extra, sizeof extra, "\"gflops\":%.4g,\"ref_gflops\":%.4g,\"max_abs_diff\":%.3g",
             flops / (ms * 1e6), flops / (ref * 1e6), diff);
    sgb_emit("matmul", "fwd", params, ms, ref, threads, extra);

    ms = sgb_median_ms(lib_fwd_bwd, &m, reps);
    ref = sgb_median_ms(ref_fwd_bwd, &m, reps);
    snprintf(extra, sizeof extra, "\"gflops\":%.4g,\"ref_gflops\":%.4g", 3 * flops / (ms * 1e6),
             3 * flops / (ref * 1e6));
    sgb_emit("matmul", "fwd_bwd", params, ms, ref, threads, extra);
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
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = threads});
    if (!ctx) return 1;
    static const int full[] = {64, 256, 512}, quick[] = {64, 128};
    const int *sizes = cfg->quick ? quick : full;
    const int n = cfg->quick ? 2 : 3;
    int rc = 0;
    for (int s = 0; s < n && !rc; s++) {
        const int d = sizes[s];
        const int reps = sgb_reps(cfg, d <= 64 ? 50 : d <= 256 ? 10 : 3);
        rc = run_size(cfg, ctx, threads, d, d, d, reps);
    }
    sg_ctx_free(ctx);
    return rc;
}
