/* Nonlinear reductions along one dim, with or without keepdim: the 1- and 2-norms,
 * log-sum-exp and the maximum with its index. (Sums and means along a dim: reduce.c.)
 *
 * Invariants: x is viewed as (outer, len, inner) around the dim and the output as
 * (outer, inner) whatever keepdim; each output element is one slice of len elements with
 * stride inner, reduced by one thread in index order, so results are bitwise identical
 * for any thread count. Backwards write every element of x's gradient from its own
 * slice's values (max_dim: zeros but at the recorded index). Norms accumulate in double;
 * log-sum-exp uses softmax.c's split around the maximum. */
#include "ops/ops.h"

#include <float.h>
#include <math.h>

/* x's shape without dim d (kept as 1 when keepdim) into shape; returns its rank. */
static int reduced_shape(const sg_tensor *x, int d, int keepdim, int64_t *shape)
{
    int nd = 0;
    for (int k = 0; k < x->ndim; k++) {
        if (k != d) shape[nd++] = x->shape[k];
        else if (keepdim) shape[nd++] = 1;
    }
    return nd;
}

typedef enum { K_NORM1, K_NORM2, K_LSE, K_MAX } red_kind;

/* Forward (gout NULL): y (and for K_MAX the index) from x. Backward: dx from x, y, gout
 * (and the index). Work items are the (outer, inner) pairs. */
typedef struct {
    red_kind kind;
    sg_dtype dtype;
    int64_t len, inner;
    const void *x, *gout;
    void *y;
    int64_t *index;
    void *dx;
} red_job;

/* ||v||_2 of a slice in double: the plain sum of squares, or, where it overflows or
 * underflows, the same scaled by the largest magnitude. */
static double norm2_slice(sg_dtype dt, const void *x, int64_t len, int64_t st)
{
    double s = 0, m = 0;
    SG__DISPATCH_FLOAT(dt, T, {
        const T *v = x;
        for (int64_t k = 0; k < len; k++) s += (double)v[k * st] * (double)v[k * st];
        if (isfinite(s) && s >= DBL_MIN / DBL_EPSILON) return sqrt(s);
        if (isnan(s)) return s;
        for (int64_t k = 0; k < len; k++) m = fmax(m, fabs((double)v[k * st]));
        if (m == 0 || isinf(m)) return m;
        s = 0;
        for (int64_t k = 0; k < len; k++) s += ((double)v[k * st] / m) * ((double)v[k * st] / m);
    });
    return m * sqrt(s);
}

/* log(sum(exp(v))) of a slice: -inf when empty or every element is -inf, +inf when one is
 * +inf (and none NaN), NaN when one is NaN; else max + log1p(rest) (softmax.c). */
static double lse_slice(sg_dtype dt, const void *x, int64_t len, int64_t st)
{
    if (len == 0) return -INFINITY;
    double m;
    const double rest = sg__softmax_rest(dt, x, len, st, &m);
    if (!isinf(m)) return m + log1p(rest); /* NaN in rest or m gives NaN */
    SG__DISPATCH_FLOAT(dt, T, {
        const T *v = x;
        for (int64_t k = 0; k < len; k++)
            if (isnan(v[k * st])) return NAN;
    });
    return m;
}

/* Index of the first maximum of a slice (len >= 1); the first NaN wins. */
static int64_t argmax_slice(sg_dtype dt, const void *x, int64_t len, int64_t st)
{
    int64_t a = 0;
    SG__DISPATCH_FLOAT(dt, T, {
        const T *v = x;
        for (int64_t k = 1; k < len && !isnan(v[a * st]); k++)
            if (v[k * st] > v[a * st] || isnan(v[k * st])) a = k;
    });
    return a;
}

static void red_forward(const red_job *J, int64_t e, int64_t base)
{
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T *x = (const T *)J->x + base;
        T *y = (T *)J->y + e;
        double s = 0;
        switch (J->kind) {
        case K_NORM1:
            for (int64_t k = 0; k < J->len; k++) s += fabs((double)x[k * J->inner]);
            *y = (T)s;
            break;
        case K_NORM2: *y = (T)norm2_slice(J->dtype, x, J->len, J->inner); break;
        case K_LSE: *y = (T)lse_slice(J->dtype, x, J->len, J->inner); break;
        case K_MAX:
            J->index[e] = argmax_slice(J->dtype, x, J->len, J->inner);
            *y = x[J->index[e] * J->inner];
            break;
        }
    });
}

/* dx of one slice: norm1 g sign(x) (sign(0) = 0); norm2 g x / y (0 where y == 0); lse
 * g softmax(x), as exp(x - max) / (1 + rest); max g at the index, 0 elsewhere. */
