/* sg_gradcheck: the full Jacobian by backward (one pass per output element) against
 * central finite differences, in f64.
 * For COO inputs, masked == 0 perturbs every element of the dense meaning: the perturbed
 * input is x plus one extra entry (index k, value +-eps), which means x + eps*e_k because
 * duplicates sum. masked == 1 perturbs only specified elements, so the numerical Jacobian
 * is zero at unspecified ones and an analytical gradient that reaches them fails. */
#include "autograd/tape.h"

#include <math.h>

typedef struct {
    sg_tensor *x;
    int64_t n;     /* elements of the dense meaning */
    double *jac_a; /* (n, nout) analytical */
    double *jac_n; /* (n, nout) numerical */
} gc_input;

/* Evaluates f and copies its output's dense meaning into buf (nout doubles). */
static int eval_into(sg_ctx *ctx, sg_gradcheck_fn f, void *ud, sg_tensor *const *inputs,
                     double *buf, int64_t nout)
{
    sg_tensor *y = f(ctx, inputs, ud);
    if (!y) return ctx->status ? ctx->status : sg__failc(ctx, SG_ERR_STATE, "gradcheck: f returned NULL");
    if (y->numel != nout) {
        sg_tape_reset(ctx);
        return sg__failc(ctx, SG_ERR_SHAPE, "gradcheck: f's output size changed");
    }
    for (int64_t j = 0; j < nout; j++) buf[j] = sg_tensor_get(y, j);
    sg_tape_reset(ctx);
    return SG_OK;
}

/* Replaces COO x's parts by x plus one entry at dense element k with value v (a tape
 * copy); `saved` keeps the original parts for restore_coo. */
static int extend_coo(sg_tensor *x, int64_t k, double v, sg_tensor *saved)
{
    sg_ctx *ctx = x->ctx;
    *saved = *x;
    int64_t dsize = sg__prod(x->shape, x->sparse_dim, x->ndim);
    int64_t nnz = x->nnz + 1;
    int64_t ishape[2] = {x->sparse_dim, nnz};
    int64_t vshape[SG_MAX_DIMS];
    vshape[0] = nnz;
    for (int i = 1; i < x->values->ndim; i++) vshape[i] = x->values->shape[i];
    sg_tensor *ind = sg__tmp(ctx, SG_I64, 2, ishape, false);
    sg_tensor *val = sg__tmp(ctx, SG_F64, x->values->ndim, vshape, true);
    if (!ind || !val) return SG_ERR_NOMEM;
    const int64_t *oi = x->indices->data;
    int64_t *ni = ind->data;
    int64_t row = k / dsize;
    for (int d = x->sparse_dim - 1; d >= 0; d--) {
        for (int64_t e = 0; e < x->nnz; e++) ni[d * nnz + e] = oi[d * x->nnz + e];
        ni[d * nnz + x->nnz] = row % x->shape[d];
        row /= x->shape[d];
    }
    memcpy(val->data, x->values->data, (size_t)(x->nnz * dsize) * sizeof(double));
    ((double *)val->data)[x->nnz * dsize + k % dsize] = v;
    x->indices = ind;
    x->values = val;
    x->nnz = nnz;
    x->coalesced = false;
    return SG_OK;
}

static void restore_coo(sg_tensor *x, const sg_tensor *saved)
{
    x->indices = saved->indices;
    x->values = saved->values;
    x->nnz = saved->nnz;
    x->coalesced = saved->coalesced;
}

/* Marks the dense elements that x's entries specify. */
static void specified(const sg_tensor *x, unsigned char *mark)
{
    int64_t dsize = sg__prod(x->shape, x->sparse_dim, x->ndim);
    const int64_t *idx = x->indices->data;
    for (int64_t e = 0; e < x->nnz; e++) {
        int64_t r = 0;
        for (int d = 0; d < x->sparse_dim; d++) r = r * x->shape[d] + idx[d * x->nnz + e];
        for (int64_t o = 0; o < dsize; o++) mark[r * dsize + o] = 1;
    }
}

