/* Shared plumbing of the op files: input checks with uniform messages. */
#include "ops/ops.h"

static bool check_layout(const char *op, const sg_tensor *t)
{
    if (t->layout == SG_DENSE) return true;
    char s[96];
    sg__fail(t->ctx, SG_ERR_LAYOUT, "%s: COO operand %s not supported here (dense expected)",
             op, sg__shape_str(t, s, sizeof s));
    return false;
}

bool sg__op_check_table(const char *op, const sg_tensor *t)
{
    if (!check_layout(op, t)) return false;
    if (sg__is_float(t->dtype)) return true;
    char s[96];
    sg__fail(t->ctx, SG_ERR_DTYPE, "%s: operand %s is %s, f32 or f64 expected", op,
             sg__shape_str(t, s, sizeof s), sg__dtype_name(t->dtype));
    return false;
}

bool sg__op_check_dense(const char *op, const sg_tensor *t)
{
    if (!check_layout(op, t)) return false;
    sg__param_sync(t, NULL);
    return true;
}

bool sg__op_check_float(const char *op, const sg_tensor *t)
{
    if (!sg__op_check_table(op, t)) return false;
    sg__param_sync(t, NULL);
    return true;
}

bool sg__op_check_pair(const char *op, const sg_tensor *a, const sg_tensor *b)
{
    if (a->ctx != b->ctx) {
        sg__fail(a->ctx, SG_ERR_ARG, "%s: operands belong to different contexts", op);
        return false;
    }
    if (a->dtype != b->dtype) {
        char sa[96], sb[96];
        sg__fail(a->ctx, SG_ERR_DTYPE, "%s: dtypes differ: %s %s and %s %s", op,
                 sg__dtype_name(a->dtype), sg__shape_str(a, sa, sizeof sa),
                 sg__dtype_name(b->dtype), sg__shape_str(b, sb, sizeof sb));
        return false;
    }
    return true;
}

bool sg__op_check_dim(const char *op, const sg_tensor *t, int dim, int *out)
{
    int d = dim < 0 ? dim + t->ndim : dim;
    if (d < 0 || d >= t->ndim) {
        char s[96];
        sg__fail(t->ctx, SG_ERR_ARG, "%s: dim %d out of range for shape %s", op, dim,
                 sg__shape_str(t, s, sizeof s));
        return false;
    }
    *out = d;
    return true;
}

void sg__op_split(const sg_tensor *t, int dim, int64_t *outer, int64_t *len, int64_t *inner)
{
    *outer = sg__prod(t->shape, 0, dim);
    *len = t->shape[dim];
    *inner = sg__prod(t->shape, dim + 1, t->ndim);
}

typedef struct {
    const sg_tensor *src;
    sg_tensor *dst;
    double scale;
} scaled_job;

static void scaled_range(void *ud, int64_t lo, int64_t hi)
{
    const scaled_job *j = ud;
    SG__DISPATCH_FLOAT(j->src->dtype, F, {
        const F *src = j->src->data;
        F *dst = j->dst->data;
        const F a = (F)j->scale;
        for (int64_t k = lo; k < hi; k++) dst[k] = src[k] * a;
    });
}

sg_tensor *sg__op_scaled(const sg_tensor *x, double s)
{
    scaled_job j = {x, sg__tmp_like(x, false), s};
    if (!j.dst) return NULL;
    sg__parallel_for(x->ctx, x->numel, SG__GRAIN, scaled_range, &j);
    return j.dst;
}

int sg__op_accum_scaled(sg_tensor *x, sg_tensor *dir, double scale)
{
    if (scale == 1.0) return sg__accum_grad(x, dir, false);
    sg_tensor *g = sg__op_scaled(dir, scale);
    return g ? sg__accum_grad(x, g, true) : sg__status_or_nomem(x->ctx);
}
