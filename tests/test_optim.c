/* Optimizers on hand-checkable steps: every update rule against numbers worked out by hand
 * and against scalar reference loops written here from the published formulas (PyTorch's
 * documentation for SGD, Adagrad, Adam/AdamW; per-row counters for LazyAdam; one
 * accumulator per row for row-wise Adagrad). Also schedules, clipping (duplicates summed
 * before squaring), state access and errors that change nothing. */
#include "optim/optim.h"
#define TU_SEED 0x2545F4914F6CDD1Dull
#include "testutil.h"


static sg_tensor *param2(sg_ctx *ctx, int64_t rows, int64_t width, const double *init)
{
    int64_t shape[2] = {rows, width};
    sg_tensor *t = init ? sg_tensor_from_data(ctx, SG_F64, 2, shape, init)
                        : sg_tensor_new(ctx, SG_F64, 2, shape);
    return sg_tensor_requires_grad(t, 1);
}

/* W gets the gradient of an embedding lookup of rows idx[0..n) whose output gradient is
 * val (n, width): a COO gradient with those rows, uncoalesced. */
static int give_rows(sg_tensor *W, int64_t n, const int64_t *idx, const double *val)
{
    sg_ctx *ctx = sg_tensor_ctx(W);
    int64_t width = sg_tensor_dim(W, 1);
    sg_tensor *it = sg_tensor_new_tmp(ctx, SG_I64, 1, &n);
    int64_t gshape[2] = {n, width};
    sg_tensor *gt = sg_tensor_new_tmp(ctx, SG_F64, 2, gshape);
    memcpy(sg_tensor_data(it), idx, (size_t)n * sizeof *idx);
    memcpy(sg_tensor_data(gt), val, (size_t)(n * width) * sizeof *val);
    sg_tensor *e = sg_embedding(W, it, NULL);
    return e ? sg_backward_grad(e, gt) : sg_ctx_status(ctx);
}

/* W gets the dense gradient g (numel). */
static int give_dense(sg_tensor *W, const double *g)
{
    sg_ctx *ctx = sg_tensor_ctx(W);
    sg_tensor *gt = sg_tensor_new_tmp(ctx, SG_F64, sg_tensor_ndim(W), sg_tensor_shape(W));
    memcpy(sg_tensor_data(gt), g, (size_t)sg_tensor_numel(W) * sizeof *g);
    return sg_backward_grad(W, gt);
}

static double at(sg_tensor *t, int64_t i) { return sg_tensor_f64(t)[i]; }

/* ---- scalar references, one element at a time, from the documented formulas */

static void ref_sgd(double *w, double *v, double g, int64_t t, double lr, double mu, double damp,
                    double wd, int nesterov)
{
    g += wd * *w;
    if (mu != 0) {
        *v = t == 1 ? g : mu * *v + (1 - damp) * g;
        g = nesterov ? g + mu * *v : *v;
    }
    *w -= lr * g;
}

static void ref_adagrad(double *w, double *sum, double g, int64_t t, double lr, double lr_decay,
                        double wd, double eps)
{
    double clr = lr / (1 + (double)(t - 1) * lr_decay);
    g += wd * *w;
    *sum += g * g;
    *w -= clr * g / (sqrt(*sum) + eps);
}

static void ref_adam(double *w, double *m, double *v, double g, int64_t t, double lr, double b1,
                     double b2, double eps, double wd, int decoupled)
{
    if (decoupled) *w *= 1 - lr * wd;
    else g += wd * *w;
    *m = b1 * *m + (1 - b1) * g;
    *v = b2 * *v + (1 - b2) * g * g;
    double mhat = *m / (1 - pow(b1, (double)t)), vhat = *v / (1 - pow(b2, (double)t));
    *w -= lr * mhat / (sqrt(vhat) + eps);
}

/* ---------------------------------------------------------------- SGD */

TEST(sgd_momentum_by_hand)
{
    /* w = 1, g = 1 every step, lr 0.1, momentum 0.9: v = 1, 1.9, 2.71 and
     * w = 0.9, 0.71, 0.439. */
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *W = param2(ctx, 1, 1, (double[]){1});
    sg_optim *opt = sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0.9, 0, 0, 0});
    CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
    const double want[3] = {0.9, 0.71, 0.439};
    for (int s = 0; s < 3; s++) {
        CHECK_STATUS(ctx, give_dense(W, (double[]){1}), SG_OK);
        CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
        sg_tape_reset(ctx);
        CHECK_NEAR(at(W, 0), want[s], 1e-14);
    }
    CHECK(sg_optim_steps(opt) == 3);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