static int check_inputs(sg_ctx *ctx, int n_inputs, sg_tensor *const *inputs)
{
    if (n_inputs < 0 || (n_inputs > 0 && !inputs)) return sg__failc(ctx, SG_ERR_ARG, "gradcheck: bad inputs");
    for (int i = 0; i < n_inputs; i++) {
        sg_tensor *x = inputs[i];
        if (!x) return sg__failc(ctx, SG_ERR_NULL, "gradcheck: input %d is NULL", i);
        if (x->ctx != ctx) /* its gradients would be another store's */
            return sg__failc(ctx, SG_ERR_ARG, "gradcheck: input %d is of another context "
                             "(operands of two contexts)", i);
        if (!x->requires_grad) continue;
        if (x->dtype != SG_F64) return sg__failc(ctx, SG_ERR_DTYPE, "gradcheck: input %d must be f64", i);
        if (!x->persistent) return sg__failc(ctx, SG_ERR_ARG, "gradcheck: input %d must be persistent", i);
    }
    return SG_OK;
}

static int analytical(sg_ctx *ctx, sg_gradcheck_fn f, void *ud, int n_inputs,
                      sg_tensor *const *inputs, gc_input *gi, int64_t nout)
{
    for (int64_t j = 0; j < nout; j++) {
        sg_tensor *y = f(ctx, inputs, ud);
        if (!y) return ctx->status ? ctx->status : SG_ERR_STATE;
        sg_tensor *seed = sg__tmp(ctx, y->dtype, y->ndim, y->shape, true);
        if (!seed) return ctx->status;
        if (y->dtype != SG_F64) return sg__failc(ctx, SG_ERR_DTYPE, "gradcheck: f's output must be f64");
        ((double *)seed->data)[j] = 1;
        int rc = y->requires_grad ? sg_backward_grad(y, seed) : SG_OK;
        if (rc) return rc;
        for (int i = 0; i < n_inputs; i++) {
            if (!gi[i].jac_a) continue;
            sg_tensor *g = sg_tensor_grad(gi[i].x);
            for (int64_t k = 0; k < gi[i].n; k++) gi[i].jac_a[k * nout + j] = g ? sg_tensor_get(g, k) : 0.0;
        }
        sg_tape_reset(ctx);
    }
    return SG_OK;
}

static int numerical(sg_ctx *ctx, sg_gradcheck_fn f, void *ud, sg_tensor *const *inputs,
                     gc_input *g, int64_t nout, double eps, int masked, double *plus, double *minus)
{
    sg_tensor *x = g->x;
    unsigned char *mark = NULL;
    if (x->layout == SG_COO && masked) {
        mark = sg__calloc(ctx, (size_t)(g->n ? g->n : 1), 1);
        if (!mark) return SG_ERR_NOMEM;
        specified(x, mark);
    }
    int rc = SG_OK;
    for (int64_t k = 0; k < g->n && !rc; k++) {
        if (mark && !mark[k]) continue; /* masked: unspecified elements are not perturbed */
        for (int s = 0; s < 2 && !rc; s++) {
            double d = s ? -eps : eps;
            double *buf = s ? minus : plus;
            if (x->layout == SG_DENSE) {
                double *v = x->data, old = v[k];
                v[k] = old + d;
                rc = eval_into(ctx, f, ud, inputs, buf, nout);
                v[k] = old;
            } else if (!masked) {
                sg_tensor saved;
                rc = extend_coo(x, k, d, &saved);
                if (!rc) rc = eval_into(ctx, f, ud, inputs, buf, nout);
                restore_coo(x, &saved);
                sg_tape_reset(ctx);
            } else { /* masked: move the first entry that specifies k (duplicates sum) */
                int64_t dsize = sg__prod(x->shape, x->sparse_dim, x->ndim);
                const int64_t *idx = x->indices->data;
                double *vals = x->values->data;
                int64_t hit = -1;
                for (int64_t e = 0; e < x->nnz && hit < 0; e++) {
                    int64_t r = 0;
                    for (int dd = 0; dd < x->sparse_dim; dd++) r = r * x->shape[dd] + idx[dd * x->nnz + e];
                    if (r == k / dsize) hit = e * dsize + k % dsize;
                }
                double old = vals[hit];
                vals[hit] = old + d;
                rc = eval_into(ctx, f, ud, inputs, buf, nout);
                vals[hit] = old;
            }
        }
        for (int64_t j = 0; j < nout && !rc; j++) g->jac_n[k * nout + j] = (plus[j] - minus[j]) / (2 * eps);
    }
    sg__free(ctx, mark);
    return rc;
}

