/* Layer normalisation over the last dim, with optional elementwise weight and bias.
 *
 * Invariants: x is viewed as R rows of D = normalized_size elements; each row is
 * normalised by one thread, its mean and biased variance accumulated in double in index
 * order (two passes: mean, then squared deviations). The forward saves each row's mean
 * and 1/sqrt(var + eps) (an (R, 2) f64 tape tensor); the backward recomputes x_hat from
 * them. The weight's and bias's gradients are sums over rows: each chunk of rows (the
 * chunks of sg__parallel_for, fixed by R and the grain) sums its own rows in order into
 * its own partial, and the partials are added in chunk order, so every result is bitwise
 * identical for any thread count. */
#include "ops/ops.h"

#include <math.h>

typedef struct {
    sg_dtype dtype;
    int64_t D, grain;
    double eps;            /* forward only */
    const void *x, *w, *b; /* w, b may be NULL */
    const void *gout;      /* backward only */
    double *stats;         /* (R, 2): mean, rstd */
    void *y;               /* forward: out; backward: dx */
    double *part;          /* backward: per chunk, D of dw then D of db */
} ln_job;

/* Forward of rows [lo, hi): stats, then y = x_hat * w + b. */
static void ln_forward(void *ud, int64_t lo, int64_t hi)
{
    const ln_job *J = ud;
    const int64_t D = J->D;
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T *w = J->w;
        const T *b = J->b;
        for (int64_t r = lo; r < hi; r++) {
            const T *x = (const T *)J->x + r * D;
            T *y = (T *)J->y + r * D;
            double mean = 0;
            double var = 0;
            for (int64_t j = 0; j < D; j++) mean += (double)x[j];
            mean /= (double)D;
            for (int64_t j = 0; j < D; j++) var += ((double)x[j] - mean) * ((double)x[j] - mean);
            const double rstd = 1.0 / sqrt(var / (double)D + J->eps);
            J->stats[2 * r] = mean;
            J->stats[2 * r + 1] = rstd;
            for (int64_t j = 0; j < D; j++) {
                double v = ((double)x[j] - mean) * rstd;
                if (w) v *= (double)w[j];
                if (b) v += (double)b[j];
                y[j] = (T)v;
            }
        }
    });
}

/* Backward of rows [lo, hi): with gy = g * w, dx = rstd (gy - mean(gy) - x_hat
 * mean(gy x_hat)); the chunk's partial sums of g x_hat (dw) and g (db) per column. */
static void ln_backward_rows(void *ud, int64_t lo, int64_t hi)
{
    const ln_job *J = ud;
    const int64_t D = J->D;
    double *dw = J->part + (lo / J->grain) * 2 * D, *db = dw + D;
    for (int64_t j = 0; j < 2 * D; j++) dw[j] = 0;
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T *w = J->w;
        for (int64_t r = lo; r < hi; r++) {
            const T *x = (const T *)J->x + r * D;
            const T *g = (const T *)J->gout + r * D;
            T *dx = J->y ? (T *)J->y + r * D : NULL;
            const double mean = J->stats[2 * r];
            const double rstd = J->stats[2 * r + 1];
            double sg = 0;
            double sgx = 0;
            for (int64_t j = 0; j < D; j++) {
                const double xh = ((double)x[j] - mean) * rstd;
                const double gj = (double)g[j];
                const double gy = w ? gj * (double)w[j] : gj;
                sg += gy;
                sgx += gy * xh;
                dw[j] += gj * xh;
                db[j] += gj;
            }
            sg /= (double)D;
            sgx /= (double)D;
            for (int64_t j = 0; dx && j < D; j++) {
                const double xh = ((double)x[j] - mean) * rstd;
                const double gy = w ? (double)g[j] * (double)w[j] : (double)g[j];
                dx[j] = (T)(rstd * (gy - sg - xh * sgx));
            }
        }
    });
}

/* Adds the chunks' partials in chunk order into a new tensor like t (column block k:
 * 0 for dw, 1 for db) and accumulates it as t's gradient. */
