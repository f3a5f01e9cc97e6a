/* Shape ops: reshape (a view), transpose (a contiguous copy; 2-D COO is handed to the
 * sparse module) and concat along dim 0.
 *
 * Invariants: these ops move data and never compute with it, so they accept every dtype
 * (integer tensors simply never record a node). Gradients of reshape and concat are views
 * of the incoming gradient (handed on as not owned); transpose's gradient is a fresh
 * transposed copy. */
#include "ops/ops.h"

/* ---------------------------------------------------------------- reshape */

static int reshape_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *x = n->in[0];
    sg_tensor *g = sg__view(x->ctx, gout->dtype, x->ndim, x->shape, gout->data);
    if (!g) return sg__status_or_nomem(x->ctx);
    return sg__accum_grad(x, g, false);
}

/* Dense a -> a view of a's data with `shape` (ndim in 0..SG_MAX_DIMS; one entry may be -1
 * and is inferred). Errors: SG_ERR_ARG for a bad ndim, a second -1, a negative entry or an
 * ambiguous -1; SG_ERR_SHAPE when the element counts differ (or the target's overflow
 * int64_t); SG_ERR_LAYOUT for COO. */
sg_tensor *sg_reshape(sg_tensor *a, int ndim, const int64_t *shape)
{
    SG__CHECK_NOTNULL(a);
    const char *op = "sg_reshape";
    if (!sg__op_check_dense(op, a)) return NULL;
    sg_ctx *ctx = a->ctx;
    char sa[96];
    if (ndim < 0 || ndim > SG_MAX_DIMS || (ndim > 0 && !shape))
        return sg__fail(ctx, SG_ERR_ARG, "%s: bad target rank %d for %s", op, ndim,
                        sg__shape_str(a, sa, sizeof sa));
    int64_t dims[SG_MAX_DIMS];
    int infer = -1;
    int64_t known = 1;
    for (int k = 0; k < ndim; k++) {
        dims[k] = shape[k];
        if (shape[k] == -1 && infer < 0) {
            infer = k;
            continue;
        }
        if (shape[k] < 0)
            return sg__fail(ctx, SG_ERR_ARG, "%s: bad target dim %lld at %d for %s", op,
                            (long long)shape[k], k, sg__shape_str(a, sa, sizeof sa));
        if (!sg__mul_fits(known, shape[k], &known))
            return sg__fail(ctx, SG_ERR_SHAPE, "%s: target dims for %s multiply past "
                            "2^63 - 1 elements", op, sg__shape_str(a, sa, sizeof sa));
    }
    if (infer >= 0) {
        if (known == 0)
            return sg__fail(ctx, SG_ERR_ARG, "%s: -1 is ambiguous next to a 0 dim for %s", op,
                            sg__shape_str(a, sa, sizeof sa));
        dims[infer] = a->numel / known;
        known *= dims[infer];
    }
    if (known != a->numel)
        return sg__fail(ctx, SG_ERR_SHAPE, "%s: cannot view %s (%lld elements) with %d dims "
                        "holding %lld elements", op, sg__shape_str(a, sa, sizeof sa),
                        (long long)a->numel, ndim, (long long)known);
    sg_tensor *out = sg__view(ctx, a->dtype, ndim, dims, a->data);
    if (!out) return NULL;
    if (sg__needs_grad(ctx, 1, &a) && !sg__node_new(ctx, reshape_backward, op, out, 1, &a))
        return NULL;
    return out;
}

/* ---------------------------------------------------------------- transpose */

/* dst = src with dims d0 and d1 swapped; shapes padded on the left to 4 dims. The work
 * items are rows (all but the last dim) of dst. A strided gather: one variant per CPU level
 * (SG__HOT_CLONES, core/core.h), where AVX2 and AVX-512 have gather instructions. */
typedef struct {
    size_t elem;
    int64_t od[4];     /* dst's padded shape */
    int64_t sst[4];    /* src's stride for each dst dim */
    const void *src;
    void *dst;
} perm_job;

