/* Reductions: sum and mean over all elements (COO sum is handed to the sparse module) and
 * along one dim with or without keepdim.
 *
 * Invariants: a full reduction sums fixed chunks of SUM_CHUNK elements (element i of a
 * chunk into double lane i % SUM_LANES, the lanes added in a fixed tree) and then adds the
 * chunk sums in chunk order; a reduction along a
 * dim adds the terms of each output element in ascending index order. Neither depends on
 * the thread count. */
#include "ops/ops.h"

#define SUM_CHUNK ((int64_t)1 << 14)
#define SUM_LANES 8 /* independent accumulators, so that the adds pipeline */

/* ---------------------------------------------------------------- sum / mean of all */

typedef struct {
    sg_dtype dtype;
    const void *x;
    double *partial; /* one per chunk */
} sum_job;

static void sum_chunks(void *ud, int64_t lo, int64_t hi)
{
    const sum_job *J = ud;
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T *x = J->x;
        double acc[SUM_LANES] = {0};
        int64_t i = lo;
        for (; i + SUM_LANES <= hi; i += SUM_LANES)
            for (int k = 0; k < SUM_LANES; k++) acc[k] += (double)x[i + k];
        for (int k = 0; i + k < hi; k++) acc[k] += (double)x[i + k];
        for (int k = 0; k < 4; k++) acc[k] += acc[k + 4];
        J->partial[lo / SUM_CHUNK] = (acc[0] + acc[2]) + (acc[1] + acc[3]);
    });
}

/* scalar[0]: 1 for sum, 1/numel for mean. The gradient is uniform (core.h): the ops that
 * take it (the elementwise ones, scale) read one value instead of a filled tensor. */
static int reduce_all_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *x = n->in[0];
    sg_tensor *g = sg__tmp_uniform(x, sg_tensor_get(gout, 0) * n->scalar[0]);
    if (!g) return sg__status_or_nomem(x->ctx);
    return sg__accum_grad(x, g, true);
}

static sg_tensor *reduce_all(sg_tensor *a, bool mean)
{
    const char *op = mean ? "sg_mean" : "sg_sum";
    if (!sg__op_check_float(op, a)) return NULL;
    sg_ctx *ctx = a->ctx;
    const int64_t n = a->numel, chunks = (n + SUM_CHUNK - 1) / SUM_CHUNK;
    double *partial = chunks ? sg__arena_alloc(ctx, (size_t)chunks * sizeof(double)) : NULL;
    if (chunks && !partial) return NULL;
    sg_tensor *out = sg__tmp(ctx, a->dtype, 0, a->shape, false);
    if (!out) return NULL;
    sum_job J = {a->dtype, a->data, partial};
    sg__parallel_for(ctx, n, SUM_CHUNK, sum_chunks, &J);
    double total = 0;
    for (int64_t c = 0; c < chunks; c++) total += partial[c];
    if (mean) total /= (double)n; /* 0/0 = NaN for an empty tensor, as in numpy */
    if (a->dtype == SG_F32)
        *(float *)out->data = (float)total;
    else
        *(double *)out->data = total;
    if (sg__needs_grad(ctx, 1, &a)) {
        sg_node *nd = sg__node_new(ctx, reduce_all_backward, op, out, 1, &a);
        if (!nd) return NULL;
        nd->scalar[0] = mean ? 1.0 / (double)n : 1.0;
    }
    return out;
}

/* Sum of every element -> shape (); COO a: sum of its dense meaning (sparse module). */
sg_tensor *sg_sum(sg_tensor *a)
{
    SG__CHECK_NOTNULL(a);
    if (a->layout == SG_COO) return sg__sparse_sum(a);
    return reduce_all(a, false);
}

/* Mean of every element -> shape (); NaN for an empty tensor. Dense only. */
sg_tensor *sg_mean(sg_tensor *a)
{
    SG__CHECK_NOTNULL(a);
    return reduce_all(a, true);
}

/* ---------------------------------------------------------------- along one dim */

/* x viewed as (outer, len, inner), y as (outer, inner); work items are (o, i) pairs.
 * Forward: y[o,i] = s * sum_d x[o,d,i]. Backward (expand): x[o,d,i] = s * y[o,i]. */