int sg_gradcheck(sg_ctx *ctx, sg_gradcheck_fn f, void *ud, int n_inputs,
                 sg_tensor *const *inputs, const sg_gradcheck_opts *opts,
                 sg_gradcheck_result *res)
{
    if (!ctx) return SG_ERR_NULL;
    if (!f) return sg__failc(ctx, SG_ERR_NULL, "gradcheck: NULL function");
    sg_gradcheck_opts o = {0};
    if (opts) o = *opts;
    double eps = o.eps > 0 ? o.eps : 1e-6, atol = o.atol > 0 ? o.atol : 1e-5,
           rtol = o.rtol > 0 ? o.rtol : 1e-3;
    sg_gradcheck_result r = {1, -1, -1, -1, 0, 0, 0};
    int rc = check_inputs(ctx, n_inputs, inputs);
    if (rc) return rc;
    sg_tape_reset(ctx);

    sg_tensor *y = f(ctx, inputs, ud);
    if (!y) return ctx->status ? ctx->status : sg__failc(ctx, SG_ERR_STATE, "gradcheck: f returned NULL");
    int64_t nout = y->numel;
    sg_tape_reset(ctx);

    gc_input *gi = sg__calloc(ctx, (size_t)(n_inputs ? n_inputs : 1), sizeof *gi);
    double *plus = sg__calloc(ctx, (size_t)(nout ? nout : 1), sizeof(double));
    double *minus = sg__calloc(ctx, (size_t)(nout ? nout : 1), sizeof(double));
    rc = gi && plus && minus ? SG_OK : SG_ERR_NOMEM;
    for (int i = 0; i < n_inputs && !rc; i++) {
        gi[i].x = inputs[i];
        gi[i].n = inputs[i]->numel;
        if (!inputs[i]->requires_grad) continue;
        int64_t cells = gi[i].n * nout;
        if (cells < 1) cells = 1;
        gi[i].jac_a = sg__calloc(ctx, (size_t)cells, sizeof(double));
        gi[i].jac_n = sg__calloc(ctx, (size_t)cells, sizeof(double));
        if (!gi[i].jac_a || !gi[i].jac_n) rc = SG_ERR_NOMEM;
    }
    if (!rc) rc = analytical(ctx, f, ud, n_inputs, inputs, gi, nout);
    if (!rc) {
        int prev = sg_set_grad_enabled(ctx, 0);
        for (int i = 0; i < n_inputs && !rc; i++)
            if (gi[i].jac_a) rc = numerical(ctx, f, ud, inputs, &gi[i], nout, eps, o.masked, plus, minus);
        sg_set_grad_enabled(ctx, prev);
    }
    if (!rc) {
        double worst = -1;
        for (int i = 0; i < n_inputs; i++) {
            if (!gi[i].jac_a) continue;
            for (int64_t c = 0; c < gi[i].n * nout; c++) {
                double a = gi[i].jac_a[c], nu = gi[i].jac_n[c], err = fabs(a - nu);
                double excess = err - (atol + rtol * fabs(nu));
                if (!(err <= r.max_abs_err)) r.max_abs_err = err;
                if (!(excess <= 0)) r.passed = 0; /* NaN counts as a failure */
                if (!(excess <= worst)) {
                    worst = isnan(excess) ? INFINITY : excess;
                    r.input = i;
                    r.element = c / (nout ? nout : 1);
                    r.output = c % (nout ? nout : 1);
                    r.analytical = a;
                    r.numerical = nu;
                }
            }
        }
        if (!r.passed)
            rc = sg__failc(ctx, SG_ERR_GRADCHECK,
                           "gradcheck: input %d element %lld output %lld: analytical %.8g, numerical %.8g",
                           r.input, (long long)r.element, (long long)r.output, r.analytical, r.numerical);
    }
    for (int i = 0; gi && i < n_inputs; i++) {
        sg__free(ctx, gi[i].jac_a);
        sg__free(ctx, gi[i].jac_n);
    }
    sg__free(ctx, gi);
    sg__free(ctx, plus);
    sg__free(ctx, minus);
    sg_tape_reset(ctx);
    if (res) *res = r;
    return rc;
}
