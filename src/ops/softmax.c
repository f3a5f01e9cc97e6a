/* softmax and log_softmax along any dim, and the log-sum-exp split that they and
 * cross_entropy share.
 *
 * Invariants: x is viewed as (outer, len, inner) around the dim; each (outer, inner) pair
 * is one independent slice of len elements with stride inner. A slice is normalised
 * around its maximum m: log-probabilities are (x - m) - log1p(rest), where rest sums
 * exp(x - m) over every element but one maximum, so no term carries the rounding error of
 * m itself (m + log(s) would lose ulp(m)/2 for large logits) and those near 0 keep their
 * relative accuracy; no overflow for finite inputs. Slices are processed in parallel,
 * each by one thread in index order: deterministic. */
#include "ops/ops.h"

#include <tgmath.h>

double sg__softmax_rest(sg_dtype dtype, const void *x, int64_t len, int64_t stride, double *max)
{
    double rest = 0;
    SG__DISPATCH_FLOAT(dtype, T, {
        const T *v = x;
        int64_t a = 0;
        for (int64_t k = 1; k < len; k++)
            if (v[k * stride] > v[a * stride]) a = k;
        const T m = v[a * stride];
        T s = 0;
        for (int64_t k = 0; k < a; k++) s += exp(v[k * stride] - m);
        for (int64_t k = a + 1; k < len; k++) s += exp(v[k * stride] - m);
        *max = (double)m;
        rest = (double)s;
    });
    return rest;
}

/* Forward (g NULL): dst = softmax or log_softmax of x. Backward: dst = input gradient
 * from y (the forward output) and g. */
typedef struct {
    sg_dtype dtype;
    int64_t len, inner;
    bool log;
    const void *x, *y, *g;
    void *dst;
} sm_job;

static void sm_run(void *ud, int64_t lo, int64_t hi)
{
    const sm_job *J = ud;
    const int64_t len = J->len, inner = J->inner;
    if (len == 0) return;
    SG__DISPATCH_FLOAT(J->dtype, T, {
        for (int64_t e = lo; e < hi; e++) {
            const int64_t base = (e / inner) * len * inner + e % inner;
            T *d = (T *)J->dst + base;
            if (!J->g) {
                const T *x = (const T *)J->x + base;
                double max;
                const T rest = (T)sg__softmax_rest(J->dtype, x, len, inner, &max);
                const T m = (T)max;
                if (J->log) {
                    const T l = log1p(rest);
                    for (int64_t k = 0; k < len; k++) d[k * inner] = (x[k * inner] - m) - l;
                } else {
                    const T s = 1 + rest;
                    for (int64_t k = 0; k < len; k++) d[k * inner] = exp(x[k * inner] - m) / s;
                }
            } else {
                const T *y = (const T *)J->y + base;
                const T *g = (const T *)J->g + base;
                T s = 0;
                if (J->log) { /* dx = g - softmax * sum(g) */
                    for (int64_t k = 0; k < len; k++) s += g[k * inner];
                    for (int64_t k = 0; k < len; k++)
                        d[k * inner] = g[k * inner] - exp(y[k * inner]) * s;
                } else { /* dx = y * (g - sum(g * y)) */
                    for (int64_t k = 0; k < len; k++) s += g[k * inner] * y[k * inner];
                    for (int64_t k = 0; k < len; k++)
                        d[k * inner] = y[k * inner] * (g[k * inner] - s);
                }
            }
        }
    });
}

/* iarg[0]: dim, iarg[1]: log. */
static int sm_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *x = n->in[0];
    int64_t outer, len, inner;
    sg__op_split(x, (int)n->iarg[0], &outer, &len, &inner);
    sg_tensor *g = sg__tmp_like(x, false);
    if (!g) return sg__status_or_nomem(x->ctx);
    sm_job J = {x->dtype, len, inner, n->iarg[1] != 0, NULL, n->out->data, gout->data, g->data};
    sg__parallel_for(x->ctx, outer * inner, sg__row_grain(len), sm_run, &J);
    return sg__accum_grad(x, g, true);
}

static sg_tensor *softmax_op(sg_tensor *a, int dim, bool log)
{
    SG__CHECK_NOTNULL(a);
    const char *op = log ? "sg_log_softmax" : "sg_softmax";
    int d;
    if (!sg__op_check_float(op, a) || !sg__op_check_dim(op, a, dim, &d)) return NULL;
    int64_t outer, len, inner;
    sg__op_split(a, d, &outer, &len, &inner);
    sg_tensor *out = sg__tmp_like(a, false);
    if (!out) return NULL;
    sm_job J = {a->dtype, len, inner, log, a->data, NULL, NULL, out->data};
    sg__parallel_for(a->ctx, outer * inner, sg__row_grain(len), sm_run, &J);
    if (sg__needs_grad(a->ctx, 1, &a)) {
        sg_node *n = sg__node_new(a->ctx, sm_backward, op, out, 1, &a);
        if (!n) return NULL;
        n->iarg[0] = d;
        n->iarg[1] = log;
    }
    return out;
}

/* Softmax along dim (negative counts from the end) -> a's shape. Errors: SG_ERR_ARG for a
 * bad dim (a 0-d tensor has none), SG_ERR_DTYPE, SG_ERR_LAYOUT. */
sg_tensor *sg_softmax(sg_tensor *a, int dim) { return softmax_op(a, dim, false); }
/* log(softmax) along dim, computed as (x - max) - log1p(rest) (see the file's head). */
sg_tensor *sg_log_softmax(sg_tensor *a, int dim) { return softmax_op(a, dim, true); }
