/* Sparse optimizer paths against dense ones: exact lazy SGD (momentum, dampening,
 * Nesterov, weight decay, schedules) run side by side with dense SGD for 200 steps of
 * random sparse batches; the fused embedding update against the unfused path; COO
 * gradients with several sparse dims; steps that visit only parameters with gradients;
 * bitwise equality across thread counts. */
#include "optim/optim.h"
#include "optim/optim.h"
#include "testutil.h"


static sg_tensor *table(sg_ctx *ctx, sg_dtype dt, int64_t rows, int64_t width, const double *init)
{
    int64_t shape[2] = {rows, width};
    sg_tensor *t = sg_tensor_new(ctx, dt, 2, shape);
    for (int64_t i = 0; init && i < rows * width; i++) {
        if (dt == SG_F32) sg_tensor_f32(t)[i] = (float)init[i];
        else sg_tensor_f64(t)[i] = init[i];
    }
    return sg_tensor_requires_grad(t, 1);
}

static sg_tensor *tmp_of(sg_ctx *ctx, sg_dtype dt, int ndim, const int64_t *shape, const double *v)
{
    sg_tensor *t = sg_tensor_new_tmp(ctx, dt, ndim, shape);
    for (int64_t i = 0; i < sg_tensor_numel(t); i++) {
        if (dt == SG_F32) sg_tensor_f32(t)[i] = (float)v[i];
        else sg_tensor_f64(t)[i] = v[i];
    }
    return t;
}

/* Embedding lookup of rows idx[0..n) of W with output gradient g (n, width); fused is
 * the optimizer for a fused update or NULL. */
static int lookup_backward(sg_tensor *W, int64_t n, const int64_t *idx, const double *g,
                           sg_optim *fused)
{
    sg_ctx *ctx = sg_tensor_ctx(W);
    sg_tensor *it = sg_tensor_new_tmp(ctx, SG_I64, 1, &n);
    memcpy(sg_tensor_data(it), idx, (size_t)n * sizeof *idx);
    int64_t gshape[2] = {n, sg_tensor_dim(W, 1)};
    sg_tensor *gt = tmp_of(ctx, sg_tensor_dtype(W), 2, gshape, g);
    sg_embedding_opts eo = {-1, 0.0, fused};
    sg_tensor *e = sg_embedding(W, it, &eo);
    return e ? sg_backward_grad(e, gt) : sg_ctx_status(ctx);
}

static int give_dense(sg_tensor *W, const double *g)
{
    sg_ctx *ctx = sg_tensor_ctx(W);
    return sg_backward_grad(W, tmp_of(ctx, sg_tensor_dtype(W), sg_tensor_ndim(W), sg_tensor_shape(W), g));
}

static double max_abs_diff(sg_tensor *a, sg_tensor *b)
{
    double m = 0;
    for (int64_t i = 0; i < sg_tensor_numel(a); i++) {
        double d = fabs(sg_tensor_get(a, i) - sg_tensor_get(b, i));
        if (!(d <= m)) m = d; /* NaN propagates */
    }
    return m;
}

/* ---------------------------------------------------------------- exact lazy SGD */

enum { LV = 40, LD = 3, LSTEPS = 200, LBATCH = 5 };

static double wavy_lr(void *ud, int64_t t, double base)
{
    (void)ud;
    return base * (1.0 + 0.5 * sin(0.3 * (double)t));
}

/* Runs a sparse and a dense SGD side by side for LSTEPS steps: each step names LBATCH rows,
 * mostly among 8 hot rows (repeats), sometimes among cold rows (gaps of tens of steps);
 * the last row is never named. Returns the largest difference after flush. */
