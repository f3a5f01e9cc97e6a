/* sgrad-bench optim: optimizer steps through the general API against plain C loops.
 *
 * train_step: one step = embedding forward of B indices into a (V,D) f32 table E, loss =
 *   sum of squares (as sum(rowdot(E, E)), the cheapest spelling with the library's ops),
 *   backward, optimizer step (unfused), or the optimizer applied inside the embedding
 *   backward (fused). Batches are uniform over V, cycling through 8 pre-drawn
 *   ones (so rows go untouched for several steps). ref_ms: one plain C loop doing the same
 *   arithmetic on the same table and state: gather + loss, then the update with gradient
 *   2 * out; nonlinear updates first sum duplicate rows (grouping through a V-sized slot
 *   array); exact lazy momentum/decay catches rows up by 2x2 matrix powers; LazyAdam's
 *   bias corrections call pow. opt_step_ms: sg_optim_step alone (unfused). probe_ms (SGD
 *   only): plain loops making the passes over (B,D) memory that the library's tape makes
 *   for this step, each its own loop: gather the rows, read them for the loss (rowdot),
 *   write the gradient 2 * out into a second (B,D) buffer (rowdot's backward; the
 *   embedding's backward borrows it), update the rows from it. The library makes these
 *   passes fused or not (the unfused sparse gradient is that borrowed buffer, so fusing
 *   saves no pass here); ms / probe_ms is what the tape costs beyond its passes.
 * many_params: P parameters of 64 floats, 10 of them with a (dense) gradient; the time of
 *   one sg_optim_step; ref_ms: the same update written as a loop over the 10 arrays.
 * dense_vs_sparse: the train step with the gradient made dense (a zero table plus a
 *   scatter, then a dense step over every row), as without sparse gradients; ref_ms is
 *   the plain sparse loop, sparse_ms the library's sparse path.
 * Every timed run starts from the same table and zeroed optimizer state and takes the same
 * steps; max_diff_vs_ref is the largest difference between the table after the library's
 * run and after the loop's (0 where the arithmetic is the same to the bit).
 * Single thread unless --threads says otherwise. */
#include "bench.h"
#include "optim/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { TS_D = 64, TS_B = 10000, TS_BATCHES = 8 };

typedef enum { OPT_SGD, OPT_SGD_MWD, OPT_ADAGRAD, OPT_ROWWISE, OPT_LAZY_ADAM, OPT_ADAM } opt_kind;
static const char *const opt_names[] = {"sgd", "sgd_momentum_wd", "adagrad", "rowwise_adagrad",
                                        "lazy_adam", "adam"};

static const double LR = 0.01, MU = 0.9, WD = 1e-4, EPS = 1e-8, B1 = 0.9, B2 = 0.999;

static sg_optim *make_opt(sg_ctx *ctx, opt_kind k)
{
    switch (k) {
    case OPT_SGD: return sg_optim_sgd(ctx, &(sg_sgd_opts){LR, 0, 0, 0, 0});
    case OPT_SGD_MWD: return sg_optim_sgd(ctx, &(sg_sgd_opts){LR, MU, 0, WD, 0});
    case OPT_ADAGRAD: return sg_optim_adagrad(ctx, &(sg_adagrad_opts){LR, 0, 0, 0, EPS});
    case OPT_ROWWISE: return sg_optim_rowwise_adagrad(ctx, &(sg_adagrad_opts){LR, 0, 0, 0, EPS});
    case OPT_LAZY_ADAM: return sg_optim_lazy_adam(ctx, &(sg_adam_opts){LR, B1, B2, EPS, 0, 0});
    case OPT_ADAM: return sg_optim_adam(ctx, &(sg_adam_opts){LR, B1, B2, EPS, 0, 0});
    }
    return NULL;
}

/* ---------------------------------------------------------------- train_step */

