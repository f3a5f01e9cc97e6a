/* Elementwise unary functions: relu, sigmoid, tanh, exp, log, log_sigmoid, abs, sqrt, sin,
 * cos, and the two with scalar parameters, pow (an exponent) and clamp (bounds).
 *
 * Invariants: dense float input, output of the same shape and dtype; each element is
 * computed independently (parallel, deterministic). Formulas avoid overflow for any finite
 * input: sigmoid and log_sigmoid only ever exponentiate a non-positive number. Backwards
 * read the saved input (node->in[0]) or output (node->out) and the node's scalars (pow's
 * exponent, clamp's bounds), never recompute the forward. Gradients at kinks follow
 * PyTorch: relu and abs give 0 at 0, clamp passes the gradient where min <= x <= max.
 * un_run has a variant per CPU level picked at run time (SG__HOT_CLONES, core/core.h): each
 * element takes the same operations, and the same libm calls, in every one. */
#include "ops/ops.h"

#include <tgmath.h>

typedef enum {
    UN_RELU, UN_SIGMOID, UN_TANH, UN_EXP, UN_LOG, UN_LOG_SIGMOID,
    UN_ABS, UN_SQRT, UN_SIN, UN_COS, UN_POW, UN_CLAMP,
    UN_SQUARE, UN_CUBE, UN_POW32 /* sg_pow's exponents 2, 3 and 1.5, without libm's pow */
} un_kind;
static const char *const un_names[] = {"sg_relu", "sg_sigmoid",     "sg_tanh", "sg_exp",
                                       "sg_log",  "sg_log_sigmoid", "sg_abs",  "sg_sqrt",
                                       "sg_sin",  "sg_cos",         "sg_pow",  "sg_clamp",
                                       "sg_pow",  "sg_pow",         "sg_pow"};

/* Forward (g NULL): dst = f(x). Backward: dst = the input gradient, from g, x and y = f(x).
 * p: pow's exponent (p[0]), or clamp's bounds (p[0] min, p[1] max; -inf/+inf when absent). */
typedef struct {
    sg_dtype dtype;
    un_kind kind;
    double p[2];
    const void *x, *y, *g;
    void *dst;
} un_job;

#define UN_LOOP(EXPR)                                                            \
    for (int64_t i = lo; i < hi; i++) {                                          \
        const T xv = x[i];                                                       \
        d[i] = EXPR;                                                             \
    }                                                                            \
    break;

/* dst = EXPR of gv (the output's gradient), xv and yv. */
#define UN_G_LOOP(EXPR)                                                          \
    for (int64_t i = lo; i < hi; i++) {                                          \
        const T gv = g[i];                                                       \
        const T xv = x[i];                                                       \
        const T yv = y[i];                                                       \
        (void)xv;                                                                \
        (void)yv;                                                                \
        d[i] = EXPR;                                                             \
    }                                                                            \
    break;
#define UN_GRAD_LOOP(EXPR) UN_G_LOOP(gv * (EXPR))

SG__HOT_BODY void un_run__body(void *ud, int64_t lo, int64_t hi)
{
    const un_job *J = ud;
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T *x = J->x;
        const T *y = J->y;
        const T *g = J->g;
        T *d = J->dst;
        const T one = 1;
        const T zero = 0;
        const T p0 = (T)J->p[0];
        const T p1 = (T)J->p[1];
        const T pm1 = (T)(J->p[0] - 1); /* pow: the derivative's exponent */
        if (!g) {
            switch (J->kind) {
            case UN_RELU: UN_LOOP(xv < zero ? zero : xv)
            case UN_SIGMOID:
                UN_LOOP(xv >= zero ? one / (one + exp(-xv)) : exp(xv) / (one + exp(xv)))
            case UN_TANH: UN_LOOP(tanh(xv))
            case UN_EXP: UN_LOOP(exp(xv))
            case UN_LOG: UN_LOOP(log(xv))
            case UN_LOG_SIGMOID: UN_LOOP((xv < zero ? xv : zero) - log1p(exp(-fabs(xv))))
            case UN_ABS: UN_LOOP(fabs(xv))
            case UN_SQRT: UN_LOOP(sqrt(xv))
            case UN_SIN: UN_LOOP(sin(xv))
            case UN_COS: UN_LOOP(cos(xv))
            case UN_POW: UN_LOOP(pow(xv, p0))
            case UN_SQUARE: UN_LOOP(xv * xv)
            case UN_CUBE: UN_LOOP(xv * xv * xv)
            case UN_POW32: UN_LOOP(xv * sqrt(xv))
            case UN_CLAMP: /* min first, then max: min > max gives max; NaN stays NaN */
                UN_LOOP(xv < p0 ? (p0 > p1 ? p1 : p0) : xv > p1 ? p1 : xv)
            }
        } else {
            switch (J->kind) {
            case UN_RELU: UN_GRAD_LOOP(xv > zero ? one : zero)
            case UN_SIGMOID: UN_GRAD_LOOP(yv * (one - yv))
            case UN_TANH: UN_GRAD_LOOP(one - yv * yv)
            case UN_EXP: UN_GRAD_LOOP(yv)
            case UN_LOG: UN_GRAD_LOOP(one / xv)
            case UN_LOG_SIGMOID: /* d/dx log sigmoid(x) = sigmoid(-x) */
                UN_GRAD_LOOP(xv >= zero ? exp(-xv) / (one + exp(-xv)) : one / (one + exp(xv)))
            case UN_ABS: UN_GRAD_LOOP(xv > zero ? one : xv < zero ? -one : zero)
            case UN_SQRT: UN_G_LOOP(gv / (2 * yv))
            case UN_SIN: UN_GRAD_LOOP(cos(xv))
            case UN_COS: UN_GRAD_LOOP(-sin(xv))
            case UN_POW: UN_GRAD_LOOP(p0 * pow(xv, pm1)) /* exponent 0: un_backward */
            case UN_SQUARE: UN_GRAD_LOOP(2 * xv)
            case UN_CUBE: UN_GRAD_LOOP(3 * (xv * xv))
            case UN_POW32: UN_GRAD_LOOP((T)1.5 * sqrt(xv))
            case UN_CLAMP: UN_G_LOOP(xv >= p0 && xv <= p1 ? gv : zero)
            }
        }
    });
}
SG__HOT_CLONES(un_run, (void *ud, int64_t lo, int64_t hi), (ud, lo, hi))

