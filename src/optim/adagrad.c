/* Adagrad (one accumulator per element) and row-wise Adagrad (one per row), dense and
 * sparse paths. A sparse step sums duplicate rows first and updates only the rows named:
 * an untouched row's zero gradient would add nothing to its accumulator nor move it, so
 * the sparse path equals the dense one when weight decay is 0; with weight decay, the decay
 * term is added to touched rows only (it has no closed form through the accumulator).
 * Invariant: accumulators only grow, starting from initial_accumulator.
 * The kernels defined through SG__HOT_CLONES have a variant per CPU level picked at run
 * time; all of them give the same bits (src/core/core.h): the row-wise sum keeps 8 lanes.
 */
#include "optim/optim.h"

#include <math.h>

static bool adagrad_needs_groups(const sg_optim *opt)
{
    (void)opt;
    return true;
}

/* clr of parameter step s. */
static double adagrad_clr(const sg_optim *opt, int64_t s, double lr)
{
    return lr / (1 + (double)(s - 1) * opt->o.adagrad.lr_decay);
}

/* ---- element-wise Adagrad */

static int adagrad_init(sg_optim *opt, sg__pstate *ps)
{
    sg_tensor *p = ps->param;
    return sg__optim_state_new(opt, ps, "sum", p->dtype, p->ndim, p->shape,
                               opt->o.adagrad.initial_accumulator)
               ? SG_OK
               : opt->ctx->status;
}

/* With wd 0 there is no decay term at all, as in torch's Adagrad (so an infinite weight
 * does not make its gradient NaN). */
#define ADAGRAD_ELEMS(T, w, acc, gp, len, clr, wd, eps)                                    \
    do {                                                                                   \
        for (int64_t j = 0; j < (len); j++) {                                              \
            T g_ = (wd) == 0 ? (gp)[j] : (gp)[j] + (T)(wd) * (w)[j];                       \
            T a_ = (acc)[j] + g_ * g_;                                                     \
            (acc)[j] = a_;                                                                 \
            (w)[j] -= (T)(clr) * g_ / (SG__SQRT(a_) + (T)(eps));                           \
        }                                                                                  \
    } while (0)

/* Elements [lo, hi) of the job's parameter. */
SG__HOT_BODY void adagrad_dense_range__body(void *vj, int64_t lo, int64_t hi)
{
    const sg__optim_job *job = vj;
    const sg_adagrad_opts *o = &job->opt->o.adagrad;
    double clr = adagrad_clr(job->opt, job->s, job->lr), wd = o->weight_decay, eps = o->eps;
    SG__DISPATCH_FLOAT(job->ps->param->dtype, T, {
        T *w = (T *)job->ps->param->data + lo;
        T *acc = (T *)job->ps->state[1]->data + lo;
        const T *gg = (const T *)job->g + lo;
        ADAGRAD_ELEMS(T, w, acc, gg, hi - lo, clr, wd, eps);
    });
}
SG__HOT_CLONES(adagrad_dense_range, (void *vj, int64_t lo, int64_t hi), (vj, lo, hi))

static void adagrad_dense(sg_optim *opt, sg__pstate *ps, const void *g, int64_t s, double lr)
{
    sg__optim_job job = {opt, ps, NULL, g, s, lr};
    sg__parallel_for(opt->ctx, ps->param->numel, SG__GRAIN, adagrad_dense_range, &job);
}

/* Groups [lo, hi) of the job's rows. */
SG__HOT_BODY void adagrad_range__body(void *vj, int64_t lo, int64_t hi)
{
    const sg__optim_job *job = vj;
    const sg_adagrad_opts *o = &job->opt->o.adagrad;
    const sg__rowgroups *rg = job->rg;
    const sg__pstate *ps = job->ps;
    double clr = adagrad_clr(job->opt, job->s, job->lr), wd = o->weight_decay, eps = o->eps;
    int64_t n = rg->n, width = ps->width;
    size_t rowbytes = (size_t)width * sg_dtype_size(ps->param->dtype);
    SG__DISPATCH_FLOAT(ps->param->dtype, T, {
        T *w = ps->param->data;
        T *acc = ps->state[1]->data;
        const T *gg = job->g;
        for (int64_t i = lo; i < hi; i++) {
            if (i + SG__OPTIM_AHEAD < n) {
                int64_t ra = sg__group_row(rg, i + SG__OPTIM_AHEAD);
                sg__optim_prefetch(w, ra, rowbytes);
                sg__optim_prefetch(acc, ra, rowbytes);
            }
            int64_t r = sg__group_row(rg, i);
            T buf[SG__OPTIM_CHUNK];
            for (int64_t c0 = 0; c0 < width; c0 += SG__OPTIM_CHUNK) {
                int64_t len = width - c0 < SG__OPTIM_CHUNK ? width - c0 : SG__OPTIM_CHUNK;
                const T *gp = SG__GROUP_SUM(T)(rg, i, gg, width, c0, len, buf);
                ADAGRAD_ELEMS(T, (w + r * width + c0), (acc + r * width + c0), gp, len, clr, wd, eps);
            }
        }
    });
}
SG__HOT_CLONES(adagrad_range, (void *vj, int64_t lo, int64_t hi), (vj, lo, hi))

