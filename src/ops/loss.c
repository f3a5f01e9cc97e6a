/* Losses from logits: cross_entropy (softmax over classes, integer targets) and
 * bce_with_logits. Both return the mean as a 0-d tensor.
 *
 * Invariants: every target is validated before anything is allocated or written. Per-row
 * (per-element) terms are computed in parallel into a buffer and summed in index order on
 * one thread, so the loss does not depend on the thread count. Formulas are stable for
 * any finite logit, and no intermediate rounds a sum that holds a large logit which a
 * later subtraction takes away again (lse = m + log(s), then lse - x, loses ulp(m)/2):
 * log-sum-exp is split around the row maximum as in softmax.c, BCE is written per sign of
 * the logit. */
#include "ops/ops.h"

#include <tgmath.h>

/* Writes a 0-d tensor's only element. */
static void set_scalar(sg_tensor *t, double v)
{
    if (t->dtype == SG_F32)
        *(float *)t->data = (float)v;
    else
        *(double *)t->data = v;
}

/* ---------------------------------------------------------------- cross_entropy */

/* Forward (dst NULL): per row i, with m its maximum and l = log1p(rest) its log-sum-exp
 * beyond m (sg__softmax_rest): lse[i] = (m, l) and term[i] = l - (x[i,t_i] - m).
 * Backward: dst[i,c] = scale * exp((x[i,c] - m) - l), and at c = t_i
 * scale * expm1((x[i,t_i] - m) - l), which keeps p - 1 accurate when p is close to 1. */
typedef struct {
    sg_dtype dtype;
    int64_t C;
    const void *x;
    const sg_tensor *targets;
    void *lse; /* (N,2): m, l */
    double *term;
    void *dst;
    double scale;
} ce_job;

static void ce_run(void *ud, int64_t lo, int64_t hi)
{
    const ce_job *J = ud;
    const int64_t C = J->C;
    SG__DISPATCH_FLOAT(J->dtype, T, {
        T *lse = J->lse;
        for (int64_t i = lo; i < hi; i++) {
            const T *x = (const T *)J->x + i * C;
            const int64_t t = sg__idx_at(J->targets, i);
            if (!J->dst) {
                double max;
                const T rest = (T)sg__softmax_rest(J->dtype, x, C, 1, &max);
                const T m = (T)max;
                const T l = log1p(rest);
                lse[2 * i] = m;
                lse[2 * i + 1] = l;
                J->term[i] = (double)l - (double)(x[t] - m);
            } else {
                const T m = lse[2 * i];
                const T l = lse[2 * i + 1];
                T *d = (T *)J->dst + i * C;
                const T scale = (T)J->scale;
                for (int64_t c = 0; c < C; c++) d[c] = scale * exp((x[c] - m) - l);
                d[t] = scale * expm1((x[t] - m) - l);
            }
        }
    });
}

/* saved[0]: lse (N,2), saved[1]: targets. */
static int ce_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *x = n->in[0];
    const int64_t N = x->shape[0];
    sg_tensor *g = sg__tmp_like(x, false);
    if (!g) return sg__status_or_nomem(x->ctx);
    ce_job J = {x->dtype, x->shape[1], x->data, n->saved[1], n->saved[0]->data, NULL,
                g->data, sg_tensor_get(gout, 0) / (double)N};
    sg__parallel_for(x->ctx, N, sg__row_grain(x->shape[1]), ce_run, &J);
    return sg__accum_grad(x, g, true);
}

/* logits (N,C) f32/f64, targets (N) int32/int64 in [0,C) -> () mean over rows of
 * log-sum-exp(row) - row[target]. NaN for N = 0. Errors: SG_ERR_SHAPE, SG_ERR_DTYPE,
 * SG_ERR_LAYOUT, SG_ERR_INDEX for a target out of range (nothing is written). */
sg_tensor *sg_cross_entropy(sg_tensor *logits, sg_tensor *targets)
{
    SG__CHECK_NOTNULL(logits);
    SG__CHECK_NOTNULL(targets);
    const char *op = "sg_cross_entropy";
    if (!sg__op_check_float(op, logits) || !sg__op_check_dense(op, targets)) return NULL;
    sg_ctx *ctx = logits->ctx;
    char sl[96], st[96];
    if (targets->ctx != ctx)
        return sg__fail(ctx, SG_ERR_ARG, "%s: operands belong to different contexts", op);
    if (!sg__is_int(targets->dtype))
        return sg__fail(ctx, SG_ERR_DTYPE, "%s: targets %s are %s, i32 or i64 expected", op,
                        sg__shape_str(targets, st, sizeof st),
                        sg__dtype_name(targets->dtype));
    if (logits->ndim != 2 || targets->ndim != 1 || targets->shape[0] != logits->shape[0])
        return sg__fail(ctx, SG_ERR_SHAPE, "%s: logits %s and targets %s, (N,C) and (N) expected",
                        op, sg__shape_str(logits, sl, sizeof sl),
                        sg__shape_str(targets, st, sizeof st));
    const int64_t N = logits->shape[0], C = logits->shape[1];
    for (int64_t i = 0; i < N; i++) {
        const int64_t t = sg__idx_at(targets, i);
        if (t < 0 || t >= C)
            return sg__fail(ctx, SG_ERR_INDEX,
                            "%s: targets[%lld] = %lld outside [0,%lld) for logits %s", op,
                            (long long)i, (long long)t, (long long)C,
                            sg__shape_str(logits, sl, sizeof sl));
    }
    const int64_t lse_shape[2] = {N, 2};
    sg_tensor *lse = sg__tmp(ctx, logits->dtype, 2, lse_shape, false);
    double *term = N ? sg__arena_alloc(ctx, (size_t)N * sizeof(double)) : NULL;
    if (!lse || (N && !term)) return NULL;
    sg_tensor *out = sg__tmp(ctx, logits->dtype, 0, logits->shape, false);
    if (!out) return NULL;
    ce_job J = {logits->dtype, C, logits->data, targets, lse->data, term, NULL, 0};
    sg__parallel_for(ctx, N, sg__row_grain(C), ce_run, &J);
    double total = 0;
    for (int64_t i = 0; i < N; i++) total += term[i];
    set_scalar(out, total / (double)N);
    if (sg__needs_grad(ctx, 1, &logits)) {
        sg_node *n = sg__node_new(ctx, ce_backward, op, out, 1, &logits);
        if (!n) return NULL;
        n->saved[0] = lse;
        n->saved[1] = targets;
    }
    return out;
}

