/* A 2-layer MLP learns a synthetic task (which of two interleaved spirals a 2-D point is
 * on) with plain SGD over the gradient store. Prints the loss falling and the final
 * training accuracy. Usage: sgrad-example-mlp [steps] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "sgrad.h"

#define N 512  /* points */
#define H 64   /* hidden units */
#define PI 3.14159265358979323846

static int fail(sg_ctx *ctx)
{
    fprintf(stderr, "error: %s (%s)\n", sg_ctx_message(ctx), sg_status_string(sg_ctx_status(ctx)));
    sg_ctx_free(ctx);
    return 1;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 1500;
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1, .seed = 7});
    if (!ctx) return 1;

    /* data: two spirals, label = arm */
    sg_tensor *X = sg_tensor_new(ctx, SG_F32, 2, (int64_t[]){N, 2});
    sg_tensor *Y = sg_tensor_new(ctx, SG_I64, 1, (int64_t[]){N});
    if (!X || !Y) return fail(ctx);
    float *x = sg_tensor_f32(X);
    int64_t *y = sg_tensor_data(Y);
    for (int i = 0; i < N; i++) {
        int arm = i % 2;
        double r = (double)(i / 2) / (N / 2), a = 3.0 * PI * r + arm * PI;
        x[2 * i] = (float)(r * cos(a) + 0.02 * (sg_rand_uniform(ctx) - 0.5));
        x[2 * i + 1] = (float)(r * sin(a) + 0.02 * (sg_rand_uniform(ctx) - 0.5));
        y[i] = arm;
    }

    /* parameters */
    sg_tensor *W1 = sg_tensor_new(ctx, SG_F32, 2, (int64_t[]){2, H});
    sg_tensor *b1 = sg_tensor_new(ctx, SG_F32, 1, (int64_t[]){H});
    sg_tensor *W2 = sg_tensor_new(ctx, SG_F32, 2, (int64_t[]){H, 2});
    sg_tensor *b2 = sg_tensor_new(ctx, SG_F32, 1, (int64_t[]){2});
    if (!W1 || !b1 || !W2 || !b2) return fail(ctx);
    sg_tensor_fill_uniform(W1, -2.0, 2.0);
    sg_tensor_fill_uniform(b1, -1.0, 1.0);
    sg_tensor_fill_uniform(W2, -0.2, 0.2);
    sg_tensor *params[] = {W1, b1, W2, b2};
    for (int i = 0; i < 4; i++) sg_tensor_requires_grad(params[i], 1);

    const float lr = 0.5f;
    for (int step = 0; step <= steps; step++) {
        sg_tensor *h = sg_relu(sg_add(sg_matmul(X, W1), b1));
        sg_tensor *logits = sg_add(sg_matmul(h, W2), b2);
        sg_tensor *loss = sg_cross_entropy(logits, Y);
        if (!loss || sg_backward(loss)) return fail(ctx);
        if (step % (steps / 10 ? steps / 10 : 1) == 0) {
            const float *lg = sg_tensor_f32(logits);
            int correct = 0;
            for (int i = 0; i < N; i++) correct += (lg[2 * i + 1] > lg[2 * i]) == (y[i] == 1);
            printf("step %5d  loss %.4f  accuracy %.3f\n", step, sg_tensor_get(loss, 0), (double)correct / N);
        }
        /* SGD over the gradient store: only parameters that got a gradient */
        for (int64_t i = 0; i < sg_grads_count(ctx); i++) {
            sg_tensor *p = sg_grads_param(ctx, i);
            const float *g = sg_tensor_f32(sg_tensor_grad(p));
            float *w = sg_tensor_f32(p);
            for (int64_t j = 0; j < sg_tensor_numel(p); j++) w[j] -= lr * g[j];
        }
        sg_tape_reset(ctx);
    }
    sg_ctx_free(ctx);
    return 0;
}
