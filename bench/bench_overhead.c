/* sgrad-bench overhead: what the tape costs per node. A chain of small elementwise ops
 * (mul, add, tanh on 16 floats) runs forward, backward and tape reset; the reference is
 * the same arithmetic written by hand (forward storing intermediates, backward by the
 * chain rule). us_per_node = library time / nodes on the tape. */
#include "bench.h"
#include "sgrad.h"

#include <math.h>
#include <stdio.h>

#define W 16

typedef struct {
    sg_ctx *ctx;
    sg_tensor *x, *a, *b;
    int links; /* mul+add+tanh triples */
    int64_t nodes;
    float *ref_buf;
} ov_case;

static void run_lib(void *ud)
{
    ov_case *c = ud;
    sg_tensor *y = c->x;
    for (int i = 0; i < c->links; i++) y = sg_tanh(sg_add(sg_mul(y, c->a), c->b));
    sg_tensor *loss = sg_sum(y);
    if (!loss || sg_backward(loss)) {
        fprintf(stderr, "overhead: %s\n", sg_ctx_message(c->ctx));
        return;
    }
    c->nodes = sg_tape_nodes(c->ctx);
    sgb_sink(sg_tensor_get(sg_tensor_grad(c->a), 0));
    sg_tape_reset(c->ctx);
}

/* The same forward and backward by hand: h_{i+1} = tanh(h_i * a + b). */
static void run_ref(void *ud)
{
    ov_case *c = ud;
    const float *x = sg_tensor_f32(c->x), *a = sg_tensor_f32(c->a), *b = sg_tensor_f32(c->b);
    float *h = c->ref_buf; /* (links+1, W) */
    float ga[W] = {0}, gb[W] = {0}, gx[W] = {0}, g[W];
    for (int j = 0; j < W; j++) h[j] = x[j];
    for (int i = 0; i < c->links; i++)
        for (int j = 0; j < W; j++) h[(i + 1) * W + j] = tanhf(h[i * W + j] * a[j] + b[j]);
    for (int j = 0; j < W; j++) g[j] = 1.0f;
    for (int i = c->links - 1; i >= 0; i--)
        for (int j = 0; j < W; j++) {
            float y = h[(i + 1) * W + j], gz = g[j] * (1 - y * y);
            ga[j] += gz * h[i * W + j];
            gb[j] += gz;
            g[j] = gz * a[j];
        }
    for (int j = 0; j < W; j++) gx[j] = g[j];
    sgb_sink(ga[0] + gb[0] + gx[0]);
}

int sgb_overhead(const sgb_cfg *cfg)
{
    int threads = cfg->threads > 0 ? cfg->threads : 1;
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = threads});
    if (!ctx) return 1;
    int64_t shape[2] = {1, W};
    ov_case c = {ctx, sg_tensor_new(ctx, SG_F32, 2, shape), sg_tensor_new(ctx, SG_F32, 2, shape),
                 sg_tensor_new(ctx, SG_F32, 2, shape), 0, 0, NULL};
    if (!c.x || !c.a || !c.b) return 1;
    sg_tensor_fill_uniform(c.x, -1, 1);
    sg_tensor_fill_uniform(c.a, -1, 1);
    sg_tensor_fill_uniform(c.b, -1, 1);
    sg_tensor_requires_grad(c.a, 1);
    sg_tensor_requires_grad(c.b, 1);
    static const int chain[] = {10, 100, 1000};
    for (size_t k = 0; k < sizeof chain / sizeof chain[0]; k++) {
        c.links = chain[k];
        static float buf[(1000 + 1) * W];
        c.ref_buf = buf;
        int reps = sgb_reps(cfg, 200);
        double ms = sgb_median_ms(run_lib, &c, reps);
        double ref = sgb_median_ms(run_ref, &c, reps);
        char params[128], extra[128];
        snprintf(params, sizeof params, "{\"ops\":%lld,\"width\":%d}", (long long)c.nodes, W);
        snprintf(extra, sizeof extra, "\"us_per_node\":%.4g", ms * 1e3 / (double)(c.nodes ? c.nodes : 1));
        sgb_emit("overhead", "chain_fwd_bwd", params, ms, ref, threads, extra);
    }
    sg_ctx_free(ctx);
    return 0;
}
