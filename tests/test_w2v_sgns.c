/* sg_sgns_loss: the loss against a naive loop, the COO gradient against the same loss built
 * from general ops, the fused SGD update against W - lr * gradient, fused updates of other
 * optimizers against the unfused gradient and a step, bitwise determinism across thread
 * counts, the Hogwild path on one thread against the deterministic one, and input errors.
 * Its finite-difference gradcheck is in test_gradcheck_ops.c. */
#include "testutil.h"

#include <stdint.h>

static double naive_loss(const double *h, const double *W, const int64_t *t, int B, int T,
                         int D)
{
    double L = 0;
    for (int i = 0; i < B; i++)
        for (int c = 0; c < T; c++) {
            double s = 0;
            for (int d = 0; d < D; d++) s += W[t[i * T + c] * D + d] * h[i * D + d];
            double p = 1 / (1 + exp(c == 0 ? -s : s)); /* sigmoid(+-s) */
            L -= log(p);
        }
    return L;
}

static sg_tensor *filled(sg_ctx *ctx, sg_dtype dt, int64_t r, int64_t c, double lo, double hi)
{
    int64_t shape[2] = {r, c};
    sg_tensor *x = sg_tensor_new(ctx, dt, 2, shape);
    sg_tensor_fill_uniform(x, lo, hi);
    return x;
}

/* Plain SGD with learning rate lr holding W and, unless NULL, W2. */
static sg_optim *sgd_of(sg_ctx *ctx, double lr, sg_tensor *W, sg_tensor *W2)
{
    sg_sgd_opts o = SG_SGD_OPTS_DEFAULT;
    o.lr = lr;
    sg_optim *opt = sg_optim_sgd(ctx, &o);
    CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
    if (W2) CHECK_STATUS(ctx, sg_optim_add_param(opt, W2), SG_OK);
    return opt;
}

TEST(loss_matches_a_naive_loop)
{
    sg_ctx_opts o = {.seed = 3};
    sg_ctx *ctx = sg_ctx_new(&o);
    enum { B = 3, T = 3, D = 4, V = 5 };
    sg_tensor *h = sg_tensor_requires_grad(filled(ctx, SG_F64, B, D, -1, 1), 1);
    sg_tensor *W = sg_tensor_requires_grad(filled(ctx, SG_F64, V, D, -1, 1), 1);
    /* row 2 appears three times (duplicates must sum), row 4 never */
    const int64_t tv[B * T] = {2, 0, 1, 3, 2, 2, 0, 1, 3};
    int64_t ts[2] = {B, T};
    for (int dt = 0; dt < 2; dt++) {
        sg_tensor *tg;
        if (dt == 0) {
            tg = sg_tensor_from_data(ctx, SG_I64, 2, ts, tv);
        } else {
            int32_t t32[B * T];
            for (int i = 0; i < B * T; i++) t32[i] = (int32_t)tv[i];
            tg = sg_tensor_from_data(ctx, SG_I32, 2, ts, t32);
        }
        sg_tensor *L = sg_sgns_loss(h, W, tg, NULL);
        CHECK(L != NULL);
        CHECK_NEAR(sg_tensor_get(L, 0), naive_loss(sg_tensor_f64(h), sg_tensor_f64(W), tv, B, T, D),
                   1e-12);
        sg_tape_reset(ctx);
        sg_tensor_free(tg);
    }
    /* T = 1 (no negatives) and large scores (saturated sigmoid) stay finite and exact */
    int64_t s1[2] = {B, 1};
    const int64_t t1[B] = {1, 4, 1};
    sg_tensor *tg1 = sg_tensor_from_data(ctx, SG_I64, 2, s1, t1);
    sg_tensor_fill_uniform(W, 20, 30);
    sg_tensor_fill_uniform(h, -3, -2);
    sg_tensor *L = sg_sgns_loss(h, W, tg1, NULL);
    CHECK(L && isfinite(sg_tensor_get(L, 0)));
    CHECK_NEAR(sg_tensor_get(L, 0), naive_loss(sg_tensor_f64(h), sg_tensor_f64(W), t1, B, 1, D),
               1e-9 * sg_tensor_get(L, 0));
    sg_ctx_free(ctx);
}

/* The same loss from general ops: h rows repeated per target, output rows gathered,
 * row-wise dots, signs, log-sigmoid, minus the sum. */