static int un_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *x = n->in[0];
    const un_kind kind = (un_kind)n->iarg[0];
    const bool zero = kind == UN_POW && n->scalar[0] == 0; /* x^0: gradient 0, as PyTorch */
    sg_tensor *g = sg__tmp_like(x, zero);
    if (!g) return sg__status_or_nomem(x->ctx);
    if (!zero) {
        un_job J = {x->dtype, kind, {n->scalar[0], n->scalar[1]}, x->data, n->out->data,
                    gout->data, g->data};
        sg__parallel_for(x->ctx, x->numel, SG__GRAIN, un_run, &J);
    }
    return sg__accum_grad(x, g, true);
}

static sg_tensor *unary_p(un_kind kind, sg_tensor *a, double p0, double p1)
{
    SG__CHECK_NOTNULL(a);
    if (!sg__op_check_float(un_names[kind], a)) return NULL;
    sg_tensor *out = sg__tmp_like(a, false);
    if (!out) return NULL;
    un_job J = {a->dtype, kind, {p0, p1}, a->data, NULL, NULL, out->data};
    sg__parallel_for(a->ctx, a->numel, SG__GRAIN, un_run, &J);
    if (sg__needs_grad(a->ctx, 1, &a)) {
        sg_node *n = sg__node_new(a->ctx, un_backward, un_names[kind], out, 1, &a);
        if (!n) return NULL;
        n->iarg[0] = kind;
        n->scalar[0] = p0;
        n->scalar[1] = p1;
    }
    return out;
}
static sg_tensor *unary(un_kind kind, sg_tensor *a) { return unary_p(kind, a, 0, 0); }

/* Each: dense f32/f64 (any shape) -> same shape. SG_ERR_LAYOUT for COO, SG_ERR_DTYPE for
 * integer tensors. relu's gradient at 0 is 0; log of a non-positive number is -inf/NaN. */
sg_tensor *sg_relu(sg_tensor *a) { return unary(UN_RELU, a); }
sg_tensor *sg_sigmoid(sg_tensor *a) { return unary(UN_SIGMOID, a); }
sg_tensor *sg_tanh(sg_tensor *a) { return unary(UN_TANH, a); }
sg_tensor *sg_exp(sg_tensor *a) { return unary(UN_EXP, a); }
sg_tensor *sg_log(sg_tensor *a) { return unary(UN_LOG, a); }
sg_tensor *sg_log_sigmoid(sg_tensor *a) { return unary(UN_LOG_SIGMOID, a); }
/* abs' gradient is sign(x): 0 at 0 (and at NaN). sqrt's is g / (2 sqrt(x)): inf at 0 (for
 * g > 0), NaN below 0 where sqrt itself is NaN. */
sg_tensor *sg_abs(sg_tensor *a) { return unary(UN_ABS, a); }
sg_tensor *sg_sqrt(sg_tensor *a) { return unary(UN_SQRT, a); }
sg_tensor *sg_sin(sg_tensor *a) { return unary(UN_SIN, a); }
sg_tensor *sg_cos(sg_tensor *a) { return unary(UN_COS, a); }

/* x^exponent by the C library's pow in the dtype (the exponent rounded to it); gradient
 * exponent * x^(exponent - 1) * g, and exactly 0 for exponent 0 (also at x = 0). The
 * exponents 2, 3 and 1.5 (N3's cube and complex modulus cube) are products and a sqrt,
 * within an ulp or two of pow and several times faster. */
sg_tensor *sg_pow(sg_tensor *a, double exponent)
{
    const un_kind kind = exponent == 2 ? UN_SQUARE : exponent == 3 ? UN_CUBE
                       : exponent == 1.5 ? UN_POW32 : UN_POW;
    return unary_p(kind, a, exponent, 0);
}

/* Absent bounds become -inf/+inf, which clamp nothing and pass every non-NaN gradient. */
sg_tensor *sg_clamp(sg_tensor *a, const double *min, const double *max)
{
    SG__CHECK_NOTNULL(a);
    if (!min && !max)
        return sg__fail(a->ctx, SG_ERR_ARG, "sg_clamp: at least one of min and max must be given");
    if ((min && isnan(*min)) || (max && isnan(*max)))
        return sg__fail(a->ctx, SG_ERR_VALUE, "sg_clamp: bound %s is NaN",
                        min && isnan(*min) ? "min" : "max");
    return unary_p(UN_CLAMP, a, min ? *min : -INFINITY, max ? *max : INFINITY);
}