static double lazy_vs_dense(sg_dtype dt, sg_sgd_opts o, const sg_lr_schedule *sched,
                            double *max_buf_diff, int *lagged_before_flush)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    double init[LV * LD];
    for (int i = 0; i < LV * LD; i++) init[i] = tu_rand_unit();
    sg_tensor *S = table(ctx, dt, LV, LD, init), *D = table(ctx, dt, LV, LD, init);
    sg_optim *os = sg_optim_sgd(ctx, &o), *od = sg_optim_sgd(ctx, &o);
    sg_optim_add_param(os, S);
    sg_optim_add_param(od, D);
    if (sched) {
        sg_optim_set_schedule(os, sched);
        sg_optim_set_schedule(od, sched);
    }
    int fail = 0;
    for (int s = 0; s < LSTEPS; s++) {
        int64_t idx[LBATCH];
        double g[LBATCH * LD], dense[LV * LD] = {0};
        for (int k = 0; k < LBATCH; k++) {
            idx[k] = tu_rand() % 10 < 8 ? (int64_t)(tu_rand() % 8) : 8 + (int64_t)(tu_rand() % (LV - 9));
            for (int j = 0; j < LD; j++) {
                g[k * LD + j] = tu_rand_unit();
                dense[idx[k] * LD + j] += g[k * LD + j];
            }
        }
        fail |= lookup_backward(S, LBATCH, idx, g, NULL) | give_dense(D, dense);
        fail |= sg_optim_step(os) | sg_optim_step(od);
        sg_tape_reset(ctx);
    }
    CHECK(!fail);
    /* the never-named row is still behind before the flush */
    *lagged_before_flush = sg_tensor_get(S, (LV - 1) * LD) != sg_tensor_get(D, (LV - 1) * LD);
    CHECK_STATUS(ctx, sg_optim_flush(os), SG_OK);
    double diff = max_abs_diff(S, D);
    *max_buf_diff = 0;
    if (o.momentum != 0)
        *max_buf_diff = max_abs_diff(sg_optim_state(os, S, 1, NULL), sg_optim_state(od, D, 1, NULL));
    sg_tensor *last = sg_optim_state(os, S, o.momentum != 0 ? 2 : 1, NULL);
    for (int64_t r = 0; r < LV; r++) CHECK(((int64_t *)sg_tensor_data(last))[r] == LSTEPS);
    sg_optim_free(os);
    sg_optim_free(od);
    sg_ctx_free(ctx);
    return diff;
}

TEST(exact_lazy_sgd_equals_dense_sgd_after_200_steps)
{
    const sg_sgd_opts cfg[] = {
        {0.05, 0.9, 0, 0.01, 0},   /* momentum + weight decay */
        {0.05, 0.9, 0.3, 0.05, 0}, /* + dampening (first step undamped) */
        {0.05, 0.8, 0, 0.02, 1},   /* Nesterov */
        {0.1, 0, 0, 0.1, 0},       /* weight decay only */
        {0.05, 0.9, 0, 0, 0},      /* momentum only */
    };
    const sg_lr_schedule linear = {SG_LR_LINEAR, 150, 0.1, NULL, NULL};
    const sg_lr_schedule wavy = {SG_LR_CALLBACK, 0, 0, wavy_lr, NULL};
    const sg_lr_schedule *scheds[3] = {NULL, &linear, &wavy};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++)
        for (int k = 0; k < 3; k++) {
            double bufd;
            int lagged;
            double d = lazy_vs_dense(SG_F64, cfg[c], scheds[k], &bufd, &lagged);
            if (!(d <= 1e-11) || !(bufd <= 1e-11))
                fprintf(stderr, "  config %zu schedule %d: max diff %g, momentum %g\n", c, k, d, bufd);
            CHECK(d <= 1e-11);
            CHECK(bufd <= 1e-11);
            if (cfg[c].weight_decay != 0) CHECK(lagged); /* momentum alone never moves it */
        }
    /* f32: the catch-up runs in double, the dense path rounds every step */
    double bufd;
    int lagged;
    double d = lazy_vs_dense(SG_F32, cfg[1], NULL, &bufd, &lagged);
    CHECK(d <= 2e-4 && bufd <= 2e-4);
    d = lazy_vs_dense(SG_F32, cfg[2], &wavy, &bufd, &lagged);
    CHECK(d <= 2e-4 && bufd <= 2e-4);
}

/* Loss 0.5 * sum(rows^2) of the looked-up rows, whose gradient is the rows themselves: the
 * forward must read each row as dense SGD holds it, caught up over the steps it skipped
 * (before the fix it read the row as last touched, and the trajectories drifted apart).
 * `dense` looks the rows up through a one-hot matmul, so every row gets a (dense)
 * gradient each step and nothing is lazy; `sparse` through the named op. */
