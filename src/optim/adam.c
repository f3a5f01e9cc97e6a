/* Adam and AdamW (dense) and LazyAdam (sparse, per-row step counters).
 *
 * Adam steps every element with the parameter's step t for the bias corrections; a COO
 * gradient reaches it densified (optim.c), so its result equals dense Adam's.
 * LazyAdam updates only the rows a gradient names; row r counts its own steps in
 * row_step[r] and uses that count for its bias corrections, so a row's k-th update is a
 * textbook Adam step k whatever the global step. Untouched rows neither move nor decay
 * their moments (dense Adam would move them along the decaying first moment): that is the
 * documented difference. With a dense gradient every row is touched and LazyAdam equals
 * Adam. Invariant: row_step[r] <= *ps->step.
 * The kernels defined through SG__HOT_CLONES have a variant per CPU level picked at run
 * time; all of them give the same bits (src/core/core.h).
 */
#include "optim/optim.h"

#include <math.h>

#define BETA_TAB 1024
#define BETA_LEVELS 3

int sg__lazy_adam_tables(sg_optim *opt)
{
    double *t = sg__malloc(opt->ctx, 2 * BETA_LEVELS * BETA_TAB * sizeof *t);
    if (!t) return SG_ERR_NOMEM;
    double betas[2] = {opt->o.adam.beta1, opt->o.adam.beta2};
    for (int b = 0; b < 2; b++)
        for (int l = 0; l < BETA_LEVELS; l++) {
            double *row = t + (b * BETA_LEVELS + l) * BETA_TAB;
            double base = pow(betas[b], (double)((int64_t)1 << (10 * l)));
            row[0] = 1;
            for (int k = 1; k < BETA_TAB; k++) row[k] = pow(base, (double)k);
        }
    opt->beta_pow = t;
    return SG_OK;
}

/* beta_b^k from the tables (k < 2^30), else pow. */
static double beta_pow(const sg_optim *opt, int b, int64_t k)
{
    if (k >= (int64_t)1 << (10 * BETA_LEVELS))
        return pow(b ? opt->o.adam.beta2 : opt->o.adam.beta1, (double)k);
    const double *t = opt->beta_pow + b * BETA_LEVELS * BETA_TAB;
    return t[k & (BETA_TAB - 1)] * t[BETA_TAB + ((k >> 10) & (BETA_TAB - 1))] *
           t[2 * BETA_TAB + ((k >> 20) & (BETA_TAB - 1))];
}

static bool adam_needs_groups(const sg_optim *opt) { return opt->kind == SG__OPT_LAZY_ADAM; }

static int adam_init(sg_optim *opt, sg__pstate *ps)
{
    sg_tensor *p = ps->param;
    if (!sg__optim_state_new(opt, ps, "exp_avg", p->dtype, p->ndim, p->shape, 0) ||
        !sg__optim_state_new(opt, ps, "exp_avg_sq", p->dtype, p->ndim, p->shape, 0))
        return opt->ctx->status;
    if (opt->kind == SG__OPT_LAZY_ADAM &&
        !sg__optim_state_new(opt, ps, "row_step", SG_I64, 1, &ps->rows, 0))
        return opt->ctx->status;
    return SG_OK;
}

/* One Adam step of elements [0, len): step_size = lr / (1 - beta1^t),
 * bc2s = sqrt(1 - beta2^t), applied as a product with its reciprocal. */
#define ADAM_ELEMS(T, w, m, v, gp, len, o, step_size, bc2s, lr)                            \
    do {                                                                                   \
        T b1_ = (T)(o)->beta1, b2_ = (T)(o)->beta2;                                        \
        T c1_ = (T)(1 - (o)->beta1), c2_ = (T)(1 - (o)->beta2);                            \
        T ss_ = (T)(step_size), ibs_ = (T)(1 / (bc2s)), eps_ = (T)(o)->eps;                \
        T wd_ = (o)->decoupled ? 0 : (T)(o)->weight_decay;                                 \
        T keep_ = (o)->decoupled ? (T)(1 - (lr) * (o)->weight_decay) : 1;                  \
        for (int64_t j = 0; j < (len); j++) {                                              \
            T w_ = (w)[j] * keep_;                                                         \
            T g_ = (gp)[j] + wd_ * (w)[j];                                                 \
            T m_ = b1_ * (m)[j] + c1_ * g_;                                                \
            T v_ = b2_ * (v)[j] + c2_ * g_ * g_;                                           \
            (m)[j] = m_;                                                                   \
            (v)[j] = v_;                                                                   \
            (w)[j] = w_ - ss_ * m_ / (SG__SQRT(v_) * ibs_ + eps_);                         \
        }                                                                                  \
    } while (0)