typedef struct {
    sg_dtype dtype;
    int64_t len, inner;
    const void *src;
    void *dst;
    double s;
    bool expand;
} dim_job;

static void dim_run(void *ud, int64_t lo, int64_t hi)
{
    const dim_job *J = ud;
    const int64_t len = J->len, inner = J->inner;
    SG__DISPATCH_FLOAT(J->dtype, T, {
        const T s = (T)J->s;
        for (int64_t e = lo; e < hi;) {
            const int64_t o = e / inner;
            const int64_t i0 = e % inner;
            const int64_t i1 = inner - i0 < hi - e ? inner : i0 + (hi - e);
            if (J->expand) {
                const T *y = (const T *)J->src + o * inner;
                T *x = (T *)J->dst + o * len * inner;
                for (int64_t d = 0; d < len; d++)
                    for (int64_t i = i0; i < i1; i++) x[d * inner + i] = s * y[i];
            } else {
                const T *x = (const T *)J->src + o * len * inner;
                T *y = (T *)J->dst + o * inner;
                for (int64_t i = i0; i < i1; i++) y[i] = 0;
                for (int64_t d = 0; d < len; d++)
                    for (int64_t i = i0; i < i1; i++) y[i] += x[d * inner + i];
                if (s != 1)
                    for (int64_t i = i0; i < i1; i++) y[i] *= s;
            }
            e += i1 - i0;
        }
    });
}

/* iarg[0]: dim; scalar[0]: 1 or 1/len. */
static int reduce_dim_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *x = n->in[0];
    int64_t outer, len, inner;
    sg__op_split(x, (int)n->iarg[0], &outer, &len, &inner);
    sg_tensor *g = sg__tmp_like(x, false);
    if (!g) return sg__status_or_nomem(x->ctx);
    dim_job J = {x->dtype, len, inner, gout->data, g->data, n->scalar[0], true};
    sg__parallel_for(x->ctx, outer * inner, sg__row_grain(len), dim_run, &J);
    return sg__accum_grad(x, g, true);
}

static sg_tensor *reduce_dim(sg_tensor *a, int dim, int keepdim, bool mean)
{
    SG__CHECK_NOTNULL(a);
    const char *op = mean ? "sg_mean_dim" : "sg_sum_dim";
    int d;
    if (!sg__op_check_float(op, a) || !sg__op_check_dim(op, a, dim, &d)) return NULL;
    sg_ctx *ctx = a->ctx;
    int64_t outer, len, inner;
    sg__op_split(a, d, &outer, &len, &inner);
    int64_t shape[SG_MAX_DIMS];
    int nd = 0;
    for (int k = 0; k < a->ndim; k++) {
        if (k != d) shape[nd++] = a->shape[k];
        else if (keepdim) shape[nd++] = 1;
    }
    sg_tensor *out = sg__tmp(ctx, a->dtype, nd, shape, false);
    if (!out) return NULL;
    const double s = mean ? 1.0 / (double)len : 1.0;
    dim_job J = {a->dtype, len, inner, a->data, out->data, s, false};
    sg__parallel_for(ctx, outer * inner, sg__row_grain(len), dim_run, &J);
    if (sg__needs_grad(ctx, 1, &a)) {
        sg_node *n = sg__node_new(ctx, reduce_dim_backward, op, out, 1, &a);
        if (!n) return NULL;
        n->iarg[0] = d;
        n->scalar[0] = s;
    }
    return out;
}

/* Sum along dim (negative counts from the end): the dim is removed, or kept as 1 when
 * keepdim. Errors: SG_ERR_ARG for a bad dim, SG_ERR_DTYPE, SG_ERR_LAYOUT. */
sg_tensor *sg_sum_dim(sg_tensor *a, int dim, int keepdim)
{
    return reduce_dim(a, dim, keepdim, false);
}

/* Mean along dim; same rules as sg_sum_dim (NaN where the dim is empty). */
sg_tensor *sg_mean_dim(sg_tensor *a, int dim, int keepdim)
{
    return reduce_dim(a, dim, keepdim, true);
}