typedef struct {
    sg_ctx *ctx;
    opt_kind kind;
    sg_tensor *W;
    sg_optim *opt;
    sg_embedding_opts eopts;
    sg_tensor *batch[TS_BATCHES];
    int next_lib, next_ref;
    int dense_grad; /* dense_vs_sparse: densify W's gradient before the step */
    int64_t V;
    /* reference loop */
    float *out;                 /* (B, D) */
    float *probe_g;             /* (B, D): the probe's gradient rows */
    int64_t *slot;              /* (V), -1 at rest */
    int64_t *rows, *off, *occ;  /* grouping, (B) each (+1 for off) */
    int64_t ref_step;           /* steps the reference took (exact lazy SGD, LazyAdam) */
    float *st0, *st1;           /* momentum / sum / exp_avg, exp_avg_sq */
    int64_t *last;              /* exact lazy SGD rows' step, LazyAdam rows' count */
    double opt_step_ms;
} tcase;

static void lib_step(void *ud)
{
    tcase *c = ud;
    sg_tensor *idx = c->batch[c->next_lib++ % TS_BATCHES];
    sg_tensor *e = sg_embedding(c->W, idx, &c->eopts);
    sg_tensor *loss = sg_sum(sg_rowdot(e, e));
    if (!loss || sg_backward(loss)) {
        fprintf(stderr, "optim: %s\n", sg_ctx_message(c->ctx));
        return;
    }
    if (c->dense_grad && c->W->grad && c->W->grad->layout == SG_COO) {
        c->W->grad = sg__densify(c->W->grad);
        c->W->grad_owned = true;
    }
    if (sg_optim_step(c->opt)) fprintf(stderr, "optim: %s\n", sg_ctx_message(c->ctx));
    sgb_sink(sg_tensor_get(loss, 0));
    sg_tape_reset(c->ctx);
}

/* Median time of sg_optim_step alone over reps train steps. */
static double time_opt_step(tcase *c, int reps)
{
    double *t = malloc((size_t)reps * sizeof *t);
    for (int r = 0; r < reps; r++) {
        sg_tensor *idx = c->batch[c->next_lib++ % TS_BATCHES];
        sg_tensor *e = sg_embedding(c->W, idx, &c->eopts);
        sg_backward(sg_sum(sg_rowdot(e, e)));
        double t0 = sgb_now_ms();
        sg_optim_step(c->opt);
        t[r] = sgb_now_ms() - t0;
        sg_tape_reset(c->ctx);
    }
    for (int i = 1; i < reps; i++) /* insertion sort: reps is small */
        for (int j = i; j > 0 && t[j - 1] > t[j]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    double m = t[reps / 2];
    free(t);
    return m;
}

/* Groups the batch's rows (first-appearance order); returns the number of groups. */
static int64_t ref_group(tcase *c, const int64_t *idx)
{
    int64_t u = 0;
    for (int64_t i = 0; i < TS_B; i++) {
        int64_t r = idx[i];
        if (c->slot[r] < 0) {
            c->slot[r] = u;
            c->rows[u] = r;
            c->off[++u] = 1;
        } else {
            c->off[c->slot[r] + 1]++;
        }
    }
    c->off[0] = 0;
    for (int64_t k = 0; k < u; k++) c->off[k + 1] += c->off[k];
    for (int64_t i = 0; i < TS_B; i++) c->occ[c->off[c->slot[idx[i]]]++] = i;
    for (int64_t k = u; k > 0; k--) c->off[k] = c->off[k - 1];
    c->off[0] = 0;
    for (int64_t k = 0; k < u; k++) c->slot[c->rows[k]] = -1;
    return u;
}

static void mat2_mul(const double *a, const double *b, double *o)
{
    double r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
                   a[2] * b[1] + a[3] * b[3]};
    for (int i = 0; i < 4; i++) o[i] = r[i];
}

/* Exact lazy momentum SGD: row r of W (and its momentum row) brought from step last[r]
 * to step `to` by the zero-gradient recurrence, as a 2x2 matrix power. */
static void ref_catch_up(tcase *c, int64_t r, int64_t to)
{
    const int64_t D = TS_D;
    int64_t skip = to - c->last[r];
    if (skip <= 0) return;
    float *w = sg_tensor_f32(c->W) + r * D, *v = c->st0 + r * D;
    double M[4] = {1 - LR * WD, -LR * MU, WD, MU}; /* zero-gradient step of momentum SGD */
    double P[4] = {1, 0, 0, 1}, B[4] = {M[0], M[1], M[2], M[3]};
    for (int64_t e = skip; e; e >>= 1) {
        if (e & 1) mat2_mul(B, P, P);
        mat2_mul(B, B, B);
    }
    for (int64_t j = 0; j < D; j++) {
        double w0 = w[j], v0 = v[j];
        w[j] = (float)(P[0] * w0 + P[1] * v0);
        v[j] = (float)(P[2] * w0 + P[3] * v0);
    }
    c->last[r] = to;
}