enum { READ_EMBEDDING, READ_BAG, READ_INDEX_SELECT };
static double square_loss_step(sg_tensor *W, const int64_t *rows, int64_t n, int how, bool dense)
{
    sg_ctx *ctx = sg_tensor_ctx(W);
    const int64_t V = sg_tensor_dim(W, 0);
    int64_t sn[1] = {n};
    sg_tensor *idx = sg_tensor_new_tmp(ctx, SG_I64, 1, sn);
    memcpy(sg_tensor_data(idx), rows, (size_t)n * sizeof *rows);
    sg_tensor *e;
    if (dense) {
        int64_t so[2] = {n, V};
        sg_tensor *onehot = sg_tensor_new_tmp(ctx, SG_F64, 2, so);
        for (int64_t i = 0; i < n; i++) sg_tensor_f64(onehot)[i * V + rows[i]] = 1;
        e = sg_matmul(onehot, W);
    } else if (how == READ_EMBEDDING) {
        e = sg_embedding(W, idx, NULL);
    } else if (how == READ_BAG) { /* bags of one row each */
        sg_tensor *off = sg_tensor_new_tmp(ctx, SG_I64, 1, sn);
        for (int64_t i = 0; i < n; i++) ((int64_t *)sg_tensor_data(off))[i] = i;
        sg_embedding_bag_opts bo = SG_EMBEDDING_BAG_OPTS_DEFAULT;
        bo.mode = SG_BAG_SUM;
        e = sg_embedding_bag(W, idx, off, &bo);
    } else {
        e = sg_index_select(W, 0, idx);
    }
    sg_tensor *loss = sg_scale(sg_sum(sg_mul(e, e)), 0.5);
    double l = loss ? sg_tensor_get(loss, 0) : NAN;
    CHECK_STATUS(ctx, loss ? sg_backward(loss) : sg_ctx_status(ctx), SG_OK);
    return l;
}

TEST(exact_lazy_sgd_reads_current_rows)
{
    const int64_t V = 7, D = 3;
    /* rows 5 and 6 are looked up only now and then, after several skipped steps */
    const int64_t batches[6][3] = {{0, 1, 5}, {0, 2, 2}, {1, 3, 0}, {6, 0, 1}, {5, 2, 6}, {4, 4, 5}};
    const sg_sgd_opts kinds[3] = {{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.05},
                                  {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.05, .nesterov = 1},
                                  {.lr = 0.1, .weight_decay = 0.2}};
    double init[7 * 3];
    for (int i = 0; i < V * D; i++) init[i] = 0.3 + 0.1 * (i % 5) - 0.02 * i;
    for (int k = 0; k < 3; k++)
        for (int how = READ_EMBEDDING; how <= READ_INDEX_SELECT; how++) {
            sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
            sg_tensor *Wd = table(ctx, SG_F64, V, D, init), *Ws = table(ctx, SG_F64, V, D, init);
            sg_optim *od = sg_optim_sgd(ctx, &kinds[k]), *os = sg_optim_sgd(ctx, &kinds[k]);
            CHECK(!sg_optim_add_param(od, Wd) && !sg_optim_add_param(os, Ws));
            double worst_loss = 0;
            for (int step = 0; step < 24; step++) {
                const int64_t *b = batches[step % 6];
                double ld = square_loss_step(Wd, b, 3, how, true);
                CHECK_STATUS(ctx, sg_optim_step(od), SG_OK);
                sg_tape_reset(ctx);
                double ls = square_loss_step(Ws, b, 3, how, false);
                CHECK_STATUS(ctx, sg_optim_step(os), SG_OK);
                sg_tape_reset(ctx);
                double d = fabs(ld - ls) / fabs(ld);
                worst_loss = d > worst_loss ? d : worst_loss;
            }
            CHECK_STATUS(ctx, sg_optim_flush(os), SG_OK);
            double diff = max_abs_diff(Wd, Ws);
            if (diff > 1e-12 || worst_loss > 1e-12)
                printf("  kind %d, op %d: |W dense - W lazy| %.3g, loss rel diff %.3g\n", k, how, diff, worst_loss);
            CHECK(diff < 1e-12 && worst_loss < 1e-12);
            sg_ctx_free(ctx);
        }
}