static int ln_param_grad(sg_tensor *t, const double *part, int64_t chunks, int64_t D, int k)
{
    sg_tensor *g = sg__tmp_like(t, false);
    if (!g) return sg__status_or_nomem(t->ctx);
    SG__DISPATCH_FLOAT(t->dtype, T, {
        T *d = g->data;
        for (int64_t j = 0; j < D; j++) {
            double s = 0;
            for (int64_t c = 0; c < chunks; c++) s += part[(c * 2 + k) * D + j];
            d[j] = (T)s;
        }
    });
    return sg__accum_grad(t, g, true);
}

/* in: x, weight, bias (either may be NULL); saved[0]: the stats. */
static int ln_node_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *dx = NULL;
    sg_ctx *ctx = x->ctx;
    const int64_t D = x->shape[x->ndim - 1], R = D ? x->numel / D : 0;
    const int64_t grain = sg__row_grain(D), chunks = R ? (R + grain - 1) / grain : 0;
    double *part = chunks ? sg__arena_alloc(ctx, (size_t)(chunks * 2 * D) * sizeof(double)) : NULL;
    if (chunks && D && !part) return sg__status_or_nomem(ctx);
    if (sg__wants_grad(x) && !(dx = sg__tmp_like(x, false))) return sg__status_or_nomem(ctx);
    ln_job J = {x->dtype, D, grain, 0, x->data, w ? w->data : NULL, NULL, gout->data,
                n->saved[0]->data, dx ? dx->data : NULL, part};
    if (D) sg__parallel_for(ctx, R, grain, ln_backward_rows, &J);
    int rc = dx ? sg__accum_grad(x, dx, true) : SG_OK;
    if (rc == SG_OK && sg__wants_grad(w)) rc = ln_param_grad(w, part, chunks, D, 0);
    if (rc == SG_OK && sg__wants_grad(b)) rc = ln_param_grad(b, part, chunks, D, 1);
    return rc;
}

/* weight or bias: NULL, or dense of x's dtype and context with shape (D). */
static bool ln_check_param(const char *op, const sg_tensor *x, const sg_tensor *t, const char *what)
{
    if (!t) return true;
    if (!sg__op_check_pair(op, x, t) || !sg__op_check_float(op, t)) return false;
    if (t->ndim == 1 && t->shape[0] == x->shape[x->ndim - 1]) return true;
    char sx[96], st[96];
    sg__fail(x->ctx, SG_ERR_SHAPE, "%s: %s %s does not match x %s (shape (normalized_size) "
             "expected)", op, what, sg__shape_str(t, st, sizeof st), sg__shape_str(x, sx, sizeof sx));
    return false;
}

sg_tensor *sg_layer_norm(sg_tensor *x, int64_t normalized_size, sg_tensor *weight, sg_tensor *bias,
                         double eps)
{
    SG__CHECK_NOTNULL(x);
    const char *op = "sg_layer_norm";
    if (!sg__op_check_float(op, x)) return NULL;
    char sx[96];
    if (x->ndim < 1 || x->shape[x->ndim - 1] != normalized_size)
        return sg__fail(x->ctx, SG_ERR_SHAPE, "%s: normalized_size %lld is not the last dim of %s",
                        op, (long long)normalized_size, sg__shape_str(x, sx, sizeof sx));
    if (!ln_check_param(op, x, weight, "weight") || !ln_check_param(op, x, bias, "bias"))
        return NULL;
    if (!(eps >= 0) || isinf(eps))
        return sg__fail(x->ctx, SG_ERR_ARG, "%s: eps = %g (finite and >= 0 expected)", op, eps);
    const int64_t D = normalized_size, R = D ? x->numel / D : 0;
    sg_tensor *out = sg__tmp_like(x, false);
    sg_tensor *stats = out ? sg__tmp(x->ctx, SG_F64, 2, (int64_t[]){R, 2}, false) : NULL;
    if (!stats) return NULL;
    ln_job J = {x->dtype, D, sg__row_grain(D), eps, x->data, weight ? weight->data : NULL,
                bias ? bias->data : NULL, NULL, stats->data, out->data, NULL};
    sg__parallel_for(x->ctx, R, J.grain, ln_forward, &J);
    sg_tensor *in[3] = {x, weight, bias};
    if (sg__needs_grad(x->ctx, 3, in)) {
        sg_node *n = sg__node_new(x->ctx, ln_node_backward, op, out, 3, in);
        if (!n) return NULL;
        n->saved[0] = stats;
    }
    return out;
}