TEST(sgd_plain_sparse_applies_duplicates_and_leaves_other_rows)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    double init[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    sg_tensor *W = param2(ctx, 4, 2, init);
    sg_optim *opt = sg_optim_sgd(ctx, &(sg_sgd_opts){0.5, 0, 0, 0, 0});
    sg_optim_add_param(opt, W);
    int64_t idx[3] = {2, 0, 2};
    double g[6] = {1, 2, 10, 20, 3, 4};
    CHECK_STATUS(ctx, give_rows(W, 3, idx, g), SG_OK);
    CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
    /* row 0: (1,2) - 0.5*(10,20); row 2: (5,6) - 0.5*((1,2)+(3,4)) */
    CHECK_NEAR(at(W, 0), -4, 1e-15);
    CHECK_NEAR(at(W, 1), -8, 1e-15);
    CHECK_NEAR(at(W, 4), 3, 1e-15);
    CHECK_NEAR(at(W, 5), 3, 1e-15);
    CHECK(at(W, 2) == 3 && at(W, 3) == 4 && at(W, 6) == 7 && at(W, 7) == 8);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

/* Plain SGD on a sparse gradient whose rows repeat, as word2vec's are (low rows most
 * often), large enough to run one part per thread: every row gets its entries in order,
 * the same bits on 1, 2 and 3 threads, and the loop below's values. */
TEST(sgd_plain_sparse_on_threads_matches_the_loop)
{
    enum { V = 500, D = 40, N = 4000 };
    static double init[V * D], g[N * D], want[V * D], got[3][V * D];
    static int64_t idx[N];
    for (int64_t i = 0; i < V * D; i++) init[i] = want[i] = tu_rand_unit();
    for (int64_t e = 0; e < N; e++) {
        const double u = (tu_rand_unit() + 1) / 2;
        idx[e] = (int64_t)(u * u * u * V); /* skewed towards row 0 */
        for (int64_t j = 0; j < D; j++) g[e * D + j] = tu_rand_unit();
    }
    const double lr = 0.25;
    for (int64_t e = 0; e < N; e++)
        for (int64_t j = 0; j < D; j++) want[idx[e] * D + j] -= lr * g[e * D + j];
    for (int threads = 1; threads <= 3; threads++) {
        sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = threads});
        sg_tensor *W = param2(ctx, V, D, init);
        sg_optim *opt = sg_optim_sgd(ctx, &(sg_sgd_opts){lr, 0, 0, 0, 0});
        CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
        CHECK_STATUS(ctx, give_rows(W, N, idx, g), SG_OK);
        CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
        memcpy(got[threads - 1], sg_tensor_f64(W), sizeof got[0]);
        sg_optim_free(opt);
        sg_ctx_free(ctx);
    }
    double worst = 0;
    for (int64_t i = 0; i < V * D; i++) {
        const double d = fabs(got[0][i] - want[i]);
        if (d > worst) worst = d;
    }
    CHECK(worst < 1e-12);
    CHECK(memcmp(got[0], got[1], sizeof got[0]) == 0);
    CHECK(memcmp(got[0], got[2], sizeof got[0]) == 0);
}

TEST(sgd_dense_variants_match_reference)
{
    const double cfg[5][4] = {/* momentum, dampening, weight_decay, nesterov */
                              {0, 0, 0.1, 0},
                              {0.9, 0, 0, 0},
                              {0.9, 0.3, 0.05, 0},
                              {0.8, 0, 0.02, 1},
                              {0.5, 0.5, 0, 0}};
    for (int c = 0; c < 5; c++) {
        sg_ctx *ctx = sg_ctx_new(NULL);
        double w[6], v[6] = {0}, g[6];
        for (int i = 0; i < 6; i++) w[i] = tu_rand_unit();
        sg_tensor *W = param2(ctx, 2, 3, w);
        sg_sgd_opts o = {0.05, cfg[c][0], cfg[c][1], cfg[c][2], (int)cfg[c][3]};
        sg_optim *opt = sg_optim_sgd(ctx, &o);
        CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
        for (int s = 1; s <= 5; s++) {
            for (int i = 0; i < 6; i++) g[i] = tu_rand_unit();
            give_dense(W, g);
            CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
            sg_tape_reset(ctx);
            for (int i = 0; i < 6; i++) ref_sgd(&w[i], &v[i], g[i], s, o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov);
        }
        for (int i = 0; i < 6; i++) CHECK_NEAR(at(W, i), w[i], 1e-13);
        if (o.momentum != 0) {
            const char *name = NULL;
            sg_tensor *buf = sg_optim_state(opt, W, 1, &name);
            CHECK(buf && !strcmp(name, "momentum_buffer"));
            for (int i = 0; buf && i < 6; i++) CHECK_NEAR(at(buf, i), v[i], 1e-13);
        }
        sg_optim_free(opt);
        sg_ctx_free(ctx);
    }
}

/* ---------------------------------------------------------------- Adagrad */

TEST(adagrad_by_hand_and_duplicates_summed_before_squaring)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    /* w = 1, g = 2, lr 0.1, eps 0: sum 4 -> w 0.9; sum 8 -> w 0.9 - 0.2/sqrt(8) */
    sg_tensor *W = param2(ctx, 1, 1, (double[]){1});
    sg_optim *opt = sg_optim_adagrad(ctx, &(sg_adagrad_opts){0.1, 0, 0, 0, 0});
    sg_optim_add_param(opt, W);
    give_dense(W, (double[]){2});
    sg_optim_step(opt);
    sg_tape_reset(ctx);
    CHECK_NEAR(at(W, 0), 0.9, 1e-15);
    give_dense(W, (double[]){2});
    sg_optim_step(opt);
    sg_tape_reset(ctx);
    CHECK_NEAR(at(W, 0), 0.8292893218813452, 1e-15);

    /* row 1 named twice with (1,1) and (2,2): one gradient (3,3), sum 9, w = -0.1 each
     * (squaring before summing would give sum 5) */
    sg_tensor *V = param2(ctx, 3, 2, NULL);
    sg_optim *opt2 = sg_optim_adagrad(ctx, &(sg_adagrad_opts){0.1, 0, 0, 0, 0});
    sg_optim_add_param(opt2, V);
    give_rows(V, 2, (int64_t[]){1, 1}, (double[]){1, 1, 2, 2});
    CHECK_STATUS(ctx, sg_optim_step(opt2), SG_OK);
    sg_tape_reset(ctx);
    CHECK_NEAR(at(V, 2), -0.1, 1e-15);
    CHECK_NEAR(at(V, 3), -0.1, 1e-15);
    CHECK(at(V, 0) == 0 && at(V, 5) == 0);
    sg_tensor *sum = sg_optim_state(opt2, V, 1, NULL);
    CHECK_NEAR(at(sum, 2), 9, 1e-15);
    sg_optim_free(opt);
    sg_optim_free(opt2);
    sg_ctx_free(ctx);
}