TEST(sparse_momentum_twice_in_a_row)
{
    /* two consecutive sparse steps with momentum (a second step on a sparse momentum
     * buffer is where other frameworks fail), against the scalar recurrence */
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *W = table(ctx, SG_F64, 3, 1, (double[]){1, 1, 1});
    sg_optim *opt = sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0.9, 0, 0, 0});
    sg_optim_add_param(opt, W);
    CHECK_STATUS(ctx, lookup_backward(W, 2, (int64_t[]){0, 1}, (double[]){1, 2}, NULL), SG_OK);
    CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
    sg_tape_reset(ctx);
    CHECK_STATUS(ctx, lookup_backward(W, 1, (int64_t[]){0}, (double[]){1}, NULL), SG_OK);
    CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
    sg_tape_reset(ctx);
    /* row 0: v 1, 1.9 -> w 0.71; row 1: v 2 then 1.8 (zero gradient) -> w 1 - 0.2 - 0.18 */
    CHECK_NEAR(sg_tensor_get(W, 0), 0.71, 1e-15);
    CHECK_STATUS(ctx, sg_optim_flush(opt), SG_OK);
    CHECK_NEAR(sg_tensor_get(W, 1), 0.62, 1e-15);
    CHECK_NEAR(sg_tensor_get(sg_optim_state(opt, W, 1, NULL), 1), 1.8, 1e-15);
    CHECK(sg_tensor_get(W, 2) == 1);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

TEST(weight_decay_with_sparse_gradients)
{
    /* row 1 is never named: three steps of decay, (1 - lr wd)^3 */
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *W = table(ctx, SG_F64, 2, 2, (double[]){1, 2, 3, 4});
    sg_optim *opt = sg_optim_sgd(ctx, &(sg_sgd_opts){0.5, 0, 0, 0.1, 0});
    sg_optim_add_param(opt, W);
    double w0 = 1;
    for (int s = 0; s < 3; s++) {
        CHECK_STATUS(ctx, lookup_backward(W, 1, (int64_t[]){0}, (double[]){1, 0}, NULL), SG_OK);
        CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
        sg_tape_reset(ctx);
        w0 -= 0.5 * (1 + 0.1 * w0);
    }
    CHECK(sg_tensor_get(W, 2) == 3); /* lazy until flushed */
    CHECK_STATUS(ctx, sg_optim_flush(opt), SG_OK);
    CHECK_NEAR(sg_tensor_get(W, 0), w0, 1e-15);
    CHECK_NEAR(sg_tensor_get(W, 2), 3 * 0.95 * 0.95 * 0.95, 1e-15);
    CHECK_NEAR(sg_tensor_get(W, 3), 4 * 0.95 * 0.95 * 0.95, 1e-15);
    /* a flush with nothing behind changes nothing */
    double before = sg_tensor_get(W, 2);
    CHECK_STATUS(ctx, sg_optim_flush(opt), SG_OK);
    CHECK(sg_tensor_get(W, 2) == before);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

/* ---------------------------------------------------------------- fused embedding update */

TEST(fused_embedding_update_equals_unfused)
{
    enum { V = 30, D = 4, B = 12, STEPS = 6 };
    for (int kind = 0; kind < 6; kind++) {
        sg_ctx *ctx = sg_ctx_new(NULL);
        double init[V * D];
        for (int i = 0; i < V * D; i++) init[i] = tu_rand_unit();
        sg_tensor *Wu = table(ctx, SG_F32, V, D, init), *Wf = table(ctx, SG_F32, V, D, init);
        sg_optim *ou = NULL, *of = NULL;
        for (int k = 0; k < 2; k++) {
            sg_optim *o = NULL;
            switch (kind) {
            case 0: o = sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0, 0, 0, 0}); break;
            case 1: o = sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0.9, 0, 0.01, 0}); break;
            case 2: o = sg_optim_rowwise_adagrad(ctx, &(sg_adagrad_opts){0.1, 0, 0, 0, 1e-8}); break;
            case 3: o = sg_optim_lazy_adam(ctx, &(sg_adam_opts){0.01, 0.9, 0.999, 1e-8, 0, 0}); break;
            case 4: o = sg_optim_adagrad(ctx, NULL); break;
            case 5: o = sg_optim_adam(ctx, NULL); break;
            }
            if (k) of = o;
            else ou = o;
        }
        sg_optim_add_param(ou, Wu);
        sg_optim_add_param(of, Wf);
        for (int s = 0; s < STEPS; s++) {
            int64_t idx[B];
            double g[B * D];
            for (int b = 0; b < B; b++) idx[b] = (int64_t)(tu_rand() % (b < 4 ? 3 : V)); /* repeats */
            for (int i = 0; i < B * D; i++) g[i] = tu_rand_unit();
            CHECK_STATUS(ctx, lookup_backward(Wu, B, idx, g, NULL), SG_OK);
            CHECK_STATUS(ctx, lookup_backward(Wf, B, idx, g, of), SG_OK);
            CHECK(sg_tensor_grad(Wf) == NULL); /* no gradient materialised */
            CHECK(sg_tensor_grad(Wu) != NULL);
            CHECK_STATUS(ctx, sg_optim_step(ou), SG_OK);
            CHECK_STATUS(ctx, sg_optim_step(of), SG_OK); /* counts the step */
            sg_tape_reset(ctx);
        }
        sg_optim_flush(ou);
        sg_optim_flush(of);
        double d = max_abs_diff(Wu, Wf);
        if (!(d <= 1e-6)) fprintf(stderr, "  kind %d: max diff %g\n", kind, d);
        CHECK(d <= 1e-6);
        CHECK(max_abs_diff(Wu, table(ctx, SG_F32, V, D, init)) > 1e-3); /* it did move */
        sg_optim_free(ou);
        sg_optim_free(of);
        sg_ctx_free(ctx);
    }
}

