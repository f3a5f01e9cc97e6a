/* The embedding training step of bench/python_vs_torch.py written in C with the same ops,
 * so that the Python package's overhead is the ratio of the two (issue: "within 1.3x of
 * the same step in C"). Named family (not run by "all"): sgrad-bench pystep.
 *
 * Step: e = sg_embedding(W, idx); loss = sg_scale(sg_sum(sg_mul(e, e)), 1 / B);
 * sg_backward; sg_optim_step; sg_tape_reset. W (V, D) f32 uniform [-0.1, 0.1), idx (B)
 * uniform over [0, V), a fresh batch every step (drawn before timing), 3 warm-up steps
 * then 50 timed ones; ms is their mean, as the Python script reports (steps / wall
 * time). Optimizers: SGD lr 0.1, LazyAdam lr 1e-3 (the script's). V = 1e6, D = 64,
 * B = 1e4; --quick: V = 1e4, 5 steps. One thread unless --threads says otherwise. There
 * is no reference loop (ref_ms null): train_step in the optim family has one.
 * probe_ms (SGD): plain loops making the passes the library's step makes, each its own
 * loop, over the same batches right after the library's steps: gather the rows (with the
 * library's prefetch distance), write e * e, sum it (8 double lanes), write the gradient
 * 2 e / B (the mul's backward with the sum's uniform gradient), update the rows from it.
 * What a step of separate ops costs at least here, on one thread (so ms / probe_ms, the
 * library's distance from it, means something with one thread only). */
#include "bench.h"

#include <sgrad.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PS_D = 64, PS_B = 10000, PS_WARMUP = 3 };

typedef struct {
    sg_tensor *W;
    sg_optim *opt;
    sg_tensor **batch;
    int next;
    int failed;
    float *e, *p, *g; /* the probe's (B, D) buffers */
} pystep;

static void py_step(void *ud)
{
    pystep *c = ud;
    sg_tensor *e = sg_embedding(c->W, c->batch[c->next++], NULL);
    sg_tensor *loss = sg_scale(sg_sum(sg_mul(e, e)), 1.0 / PS_B);
    if (!loss || sg_backward(loss) || sg_optim_step(c->opt)) c->failed = 1;
    sg_tape_reset(sg_tensor_ctx(c->W));
}

/* The SGD step as plain loops (probe_ms in the header). */
static void probe_step(pystep *c)
{
    enum { AHEAD = 8 };
    const int64_t *idx = sg_tensor_data(c->batch[c->next++]);
    float *W = sg_tensor_f32(c->W), *e = c->e, *p = c->p, *g = c->g;
    for (int64_t b = 0; b < PS_B; b++) {
        if (b + AHEAD < PS_B)
            for (int k = 0; k < PS_D; k += 16) __builtin_prefetch(W + idx[b + AHEAD] * PS_D + k);
        memcpy(e + b * PS_D, W + idx[b] * PS_D, PS_D * sizeof *e);
    }
    for (int64_t i = 0; i < PS_B * PS_D; i++) p[i] = e[i] * e[i];
    double lane[8] = {0};
    for (int64_t i = 0; i < PS_B * PS_D; i += 8)
        for (int k = 0; k < 8; k++) lane[k] += (double)p[i + k];
    sgb_sink(lane[0] + lane[1] + lane[2] + lane[3] + lane[4] + lane[5] + lane[6] + lane[7]);
    const float c2 = 2.0f / PS_B, lr = 0.1f;
    for (int64_t i = 0; i < PS_B * PS_D; i++) g[i] = c2 * e[i];
    for (int64_t b = 0; b < PS_B; b++) {
        if (b + AHEAD < PS_B)
            for (int k = 0; k < PS_D; k += 16) __builtin_prefetch(W + idx[b + AHEAD] * PS_D + k, 1);
        float *w = W + idx[b] * PS_D;
        for (int64_t j = 0; j < PS_D; j++) w[j] -= lr * g[b * PS_D + j];
    }
}

int sgb_pystep(const sgb_cfg *cfg)
{
    const int64_t V = cfg->quick ? 10000 : 1000000;
    const int steps = cfg->quick ? 5 : 50, n = steps + PS_WARMUP;
    const int threads = cfg->threads > 0 ? cfg->threads : 1;
    static const char *const names[2] = {"sgd", "lazy_adam"};
    for (int k = 0; k < 2; k++) {
        sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = threads});
        if (!ctx) return 1;
        pystep c = {0};
        int64_t shape[2] = {V, PS_D}, bshape[1] = {PS_B};
        c.W = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F32, 2, shape), 1);
        c.batch = calloc((size_t)n, sizeof *c.batch);
        c.opt = k == 0 ? sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0, 0, 0, 0})
                       : sg_optim_lazy_adam(ctx, &(sg_adam_opts){1e-3, 0.9, 0.999, 1e-8, 0, 0});
        if (!c.W || !c.batch || !c.opt || sg_optim_add_param(c.opt, c.W)) {
            fprintf(stderr, "pystep: setup: %s\n", sg_ctx_message(ctx));
            return 1;
        }
        sg_tensor_fill_uniform(c.W, -0.1, 0.1);
        for (int b = 0; b < n; b++) {
            if (!(c.batch[b] = sg_tensor_new(ctx, SG_I64, 1, bshape))) {
                fprintf(stderr, "pystep: setup: %s\n", sg_ctx_message(ctx));
                return 1;
            }
            int64_t *d = sg_tensor_data(c.batch[b]);
            for (int64_t i = 0; i < PS_B; i++) d[i] = (int64_t)(sg_rand_u64(ctx) % (uint64_t)V);
        }
        for (int s = 0; s < PS_WARMUP; s++) py_step(&c);
        double t0 = sgb_now_ms();
        for (int s = 0; s < steps; s++) py_step(&c);
        double ms = (sgb_now_ms() - t0) / steps;
        if (c.failed) {
            fprintf(stderr, "pystep: %s\n", sg_ctx_message(ctx));
            return 1;
        }
        char params[128], extra[96];
        snprintf(params, sizeof params, "{\"opt\":\"%s\",\"V\":%lld,\"B\":%d,\"D\":%d,\"steps\":%d}",
                 names[k], (long long)V, PS_B, PS_D, steps);
        int el = snprintf(extra, sizeof extra, "\"steps_per_sec\":%.4g", 1e3 / ms);
        if (k == 0) {
            const size_t bytes = (size_t)PS_B * PS_D * sizeof(float);
            c.e = malloc(bytes), c.p = malloc(bytes), c.g = malloc(bytes);
            if (!c.e || !c.p || !c.g) {
                fprintf(stderr, "pystep: out of memory for the probe\n");
                free(c.e), free(c.p), free(c.g), free(c.batch);
                sg_optim_free(c.opt);
                sg_ctx_free(ctx);
                return 1;
            }
            c.next = 0;
            for (int s = 0; s < PS_WARMUP; s++) probe_step(&c);
            double p0 = sgb_now_ms();
            for (int s = 0; s < steps; s++) probe_step(&c);
            snprintf(extra + el, sizeof extra - (size_t)el, ",\"probe_ms\":%.4g", (sgb_now_ms() - p0) / steps);
            free(c.e), free(c.p), free(c.g);
        }
        sgb_emit("pystep", "train_step", params, ms, 0, threads, extra);
        sg_optim_free(c.opt);
        free(c.batch);
        sg_ctx_free(ctx);
    }
    return 0;
}