TEST(adagrad_without_weight_decay_has_no_decay_term)
{
    /* as torch's: with weight_decay 0 the gradient is not g + 0 * w, so an infinite
     * weight stays infinite instead of making its gradient, sum and weight NaN; rows of 64
     * and of 3, sparse and dense */
    sg_ctx *ctx = sg_ctx_new(NULL);
    const int64_t widths[2] = {64, 3};
    for (int k = 0; k < 2; k++)
        for (int dense = 0; dense < 2; dense++) {
            const int64_t D = widths[k];
            double init[128] = {0}, g[128];
            init[1] = INFINITY;
            for (int64_t j = 0; j < 2 * D; j++) g[j] = 1;
            sg_tensor *W = param2(ctx, 2, D, init);
            sg_optim *opt = sg_optim_adagrad(ctx, &(sg_adagrad_opts){0.1, 0, 0, 0, 0});
            sg_optim_add_param(opt, W);
            if (dense) give_dense(W, g);
            else give_rows(W, 1, (int64_t[]){0}, g);
            CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
            sg_tape_reset(ctx);
            CHECK(isinf(at(W, 1)) && at(W, 1) > 0);
            CHECK_NEAR(at(W, 0), -0.1, 1e-15);
            CHECK_NEAR(at(sg_optim_state(opt, W, 1, NULL), 1), 1, 1e-15);
            sg_optim_free(opt);
        }
    sg_ctx_free(ctx);
}

TEST(adagrad_dense_and_sparse_match_reference)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_adagrad_opts o = {0.2, 0.1, 0.01, 0.5, 1e-10};
    double wd_[6], sd_[6], ws[6], ss[6];
    for (int i = 0; i < 6; i++) {
        wd_[i] = ws[i] = tu_rand_unit();
        sd_[i] = ss[i] = o.initial_accumulator;
    }
    sg_tensor *D = param2(ctx, 3, 2, wd_), *S = param2(ctx, 3, 2, ws);
    sg_optim *od = sg_optim_adagrad(ctx, &o), *os = sg_optim_adagrad(ctx, &o);
    sg_optim_add_param(od, D);
    sg_optim_add_param(os, S);
    for (int s = 1; s <= 4; s++) {
        double g[6], gs[4];
        for (int i = 0; i < 6; i++) g[i] = tu_rand_unit();
        for (int i = 0; i < 4; i++) gs[i] = tu_rand_unit();
        int64_t idx[2] = {s % 3, s % 3}; /* one row, twice */
        give_dense(D, g);
        give_rows(S, 2, idx, gs);
        CHECK_STATUS(ctx, sg_optim_step(od), SG_OK);
        CHECK_STATUS(ctx, sg_optim_step(os), SG_OK);
        sg_tape_reset(ctx);
        for (int i = 0; i < 6; i++) ref_adagrad(&wd_[i], &sd_[i], g[i], s, o.lr, o.lr_decay, o.weight_decay, o.eps);
        for (int j = 0; j < 2; j++) {
            int64_t e = idx[0] * 2 + j;
            ref_adagrad(&ws[e], &ss[e], gs[j] + gs[2 + j], s, o.lr, o.lr_decay, o.weight_decay, o.eps);
        }
    }
    for (int i = 0; i < 6; i++) {
        CHECK_NEAR(at(D, i), wd_[i], 1e-13);
        CHECK_NEAR(at(S, i), ws[i], 1e-13);
    }
    sg_optim_free(od);
    sg_optim_free(os);
    sg_ctx_free(ctx);
}

/* Row grouping finds a row's group through opt->slot (a word per row) or, for an update
 * much smaller than the table, through a hash table of its own; slot stamps of earlier
 * groupings must read as "not met", also across the epochs' wrap-around. Either way a
 * sparse Adagrad step (no weight decay) with duplicate rows equals, bitwise, the dense
 * step whose gradient sums each row's entries in order (0 + g1 + g2 + ...). */