static void red_backward(const red_job *J, int64_t e, int64_t base)
{
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T *x = (const T *)J->x + base;
        T *dx = (T *)J->dx + base;
        const T g = ((const T *)J->gout)[e];
        const T y = ((const T *)J->y)[e];
        const int64_t len = J->len;
        const int64_t st = J->inner;
        double m = 0;
        double s = 1;
        if (J->kind == K_LSE && len > 0) s = 1 + sg__softmax_rest(J->dtype, x, len, st, &m);
        for (int64_t k = 0; k < len; k++) {
            const T v = x[k * st];
            switch (J->kind) {
            case K_NORM1: dx[k * st] = v > 0 ? g : v < 0 ? -g : (T)0; break;
            case K_NORM2: dx[k * st] = y == 0 ? (T)0 : g * (v / y); break;
            case K_LSE: dx[k * st] = g * (T)(exp((double)v - m) / s); break;
            case K_MAX: dx[k * st] = k == J->index[e] ? g : (T)0; break;
            }
        }
    });
}

static void red_run(void *ud, int64_t lo, int64_t hi)
{
    const red_job *J = ud;
    for (int64_t e = lo; e < hi; e++) {
        const int64_t base = (e / J->inner) * J->len * J->inner + e % J->inner;
        if (J->gout) red_backward(J, e, base);
        else red_forward(J, e, base);
    }
}

/* iarg[0]: dim, iarg[1]: kind; saved[0]: the output, saved[1]: max's index. */
static int red_node_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *x = n->in[0], *y = n->saved[0], *index = n->saved[1];
    sg_tensor *dx = sg__tmp_like(x, false);
    if (!dx) return sg__status_or_nomem(x->ctx);
    int64_t outer, len, inner;
    sg__op_split(x, (int)n->iarg[0], &outer, &len, &inner);
    red_job J = {(red_kind)n->iarg[1], x->dtype, len, inner, x->data, gout->data, y->data,
                 index ? index->data : NULL, dx->data};
    sg__parallel_for(x->ctx, outer * inner, sg__row_grain(len), red_run, &J);
    return sg__accum_grad(x, dx, true);
}

static sg_tensor *reduce_op(const char *op, red_kind kind, sg_tensor *x, int dim, int keepdim,
                            sg_tensor **index_out)
{
    int d;
    if (!sg__op_check_float(op, x) || !sg__op_check_dim(op, x, dim, &d)) return NULL;
    int64_t outer, len, inner, shape[SG_MAX_DIMS];
    sg__op_split(x, d, &outer, &len, &inner);
    if (kind == K_MAX && len == 0) {
        char sx[96];
        return sg__fail(x->ctx, SG_ERR_SHAPE, "%s: dim %d of %s is empty (no maximum)", op, d,
                        sg__shape_str(x, sx, sizeof sx));
    }
    const int nd = reduced_shape(x, d, keepdim, shape);
    sg_tensor *y = sg__tmp(x->ctx, x->dtype, nd, shape, false);
    sg_tensor *index = y && kind == K_MAX ? sg__tmp(x->ctx, SG_I64, nd, shape, false) : NULL;
    if (!y || (kind == K_MAX && !index)) return NULL;
    red_job J = {kind, x->dtype, len, inner, x->data, NULL, y->data, index ? index->data : NULL, NULL};
    sg__parallel_for(x->ctx, outer * inner, sg__row_grain(len), red_run, &J);
    if (sg__needs_grad(x->ctx, 1, &x)) {
        sg_node *n = sg__node_new(x->ctx, red_node_backward, op, y, 1, &x);
        if (!n) return NULL;
        n->saved[0] = y;
        n->saved[1] = index;
        n->iarg[0] = d;
        n->iarg[1] = kind;
    }
    if (index_out) *index_out = index;
    return y;
}

sg_tensor *sg_norm_dim(sg_tensor *x, double p, int dim, int keepdim)
{
    SG__CHECK_NOTNULL(x);
    if (p != 1 && p != 2)
        return sg__fail(x->ctx, SG_ERR_ARG, "sg_norm_dim: p = %g (1 or 2 expected)", p);
    return reduce_op("sg_norm_dim", p == 1 ? K_NORM1 : K_NORM2, x, dim, keepdim, NULL);
}

sg_tensor *sg_logsumexp_dim(sg_tensor *x, int dim, int keepdim)
{
    SG__CHECK_NOTNULL(x);
    return reduce_op("sg_logsumexp_dim", K_LSE, x, dim, keepdim, NULL);
}

sg_tensor *sg_max_dim(sg_tensor *x, int dim, int keepdim, sg_tensor **indices)
{
    if (indices) *indices = NULL;
    SG__CHECK_NOTNULL(x);
    return reduce_op("sg_max_dim", K_MAX, x, dim, keepdim, indices);
}