static sg_tensor *graph_loss(sg_ctx *ctx, sg_tensor *h, sg_tensor *W, const int64_t *tv,
                             int64_t B, int64_t T)
{
    int64_t n[1] = {B * T};
    sg_tensor *rep = sg_tensor_new_tmp(ctx, SG_I64, 1, n);
    sg_tensor *tf = sg_tensor_new_tmp(ctx, SG_I64, 1, n);
    sg_tensor *sign = sg_tensor_new_tmp(ctx, SG_F64, 1, n);
    for (int64_t e = 0; e < B * T; e++) {
        ((int64_t *)sg_tensor_data(rep))[e] = e / T;
        ((int64_t *)sg_tensor_data(tf))[e] = tv[e];
        sg_tensor_f64(sign)[e] = e % T == 0 ? 1 : -1;
    }
    sg_tensor *s = sg_rowdot(sg_index_select(h, 0, rep), sg_embedding(W, tf, NULL));
    return sg_scale(sg_sum(sg_log_sigmoid(sg_mul(s, sign))), -1.0);
}

static void dense_grad(sg_tensor *x, double *out)
{
    sg_tensor *g = sg_tensor_grad(x);
    for (int64_t i = 0; i < sg_tensor_numel(x); i++) out[i] = g ? sg_tensor_get(g, i) : 0;
}