TEST(adagrad_row_grouping_by_slot_and_by_hash_equals_the_dense_step)
{
    const int64_t W_ = 3, N = 300;
    const int64_t table_rows[2] = {50, 100000}; /* slot; hash (2^10 words << 1e5) */
    for (int t = 0; t < 2; t++) {
        const int64_t V = table_rows[t];
        sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 2});
        sg_adagrad_opts o = {0.1, 0.05, 0, 0.1, 1e-10};
        sg_tensor *S = param2(ctx, V, W_, NULL), *D = param2(ctx, V, W_, NULL);
        for (int64_t i = 0; i < V * W_; i++) sg_tensor_f64(S)[i] = sg_tensor_f64(D)[i] = tu_rand_unit();
        sg_optim *os = sg_optim_adagrad(ctx, &o), *od = sg_optim_adagrad(ctx, &o);
        sg_optim_add_param(os, S);
        sg_optim_add_param(od, D);
        int64_t *idx = malloc((size_t)N * sizeof *idx);
        double *val = malloc((size_t)(N * W_) * sizeof *val), *g = malloc((size_t)(V * W_) * sizeof *g);
        int64_t pick[200]; /* random rows: hash probes collide (an arithmetic run would not) */
        for (int k = 0; k < 200; k++) pick[k] = (int64_t)(tu_rand() % (uint64_t)V);
        for (int s = 0; s < 6; s++) {
            if (s == 2) os->slot_epoch = SG__SLOT_EPOCH_MAX - 1; /* steps 2, 3 wrap around */
            for (int64_t i = 0; i < N; i++) idx[i] = (pick[tu_rand() % 200] + s) % V; /* repeated */
            for (int64_t i = 0; i < N * W_; i++) val[i] = tu_rand_unit();
            for (int64_t i = 0; i < V * W_; i++) g[i] = 0;
            for (int64_t i = 0; i < N; i++)
                for (int64_t j = 0; j < W_; j++) g[idx[i] * W_ + j] += val[i * W_ + j];
            CHECK_STATUS(ctx, give_rows(S, N, idx, val), SG_OK);
            CHECK_STATUS(ctx, give_dense(D, g), SG_OK);
            CHECK_STATUS(ctx, sg_optim_step(os), SG_OK);
            CHECK_STATUS(ctx, sg_optim_step(od), SG_OK);
            sg_tape_reset(ctx);
            CHECK(memcmp(sg_tensor_data(S), sg_tensor_data(D), (size_t)(V * W_) * sizeof(double)) == 0);
        }
        CHECK(t == 1 || (os->slot_epoch >= 1 && os->slot_epoch <= 4)); /* it wrapped */
        free(idx);
        free(val);
        free(g);
        sg_optim_free(os);
        sg_optim_free(od);
        sg_ctx_free(ctx);
        if (tu_failures) {
            fprintf(stderr, "  (%lld rows)\n", (long long)V);
            return;
        }
    }
}

TEST(rowwise_adagrad_by_hand)
{
    /* row gradient (3,4): mean square 12.5, then 25; lr 0.1, eps 0 */
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *W = param2(ctx, 3, 2, NULL);
    sg_optim *opt = sg_optim_rowwise_adagrad(ctx, &(sg_adagrad_opts){0.1, 0, 0, 0, 0});
    CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
    /* first step: row 2 named twice, (1,1) + (2,3) = (3,4) */
    give_rows(W, 2, (int64_t[]){2, 2}, (double[]){1, 1, 2, 3});
    CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
    sg_tape_reset(ctx);
    CHECK_NEAR(at(W, 4), -0.3 / sqrt(12.5), 1e-15);
    CHECK_NEAR(at(W, 5), -0.4 / sqrt(12.5), 1e-15);
    give_rows(W, 1, (int64_t[]){2}, (double[]){3, 4});
    CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
    sg_tape_reset(ctx);
    CHECK_NEAR(at(W, 4), -0.3 / sqrt(12.5) - 0.06, 1e-15);
    CHECK_NEAR(at(W, 5), -0.4 / sqrt(12.5) - 0.08, 1e-15);
    sg_tensor *acc = sg_optim_state(opt, W, 1, NULL);
    CHECK(sg_tensor_ndim(acc) == 1 && sg_tensor_dim(acc, 0) == 3);
    CHECK_NEAR(at(acc, 2), 25, 1e-14);
    CHECK(at(acc, 0) == 0 && at(W, 0) == 0 && at(W, 3) == 0);
    /* a dense gradient steps every row with its own accumulator */
    give_dense(W, (double[]){0, 2, 1, -1, 0, 0});
    CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
    sg_tape_reset(ctx);
    CHECK_NEAR(at(acc, 0), 2, 1e-15);
    CHECK_NEAR(at(W, 1), -0.1 * 2 / sqrt(2), 1e-15);
    CHECK_NEAR(at(acc, 1), 1, 1e-15);
    CHECK_NEAR(at(W, 2), -0.1, 1e-15);
    CHECK_NEAR(at(W, 3), 0.1, 1e-15);
    CHECK_NEAR(at(acc, 2), 25, 1e-14); /* zero gradient row: nothing added, not moved */
    CHECK_NEAR(at(W, 4), -0.3 / sqrt(12.5) - 0.06, 1e-15);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

/* ---------------------------------------------------------------- Adam */

TEST(adam_by_hand_and_against_reference)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    /* constant gradient: bias-corrected m/sqrt(v) = sign(g), so each step moves lr */
    sg_tensor *W = param2(ctx, 1, 1, (double[]){1});
    sg_optim *opt = sg_optim_adam(ctx, &(sg_adam_opts){0.1, 0.9, 0.999, 1e-8, 0, 0});
    sg_optim_add_param(opt, W);
    for (int s = 0; s < 2; s++) {
        give_dense(W, (double[]){0.5});
        CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
        sg_tape_reset(ctx);
    }
    CHECK_NEAR(at(W, 0), 0.8, 1e-7);
    sg_optim_free(opt);

    for (int decoupled = 0; decoupled < 2; decoupled++) {
        sg_adam_opts o = {0.01, 0.8, 0.95, 1e-6, 0.1, decoupled};
        double w[6], m[6] = {0}, v[6] = {0}, g[6];
        for (int i = 0; i < 6; i++) w[i] = tu_rand_unit();
        sg_tensor *P = param2(ctx, 2, 3, w);
        sg_optim *a = sg_optim_adam(ctx, &o);
        sg_optim_add_param(a, P);
        for (int s = 1; s <= 6; s++) {
            for (int i = 0; i < 6; i++) g[i] = tu_rand_unit();
            give_dense(P, g);
            CHECK_STATUS(ctx, sg_optim_step(a), SG_OK);
            sg_tape_reset(ctx);
            for (int i = 0; i < 6; i++) ref_adam(&w[i], &m[i], &v[i], g[i], s, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, decoupled);
        }
        for (int i = 0; i < 6; i++) CHECK_NEAR(at(P, i), w[i], 1e-13);
        sg_optim_free(a);
    }
    sg_ctx_free(ctx);
}