static void ref_step(void *ud)
{
    tcase *c = ud;
    const int64_t *idx = sg_tensor_data(c->batch[c->next_ref++ % TS_BATCHES]);
    float *W = sg_tensor_f32(c->W), *out = c->out;
    const int64_t D = TS_D;
    double lane[8] = {0}; /* eight partial sums, so that the loop vectorizes */
    for (int64_t b = 0; b < TS_B; b++) {
        /* the forward reads each row as dense SGD holds it (the library does the same) */
        if (c->kind == OPT_SGD_MWD) ref_catch_up(c, idx[b], c->ref_step);
        const float *w = W + idx[b] * D;
        float *o = out + b * D;
        for (int64_t j = 0; j < D; j += 8)
            for (int k = 0; k < 8; k++) {
                o[j + k] = w[j + k];
                lane[k] += (double)o[j + k] * o[j + k];
            }
    }
    sgb_sink(lane[0] + lane[1] + lane[2] + lane[3] + lane[4] + lane[5] + lane[6] + lane[7]);
    int64_t s = ++c->ref_step;
    if (c->kind == OPT_SGD) {
        for (int64_t b = 0; b < TS_B; b++) {
            float *w = W + idx[b] * D;
            const float *o = out + b * D;
            for (int64_t j = 0; j < D; j++) w[j] -= (float)LR * (o[j] + o[j]);
        }
        return;
    }
    int64_t u = ref_group(c, idx);
    float g[TS_D];
    for (int64_t k = 0; k < u; k++) {
        int64_t r = c->rows[k];
        for (int64_t j = 0; j < D; j++) g[j] = 0;
        for (int64_t q = c->off[k]; q < c->off[k + 1]; q++) {
            const float *o = out + c->occ[q] * D;
            for (int64_t j = 0; j < D; j++) g[j] += o[j] + o[j];
        }
        float *w = W + r * D;
        switch (c->kind) {
        case OPT_SGD_MWD: {
            float *v = c->st0 + r * D;
            ref_catch_up(c, r, s - 1); /* done by the forward already */
            for (int64_t j = 0; j < D; j++) {
                float gj = g[j] + (float)WD * w[j];
                v[j] = (float)MU * v[j] + gj;
                w[j] -= (float)LR * v[j];
            }
            c->last[r] = s;
            break;
        }
        case OPT_ADAGRAD: {
            float *a = c->st0 + r * D;
            for (int64_t j = 0; j < D; j++) {
                a[j] += g[j] * g[j];
                w[j] -= (float)LR * g[j] / (sqrtf(a[j]) + (float)EPS);
            }
            break;
        }
        case OPT_ROWWISE: {
            double sq = 0;
            for (int64_t j = 0; j < D; j++) sq += (double)g[j] * g[j];
            c->st0[r] += (float)(sq / D);
            float m = (float)LR / (sqrtf(c->st0[r]) + (float)EPS);
            for (int64_t j = 0; j < D; j++) w[j] -= m * g[j];
            break;
        }
        case OPT_LAZY_ADAM: {
            int64_t t = ++c->last[r];
            float ss = (float)(LR / (1 - pow(B1, (double)t)));
            float bs = (float)sqrt(1 - pow(B2, (double)t));
            float *m = c->st0 + r * D, *v = c->st1 + r * D;
            for (int64_t j = 0; j < D; j++) {
                m[j] = (float)B1 * m[j] + (float)(1 - B1) * g[j];
                v[j] = (float)B2 * v[j] + (float)(1 - B2) * g[j] * g[j];
                w[j] -= ss * m[j] / (sqrtf(v[j]) / bs + (float)EPS);
            }
            break;
        }
        default:
            break;
        }
    }
}