TEST(matches_general_ops_and_fused_update)
{
    sg_ctx_opts o = {.seed = 5};
    sg_ctx *ctx = sg_ctx_new(&o);
    enum { B = 40, T = 6, D = 8, V = 12 };
    sg_tensor *h = sg_tensor_requires_grad(filled(ctx, SG_F64, B, D, -0.5, 0.5), 1);
    sg_tensor *W = sg_tensor_requires_grad(filled(ctx, SG_F64, V, D, -0.5, 0.5), 1);
    int64_t tv[B * T];
    for (int e = 0; e < B * T; e++) tv[e] = (int64_t)(sg_rand_u64(ctx) % V);
    int64_t ts[2] = {B, T};
    sg_tensor *tg = sg_tensor_from_data(ctx, SG_I64, 2, ts, tv);
    static double gh_ref[B * D], gw_ref[V * D], gh[B * D], gw[V * D];

    sg_tensor *L = graph_loss(ctx, h, W, tv, B, T);
    CHECK_STATUS(ctx, sg_backward(L), SG_OK);
    double l_ref = sg_tensor_get(L, 0);
    dense_grad(h, gh_ref);
    dense_grad(W, gw_ref);
    sg_tape_reset(ctx);

    L = sg_sgns_loss(h, W, tg, NULL);
    CHECK_STATUS(ctx, sg_backward(L), SG_OK);
    CHECK_NEAR(sg_tensor_get(L, 0), l_ref, 1e-10);
    sg_tensor *g = sg_tensor_grad(W);
    CHECK(g && sg_tensor_layout(g) == SG_COO && sg_coo_nnz(g) == B * T);
    dense_grad(h, gh);
    dense_grad(W, gw);
    double worst = 0;
    for (int i = 0; i < B * D; i++) worst = fmax(worst, fabs(gh[i] - gh_ref[i]));
    for (int i = 0; i < V * D; i++) worst = fmax(worst, fabs(gw[i] - gw_ref[i]));
    CHECK(worst < 1e-12);
    sg_tape_reset(ctx);

    /* fused: W becomes W - lr * gradient, h still gets its gradient, W gets none */
    const double lr = 0.3;
    static double w0[V * D];
    memcpy(w0, sg_tensor_f64(W), sizeof w0);
    sg_optim *opt = sgd_of(ctx, lr, W, NULL);
    sg_sgns_opts so = {.fused = opt};
    L = sg_sgns_loss(h, W, tg, &so);
    CHECK_STATUS(ctx, sg_backward(L), SG_OK);
    CHECK(sg_tensor_grad(W) == NULL);
    dense_grad(h, gh);
    worst = 0;
    for (int i = 0; i < B * D; i++) worst = fmax(worst, fabs(gh[i] - gh_ref[i]));
    for (int i = 0; i < V * D; i++)
        worst = fmax(worst, fabs(sg_tensor_f64(W)[i] - (w0[i] - lr * gw_ref[i])));
    CHECK(worst < 1e-12);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

/* Trains a few fused steps in f32 and returns a checksum-free copy of both tables. */
static void fused_steps(int threads, float *win_out, float *wout_out, double *loss_out)
{
    enum { B = 3000, T = 6, D = 32, V = 50 };
    sg_ctx_opts o = {.threads = threads, .seed = 11};
    sg_ctx *ctx = sg_ctx_new(&o);
    sg_tensor *Win = sg_tensor_requires_grad(filled(ctx, SG_F32, V, D, -0.5, 0.5), 1);
    sg_tensor *Wout = sg_tensor_requires_grad(filled(ctx, SG_F32, V, D, -0.5, 0.5), 1);
    sg_optim *opt = sgd_of(ctx, 0.05, Win, Wout); /* one optimizer for both, as sgrad-w2v */
    *loss_out = 0;
    for (int step = 0; step < 3; step++) {
        int64_t bs[1] = {B}, ts[2] = {B, T};
        sg_tensor *idx = sg_tensor_new_tmp(ctx, SG_I32, 1, bs);
        sg_tensor *tg = sg_tensor_new_tmp(ctx, SG_I32, 2, ts);
        for (int i = 0; i < B; i++) ((int32_t *)sg_tensor_data(idx))[i] = (int32_t)(sg_rand_u64(ctx) % V);
        for (int i = 0; i < B * T; i++)
            ((int32_t *)sg_tensor_data(tg))[i] = (int32_t)(sg_rand_u64(ctx) % 7 == 0 ? 0 : sg_rand_u64(ctx) % V);
        sg_sgns_opts so = {.fused = opt};
        sg_tensor *L = sg_sgns_loss(sg_embedding(Win, idx, NULL), Wout, tg, &so);
        CHECK(L != NULL);
        CHECK_STATUS(ctx, sg_backward(L), SG_OK);
        CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
        *loss_out += sg_tensor_get(L, 0);
        sg_tape_reset(ctx);
    }
    memcpy(win_out, sg_tensor_f32(Win), sizeof(float) * V * D);
    memcpy(wout_out, sg_tensor_f32(Wout), sizeof(float) * V * D);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

TEST(fused_update_is_bitwise_deterministic)
{
    static float a_in[50 * 32], a_out[50 * 32], b_in[50 * 32], b_out[50 * 32];
    double la, lb;
    fused_steps(1, a_in, a_out, &la);
    fused_steps(2, b_in, b_out, &lb);
    CHECK(la == lb);
    CHECK(memcmp(a_in, b_in, sizeof a_in) == 0);
    CHECK(memcmp(a_out, b_out, sizeof a_out) == 0);
    fused_steps(3, b_in, b_out, &lb);
    CHECK(memcmp(a_out, b_out, sizeof a_out) == 0);
}

/* Called from inside the caller's parallel region (as sgrad-w2v's backward, beside the
 * drawing of the next batch), the library's loops run as tasks that the region's other
 * thread takes up, and the fused update cuts finer parts: the same bits as outside. */
TEST(fused_steps_inside_a_callers_parallel_region_are_bitwise_the_same)
{
    static float a_in[50 * 32], a_out[50 * 32], b_in[50 * 32], b_out[50 * 32];
    double la, lb = 0;
    fused_steps(1, a_in, a_out, &la);
#ifdef _OPENMP
#pragma omp parallel num_threads(2)
#pragma omp single
#endif
    fused_steps(2, b_in, b_out, &lb);
    CHECK(la == lb);
    CHECK(memcmp(a_in, b_in, sizeof a_in) == 0);
    CHECK(memcmp(a_out, b_out, sizeof a_out) == 0);
}

/* One fused step in f64 on a context with the given mode; W and h's gradient out. */
static void one_fused_step(int nondeterministic, int threads, double *w_out, double *gh_out)
{
    enum { B = 300, T = 4, D = 6, V = 7 };
    sg_ctx_opts o = {.threads = threads, .nondeterministic = nondeterministic, .seed = 9};
    sg_ctx *ctx = sg_ctx_new(&o);
    sg_tensor *h = sg_tensor_requires_grad(filled(ctx, SG_F64, B, D, -1, 1), 1);
    sg_tensor *W = sg_tensor_requires_grad(filled(ctx, SG_F64, V, D, -1, 1), 1);
    int64_t tv[B * T], ts[2] = {B, T};
    for (int e = 0; e < B * T; e++) tv[e] = (int64_t)(sg_rand_u64(ctx) % V);
    sg_tensor *tg = sg_tensor_from_data(ctx, SG_I64, 2, ts, tv);
    sg_optim *opt = sgd_of(ctx, 0.1, W, NULL);
    sg_sgns_opts so = {.fused = opt};
    /* the incoming gradient 2 scales both h's gradient and W's update */
    sg_tensor *L = sg_scale(sg_sgns_loss(h, W, tg, &so), 2.0);
    CHECK_STATUS(ctx, sg_backward(L), SG_OK);
    memcpy(w_out, sg_tensor_f64(W), sizeof(double) * V * D);
    sg_tensor *g = sg_tensor_grad(h);
    CHECK(g != NULL);
    for (int i = 0; g && i < B * D; i++) gh_out[i] = sg_tensor_get(g, i);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

TEST(hogwild_on_one_thread_equals_deterministic)
{
    static double w1[7 * 6], w2[7 * 6], g1[300 * 6], g2[300 * 6];
    one_fused_step(0, 2, w1, g1);
    one_fused_step(1, 1, w2, g2);
    CHECK(memcmp(w1, w2, sizeof w1) == 0);
    CHECK(memcmp(g1, g2, sizeof g1) == 0);
    /* two Hogwild threads may lose an update when they hit a row at once: close, not equal */
    one_fused_step(1, 2, w2, g2);
    CHECK(memcmp(g1, g2, sizeof g1) == 0);
    int far = 0;
    for (int i = 0; i < 7 * 6; i++) far += !(fabs(w1[i] - w2[i]) < 10.0); /* NaN counts */
    CHECK(far == 0);
}

TEST(fused_update_needs_a_leaf_parameter_of_the_optimizer)
{
    /* The fused update writes W in place and gives W no gradient: on W = W0 * 1 it would
     * change a tape temporary and W0 would get nothing; on a W that does not require grad,
     * or that the optimizer does not hold, it would silently not happen. Each is refused
     * (the same check as sg_embedding's); without fusion all are fine. */
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *h = sg_tensor_requires_grad(filled(ctx, SG_F32, 2, 3, -1, 1), 1);
    sg_tensor *W0 = sg_tensor_requires_grad(filled(ctx, SG_F32, 4, 3, -1, 1), 1);
    sg_tensor *U = sg_tensor_requires_grad(filled(ctx, SG_F32, 4, 3, -1, 1), 1);
    sg_tensor *F = filled(ctx, SG_F32, 4, 3, -1, 1);
    int64_t ts[2] = {2, 2};
    const int64_t t[4] = {0, 1, 2, 3};
    sg_tensor *tg = sg_tensor_from_data(ctx, SG_I64, 2, ts, t);
    sg_optim *opt = sgd_of(ctx, 0.1, W0, F);
    sg_sgns_opts so = {.fused = opt};
    sg_tensor *S = sg_scale(W0, 1.0);
    int64_t nodes = sg_tape_nodes(ctx);
    sg_tensor *bad[3] = {S, F, U};
    for (int i = 0; i < 3; i++) {
        sg_ctx_clear_error(ctx);
        CHECK(sg_sgns_loss(h, bad[i], tg, &so) == NULL && sg_ctx_status(ctx) == SG_ERR_ARG);
    }
    CHECK(sg_tape_nodes(ctx) == nodes);
    for (int i = 0; i < 3; i++) CHECK(sg_sgns_loss(h, bad[i], tg, NULL) != NULL);
    CHECK(sg_sgns_loss(h, W0, tg, &so) != NULL);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

/* A learning rate the schedule cannot give fails the backward and changes nothing. */
static double nan_lr(void *ud, int64_t step, double base)
{
    (void)ud, (void)step, (void)base;
    return NAN;
}

/* Fused into optimizers that need the gradient rows written out (Adagrad, SGD with
 * momentum and weight decay), the update equals the unfused COO gradient and a step of the
 * same optimizer, bitwise; a fused plain SGD follows the optimizer's schedule. */
TEST(fused_update_equals_gradient_and_step_of_the_optimizer)
{
    enum { B = 30, T = 4, D = 5, V = 9 };
    for (int kind = 0; kind < 3; kind++) {
        double w[2][V * D];
        for (int fused = 0; fused < 2; fused++) {
            sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.seed = 21});
            sg_tensor *h = filled(ctx, SG_F64, B, D, -1, 1);
            sg_tensor *W = sg_tensor_requires_grad(filled(ctx, SG_F64, V, D, -1, 1), 1);
            int64_t tv[B * T];
            for (int e = 0; e < B * T; e++) tv[e] = (int64_t)(sg_rand_u64(ctx) % V);
            sg_tensor *tg = sg_tensor_from_data(ctx, SG_I64, 2, (int64_t[]){B, T}, tv);
            sg_optim *opt;
            if (kind == 0) {
                opt = sg_optim_adagrad(ctx, &(sg_adagrad_opts){.lr = 0.2, .eps = 1e-10});
            } else if (kind == 1) {
                opt = sg_optim_sgd(ctx, &(sg_sgd_opts){.lr = 0.2, .momentum = 0.9, .weight_decay = 0.01});
            } else {
                opt = sg_optim_sgd(ctx, &(sg_sgd_opts){.lr = 0.2});
                sg_lr_schedule ls = {SG_LR_LINEAR, 2, 0.5, NULL, NULL}; /* 0.2, 0.15, 0.1 */
                CHECK_STATUS(ctx, sg_optim_set_schedule(opt, &ls), SG_OK);
            }
            CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
            sg_sgns_opts so = {.fused = fused ? opt : NULL};
            for (int step = 0; step < 3; step++) {
                CHECK_STATUS(ctx, sg_backward(sg_sgns_loss(h, W, tg, &so)), SG_OK);
                CHECK((sg_tensor_grad(W) == NULL) == fused);
                CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
                sg_tape_reset(ctx);
            }
            memcpy(w[fused], sg_tensor_f64(W), sizeof w[0]);
            sg_optim_free(opt);
            sg_ctx_free(ctx);
        }
        if (kind < 2) {
            CHECK(memcmp(w[0], w[1], sizeof w[0]) == 0);
        } else { /* the factored kernel rounds (lr * coef) * h, the step lr * (coef * h) */
            double worst = 0;
            for (int i = 0; i < V * D; i++) worst = fmax(worst, fabs(w[0][i] - w[1][i]));
            CHECK(worst < 1e-13);
        }
    }
}

TEST(fused_update_with_a_failing_schedule_changes_nothing)
{
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.seed = 4});
    sg_tensor *h = sg_tensor_requires_grad(filled(ctx, SG_F64, 3, 2, -1, 1), 1);
    sg_tensor *W = sg_tensor_requires_grad(filled(ctx, SG_F64, 4, 2, -1, 1), 1);
    sg_tensor *tg = sg_tensor_from_data(ctx, SG_I64, 2, (int64_t[]){3, 2}, (int64_t[]){0, 1, 2, 3, 1, 0});
    sg_optim *opt = sgd_of(ctx, 0.1, W, NULL);
    sg_lr_schedule ls = {SG_LR_CALLBACK, 0, 1, nan_lr, NULL};
    CHECK_STATUS(ctx, sg_optim_set_schedule(opt, &ls), SG_OK);
    double w0[8];
    memcpy(w0, sg_tensor_f64(W), sizeof w0);
    sg_sgns_opts so = {.fused = opt};
    CHECK(sg_backward(sg_sgns_loss(h, W, tg, &so)) == SG_ERR_VALUE);
    CHECK(memcmp(w0, sg_tensor_f64(W), sizeof w0) == 0);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

TEST(input_errors)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *h = sg_tensor_requires_grad(filled(ctx, SG_F32, 2, 3, -1, 1), 1);
    sg_tensor *W = sg_tensor_requires_grad(filled(ctx, SG_F32, 4, 3, -1, 1), 1);
    int64_t ts[2] = {2, 2};
    const int64_t bad[4] = {0, 1, 4, 2}; /* 4 is out of [0, 4) */
    sg_tensor *tg_bad = sg_tensor_from_data(ctx, SG_I64, 2, ts, bad);
    const int64_t neg[4] = {0, -1, 2, 2};
    sg_tensor *tg_neg = sg_tensor_from_data(ctx, SG_I64, 2, ts, neg);
    const int64_t ok[4] = {0, 1, 2, 3};
    sg_tensor *tg = sg_tensor_from_data(ctx, SG_I64, 2, ts, ok);
    sg_optim *opt = sgd_of(ctx, 0.1, W, NULL);
    sg_sgns_opts so = {.fused = opt};
    CHECK(sg_sgns_loss(h, W, tg_bad, &so) == NULL);
    CHECK(sg_ctx_status(ctx) == SG_ERR_INDEX);
    CHECK(sg_tape_nodes(ctx) == 0);
    CHECK(sg_sgns_loss(h, W, tg_neg, NULL) == NULL && sg_ctx_status(ctx) == SG_ERR_INDEX);
    sg_tensor *W5 = filled(ctx, SG_F32, 4, 5, -1, 1); /* D differs */
    CHECK(sg_sgns_loss(h, W5, tg, NULL) == NULL && sg_ctx_status(ctx) == SG_ERR_SHAPE);
    int64_t t3[2] = {3, 2};
    const int64_t v3[6] = {0, 1, 2, 3, 0, 1};
    sg_tensor *tg3 = sg_tensor_from_data(ctx, SG_I64, 2, t3, v3); /* B differs */
    CHECK(sg_sgns_loss(h, W, tg3, NULL) == NULL && sg_ctx_status(ctx) == SG_ERR_SHAPE);
    sg_tensor *W64 = filled(ctx, SG_F64, 4, 3, -1, 1);
    CHECK(sg_sgns_loss(h, W64, tg, NULL) == NULL && sg_ctx_status(ctx) == SG_ERR_DTYPE);
    CHECK(sg_sgns_loss(h, W, h, NULL) == NULL && sg_ctx_status(ctx) == SG_ERR_DTYPE);
    CHECK(sg_sgns_loss(NULL, W, tg, NULL) == NULL);
    CHECK(sg_sgns_loss(h, W, NULL, NULL) == NULL);
    /* B = 0 is a zero loss */
    int64_t z[2] = {0, 3}, zt[2] = {0, 2};
    sg_tensor *h0 = sg_tensor_new(ctx, SG_F32, 2, z);
    sg_tensor *t0 = sg_tensor_new(ctx, SG_I64, 2, zt);
    sg_tensor *L0 = sg_sgns_loss(h0, W, t0, NULL);
    CHECK(L0 && sg_tensor_get(L0, 0) == 0);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

/* The fused update runs after the whole backward: another node that reads W in its
 * backward (here mul(W, c), whose gradient for c is W) sees W as the forward did, and a
 * fused update whose h is W's own memory is refused. */
TEST(fused_update_waits_for_the_rest_of_the_backward)
{
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.seed = 5, .threads = 1});
    enum { B = 4, T = 3, D = 3, V = 4 };
    sg_tensor *W = sg_tensor_requires_grad(filled(ctx, SG_F64, V, D, -1, 1), 1);
    sg_tensor *c = sg_tensor_requires_grad(filled(ctx, SG_F64, V, D, -1, 1), 1);
    sg_tensor *h = filled(ctx, SG_F64, B, D, -1, 1);
    const int64_t tv[B * T] = {0, 1, 2, 1, 2, 3, 2, 3, 0, 3, 0, 1};
    sg_tensor *tg = sg_tensor_from_data(ctx, SG_I64, 2, (int64_t[]){B, T}, tv);
    double w0[V * D];
    for (int i = 0; i < V * D; i++) w0[i] = sg_tensor_get(W, i);
    sg_optim *opt = sgd_of(ctx, 0.5, W, NULL);
    sg_sgns_opts fo = {.fused = opt};
    /* the sgns term second: its backward runs before mul's in the traversal */
    sg_tensor *loss = sg_add(sg_sum(sg_mul(W, c)), sg_sgns_loss(h, W, tg, &fo));
    CHECK(loss != NULL);
    CHECK_STATUS(ctx, sg_backward(loss), SG_OK);
    sg_tensor *gc = sg_tensor_grad(c);
    int moved = 0;
    for (int i = 0; gc && i < V * D; i++) {
        CHECK_NEAR(sg_tensor_get(gc, i), w0[i], 0);
        moved += sg_tensor_get(W, i) != w0[i];
    }
    CHECK(gc != NULL && moved > 0); /* and the update did happen */
    sg_tape_reset(ctx);
    CHECK(sg_sgns_loss(sg_reshape(W, 2, (int64_t[]){V, D}), W, tg, &fo) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_ARG);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

TEST_MAIN()