/* Parameters of one step at different step counts (one joined later): each gets its own
 * bias corrections, whatever the order the step meets them in. */
TEST(adam_parameters_at_different_step_counts)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_adam_opts o = {0.05, 0.8, 0.9, 1e-8, 0, 0};
    enum { N = 3, W = 4 };
    double w[N][W], m[N][W] = {{0}}, v[N][W] = {{0}}, g[W];
    int64_t t[N] = {0};
    sg_tensor *P[N];
    sg_optim *opt = sg_optim_adam(ctx, &o);
    for (int p = 0; p < N; p++) {
        for (int i = 0; i < W; i++) w[p][i] = tu_rand_unit();
        P[p] = param2(ctx, 1, W, w[p]);
        CHECK(sg_optim_add_param(opt, P[p]) == SG_OK);
    }
    /* steps 1-3: parameters 0 and 2 only; steps 4-6: all three, met in the order 0, 1, 2
     * (step counts 4, 1, 4 at step 4) */
    for (int s = 1; s <= 6; s++) {
        for (int p = 0; p < N; p++) {
            if (p == 1 && s <= 3) continue;
            for (int i = 0; i < W; i++) g[i] = tu_rand_unit();
            give_dense(P[p], g);
            t[p]++;
            for (int i = 0; i < W; i++)
                ref_adam(&w[p][i], &m[p][i], &v[p][i], g[i], t[p], o.lr, o.beta1, o.beta2, o.eps, 0, 0);
        }
        CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
        sg_tape_reset(ctx);
    }
    for (int p = 0; p < N; p++)
        for (int i = 0; i < W; i++) CHECK_NEAR(at(P[p], i), w[p][i], 1e-13);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

/* Steps taken without a tape reset in between (the same gradients applied again) do not
 * grow the step arena when few parameters have a gradient. */
TEST(repeated_steps_without_reset_keep_the_arena)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    enum { N = 10, W = 8, STEPS = 4000 };
    sg_optim *opt = sg_optim_adam(ctx, NULL);
    double g[W];
    for (int i = 0; i < W; i++) g[i] = tu_rand_unit();
    for (int p = 0; p < N; p++) {
        sg_tensor *P = param2(ctx, 1, W, NULL);
        CHECK(sg_optim_add_param(opt, P) == SG_OK);
        give_dense(P, g);
    }
    CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
    size_t arena = sg_ctx_mem_stats(ctx).arena_bytes;
    for (int s = 1; s < STEPS; s++) CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
    CHECK(sg_ctx_mem_stats(ctx).arena_bytes == arena);
    CHECK(sg_optim_steps(opt) == STEPS);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

TEST(adam_with_sparse_gradient_is_dense_adam)
{
    /* dense Adam given COO gradients moves untouched rows along their first moment, as
     * with the same gradients made dense */
    sg_ctx *ctx = sg_ctx_new(NULL);
    double init[8];
    for (int i = 0; i < 8; i++) init[i] = tu_rand_unit();
    sg_tensor *S = param2(ctx, 4, 2, init), *D = param2(ctx, 4, 2, init);
    sg_adam_opts o = {0.05, 0.9, 0.99, 1e-8, 0.01, 0};
    sg_optim *os = sg_optim_adam(ctx, &o), *od = sg_optim_adam(ctx, &o);
    sg_optim_add_param(os, S);
    sg_optim_add_param(od, D);
    for (int s = 0; s < 4; s++) {
        int64_t idx[2] = {s == 0 ? 1 : 3, 3};
        double g[4], dense[8] = {0};
        for (int i = 0; i < 4; i++) g[i] = tu_rand_unit();
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 2; j++) dense[idx[k] * 2 + j] += g[k * 2 + j];
        give_rows(S, 2, idx, g);
        give_dense(D, dense);
        CHECK_STATUS(ctx, sg_optim_step(os), SG_OK);
        CHECK_STATUS(ctx, sg_optim_step(od), SG_OK);
        sg_tape_reset(ctx);
    }
    for (int i = 0; i < 8; i++) CHECK_NEAR(at(S, i), at(D, i), 1e-14);
    CHECK(at(S, 2) != init[2]); /* row 1, touched at step 1 only, kept moving */
    sg_optim_free(os);
    sg_optim_free(od);
    sg_ctx_free(ctx);
}