static void adagrad_rows(sg_optim *opt, sg__pstate *ps, const sg__rowgroups *rg,
                         const void *g, int64_t s, double lr)
{
    sg__optim_job job = {opt, ps, rg, g, s, lr};
    sg__parallel_for(opt->ctx, rg->n, sg__row_grain(ps->width), adagrad_range, &job);
}

const sg__optim_ops sg__adagrad_ops = {adagrad_init, adagrad_dense, adagrad_rows, NULL, NULL,
                                       adagrad_needs_groups};

/* ---- row-wise Adagrad: acc[r] += mean over the row of g^2 (accumulated in double, in
 * eight interleaved partial sums so that the loop vectorizes) */

static int rowwise_init(sg_optim *opt, sg__pstate *ps)
{
    return sg__optim_state_new(opt, ps, "sum", ps->param->dtype, 1, &ps->rows,
                               opt->o.adagrad.initial_accumulator)
               ? SG_OK
               : opt->ctx->status;
}

/* Groups [lo, hi) of the job's rows. */
SG__HOT_BODY void rowwise_range__body(void *vj, int64_t lo, int64_t hi)
{
    const sg__optim_job *job = vj;
    const sg_adagrad_opts *o = &job->opt->o.adagrad;
    const sg__rowgroups *rg = job->rg;
    const sg__pstate *ps = job->ps;
    double clr = adagrad_clr(job->opt, job->s, job->lr), wd = o->weight_decay, eps = o->eps;
    int64_t n = rg->n, width = ps->width;
    size_t rowbytes = (size_t)width * sg_dtype_size(ps->param->dtype);
    SG__DISPATCH_FLOAT(ps->param->dtype, T, {
        T *w = ps->param->data;
        T *acc = ps->state[1]->data;
        const T *gg = job->g;
        for (int64_t i = lo; i < hi; i++) {
            if (i + SG__OPTIM_AHEAD < n) {
                int64_t ra = sg__group_row(rg, i + SG__OPTIM_AHEAD);
                sg__optim_prefetch(w, ra, rowbytes);
                sg__optim_prefetch(acc, ra, sizeof(T));
            }
            int64_t r = sg__group_row(rg, i);
            T *wr = w + r * width;
            T buf[SG__OPTIM_CHUNK];
            double lane[8] = {0}; /* column j adds into lane j % 8: a fixed order */
            for (int64_t c0 = 0; c0 < width; c0 += SG__OPTIM_CHUNK) {
                int64_t len = width - c0 < SG__OPTIM_CHUNK ? width - c0 : SG__OPTIM_CHUNK;
                const T *gp = SG__GROUP_SUM(T)(rg, i, gg, width, c0, len, buf);
                const T *wc = wr + c0;
                int64_t j = 0;
                for (; j + 8 <= len; j += 8)
                    for (int k = 0; k < 8; k++) {
                        double gj = (double)(gp[j + k] + (T)wd * wc[j + k]);
                        lane[k] += gj * gj;
                    }
                for (; j < len; j++) {
                    double gj = (double)(gp[j] + (T)wd * wc[j]);
                    lane[j % 8] += gj * gj;
                }
            }
            double sq = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
            T a = acc[r] + (T)(sq / (double)width);
            acc[r] = a;
            T mult = (T)clr / (SG__SQRT(a) + (T)eps);
            for (int64_t c0 = 0; c0 < width; c0 += SG__OPTIM_CHUNK) {
                int64_t len = width - c0 < SG__OPTIM_CHUNK ? width - c0 : SG__OPTIM_CHUNK;
                const T *gp = SG__GROUP_SUM(T)(rg, i, gg, width, c0, len, buf);
                T *wc = wr + c0;
                for (int64_t j = 0; j < len; j++) wc[j] -= mult * (gp[j] + (T)wd * wc[j]);
            }
        }
    });
}
SG__HOT_CLONES(rowwise_range, (void *vj, int64_t lo, int64_t hi), (vj, lo, hi))

static void rowwise_rows(sg_optim *opt, sg__pstate *ps, const sg__rowgroups *rg,
                         const void *g, int64_t s, double lr)
{
    if (ps->width == 0) return;
    sg__optim_job job = {opt, ps, rg, g, s, lr};
    sg__parallel_for(opt->ctx, rg->n, sg__row_grain(ps->width), rowwise_range, &job);
}

const sg__optim_ops sg__rowwise_adagrad_ops = {rowwise_init, NULL, rowwise_rows, NULL, NULL,
                                               adagrad_needs_groups};
