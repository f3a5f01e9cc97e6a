/* Elementwise unary functions: relu, sigmoid, tanh, exp, log, log_sigmoid.
 *
 * Invariants: dense float input, output of the same shape and dtype; each element is
 * computed independently (parallel, deterministic). Formulas avoid overflow for any finite
 * input: sigmoid and log_sigmoid only ever exponentiate a non-positive number. Backwards
 * read the saved input (node->in[0]) or output (node->out), never recompute the forward. */
#include "ops/ops.h"

#include <tgmath.h>

typedef enum { UN_RELU, UN_SIGMOID, UN_TANH, UN_EXP, UN_LOG, UN_LOG_SIGMOID } un_kind;
static const char *const un_names[] = {"sg_relu", "sg_sigmoid",    "sg_tanh",
                                       "sg_exp",  "sg_log",        "sg_log_sigmoid"};

/* Forward (g NULL): dst = f(x). Backward: dst = g * f'(x), from x and y = f(x). */
typedef struct {
    sg_dtype dtype;
    un_kind kind;
    const void *x, *y, *g;
    void *dst;
} un_job;

#define UN_LOOP(EXPR)                                                            \
    for (int64_t i = lo; i < hi; i++) {                                          \
        const T xv = x[i];                                                       \
        d[i] = EXPR;                                                             \
    }                                                                            \
    break;

#define UN_GRAD_LOOP(EXPR)                                                       \
    for (int64_t i = lo; i < hi; i++) {                                          \
        const T xv = x[i];                                                       \
        const T yv = y[i];                                                       \
        (void)xv;                                                                \
        (void)yv;                                                                \
        d[i] = g[i] * (EXPR);                                                    \
    }                                                                            \
    break;

static void un_run(void *ud, int64_t lo, int64_t hi)
{
    const un_job *J = ud;
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T *x = J->x;
        const T *y = J->y;
        const T *g = J->g;
        T *d = J->dst;
        const T one = 1;
        const T zero = 0;
        if (!g) {
            switch (J->kind) {
            case UN_RELU: UN_LOOP(xv < zero ? zero : xv)
            case UN_SIGMOID:
                UN_LOOP(xv >= zero ? one / (one + exp(-xv)) : exp(xv) / (one + exp(xv)))
            case UN_TANH: UN_LOOP(tanh(xv))
            case UN_EXP: UN_LOOP(exp(xv))
            case UN_LOG: UN_LOOP(log(xv))
            case UN_LOG_SIGMOID: UN_LOOP((xv < zero ? xv : zero) - log1p(exp(-fabs(xv))))
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
            }
        }
    });
}

static int un_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *x = n->in[0];
    sg_tensor *g = sg__tmp_like(x, false);
    if (!g) return sg__status_or_nomem(x->ctx);
    un_job J = {x->dtype, (un_kind)n->iarg[0], x->data, n->out->data, gout->data, g->data};
    sg__parallel_for(x->ctx, x->numel, SG__GRAIN, un_run, &J);
    return sg__accum_grad(x, g, true);
}

static sg_tensor *unary(un_kind kind, sg_tensor *a)
{
    SG__CHECK_NOTNULL(a);
    if (!sg__op_check_float(un_names[kind], a)) return NULL;
    sg_tensor *out = sg__tmp_like(a, false);
    if (!out) return NULL;
    un_job J = {a->dtype, kind, a->data, NULL, NULL, out->data};
    sg__parallel_for(a->ctx, a->numel, SG__GRAIN, un_run, &J);
    if (sg__needs_grad(a->ctx, 1, &a)) {
        sg_node *n = sg__node_new(a->ctx, un_backward, un_names[kind], out, 1, &a);
        if (!n) return NULL;
        n->iarg[0] = kind;
    }
    return out;
}

/* Each: dense f32/f64 (any shape) -> same shape. SG_ERR_LAYOUT for COO, SG_ERR_DTYPE for
 * integer tensors. relu's gradient at 0 is 0; log of a non-positive number is -inf/NaN. */
sg_tensor *sg_relu(sg_tensor *a) { return unary(UN_RELU, a); }
sg_tensor *sg_sigmoid(sg_tensor *a) { return unary(UN_SIGMOID, a); }
sg_tensor *sg_tanh(sg_tensor *a) { return unary(UN_TANH, a); }
sg_tensor *sg_exp(sg_tensor *a) { return unary(UN_EXP, a); }
sg_tensor *sg_log(sg_tensor *a) { return unary(UN_LOG, a); }
sg_tensor *sg_log_sigmoid(sg_tensor *a) { return unary(UN_LOG_SIGMOID, a); }