/* ---------------------------------------------------------------- COO with sparse_dim 2 */

TEST(coo_gradient_with_two_sparse_dims)
{
    /* entries (r, c) of a (V, D) gradient mean the same as row gradients with zeros
     * elsewhere: each optimizer gives the same result both ways */
    enum { V = 6, D = 3 };
    for (int kind = 0; kind < 4; kind++) {
        sg_ctx *ctx = sg_ctx_new(NULL);
        double init[V * D];
        for (int i = 0; i < V * D; i++) init[i] = tu_rand_unit();
        sg_tensor *A = table(ctx, SG_F64, V, D, init), *R = table(ctx, SG_F64, V, D, init);
        sg_optim *oa, *orr;
        if (kind == 0) {
            oa = sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0.9, 0, 0.05, 1});
            orr = sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0.9, 0, 0.05, 1});
        } else if (kind == 1) {
            oa = sg_optim_adagrad(ctx, NULL);
            orr = sg_optim_adagrad(ctx, NULL);
        } else if (kind == 2) {
            oa = sg_optim_rowwise_adagrad(ctx, NULL);
            orr = sg_optim_rowwise_adagrad(ctx, NULL);
        } else {
            oa = sg_optim_lazy_adam(ctx, NULL);
            orr = sg_optim_lazy_adam(ctx, NULL);
        }
        sg_optim_add_param(oa, A);
        sg_optim_add_param(orr, R);
        for (int s = 0; s < 4; s++) {
            enum { N = 4 };
            int64_t ind[2 * N] = {1, 4, 1, (int64_t)(s % V), /* rows */ 0, 2, 2, 1 /* cols */};
            double val[N], rows[N * D] = {0};
            for (int e = 0; e < N; e++) {
                val[e] = tu_rand_unit();
                rows[e * D + ind[N + e]] = val[e];
            }
            sg_tensor *coo = sg_coo_new(ctx, SG_F64, 2, sg_tensor_shape(A), 2, N, ind, val);
            CHECK_STATUS(ctx, sg_backward_grad(A, coo), SG_OK);
            CHECK_STATUS(ctx, lookup_backward(R, N, ind, rows, NULL), SG_OK);
            CHECK_STATUS(ctx, sg_optim_step(oa), SG_OK);
            CHECK_STATUS(ctx, sg_optim_step(orr), SG_OK);
            sg_tape_reset(ctx);
            sg_tensor_free(coo);
        }
        sg_optim_flush(oa);
        sg_optim_flush(orr);
        CHECK(max_abs_diff(A, R) <= 1e-14);
        sg_optim_free(oa);
        sg_optim_free(orr);
        sg_ctx_free(ctx);
    }
}