/* A dense Adam update: the job and its bias corrections, computed once for all chunks. */
typedef struct {
    sg__optim_job job;
    double step_size, bc2s;
} adam_dense_job;

/* Elements [lo, hi) of the job's parameter. */
SG__HOT_BODY void adam_dense_range__body(void *vj, int64_t lo, int64_t hi)
{
    const adam_dense_job *aj = vj;
    const sg__optim_job *job = &aj->job;
    const sg_adam_opts *o = &job->opt->o.adam;
    SG__DISPATCH_FLOAT(job->ps->param->dtype, T, {
        T *w = (T *)job->ps->param->data + lo;
        T *m = (T *)job->ps->state[1]->data + lo;
        T *v = (T *)job->ps->state[2]->data + lo;
        const T *gg = (const T *)job->g + lo;
        ADAM_ELEMS(T, w, m, v, gg, hi - lo, o, aj->step_size, aj->bc2s, job->lr);
    });
}
SG__HOT_CLONES(adam_dense_range, (void *vj, int64_t lo, int64_t hi), (vj, lo, hi))

static void adam_dense(sg_optim *opt, sg__pstate *ps, const void *g, int64_t s, double lr)
{
    const sg_adam_opts *o = &opt->o.adam;
    if (opt->adam_pow_step != s) {
        opt->adam_pow[0] = pow(o->beta1, (double)s);
        opt->adam_pow[1] = pow(o->beta2, (double)s);
        opt->adam_pow_step = s;
    }
    adam_dense_job aj = {{opt, ps, NULL, g, s, lr}, lr / (1 - opt->adam_pow[0]), sqrt(1 - opt->adam_pow[1])};
    sg__parallel_for(opt->ctx, ps->param->numel, SG__GRAIN, adam_dense_range, &aj);
}

/* Groups [lo, hi) of the job's rows. */
SG__HOT_BODY void lazy_adam_range__body(void *vj, int64_t lo, int64_t hi)
{
    const sg__optim_job *job = vj;
    const sg_optim *opt = job->opt;
    const sg_adam_opts *o = &opt->o.adam;
    const sg__rowgroups *rg = job->rg;
    const sg__pstate *ps = job->ps;
    int64_t n = rg->n, width = ps->width;
    int64_t *row_step = ps->state[3]->data;
    size_t rowbytes = (size_t)width * sg_dtype_size(ps->param->dtype);
    double lr = job->lr;
    SG__DISPATCH_FLOAT(ps->param->dtype, T, {
        T *w = ps->param->data;
        T *m = ps->state[1]->data;
        T *v = ps->state[2]->data;
        const T *gg = job->g;
        for (int64_t i = lo; i < hi; i++) {
            if (i + SG__OPTIM_AHEAD < n) {
                int64_t ra = sg__group_row(rg, i + SG__OPTIM_AHEAD);
                sg__optim_prefetch(w, ra, rowbytes);
                sg__optim_prefetch(m, ra, rowbytes);
                sg__optim_prefetch(v, ra, rowbytes);
                sg__optim_prefetch(row_step, ra, sizeof *row_step);
            }
            int64_t r = sg__group_row(rg, i);
            int64_t k = ++row_step[r];
            double step_size = lr / (1 - beta_pow(opt, 0, k));
            double bc2s = sqrt(1 - beta_pow(opt, 1, k));
            T buf[SG__OPTIM_CHUNK];
            for (int64_t c0 = 0; c0 < width; c0 += SG__OPTIM_CHUNK) {
                int64_t len = width - c0 < SG__OPTIM_CHUNK ? width - c0 : SG__OPTIM_CHUNK;
                const T *gp = SG__GROUP_SUM(T)(rg, i, gg, width, c0, len, buf);
                int64_t at = r * width + c0;
                ADAM_ELEMS(T, (w + at), (m + at), (v + at), gp, len, o, step_size, bc2s, lr);
            }
        }
    });
}
SG__HOT_CLONES(lazy_adam_range, (void *vj, int64_t lo, int64_t hi), (vj, lo, hi))

static void lazy_adam_rows(sg_optim *opt, sg__pstate *ps, const sg__rowgroups *rg,
                           const void *g, int64_t s, double lr)
{
    sg__optim_job job = {opt, ps, rg, g, s, lr};
    sg__parallel_for(opt->ctx, rg->n, sg__row_grain(ps->width), lazy_adam_range, &job);
}

/* Adam has no row path: optim.c hands it every gradient dense. */
const sg__optim_ops sg__adam_ops = {adam_init, adam_dense, NULL, NULL, NULL, adam_needs_groups};
const sg__optim_ops sg__lazy_adam_ops = {adam_init, NULL, lazy_adam_rows, NULL, NULL, adam_needs_groups};