/* Plain SGD through the library's passes (probe_ms in the header). */
static void probe_sgd_step(void *ud)
{
    tcase *c = ud;
    const int64_t *idx = sg_tensor_data(c->batch[c->next_ref++ % TS_BATCHES]);
    float *W = sg_tensor_f32(c->W), *out = c->out, *g = c->probe_g;
    const int64_t D = TS_D;
    for (int64_t b = 0; b < TS_B; b++) {
        const float *w = W + idx[b] * D;
        for (int64_t j = 0; j < D; j++) out[b * D + j] = w[j];
    }
    double lane[8] = {0};
    for (int64_t b = 0; b < TS_B; b++)
        for (int64_t j = 0; j < D; j += 8)
            for (int k = 0; k < 8; k++) lane[k] += (double)out[b * D + j + k] * out[b * D + j + k];
    sgb_sink(lane[0] + lane[1] + lane[2] + lane[3] + lane[4] + lane[5] + lane[6] + lane[7]);
    for (int64_t i = 0; i < TS_B * D; i++) g[i] = out[i] + out[i];
    for (int64_t b = 0; b < TS_B; b++) {
        float *w = W + idx[b] * D;
        for (int64_t j = 0; j < D; j++) w[j] -= (float)LR * g[b * D + j];
    }
}

/* Puts the table back to its first values and the optimizer's state to zeros (step 0):
 * every timed run starts from the same point and takes the same steps, so the library,
 * the reference and the fused path do the same arithmetic on the same numbers (this
 * objective drives Adagrad's rows towards zero, into subnormal floats, after enough
 * steps: a run that started later would be slower for that alone). */
static void reset_case(tcase *c, const float *w0)
{
    memcpy(sg_tensor_f32(c->W), w0, (size_t)c->V * TS_D * sizeof *w0);
    for (int i = 0; i < sg_optim_state_count(c->opt, c->W); i++) {
        sg_tensor *s = sg_optim_state(c->opt, c->W, i, NULL);
        memset(sg_tensor_data(s), 0, (size_t)sg_tensor_numel(s) * sg_dtype_size(sg_tensor_dtype(s)));
    }
    sg_optim_set_steps(c->opt, 0);
    c->next_lib = c->next_ref = 0;
    c->ref_step = 0;
}

/* Points the reference at the optimizer's own state tensors. */
static void ref_bind_state(tcase *c)
{
    c->st0 = c->st1 = NULL;
    c->last = NULL;
    const char *name;
    for (int i = 0; i < sg_optim_state_count(c->opt, c->W); i++) {
        sg_tensor *s = sg_optim_state(c->opt, c->W, i, &name);
        if (!strcmp(name, "momentum_buffer") || !strcmp(name, "sum") || !strcmp(name, "exp_avg"))
            c->st0 = sg_tensor_data(s);
        else if (!strcmp(name, "exp_avg_sq")) c->st1 = sg_tensor_data(s);
        else if (!strcmp(name, "last_step") || !strcmp(name, "row_step")) c->last = sg_tensor_data(s);
    }
    c->ref_step = sg_optim_steps(c->opt);
}