TEST(coo_gradient_with_several_sparse_dims_equals_dense)
{
    /* A COO gradient of a (R, A, B) parameter with sparse_dim 2 or 3 (entries (r, a) or
     * (r, a, b), exact duplicates included) steps each optimizer as its dense meaning,
     * built here by a loop, steps a twin parameter. */
    enum { R = 7, A = 3, B = 4, N = 10, STEPS = 3 };
    const int64_t shape[3] = {R, A, B};
    for (int sd = 2; sd <= 3; sd++)
        for (int kind = 0; kind < 5; kind++) {
            sg_ctx *ctx = sg_ctx_new(NULL);
            double init[R * A * B];
            for (int i = 0; i < R * A * B; i++) init[i] = tu_rand_unit();
            sg_tensor *P = sg_tensor_requires_grad(sg_tensor_from_data(ctx, SG_F64, 3, shape, init), 1);
            sg_tensor *Q = sg_tensor_requires_grad(sg_tensor_from_data(ctx, SG_F64, 3, shape, init), 1);
            sg_optim *op[2];
            for (int k = 0; k < 2; k++) {
                switch (kind) {
                case 0: op[k] = sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0, 0, 0, 0}); break;
                case 1: op[k] = sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0.9, 0, 0.05, 1}); break;
                case 2: op[k] = sg_optim_adagrad(ctx, NULL); break;
                case 3: op[k] = sg_optim_rowwise_adagrad(ctx, NULL); break;
                default: op[k] = sg_optim_adam(ctx, NULL); break;
                }
            }
            sg_optim_add_param(op[0], P);
            sg_optim_add_param(op[1], Q);
            const int64_t bs = sd == 2 ? B : 1; /* elements per entry */
            for (int s = 0; s < STEPS; s++) {
                int64_t ind[3 * N];
                double val[N * B], dense[R * A * B] = {0};
                for (int e = 0; e < N; e++) {
                    int64_t r = e < 6 ? 1 + 4 * (e % 2) : (int64_t)(tu_rand() % R);
                    int64_t a = (int64_t)(tu_rand() % A), b = (int64_t)(tu_rand() % B);
                    if (e == N - 1) { /* an exact duplicate of entry 0 */
                        r = ind[0];
                        a = ind[N];
                        b = sd == 3 ? ind[2 * N] : 0;
                    }
                    ind[e] = r;
                    ind[N + e] = a;
                    if (sd == 3) ind[2 * N + e] = b;
                    for (int64_t j = 0; j < bs; j++) {
                        val[e * bs + j] = tu_rand_unit();
                        dense[(r * A + a) * B + (sd == 3 ? b : j)] += val[e * bs + j];
                    }
                }
                sg_tensor *coo = sg_coo_new(ctx, SG_F64, 3, shape, sd, N, ind, val);
                CHECK_STATUS(ctx, sg_backward_grad(P, coo), SG_OK);
                CHECK_STATUS(ctx, give_dense(Q, dense), SG_OK);
                CHECK_STATUS(ctx, sg_optim_step(op[0]), SG_OK);
                CHECK_STATUS(ctx, sg_optim_step(op[1]), SG_OK);
                sg_tape_reset(ctx);
                sg_tensor_free(coo);
            }
            sg_optim_flush(op[0]);
            sg_optim_flush(op[1]);
            double d = max_abs_diff(P, Q);
            if (!(d <= 1e-12)) fprintf(stderr, "  sparse_dim %d, kind %d: max diff %g\n", sd, kind, d);
            CHECK(d <= 1e-12);
            sg_optim_free(op[0]);
            sg_optim_free(op[1]);
            sg_ctx_free(ctx);
        }
}