TEST(lazy_adam_counts_steps_per_row)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    double init[8];
    for (int i = 0; i < 8; i++) init[i] = tu_rand_unit();
    sg_tensor *W = param2(ctx, 4, 2, init);
    sg_adam_opts o = {0.1, 0.9, 0.999, 1e-8, 0, 0};
    sg_optim *opt = sg_optim_lazy_adam(ctx, &o);
    CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
    double w[8], m[8] = {0}, v[8] = {0};
    int64_t k[4] = {0};
    memcpy(w, init, sizeof w);
    /* step 1: row 0; step 2: rows 0 and 3; step 3: row 3 twice (summed) */
    const int64_t idx[3][2] = {{0, 0}, {0, 3}, {3, 3}};
    const int n[3] = {1, 2, 2};
    for (int s = 0; s < 3; s++) {
        double g[4];
        for (int i = 0; i < 4; i++) g[i] = tu_rand_unit();
        give_rows(W, n[s], idx[s], g);
        CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
        sg_tape_reset(ctx);
        double sum[4][2] = {{0}};
        int touched[4] = {0};
        for (int e = 0; e < n[s]; e++) {
            touched[idx[s][e]] = 1;
            for (int j = 0; j < 2; j++) sum[idx[s][e]][j] += g[e * 2 + j];
        }
        for (int r = 0; r < 4; r++) {
            if (!touched[r]) continue;
            k[r]++;
            for (int j = 0; j < 2; j++)
                ref_adam(&w[r * 2 + j], &m[r * 2 + j], &v[r * 2 + j], sum[r][j], k[r], o.lr, o.beta1, o.beta2, o.eps, 0, 0);
        }
        if (s == 1) { /* row 3's first update moves each element by lr against its sign */
            for (int j = 0; j < 2; j++)
                CHECK_NEAR(at(W, 6 + j), init[6 + j] - (g[2 + j] > 0 ? 0.1 : -0.1), 1e-6);
        }
    }
    for (int i = 0; i < 8; i++) CHECK_NEAR(at(W, i), w[i], 1e-13);
    CHECK(at(W, 2) == init[2] && at(W, 5) == init[5]); /* rows 1, 2 untouched */
    sg_tensor *rs = sg_optim_state(opt, W, 3, NULL);
    CHECK(((int64_t *)sg_tensor_data(rs))[0] == 2 && ((int64_t *)sg_tensor_data(rs))[3] == 2);
    CHECK(((int64_t *)sg_tensor_data(rs))[1] == 0);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

TEST(lazy_adam_with_dense_gradients_equals_adam)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    double init[6];
    for (int i = 0; i < 6; i++) init[i] = tu_rand_unit();
    sg_tensor *L = param2(ctx, 3, 2, init), *A = param2(ctx, 3, 2, init);
    sg_adam_opts o = {0.02, 0.9, 0.99, 1e-8, 0.05, 1};
    sg_optim *ol = sg_optim_lazy_adam(ctx, &o), *oa = sg_optim_adam(ctx, &o);
    sg_optim_add_param(ol, L);
    sg_optim_add_param(oa, A);
    for (int s = 0; s < 5; s++) {
        double g[6];
        for (int i = 0; i < 6; i++) g[i] = tu_rand_unit();
        give_dense(L, g);
        give_dense(A, g);
        sg_optim_step(ol);
        sg_optim_step(oa);
        sg_tape_reset(ctx);
    }
    for (int i = 0; i < 6; i++) CHECK_NEAR(at(L, i), at(A, i), 1e-14);
    sg_optim_free(ol);
    sg_optim_free(oa);
    sg_ctx_free(ctx);
}

/* ---------------------------------------------------------------- schedules */

static double inv_step(void *ud, int64_t t, double base) { return base / (double)t + *(double *)ud; }
static double bad_lr(void *ud, int64_t t, double base)
{
    (void)ud;
    return t >= 2 ? NAN : base;
}

TEST(schedules_linear_and_callback)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *W = param2(ctx, 1, 1, NULL);
    sg_optim *opt = sg_optim_sgd(ctx, &(sg_sgd_opts){1.0, 0, 0, 0, 0});
    sg_optim_add_param(opt, W);
    CHECK_STATUS(ctx, sg_optim_set_schedule(opt, &(sg_lr_schedule){SG_LR_LINEAR, 4, 0.2, NULL, NULL}), SG_OK);
    CHECK_NEAR(sg_optim_lr(opt), 1.0, 1e-15);
    for (int s = 0; s < 3; s++) { /* lr 1, 0.8, 0.6 with g = 1 */
        give_dense(W, (double[]){1});
        sg_optim_step(opt);
        sg_tape_reset(ctx);
    }
    CHECK_NEAR(at(W, 0), -2.4, 1e-14);
    CHECK_NEAR(sg_optim_lr(opt), 0.4, 1e-15);
    sg_optim_set_steps(opt, 10);
    CHECK_NEAR(sg_optim_lr(opt), 0.2, 1e-15);

    double add = 0.5;
    sg_optim_set_schedule(opt, &(sg_lr_schedule){SG_LR_CALLBACK, 0, 0, inv_step, &add});
    CHECK_NEAR(sg_optim_lr(opt), 1.0 / 11 + 0.5, 1e-15);
    sg_optim_set_lr(opt, 2.0);
    CHECK_NEAR(sg_optim_lr(opt), 2.0 / 11 + 0.5, 1e-15);

    /* a schedule that fails: the step reports it and changes nothing */
    sg_optim_set_steps(opt, 0);
    sg_optim_set_schedule(opt, &(sg_lr_schedule){SG_LR_CALLBACK, 0, 0, bad_lr, NULL});
    give_dense(W, (double[]){1});
    CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
    sg_tape_reset(ctx);
    double before = at(W, 0);
    give_dense(W, (double[]){1});
    CHECK_STATUS(ctx, sg_optim_step(opt), SG_ERR_VALUE);
    sg_tape_reset(ctx);
    CHECK(at(W, 0) == before && sg_optim_steps(opt) == 1);
    CHECK(isnan(sg_optim_lr(opt)));

    CHECK_STATUS(ctx, sg_optim_set_schedule(opt, &(sg_lr_schedule){SG_LR_LINEAR, 0, 0.5, NULL, NULL}), SG_ERR_ARG);
    CHECK_STATUS(ctx, sg_optim_set_schedule(opt, &(sg_lr_schedule){SG_LR_CALLBACK, 0, 0, NULL, NULL}), SG_ERR_NULL);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

/* ---------------------------------------------------------------- clipping */