SG__HOT_BODY void perm_rows__body(void *ud, int64_t lo, int64_t hi)
{
    const perm_job *J = ud;
    const int64_t n3 = J->od[3], s3 = J->sst[3];
    for (int64_t r = lo; r < hi; r++) {
        int64_t i2 = r % J->od[2], rest = r / J->od[2];
        int64_t i1 = rest % J->od[1], i0 = rest / J->od[1];
        int64_t off = i0 * J->sst[0] + i1 * J->sst[1] + i2 * J->sst[2];
        if (J->elem == 8) {
            const uint64_t *s = (const uint64_t *)J->src + off;
            uint64_t *d = (uint64_t *)J->dst + r * n3;
            for (int64_t j = 0; j < n3; j++) d[j] = s[j * s3];
        } else {
            const uint32_t *s = (const uint32_t *)J->src + off;
            uint32_t *d = (uint32_t *)J->dst + r * n3;
            for (int64_t j = 0; j < n3; j++) d[j] = s[j * s3];
        }
    }
}
SG__HOT_CLONES(perm_rows, (void *ud, int64_t lo, int64_t hi), (ud, lo, hi))

/* A dense tape copy of x with dims d0, d1 (normalised) swapped. */
static sg_tensor *swap_copy(const sg_tensor *x, int d0, int d1)
{
    int64_t shape[SG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[d0] = x->shape[d1];
    shape[d1] = x->shape[d0];
    sg_tensor *out = sg__tmp(x->ctx, x->dtype, x->ndim, shape, false);
    if (!out) return NULL;
    perm_job J;
    J.elem = sg_dtype_size(x->dtype);
    J.src = x->data;
    J.dst = out->data;
    const int pad = 4 - x->ndim;
    for (int p = 0; p < 4; p++) {
        int q = p - pad; /* dst dim */
        int qs = q == d0 ? d1 : q == d1 ? d0 : q; /* the src dim it reads */
        J.od[p] = q >= 0 ? shape[q] : 1;
        J.sst[p] = q >= 0 ? sg__prod(x->shape, qs + 1, x->ndim) : 0;
    }
    const int64_t rows = J.od[0] * J.od[1] * J.od[2];
    const int64_t grain = sg__row_grain(J.od[3]);
    sg__parallel_for(x->ctx, rows, grain, perm_rows, &J);
    return out;
}

/* iarg[0], iarg[1]: the swapped dims. */
static int transpose_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *g = swap_copy(gout, (int)n->iarg[0], (int)n->iarg[1]);
    if (!g) return sg__status_or_nomem(gout->ctx);
    return sg__accum_grad(n->in[0], g, true);
}

/* Dense a (any rank >= 1) -> contiguous copy with dims dim0 and dim1 swapped (negative
 * dims count from the end); 2-D COO a -> COO transpose. Errors: SG_ERR_ARG for a bad dim. */
sg_tensor *sg_transpose(sg_tensor *a, int dim0, int dim1)
{
    SG__CHECK_NOTNULL(a);
    if (a->layout == SG_COO) return sg__sparse_transpose(a, dim0, dim1);
    const char *op = "sg_transpose";
    int d0, d1;
    if (!sg__op_check_dim(op, a, dim0, &d0) || !sg__op_check_dim(op, a, dim1, &d1))
        return NULL;
    sg_tensor *out = swap_copy(a, d0, d1);
    if (!out) return NULL;
    if (sg__needs_grad(a->ctx, 1, &a)) {
        sg_node *n = sg__node_new(a->ctx, transpose_backward, op, out, 1, &a);
        if (!n) return NULL;
        n->iarg[0] = d0;
        n->iarg[1] = d1;
    }
    return out;
}

/* ---------------------------------------------------------------- concat */

/* iarg[k]: first output row of in[k]. Each input's gradient is a view of its rows. */
static int concat_backward(sg_node *n, sg_tensor *gout)
{
    const int64_t row = sg__prod(gout->shape, 1, gout->ndim) * (int64_t)sg_dtype_size(gout->dtype);
    for (int k = 0; k < n->n_in; k++) {
        sg_tensor *x = n->in[k];
        if (!sg__wants_grad(x)) continue;
        sg_tensor *g = sg__view(x->ctx, gout->dtype, x->ndim, x->shape,
                                (char *)gout->data + n->iarg[k] * row);
        if (!g) return sg__status_or_nomem(x->ctx);
        int rc = sg__accum_grad(x, g, false);
        if (rc != SG_OK) return rc;
    }
    return SG_OK;
}