TEST(coo_gradient_with_two_sparse_dims_costs_unique_rows_not_entries)
{
    /* 2048 entries (r, c) in 2 rows of a (16, 2048) table: the step's scratch is
     * O(entries + 2 rows x 2048), not one 2048-wide row per entry (32 MB); plain SGD too. */
    enum { V = 16, W = 2048, N = 2048 };
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
    sg_tensor *P = table(ctx, SG_F64, V, W, NULL);
    sg_optim *opt = sg_optim_sgd(ctx, &(sg_sgd_opts){0.5, 0, 0, 0, 0});
    sg_optim_add_param(opt, P);
    int64_t *ind = malloc(2 * N * sizeof *ind);
    double *val = malloc(N * sizeof *val);
    for (int e = 0; e < N; e++) {
        ind[e] = e % 2 ? 3 : 9;
        ind[N + e] = (e * 7) % W;
        val[e] = 1.0 + e % 5;
    }
    sg_tensor *coo = sg_coo_new(ctx, SG_F64, 2, sg_tensor_shape(P), 2, N, ind, val);
    CHECK_STATUS(ctx, sg_backward_grad(P, coo), SG_OK);
    CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
    size_t arena = sg_ctx_mem_stats(ctx).arena_bytes;
    if (!(arena < ((size_t)4 << 20))) fprintf(stderr, "  arena %zu bytes\n", arena);
    CHECK(arena < ((size_t)4 << 20));
    double *want = calloc(V * W, sizeof *want);
    for (int e = 0; e < N; e++) want[ind[e] * W + ind[N + e]] -= 0.5 * val[e];
    int bad = 0;
    for (int64_t i = 0; i < V * W; i++) bad += sg_tensor_f64(P)[i] != want[i];
    CHECK(bad == 0);
    free(want);
    free(ind);
    free(val);
    sg_optim_free(opt);
    sg_ctx_free(ctx);
}

/* ---------------------------------------------------------------- O(touched) steps */

TEST(step_visits_only_parameters_with_gradients)
{
    enum { P = 50000, W = 4, WITH = 10 };
    for (int kind = 0; kind < 2; kind++) {
        sg_ctx *ctx = sg_ctx_new(NULL);
        sg_optim *opt = kind ? sg_optim_adam(ctx, &(sg_adam_opts){0.1, 0.9, 0.999, 1e-8, 0.1, 1})
                             : sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0.9, 0, 0.1, 0});
        sg_tensor **ps = malloc(P * sizeof *ps);
        double init[W] = {1, -2, 3, -4};
        int64_t shape[1] = {W};
        for (int i = 0; i < P; i++) {
            ps[i] = sg_tensor_requires_grad(sg_tensor_from_data(ctx, SG_F64, 1, shape, init), 1);
            CHECK(sg_optim_add_param(opt, ps[i]) == SG_OK);
        }
        double g[W] = {0.5, 0.5, -0.5, 1};
        for (int s = 0; s < 2; s++) {
            for (int k = 0; k < WITH; k++) give_dense(ps[k * (P / WITH) + 7], g);
            CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
            /* the step looked at the WITH parameters with gradients, not at all P (the
             * values below cannot tell a step that walks every parameter and skips
             * those without a gradient) */
            CHECK(opt->visited == WITH);
            sg_tape_reset(ctx);
        }
        sg_optim_flush(opt);
        int changed = 0, untouched_ok = 1;
        for (int i = 0; i < P; i++) {
            bool with = i % (P / WITH) == 7;
            const double *w = sg_tensor_f64(ps[i]);
            int same = !memcmp(w, init, sizeof init);
            const char *name;
            sg_tensor *step = sg_optim_state(opt, ps[i], 0, &name);
            int64_t steps = *(int64_t *)sg_tensor_data(step);
            if (with) changed += !same && steps == 2;
            else untouched_ok &= same && steps == 0;
        }
        CHECK(changed == WITH);
        CHECK(untouched_ok);
        sg_optim_free(opt);
        free(ps);
        sg_ctx_free(ctx);
    }
}

/* ---------------------------------------------------------------- threads */