TEST(clip_grad_norm_sums_duplicates_before_squaring)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *A = param2(ctx, 1, 2, NULL), *B = param2(ctx, 3, 1, NULL);
    /* A: dense (3,4) -> 25; B: row 1 named twice with 1 and 2 -> (3) -> 9; total sqrt(34)
     * (squaring before summing would give sqrt(30)) */
    give_dense(A, (double[]){3, 4});
    double gB[2] = {1, 2};
    int64_t n = 2;
    sg_tensor *it = sg_tensor_new_tmp(ctx, SG_I64, 1, &n);
    ((int64_t *)sg_tensor_data(it))[0] = ((int64_t *)sg_tensor_data(it))[1] = 1;
    sg_tensor *gt = sg_tensor_new_tmp(ctx, SG_F64, 2, (int64_t[]){2, 1});
    memcpy(sg_tensor_data(gt), gB, sizeof gB);
    CHECK_STATUS(ctx, sg_backward_grad(sg_embedding(B, it, NULL), gt), SG_OK);
    double total = 0;
    CHECK_STATUS(ctx, sg_clip_grad_norm(ctx, 1.0, &total), SG_OK);
    CHECK_NEAR(total, sqrt(34.0), 1e-14);
    double c = 1.0 / (sqrt(34.0) + 1e-6);
    CHECK_NEAR(sg_tensor_get(sg_tensor_grad(A), 0), 3 * c, 1e-14);
    CHECK_NEAR(sg_tensor_get(sg_tensor_grad(A), 1), 4 * c, 1e-14);
    CHECK_NEAR(sg_tensor_get(sg_tensor_grad(B), 1), 3 * c, 1e-14);
    CHECK(sg_tensor_get(sg_tensor_grad(B), 0) == 0);
    CHECK(sg_coo_is_coalesced(sg_tensor_grad(B)));
    /* the embedding's gradient borrowed gt's buffer: clipping did not write into it */
    CHECK(((double *)sg_tensor_data(gt))[0] == 1 && ((double *)sg_tensor_data(gt))[1] == 2);
    /* the norm of the clipped gradients is max_norm (up to the 1e-6) */
    double again = 0;
    CHECK_STATUS(ctx, sg_clip_grad_norm(ctx, 10.0, &again), SG_OK);
    CHECK_NEAR(again, 1.0, 1e-6);
    CHECK_NEAR(sg_tensor_get(sg_tensor_grad(A), 0), 3 * c, 1e-14); /* under max: unchanged */
    sg_tape_reset(ctx);

    CHECK_STATUS(ctx, sg_clip_grad_norm(ctx, -1, NULL), SG_ERR_ARG);
    give_dense(A, (double[]){INFINITY, 1});
    CHECK_STATUS(ctx, sg_clip_grad_norm(ctx, 1.0, &total), SG_ERR_VALUE);
    CHECK(sg_tensor_get(sg_tensor_grad(A), 1) == 1);
    sg_tape_reset(ctx);
    sg_ctx_free(ctx);
}

TEST(clip_grad_value_after_summing_duplicates)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *A = param2(ctx, 1, 3, NULL), *B = param2(ctx, 2, 1, NULL);
    give_dense(A, (double[]){-3, 0.5, 2});
    give_rows(B, 3, (int64_t[]){0, 0, 1}, (double[]){0.6, 0.6, -0.2});
    CHECK_STATUS(ctx, sg_clip_grad_value(ctx, 1.0), SG_OK);
    CHECK(sg_tensor_get(sg_tensor_grad(A), 0) == -1);
    CHECK(sg_tensor_get(sg_tensor_grad(A), 1) == 0.5);
    CHECK(sg_tensor_get(sg_tensor_grad(A), 2) == 1);
    CHECK(sg_tensor_get(sg_tensor_grad(B), 0) == 1); /* 0.6 + 0.6 = 1.2, clamped */
    CHECK_NEAR(sg_tensor_get(sg_tensor_grad(B), 1), -0.2, 1e-16);
    CHECK_STATUS(ctx, sg_clip_grad_value(ctx, -0.5), SG_ERR_ARG);
    sg_tape_reset(ctx);
    sg_ctx_free(ctx);
}

TEST(clip_then_step_uses_clipped_gradient)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *W = param2(ctx, 3, 1, NULL);
    sg_optim *opt = sg_optim_sgd(ctx, &(sg_sgd_opts){1.0, 0.9, 0, 0.1, 0});
    sg_optim_add_param(opt, W);
    give_rows(W, 2, (int64_t[]){2, 2}, (double[]){3, 1});
    double total;
    CHECK_STATUS(ctx, sg_clip_grad_norm(ctx, 2.0, &total), SG_OK);
    CHECK_NEAR(total, 4, 1e-15);
    CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
    sg_tape_reset(ctx);
    CHECK_NEAR(at(W, 2), -2.0 * 4 / (4 + 1e-6), 1e-14);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

/* ---------------------------------------------------------------- state and errors */