static int train_cases(const sgb_cfg *cfg, int threads)
{
    static const int64_t Vs[3] = {10000, 100000, 1000000};
    int nV = cfg->quick ? 2 : 3;
    for (int vi = 0; vi < nV; vi++) {
        int64_t V = Vs[vi];
        sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = threads});
        if (!ctx) return 1;
        tcase c;
        memset(&c, 0, sizeof c);
        c.ctx = ctx;
        c.V = V;
        int64_t shape[2] = {V, TS_D};
        c.W = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F32, 2, shape), 1);
        if (!c.W) return 1;
        sg_tensor_fill_uniform(c.W, -0.1, 0.1);
        float *w0 = malloc((size_t)V * TS_D * sizeof *w0);
        float *w_lib = malloc((size_t)V * TS_D * sizeof *w_lib);
        memcpy(w0, sg_tensor_f32(c.W), (size_t)V * TS_D * sizeof *w0);
        int64_t bshape[1] = {TS_B};
        for (int k = 0; k < TS_BATCHES; k++) {
            c.batch[k] = sg_tensor_new(ctx, SG_I64, 1, bshape);
            int64_t *d = sg_tensor_data(c.batch[k]);
            for (int64_t i = 0; i < TS_B; i++) d[i] = (int64_t)(sg_rand_u64(ctx) % (uint64_t)V);
        }
        c.out = malloc((size_t)TS_B * TS_D * sizeof *c.out);
        c.probe_g = malloc((size_t)TS_B * TS_D * sizeof *c.probe_g);
        c.slot = malloc((size_t)V * sizeof *c.slot);
        c.rows = malloc(TS_B * sizeof *c.rows);
        c.off = malloc((TS_B + 1) * sizeof *c.off);
        c.occ = malloc(TS_B * sizeof *c.occ);
        for (int64_t r = 0; r < V; r++) c.slot[r] = -1;
        int reps = sgb_reps(cfg, V >= 1000000 ? 15 : 40);

        for (int k = OPT_SGD; k <= OPT_LAZY_ADAM; k++) {
            double unfused_ms = 0;
            for (int fused = 0; fused < 2; fused++) {
                c.kind = (opt_kind)k;
                c.opt = make_opt(ctx, c.kind);
                if (!c.opt || sg_optim_add_param(c.opt, c.W)) return 1;
                c.eopts = (sg_embedding_opts){-1, 0.0, fused ? c.opt : NULL};
                c.dense_grad = 0;
                reset_case(&c, w0);
                double ms = sgb_median_ms(lib_step, &c, reps);
                memcpy(w_lib, sg_tensor_f32(c.W), (size_t)V * TS_D * sizeof *w_lib);
                char extra[160] = "";
                if (!fused) {
                    unfused_ms = ms;
                    reset_case(&c, w0);
                    snprintf(extra, sizeof extra, "\"opt_step_ms\":%.4g", time_opt_step(&c, reps + 1));
                }
                reset_case(&c, w0);
                ref_bind_state(&c);
                double ref = sgb_median_ms(ref_step, &c, reps);
                double diff = 0; /* the same steps: the library's table against the loop's */
                const float *w_ref = sg_tensor_f32(c.W);
                for (int64_t i = 0; i < V * TS_D; i++) {
                    double d = fabs((double)w_lib[i] - (double)w_ref[i]);
                    if (!(d <= diff)) diff = d;
                }
                size_t el = strlen(extra);
                snprintf(extra + el, sizeof extra - el, "%s\"max_diff_vs_ref\":%.3g", el ? "," : "", diff);
                if (k == OPT_SGD) {
                    reset_case(&c, w0);
                    el = strlen(extra);
                    snprintf(extra + el, sizeof extra - el, ",\"probe_ms\":%.4g",
                             sgb_median_ms(probe_sgd_step, &c, reps));
                }
                char params[160];
                snprintf(params, sizeof params, "{\"opt\":\"%s\",\"fused\":%s,\"V\":%lld,\"B\":%d,\"D\":%d}",
                         opt_names[k], fused ? "true" : "false", (long long)V, TS_B, TS_D);
                sgb_emit("optim", "train_step", params, ms, ref, threads, extra);

                if (!fused && k <= OPT_ADAGRAD) { /* the same step through a dense gradient */
                    c.eopts.fused = NULL;
                    c.dense_grad = 1;
                    reset_case(&c, w0);
                    double dms = sgb_median_ms(lib_step, &c, V >= 1000000 ? 3 : sgb_reps(cfg, 10));
                    c.dense_grad = 0;
                    snprintf(extra, sizeof extra, "\"sparse_ms\":%.4g,\"dense_over_sparse\":%.4g",
                             unfused_ms, dms / unfused_ms);
                    sgb_emit("optim", "dense_vs_sparse", params, dms, ref, threads, extra);
                }
                sg_optim_free(c.opt);
                c.opt = NULL;
            }
        }
        free(w0);
        free(w_lib);
        free(c.out);
        free(c.probe_g);
        free(c.slot);
        free(c.rows);
        free(c.off);
        free(c.occ);
        sg_ctx_free(ctx);
    }
    return 0;
}

/* ---------------------------------------------------------------- many_params */

enum { MP_W = 64, MP_WITH = 10, MP_INNER = 100 };