TEST(bitwise_identical_across_thread_counts)
{
    enum { V = 3000, D = 16, N = 4000, STEPS = 4 };
    int64_t *idx = malloc(STEPS * N * sizeof *idx);
    double *g = malloc((size_t)STEPS * N * D * sizeof *g), *init = malloc(V * D * sizeof *init);
    for (int i = 0; i < STEPS * N; i++) idx[i] = (int64_t)(tu_rand() % (i % 3 ? V : 50));
    for (int i = 0; i < STEPS * N * D; i++) g[i] = tu_rand_unit();
    for (int i = 0; i < V * D; i++) init[i] = tu_rand_unit();
    for (int kind = 0; kind < 5; kind++) {
        float *res[2];
        for (int th = 0; th < 2; th++) {
            sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = th + 1});
            sg_tensor *Wt = table(ctx, SG_F32, V, D, init);
            sg_optim *opt = kind == 0   ? sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0, 0, 0, 0})
                            : kind == 1 ? sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0.9, 0.1, 0.01, 0})
                            : kind == 2 ? sg_optim_adagrad(ctx, NULL)
                            : kind == 3 ? sg_optim_rowwise_adagrad(ctx, NULL)
                                        : sg_optim_lazy_adam(ctx, NULL);
            sg_optim_add_param(opt, Wt);
            for (int s = 0; s < STEPS; s++) {
                CHECK_STATUS(ctx, lookup_backward(Wt, N, idx + s * N, g + (size_t)s * N * D, NULL), SG_OK);
                CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
                sg_tape_reset(ctx);
            }
            sg_optim_flush(opt);
            res[th] = malloc(V * D * sizeof(float));
            memcpy(res[th], sg_tensor_f32(Wt), V * D * sizeof(float));
            sg_optim_free(opt);
            sg_ctx_free(ctx);
        }
        CHECK(!memcmp(res[0], res[1], V * D * sizeof(float)));
        free(res[0]);
        free(res[1]);
    }
    free(idx);
    free(g);
    free(init);
}

TEST(dense_steps_bitwise_identical_across_thread_counts)
{
    /* dense gradients over a table of several chunks: every kind's dense path (and exact
     * lazy SGD's all-rows path), on 1, 2 and 3 threads */
    enum { V = 3000, D = 64, STEPS = 3 };
    double *g = malloc((size_t)STEPS * V * D * sizeof *g), *init = malloc(V * D * sizeof *init);
    for (int i = 0; i < STEPS * V * D; i++) g[i] = tu_rand_unit();
    for (int i = 0; i < V * D; i++) init[i] = tu_rand_unit();
    for (int kind = 0; kind < 5; kind++) {
        float *res[3];
        for (int th = 0; th < 3; th++) {
            sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = th + 1});
            sg_tensor *Wt = table(ctx, SG_F32, V, D, init);
            sg_optim *opt = kind == 0   ? sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0, 0, 0, 0})
                            : kind == 1 ? sg_optim_sgd(ctx, &(sg_sgd_opts){0.1, 0.9, 0, 0.01, 1})
                            : kind == 2 ? sg_optim_adagrad(ctx, &(sg_adagrad_opts){0.1, 0.01, 0.01, 0.1, 1e-10})
                            : kind == 3 ? sg_optim_adam(ctx, &(sg_adam_opts){0.01, 0.9, 0.99, 1e-8, 0.01, 1})
                                        : sg_optim_lazy_adam(ctx, NULL);
            sg_optim_add_param(opt, Wt);
            for (int s = 0; s < STEPS; s++) {
                CHECK_STATUS(ctx, give_dense(Wt, g + (size_t)s * V * D), SG_OK);
                CHECK_STATUS(ctx, sg_optim_step(opt), SG_OK);
                sg_tape_reset(ctx);
            }
            res[th] = malloc(V * D * sizeof(float));
            memcpy(res[th], sg_tensor_f32(Wt), V * D * sizeof(float));
            CHECK(res[th][V * D - 1] != (float)init[V * D - 1]); /* the last chunk stepped too */
            sg_optim_free(opt);
            sg_ctx_free(ctx);
        }
        CHECK(!memcmp(res[0], res[1], V * D * sizeof(float)));
        CHECK(!memcmp(res[0], res[2], V * D * sizeof(float)));
        for (int th = 0; th < 3; th++) free(res[th]);
    }
    free(g);
    free(init);
}

TEST_MAIN()