/* Copies ts[0..n) (validated) one after the other into a new tensor. */
static sg_tensor *concat_copy(int n, sg_tensor *const *ts, int64_t rows)
{
    const sg_tensor *t0 = ts[0];
    int64_t shape[SG_MAX_DIMS];
    memcpy(shape, t0->shape, sizeof shape);
    shape[0] = rows;
    sg_tensor *out = sg__tmp(t0->ctx, t0->dtype, t0->ndim, shape, false);
    if (!out) return NULL;
    char *dst = out->data;
    const size_t elem = sg_dtype_size(t0->dtype);
    for (int k = 0; k < n; k++) {
        const size_t bytes = (size_t)ts[k]->numel * elem;
        if (bytes) memcpy(dst, ts[k]->data, bytes);
        dst += bytes;
    }
    return out;
}

/* ts[0..n) dense, one dtype, equal rank >= 1 and equal dims past the first -> their
 * concatenation along dim 0. n <= 0, ts NULL or a NULL element: returns NULL (nothing
 * recorded when no context is known). Errors: SG_ERR_SHAPE, SG_ERR_DTYPE, SG_ERR_LAYOUT,
 * SG_ERR_ARG for tensors of different contexts. */
sg_tensor *sg_concat(int n, sg_tensor *const *ts)
{
    if (n <= 0 || !ts) return NULL;
    for (int k = 0; k < n; k++) SG__CHECK_NOTNULL(ts[k]);
    const char *op = "sg_concat";
    sg_tensor *t0 = ts[0];
    sg_ctx *ctx = t0->ctx;
    int64_t rows = 0;
    int n_grad = 0;
    for (int k = 0; k < n; k++) {
        sg_tensor *t = ts[k];
        if (!sg__op_check_pair(op, t0, t) || !sg__op_check_dense(op, t)) return NULL;
        bool same = t->ndim == t0->ndim && t->ndim >= 1;
        for (int d = 1; same && d < t->ndim; d++) same = t->shape[d] == t0->shape[d];
        if (!same) {
            char s0[96], sk[96];
            return sg__fail(ctx, SG_ERR_SHAPE,
                            "%s: tensor %d has shape %s, tensor 0 has %s (rank >= 1 and equal "
                            "dims past the first expected)", op, k,
                            sg__shape_str(t, sk, sizeof sk), sg__shape_str(t0, s0, sizeof s0));
        }
        rows += t->shape[0];
        n_grad += sg__wants_grad(t);
    }
    if (!sg__needs_grad(ctx, n, ts)) return concat_copy(n, ts, rows);
    if (n_grad > SG__MAX_NODE_INPUTS) {
        /* One node holds at most SG__MAX_NODE_INPUTS inputs: concatenate in groups. */
        sg_tensor *parts[SG__MAX_NODE_INPUTS];
        const int per = (n + SG__MAX_NODE_INPUTS - 1) / SG__MAX_NODE_INPUTS;
        int np = 0;
        for (int k = 0; k < n; k += per) {
            parts[np] = sg_concat(n - k < per ? n - k : per, ts + k);
            if (!parts[np++]) return NULL;
        }
        return sg_concat(np, parts);
    }
    sg_tensor *out = concat_copy(n, ts, rows);
    if (!out) return NULL;
    sg_tensor *in[SG__MAX_NODE_INPUTS];
    int64_t first[SG__MAX_NODE_INPUTS];
    int m = 0;
    int64_t row = 0;
    for (int k = 0; k < n; k++) {
        if (sg__wants_grad(ts[k])) {
            in[m] = ts[k];
            first[m++] = row;
        }
        row += ts[k]->shape[0];
    }
    sg_node *node = sg__node_new(ctx, concat_backward, op, out, m, in);
    if (!node) return NULL;
    for (int k = 0; k < m; k++) node->iarg[k] = first[k];
    return out;
}