/* ---------------------------------------------------------------- bce_with_logits */

/* Forward (dst NULL): term[i] = x*(1-t) + log1p(exp(-x)) for x > 0, -x*t + log1p(exp(x))
 * otherwise (max(x,0) - x*t + log1p(exp(-|x|)) without the cancellation of x against
 * x*t). Backward: dx (which 0) = scale * ((1-t) * sigmoid(x) - t * sigmoid(-x)), which is
 * sigmoid(x) - t without the cancellation of sigmoid(x) against t = 1; dt (which 1) =
 * -scale * x. */
typedef struct {
    sg_dtype dtype;
    const void *x, *t;
    double *term;
    void *dst;
    int which;
    double scale;
} bce_job;

static void bce_run(void *ud, int64_t lo, int64_t hi)
{
    const bce_job *J = ud;
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T *x = J->x;
        const T *t = J->t;
        T *d = J->dst;
        const T one = 1;
        const T zero = 0;
        const T scale = (T)J->scale;
        for (int64_t i = lo; i < hi; i++) {
            const T xv = x[i];
            if (!d) {
                J->term[i] = (double)(xv > zero ? xv * (one - t[i]) + log1p(exp(-xv))
                                                : -xv * t[i] + log1p(exp(xv)));
            } else if (J->which == 0) {
                const T e = exp(-fabs(xv));
                const T sig_abs = one / (one + e);   /* sigmoid(|x|) */
                const T sig_nabs = e / (one + e);    /* sigmoid(-|x|) */
                const T sig = xv >= zero ? sig_abs : sig_nabs;
                const T sig_neg = xv >= zero ? sig_nabs : sig_abs;
                d[i] = scale * ((one - t[i]) * sig - t[i] * sig_neg);
            } else {
                d[i] = -scale * xv;
            }
        }
    });
}

static int bce_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *x = n->in[0];
    const double scale = sg_tensor_get(gout, 0) / (double)x->numel;
    for (int k = 0; k < 2; k++) {
        sg_tensor *in = n->in[k];
        if (!sg__wants_grad(in)) continue;
        sg_tensor *g = sg__tmp_like(in, false);
        if (!g) return sg__status_or_nomem(x->ctx);
        bce_job J = {x->dtype, x->data, n->in[1]->data, NULL, g->data, k, scale};
        sg__parallel_for(x->ctx, x->numel, SG__GRAIN, bce_run, &J);
        int rc = sg__accum_grad(in, g, true);
        if (rc != SG_OK) return rc;
    }
    return SG_OK;
}

/* logits and targets of one shape and float dtype (targets in [0,1]) -> () mean binary
 * cross-entropy of sigmoid(logits); NaN when empty. Gradients flow to both. Errors:
 * SG_ERR_SHAPE, SG_ERR_DTYPE, SG_ERR_LAYOUT. */
sg_tensor *sg_bce_with_logits(sg_tensor *logits, sg_tensor *targets)
{
    SG__CHECK_NOTNULL(logits);
    SG__CHECK_NOTNULL(targets);
    const char *op = "sg_bce_with_logits";
    if (!sg__op_check_pair(op, logits, targets) || !sg__op_check_float(op, logits) ||
        !sg__op_check_float(op, targets))
        return NULL;
    sg_ctx *ctx = logits->ctx;
    if (!sg__same_shape(logits, targets)) {
        char sl[96], st[96];
        return sg__fail(ctx, SG_ERR_SHAPE, "%s: logits %s and targets %s differ in shape", op,
                        sg__shape_str(logits, sl, sizeof sl),
                        sg__shape_str(targets, st, sizeof st));
    }
    const int64_t n = logits->numel;
    double *term = n ? sg__arena_alloc(ctx, (size_t)n * sizeof(double)) : NULL;
    if (n && !term) return NULL;
    sg_tensor *out = sg__tmp(ctx, logits->dtype, 0, logits->shape, false);
    if (!out) return NULL;
    bce_job J = {logits->dtype, logits->data, targets->data, term, NULL, 0, 0};
    sg__parallel_for(ctx, n, SG__GRAIN, bce_run, &J);
    double total = 0;
    for (int64_t i = 0; i < n; i++) total += term[i];
    set_scalar(out, total / (double)n);
    sg_tensor *in[2] = {logits, targets};
    if (sg__needs_grad(ctx, 2, in) && !sg__node_new(ctx, bce_backward, op, out, 2, in))
        return NULL;
    return out;
}
