/* Gradient clipping over the context's gradient store: by global L2 norm and by value.
 *
 * Both are nonlinear in the gradient, so a COO gradient is coalesced first (duplicates
 * summed) and replaced by its coalesced form, which means the same dense array. A gradient
 * whose buffers the store does not own (it may alias another tensor) is never written:
 * it is replaced by a modified copy. Everything that can fail (coalescing, copies) happens
 * before the first gradient changes. Sums of squares run in double, in store order.
 */
#include "optim/optim.h"

#include <math.h>

typedef enum { CLIP_SCALE, CLIP_CLAMP } clip_mode;

static void transform(sg_dtype dtype, void *data, int64_t n, clip_mode mode, double a)
{
    SG__DISPATCH_FLOAT(dtype, T, {
        T *x = data;
        T c = (T)a;
        if (mode == CLIP_SCALE) {
            for (int64_t i = 0; i < n; i++) x[i] *= c;
        } else {
            for (int64_t i = 0; i < n; i++) x[i] = x[i] > c ? c : x[i] < -c ? -c : x[i];
        }
    });
}

static int64_t elems(const sg_tensor *g) { return g->layout == SG_COO ? g->values->numel : g->numel; }
static void *elem_data(const sg_tensor *g) { return g->layout == SG_COO ? g->values->data : g->data; }

static double sum_squares(const sg_tensor *g)
{
    double s = 0;
    int64_t n = elems(g);
    SG__DISPATCH_FLOAT(g->dtype, T, {
        const T *x = elem_data(g);
        for (int64_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    });
    return s;
}

/* A tape copy of g (dense, or COO sharing g's indices) with transformed elements. */
static sg_tensor *transformed_copy(sg_tensor *g, clip_mode mode, double a)
{
    sg_tensor *src = g->layout == SG_COO ? g->values : g;
    sg_tensor *c = sg__tmp_like(src, false);
    if (!c) return NULL;
    memcpy(c->data, src->data, (size_t)src->numel * sg_dtype_size(src->dtype));
    transform(c->dtype, c->data, c->numel, mode, a);
    if (g->layout == SG_DENSE) return c;
    return sg__coo_wrap(g->ctx, g->ndim, g->shape, g->sparse_dim, g->indices, c, g->coalesced);
}

/* Coalesced forms of every stored gradient (NULL where a parameter has none), and whether
 * each is ours to modify in place. */
static int coalesce_all(sg_ctx *ctx, sg_tensor ***out, bool **owned_out)
{
    int64_t n = ctx->store_len;
    sg_tensor **co = sg__arena_alloc(ctx, (size_t)(n ? n : 1) * sizeof *co);
    bool *owned = sg__arena_alloc(ctx, (size_t)(n ? n : 1) * sizeof *owned);
    if (!co || !owned) return ctx->status;
    for (int64_t i = 0; i < n; i++) {
        sg_tensor *p = ctx->store[i], *g = p->grad;
        co[i] = g;
        owned[i] = g && p->grad_owned;
        if (!g || g->layout == SG_DENSE || g->coalesced) continue;
        sg_tensor *c = sg_coalesce(g);
        if (!c) return ctx->status ? ctx->status : SG_ERR_NOMEM;
        co[i] = c;
        if (c != g && c->values->data != g->values->data) owned[i] = true;
    }
    *out = co;
    *owned_out = owned;
    return SG_OK;
}

/* Applies the transform to every stored gradient: copies first, then replaces and writes. */
static int apply_all(sg_ctx *ctx, sg_tensor **co, bool *owned, clip_mode mode, double a)
{
    int64_t n = ctx->store_len;
    for (int64_t i = 0; i < n; i++) {
        if (!co[i] || owned[i]) continue;
        co[i] = transformed_copy(co[i], mode, a);
        if (!co[i]) return ctx->status ? ctx->status : SG_ERR_NOMEM;
    }
    for (int64_t i = 0; i < n; i++) {
        if (!co[i]) continue;
        if (owned[i]) transform(co[i]->dtype, elem_data(co[i]), elems(co[i]), mode, a);
        sg_tensor *p = ctx->store[i];
        p->grad = co[i];
        p->grad_owned = true;
        if (co[i]->layout == SG_COO && co[i]->coalesced) p->rows_unique_lb = co[i]->nnz;
    }
    return SG_OK;
}

int sg_clip_grad_norm(sg_ctx *ctx, double max_norm, double *total_norm)
{
    if (!ctx) return SG_ERR_NULL;
    if (!(max_norm >= 0))
        return sg__failc(ctx, SG_ERR_ARG, "clip_grad_norm: max_norm %g must be >= 0", max_norm);
    sg_tensor **co;
    bool *owned;
    int rc = coalesce_all(ctx, &co, &owned);
    if (rc) return rc;
    double sq = 0;
    for (int64_t i = 0; i < ctx->store_len; i++)
        if (co[i]) sq += sum_squares(co[i]);
    double total = sqrt(sq);
    if (total_norm) *total_norm = total;
    if (!isfinite(total))
        return sg__failc(ctx, SG_ERR_VALUE, "clip_grad_norm: total norm is %g", total);
    double coef = max_norm / (total + 1e-6);
    if (coef >= 1) { /* nothing to scale: keep the coalesced forms */
        for (int64_t i = 0; i < ctx->store_len; i++) {
            sg_tensor *p = ctx->store[i];
            if (!co[i] || co[i] == p->grad) continue;
            p->grad = co[i];
            p->grad_owned = owned[i];
            p->rows_unique_lb = co[i]->nnz;
        }
        return SG_OK;
    }
    return apply_all(ctx, co, owned, CLIP_SCALE, coef);
}

int sg_clip_grad_value(sg_ctx *ctx, double clip)
{
    if (!ctx) return SG_ERR_NULL;
    if (!(clip >= 0)) return sg__failc(ctx, SG_ERR_ARG, "clip_grad_value: clip %g must be >= 0", clip);
    sg_tensor **co;
    bool *owned;
    int rc = coalesce_all(ctx, &co, &owned);
    if (rc) return rc;
    return apply_all(ctx, co, owned, CLIP_CLAMP, clip);
}