TEST(state_tensors_named_and_shaped)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *W = param2(ctx, 5, 3, NULL);
    struct {
        sg_optim *opt;
        const char *names[4];
        int n;
    } cases[] = {
        {sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0.9, 0, 0.1, 0}), {"step", "momentum_buffer", "last_step"}, 3},
        {sg_optim_sgd(ctx, NULL), {"step"}, 1},
        {sg_optim_adagrad(ctx, NULL), {"step", "sum"}, 2},
        {sg_optim_rowwise_adagrad(ctx, NULL), {"step", "sum"}, 2},
        {sg_optim_adam(ctx, NULL), {"step", "exp_avg", "exp_avg_sq"}, 3},
        {sg_optim_lazy_adam(ctx, NULL), {"step", "exp_avg", "exp_avg_sq", "row_step"}, 4},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sg_optim *opt = cases[c].opt;
        CHECK(opt != NULL);
        CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
        CHECK(sg_optim_state_count(opt, W) == cases[c].n);
        for (int i = 0; i < cases[c].n; i++) {
            const char *name = NULL;
            sg_tensor *s = sg_optim_state(opt, W, i, &name);
            CHECK(s && name && !strcmp(name, cases[c].names[i]));
            if (!s) continue;
            int64_t want = !strcmp(name, "step") ? 1 : !strcmp(name, "last_step") || !strcmp(name, "row_step") ||
                                                         (c == 3 && i == 1) ? 5 : 15;
            CHECK(sg_tensor_numel(s) == want);
        }
        CHECK(sg_optim_state(opt, W, cases[c].n, NULL) == NULL);
        CHECK(sg_optim_param_count(opt) == 1 && sg_optim_param(opt, 0) == W);
        sg_optim_free(opt); /* detaches W for the next case */
    }
    sg_ctx_free(ctx);
}

TEST(errors_change_nothing)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    CHECK(sg_optim_sgd(ctx, &(sg_sgd_opts){-1, 0, 0, 0, 0}) == NULL);
    CHECK(sg_ctx_status(ctx) == SG_ERR_ARG);
    CHECK(sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0.9, 0.1, 0, 1}) == NULL); /* nesterov + dampening */
    CHECK(sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0, 0, 0, 1}) == NULL);     /* nesterov, no momentum */
    CHECK(sg_optim_adam(ctx, &(sg_adam_opts){0.1, 1.0, 0.9, 1e-8, 0, 0}) == NULL);
    CHECK(sg_optim_adagrad(ctx, &(sg_adagrad_opts){0.1, 0, 0, -1, 0}) == NULL);
    CHECK(sg_optim_sgd(NULL, NULL) == NULL);

    sg_optim *opt = sg_optim_sgd(ctx, NULL), *other = sg_optim_adam(ctx, NULL);
    sg_tensor *W = param2(ctx, 2, 2, NULL);
    sg_tensor *I = sg_tensor_new(ctx, SG_I64, 1, (int64_t[]){3});
    sg_tensor *S = sg_coo_new(ctx, SG_F64, 1, (int64_t[]){4}, 1, 0, NULL, NULL);
    sg_tensor *tmp = sg_tensor_new_tmp(ctx, SG_F64, 1, (int64_t[]){3});
    CHECK(sg_optim_add_param(NULL, W) == SG_ERR_NULL);
    CHECK_STATUS(ctx, sg_optim_add_param(opt, NULL), SG_ERR_NULL);
    CHECK_STATUS(ctx, sg_optim_add_param(opt, I), SG_ERR_DTYPE);
    CHECK_STATUS(ctx, sg_optim_add_param(opt, S), SG_ERR_LAYOUT);
    CHECK_STATUS(ctx, sg_optim_add_param(opt, tmp), SG_ERR_ARG);
    CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_OK);
    CHECK_STATUS(ctx, sg_optim_add_param(opt, W), SG_ERR_STATE);
    CHECK_STATUS(ctx, sg_optim_add_param(other, W), SG_ERR_STATE);
    CHECK(sg_optim_param_count(opt) == 1 && sg_optim_param_count(other) == 0);
    CHECK(sg_optim_state_count(other, W) == 0);

    /* the fused hook refuses a table that is not a parameter and rows out of range */
    sg_tensor *U = param2(ctx, 2, 2, NULL);
    double g[2] = {1, 1};
    CHECK_STATUS(ctx, sg__optim_apply_rows(opt, U, &(sg__fused_rows){.idx = (int64_t[]){0}, .n = 1, .g = g}),
                 SG_ERR_STATE);
    CHECK_STATUS(ctx, sg__optim_apply_rows(opt, W, &(sg__fused_rows){.idx = (int64_t[]){2}, .n = 1, .g = g}),
                 SG_ERR_INDEX);
    CHECK(at(W, 0) == 0 && at(W, 1) == 0 && at(W, 2) == 0 && at(W, 3) == 0);
    CHECK(sg_optim_set_lr(opt, NAN) == SG_ERR_ARG);
    CHECK(sg_optim_set_steps(opt, -1) == SG_ERR_ARG);
    CHECK(sg_optim_step(NULL) == SG_ERR_NULL && sg_optim_flush(NULL) == SG_ERR_NULL);
    CHECK(sg_clip_grad_norm(NULL, 1, NULL) == SG_ERR_NULL);

    /* with nothing in the store a step only counts */
    CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
    CHECK(sg_optim_steps(opt) == 1 && at(W, 0) == 0);
    sg_optim_free(opt);
    sg_optim_free(other);
    sg_optim_free(NULL);
    sg_ctx_free(ctx);
}

/* The accessors answer NULL with values no optimizer has (the header's accessor rule). */
TEST(accessors_of_a_null_optimizer)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *p = sg_tensor_new(ctx, SG_F32, 1, (int64_t[]){4});
    CHECK(sg_optim_param_count(NULL) == -1);
    CHECK(sg_optim_steps(NULL) == -1);
    CHECK(sg_optim_state_count(NULL, p) == -1);
    CHECK(sg_optim_param(NULL, 0) == NULL);
    CHECK(isnan(sg_optim_lr(NULL)));
    sg_optim *opt = sg_optim_sgd(ctx, NULL);
    CHECK(sg_optim_param_count(opt) == 0 && sg_optim_steps(opt) == 0);
    CHECK(sg_optim_state_count(opt, p) == 0); /* not registered */
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

TEST_MAIN()