typedef struct {
    sg_optim *opt;
    opt_kind kind;
    float *w[MP_WITH], *m[MP_WITH], *v[MP_WITH];
    float g[MP_W];
    int64_t t;
} mcase;

static void many_lib(void *ud)
{
    mcase *c = ud;
    for (int i = 0; i < MP_INNER; i++) sg_optim_step(c->opt);
}

static void many_ref(void *ud)
{
    mcase *c = ud;
    for (int it = 0; it < MP_INNER; it++) {
        int64_t t = ++c->t;
        float ss = (float)(LR / (1 - pow(B1, (double)t))), bs = (float)sqrt(1 - pow(B2, (double)t));
        for (int p = 0; p < MP_WITH; p++) {
            float *w = c->w[p];
            if (c->kind == OPT_SGD) {
                for (int j = 0; j < MP_W; j++) w[j] -= (float)LR * c->g[j];
                continue;
            }
            float *m = c->m[p], *v = c->v[p];
            for (int j = 0; j < MP_W; j++) {
                m[j] = (float)B1 * m[j] + (float)(1 - B1) * c->g[j];
                v[j] = (float)B2 * v[j] + (float)(1 - B2) * c->g[j] * c->g[j];
                w[j] -= ss * m[j] / (sqrtf(v[j]) / bs + (float)EPS);
            }
        }
    }
}

static int many_cases(const sgb_cfg *cfg, int threads)
{
    static const int64_t Ps[3] = {10, 1000, 50000};
    static const opt_kind kinds[2] = {OPT_SGD, OPT_ADAM};
    for (int ki = 0; ki < 2; ki++) {
        double base_ms = 0;
        for (int pi = 0; pi < 3; pi++) {
            int64_t P = Ps[pi];
            sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = threads});
            mcase c;
            memset(&c, 0, sizeof c);
            c.kind = kinds[ki];
            c.opt = make_opt(ctx, c.kind);
            int64_t shape[1] = {MP_W};
            sg_tensor **ps = malloc((size_t)P * sizeof *ps);
            for (int64_t i = 0; i < P; i++) {
                ps[i] = sg_tensor_requires_grad(sg_tensor_new(ctx, SG_F32, 1, shape), 1);
                if (!ps[i] || sg_optim_add_param(c.opt, ps[i])) return 1;
            }
            for (int j = 0; j < MP_W; j++) c.g[j] = 0.01f * (float)(j % 7);
            for (int k = 0; k < MP_WITH; k++) { /* spread over the list */
                sg_tensor *p = ps[k * (P / MP_WITH) + P / (2 * MP_WITH)];
                sg_tensor *g = sg_tensor_new_tmp(ctx, SG_F32, 1, shape);
                memcpy(sg_tensor_f32(g), c.g, sizeof c.g);
                if (sg_backward_grad(p, g)) return 1;
                c.w[k] = sg_tensor_f32(p);
                if (c.kind == OPT_ADAM) {
                    c.m[k] = sg_tensor_data(sg_optim_state(c.opt, p, 1, NULL));
                    c.v[k] = sg_tensor_data(sg_optim_state(c.opt, p, 2, NULL));
                }
            }
            /* the gradients stay in the store: every step applies them again */
            int reps = sgb_reps(cfg, 50);
            double ms = sgb_median_ms(many_lib, &c, reps) / MP_INNER;
            double ref = sgb_median_ms(many_ref, &c, reps) / MP_INNER;
            if (pi == 0) base_ms = ms;
            char params[96], extra[64];
            snprintf(params, sizeof params, "{\"P\":%lld,\"opt\":\"%s\"}", (long long)P, opt_names[c.kind]);
            snprintf(extra, sizeof extra, "\"vs_P10\":%.4g", ms / base_ms);
            sgb_emit("optim", "many_params", params, ms, ref, threads, extra);
            sg_optim_free(c.opt);
            free(ps);
            sg_ctx_free(ctx);
        }
    }
    return 0;
}

int sgb_optim(const sgb_cfg *cfg)
{
    int threads = cfg->threads > 0 ? cfg->threads : 1;
    if (many_cases(cfg, threads)) return 1;
    return train_cases(cfg, threads);
}
