/* Ops on COO tensors, each with its backward beside it: sparse + sparse, sparse * scalar,
 * 2-D transpose, sparse @ dense (spmm), sum, to_dense, to_sparse and sparse_mask.
 *
 * Semantics (docs/design.md, "Sparse semantics"): a COO tensor means its dense form, so
 * every backward here is non-masked (gradients reach unspecified elements) except
 * sparse_mask's, which restricts its gradient to the mask's pattern. A backward that
 * passes a gradient through accepts a COO incoming gradient and keeps it sparse.
 *
 * "Restricted" tensors: when every path from a COO tensor a to the leaves goes through a
 * sparse_mask (possibly via add, scale and transpose), only the values of a's gradient at
 * a's own pattern can ever reach a leaf. The backwards of sum and spmm then compute a's
 * gradient at that pattern only (O(nnz) instead of O(numel)); the gradient stored for a
 * itself, an intermediate, is then exact at its pattern and zero elsewhere. Without such a
 * restriction (a is a leaf, or comes from to_sparse) they produce the full dense gradient,
 * as non-masked semantics require.
 *
 * Threads: kernels that scatter into rows cut the destination rows into one range per
 * thread (sg__parallel_ranges) and let each range scan every entry (as index-add does);
 * kernels that compute each output row on its own go through sg__parallel_for. Either way
 * results are bitwise identical for any thread count. */
#include "ops/ops.h"

#include <math.h>

static int add_backward(sg_node *n, sg_tensor *gout);
static int scale_backward(sg_node *n, sg_tensor *gout);
static int transpose_backward(sg_node *n, sg_tensor *gout);
static int mask_backward(sg_node *n, sg_tensor *gout);


/* True when a's gradient only matters at a's pattern (see the file comment). */
static bool grad_restricted(const sg_tensor *a, int depth)
{
    if (!a->requires_grad) return true; /* nothing upstream wants a gradient */
    const sg_node *n = a->node;
    if (!n || depth > 64) return false;
    if (n->backward == mask_backward) return true;
    if (n->backward != add_backward && n->backward != scale_backward && n->backward != transpose_backward)
        return false;
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] && !grad_restricted(n->in[i], depth + 1)) return false;
    return true;
}

/* a with unique rows: a itself if coalesced, else its coalesced copy. */
static sg_tensor *unique_pattern(sg_tensor *a) { return sg_coalesce(a); }

/* A dense tape copy of dense t times s. */
static sg_tensor *scaled_copy(const sg_tensor *t, double s)
{
    sg_tensor *o = sg__tmp_like(t, false);
    if (!o) return NULL;
    SG__DISPATCH_FLOAT(t->dtype, T, {
        const T *x = t->data;
        T *y = o->data;
        T c = (T)s;
        for (int64_t i = 0; i < t->numel; i++) y[i] = c * x[i];
    });
    return o;
}

/* A dense tape tensor of t's shape and dtype with every element v. */
static sg_tensor *filled(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape, double v)
{
    sg_tensor *o = sg__tmp(ctx, dtype, ndim, shape, false);
    if (!o) return NULL;
    SG__DISPATCH_FLOAT(dtype, T, {
        T *y = o->data;
        for (int64_t i = 0; i < o->numel; i++) y[i] = (T)v;
    });
    return o;
}

static bool check_coo(const char *op, const sg_tensor *t)
{
    if (t->layout != SG_COO) {
        sg__fail(t->ctx, SG_ERR_LAYOUT, "%s: COO operand needed", op);
        return false;
    }
    return true;
}

static bool check_same(const char *op, const sg_tensor *a, const sg_tensor *b)
{
    if (a->ctx != b->ctx) {
        sg__fail(a->ctx, SG_ERR_ARG, "%s: operands of different contexts", op);
        return false;
    }
    if (a->dtype != b->dtype || !sg__is_float(a->dtype)) {
        sg__fail(a->ctx, SG_ERR_DTYPE, "%s: operands need the same float dtype", op);
        return false;
    }
    if (!sg__same_shape(a, b)) {
        char sa[64], sb[64];
        sg__fail(a->ctx, SG_ERR_SHAPE, "%s: shapes %s and %s differ", op, sg__shape_str(a, sa, sizeof sa),
                 sg__shape_str(b, sb, sizeof sb));
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------- sparse + sparse */

static int add_backward(sg_node *n, sg_tensor *gout)
{
    for (int i = 0; i < 2; i++) {
        if (!sg__wants_grad(n->in[i])) continue;
        int rc = sg__accum_grad(n->in[i], gout, false);
        if (rc) return rc;
    }
    return SG_OK;
}

/* COO + COO of one shape: the concatenation of the entries (no sort); entries meet at the
 * larger sparse_dim. (sg_add densifies a COO operand added to a dense one itself.) */
sg_tensor *sg__sparse_add(sg_tensor *a, sg_tensor *b)
{
    if (!a || !b) return NULL;
    sg_ctx *ctx = a->ctx;
    if (!check_same("sg_add", a, b)) return NULL;
    sg_tensor *out = sg__coo_concat(a, b);
    if (!out) return NULL;
    sg_tensor *in[2] = {a, b};
    if (sg__needs_grad(ctx, 2, in)) {
        sg_node *nd = sg__node_new(ctx, add_backward, "sparse_add", out, 2, in);
        if (!nd) return NULL;
        nd->accepts_sparse_gout = true;
    }
    return out;
}

/* ---------------------------------------------------------------- sparse * scalar */

/* t * s for dense or COO t (COO: indices shared with t). */
static sg_tensor *scale_any(sg_tensor *t, double s)
{
    if (t->layout == SG_DENSE) return scaled_copy(t, s);
    sg_tensor *v = scaled_copy(t->values, s);
    return v ? sg__coo_wrap(t->ctx, t->ndim, t->shape, t->sparse_dim, t->indices, v, t->coalesced) : NULL;
}

static int scale_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *g = scale_any(gout, n->scalar[0]);
    if (!g) return sg__status_or_nomem(n->out->ctx);
    return sg__accum_grad(n->in[0], g, g->layout == SG_DENSE);
}

/* COO a * s: a COO tensor sharing a's indices, values scaled. */
sg_tensor *sg__sparse_scale(sg_tensor *a, double s)
{
    if (!a) return NULL;
    if (!check_coo("sg_scale", a)) return NULL;
    sg_tensor *out = scale_any(a, s);
    if (!out) return NULL;
    if (sg__needs_grad(a->ctx, 1, &a)) {
        sg_node *nd = sg__node_new(a->ctx, scale_backward, "sparse_scale", out, 1, &a);
        if (!nd) return NULL;
        nd->scalar[0] = s;
        nd->accepts_sparse_gout = true;
    }
    return out;
}

/* ---------------------------------------------------------------- transpose */

/* 2-D COO t with its two dims swapped (swap == 0: the same tensor re-wrapped). The result
 * has sparse_dim 2; its values are a view of t's. */
static sg_tensor *coo_transpose(const sg_tensor *t, bool swap)
{
    const sg_tensor *e = sg__coo_expand(t, 2);
    if (!e) return NULL;
    int64_t shape[2] = {t->shape[swap ? 1 : 0], t->shape[swap ? 0 : 1]};
    if (!swap) return sg__coo_wrap(t->ctx, 2, shape, 2, e->indices, e->values, e->coalesced);
    int64_t ishape[2] = {2, e->nnz};
    sg_tensor *ind = sg__tmp(t->ctx, SG_I64, 2, ishape, false);
    if (!ind) return NULL;
    const int64_t *src = e->indices->data;
    int64_t *dst = ind->data;
    if (e->nnz) {
        memcpy(dst, src + e->nnz, (size_t)e->nnz * sizeof *dst);
        memcpy(dst + e->nnz, src, (size_t)e->nnz * sizeof *dst);
    }
    return sg__coo_wrap(t->ctx, 2, shape, 2, ind, e->values, false);
}

/* Dense 2-D t transposed (a copy). */
static sg_tensor *dense_transpose(const sg_tensor *t)
{
    int64_t R = t->shape[0], C = t->shape[1];
    int64_t shape[2] = {C, R};
    sg_tensor *o = sg__tmp(t->ctx, t->dtype, 2, shape, false);
    if (!o) return NULL;
    SG__DISPATCH_FLOAT(t->dtype, T, {
        const T *x = t->data;
        T *y = o->data;
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < C; j++) y[j * R + i] = x[i * C + j];
    });
    return o;
}

static int transpose_backward(sg_node *n, sg_tensor *gout)
{
    bool swap = n->iarg[0] != 0;
    if (gout->layout == SG_DENSE && !swap) return sg__accum_grad(n->in[0], gout, false);
    sg_tensor *g = gout->layout == SG_DENSE ? dense_transpose(gout) : coo_transpose(gout, swap);
    if (!g) return sg__status_or_nomem(n->out->ctx);
    return sg__accum_grad(n->in[0], g, g->layout == SG_DENSE);
}

/* 2-D COO a with dims dim0 and dim1 swapped: a COO result (sparse_dim 2) whose values are
 * a view of a's. Errors: SG_ERR_LAYOUT (dense a), SG_ERR_SHAPE (not 2-D), SG_ERR_ARG. */
sg_tensor *sg__sparse_transpose(sg_tensor *a, int dim0, int dim1)
{
    if (!a) return NULL;
    if (!check_coo("sg_transpose", a)) return NULL;
    if (a->ndim != 2) return sg__fail(a->ctx, SG_ERR_SHAPE, "sg_transpose: COO operand must be 2-D (is %d-D)", a->ndim);
    int d0 = dim0 < 0 ? dim0 + 2 : dim0, d1 = dim1 < 0 ? dim1 + 2 : dim1;
    if (d0 < 0 || d0 > 1 || d1 < 0 || d1 > 1)
        return sg__fail(a->ctx, SG_ERR_ARG, "sg_transpose: dims %d, %d out of range for 2-D", dim0, dim1);
    bool swap = d0 != d1;
    sg_tensor *out = coo_transpose(a, swap);
    if (!out) return NULL;
    if (sg__needs_grad(a->ctx, 1, &a)) {
        sg_node *nd = sg__node_new(a->ctx, transpose_backward, "sparse_transpose", out, 1, &a);
        if (!nd) return NULL;
        nd->iarg[0] = swap;
        nd->accepts_sparse_gout = true;
    }
    return out;
}

/* ---------------------------------------------------------------- spmm */

typedef struct {
    const sg_tensor *a; /* COO (M,K), sparse_dim 1 or 2 */
    const sg_tensor *b; /* dense (K,N) or (M,N) */
    sg_tensor *out;     /* dense, zeroed */
} spmm_job;

/* out (M,N) += A @ B for A's entries whose row i is in [lo, hi). */
static void spmm_fwd_range(void *vj, int64_t lo, int64_t hi)
{
    const spmm_job *j = vj;
    const sg_tensor *a = j->a;
    int64_t nnz = a->nnz, K = a->shape[1], N = j->b->shape[1];
    const int64_t *idx = a->indices->data;
    bool sd2 = a->sparse_dim == 2;
    SG__DISPATCH_FLOAT(a->dtype, T, {
        const T *v = a->values->data;
        const T *B = j->b->data;
        T *O = j->out->data;
        for (int64_t e = 0; e < nnz; e++) {
            int64_t i = idx[e];
            if (i < lo || i >= hi) continue;
            T *restrict o = O + i * N;
            int64_t k0 = sd2 ? idx[nnz + e] : 0;
            int64_t k1 = sd2 ? k0 + 1 : K;
            for (int64_t k = k0; k < k1; k++) {
                T c = sd2 ? v[e] : v[e * K + k];
                const T *restrict br = B + k * N;
                for (int64_t c2 = 0; c2 < N; c2++) o[c2] += c * br[c2];
            }
        }
    });
}

/* out (K,N) += A^T @ G for output rows k in [lo, hi); j->b is G (M,N). */
static void spmm_bwd_b_range(void *vj, int64_t lo, int64_t hi)
{
    const spmm_job *j = vj;
    const sg_tensor *a = j->a;
    int64_t nnz = a->nnz, K = a->shape[1], N = j->b->shape[1];
    const int64_t *idx = a->indices->data;
    bool sd2 = a->sparse_dim == 2;
    SG__DISPATCH_FLOAT(a->dtype, T, {
        const T *v = a->values->data;
        const T *G = j->b->data;
        T *O = j->out->data;
        for (int64_t e = 0; e < nnz; e++) {
            int64_t k0 = sd2 ? idx[nnz + e] : lo;
            int64_t k1 = sd2 ? k0 + 1 : hi;
            if (k0 < lo || k0 >= hi) continue;
            const T *restrict g = G + idx[e] * N;
            for (int64_t k = k0; k < k1; k++) {
                T c = sd2 ? v[e] : v[e * K + k];
                T *restrict o = O + k * N;
                for (int64_t c2 = 0; c2 < N; c2++) o[c2] += c * g[c2];
            }
        }
    });
}

typedef struct {
    const sg_tensor *g, *b; /* G (M,N), B (K,N) */
    sg_tensor *out;         /* dense (M,K), or the values of a COO pattern */
    const sg_tensor *pat;   /* NULL: dense output; else COO pattern (sparse_dim 1 or 2) */
} sddmm_job;

/* dA = G @ B^T: dense rows [lo, hi), or pattern entries [lo, hi). */
static void grad_a_range(void *vj, int64_t lo, int64_t hi)
{
    const sddmm_job *j = vj;
    int64_t K = j->b->shape[0], N = j->b->shape[1];
    const sg_tensor *p = j->pat;
    const int64_t *idx = p ? p->indices->data : NULL;
    SG__DISPATCH_FLOAT(j->out->dtype, T, {
        const T *G = j->g->data;
        const T *B = j->b->data;
        T *O = j->out->data;
        for (int64_t r = lo; r < hi; r++) {
            int64_t i = p ? idx[r] : r;
            bool one = p && p->sparse_dim == 2;
            int64_t k0 = one ? idx[p->nnz + r] : 0;
            int64_t k1 = one ? k0 + 1 : K;
            T *o = one ? O + r : O + r * K;
            const T *restrict gr = G + i * N;
            for (int64_t k = k0; k < k1; k++) {
                const T *restrict br = B + k * N;
                T s = 0;
                for (int64_t c = 0; c < N; c++) s += gr[c] * br[c];
                o[one ? 0 : k] = s;
            }
        }
    });
}

static int spmm_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *a = n->in[0], *b = n->in[1];
    sg_ctx *ctx = gout->ctx;
    int64_t M = a->shape[0], K = a->shape[1], N = b->shape[1];
    if (sg__wants_grad(b)) { /* dB = A^T @ G, over A's entries only */
        sg_tensor *gb = sg__tmp_like(b, true);
        if (!gb) return sg__status_or_nomem(ctx);
        spmm_job j = {a, gout, gb};
        int64_t work = a->nnz * N * (a->sparse_dim == 2 ? 1 : K);
        sg__parallel_ranges(ctx, K, work, spmm_bwd_b_range, &j);
        int rc = sg__accum_grad(b, gb, true);
        if (rc) return rc;
    }
    if (sg__wants_grad(a)) { /* dA = G @ B^T: dense, or at A's pattern when restricted */
        sddmm_job j = {gout, b, NULL, NULL};
        sg_tensor *ga;
        int64_t rows, row_work; /* rows of the output and multiply-adds per row */
        if (grad_restricted(a, 0)) {
            sg_tensor *p = unique_pattern(a);
            if (!p) return sg__status_or_nomem(ctx);
            sg_tensor *v = sg__tmp(ctx, a->dtype, p->values->ndim, p->values->shape, false);
            ga = v ? sg__coo_wrap(ctx, 2, a->shape, p->sparse_dim, p->indices, v, true) : NULL;
            if (!ga) return sg__status_or_nomem(ctx);
            j.out = v;
            j.pat = p;
            rows = p->nnz;
            row_work = p->sparse_dim == 2 ? N : K * N;
        } else {
            ga = sg__tmp_like(a, false);
            if (!ga) return sg__status_or_nomem(ctx);
            j.out = ga;
            rows = M;
            row_work = K * N;
        }
        sg__parallel_for(ctx, rows, sg__row_grain(row_work), grad_a_range, &j);
        int rc = sg__accum_grad(a, ga, ga->layout == SG_DENSE);
        if (rc) return rc;
    }
    return SG_OK;
}

/* COO a (M,K) @ dense b (K,N) -> dense (M,N). a may be sparse_dim 2 (entries) or 1 (rows).
 * Gradients: b's is A^T @ G, computed over a's entries; a's is G @ B^T (dense, O(M K N)),
 * or only at a's pattern when a's gradient is restricted to it (see the file comment). */
sg_tensor *sg__spmm(sg_tensor *a, sg_tensor *b)
{
    if (!a || !b) return NULL;
    sg_ctx *ctx = a->ctx;
    if (!check_coo("sg_matmul", a)) return NULL;
    if (b->layout != SG_DENSE) return sg__fail(ctx, SG_ERR_LAYOUT, "sg_matmul: COO @ COO is not supported");
    if (b->ctx != ctx) return sg__fail(ctx, SG_ERR_ARG, "sg_matmul: operands of different contexts");
    if (a->dtype != b->dtype) return sg__fail(ctx, SG_ERR_DTYPE, "sg_matmul: operands need the same dtype");
    if (a->ndim != 2 || b->ndim != 2 || a->shape[1] != b->shape[0]) {
        char sa[64], sb[64];
        return sg__fail(ctx, SG_ERR_SHAPE, "sg_matmul: COO %s @ %s: (M,K) @ (K,N) needed",
                        sg__shape_str(a, sa, sizeof sa), sg__shape_str(b, sb, sizeof sb));
    }
    int64_t M = a->shape[0], K = a->shape[1], N = b->shape[1];
    int64_t shape[2] = {M, N};
    sg_tensor *out = sg__tmp(ctx, a->dtype, 2, shape, true);
    if (!out) return NULL;
    spmm_job j = {a, b, out};
    sg__parallel_ranges(ctx, M, a->nnz * N * (a->sparse_dim == 2 ? 1 : K), spmm_fwd_range, &j);
    sg_tensor *in[2] = {a, b};
    if (sg__needs_grad(ctx, 2, in) && !sg__node_new(ctx, spmm_backward, "spmm", out, 2, in)) return NULL;
    return out;
}

/* ---------------------------------------------------------------- sum */

static int sum_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *a = n->in[0];
    sg_ctx *ctx = a->ctx;
    double g0 = sg_tensor_get(gout, 0);
    if (grad_restricted(a, 0)) { /* ones at a's unique pattern: O(nnz) */
        sg_tensor *p = unique_pattern(a);
        sg_tensor *v = p ? filled(ctx, a->dtype, p->values->ndim, p->values->shape, g0) : NULL;
        sg_tensor *g = v ? sg__coo_wrap(ctx, a->ndim, a->shape, p->sparse_dim, p->indices, v, true) : NULL;
        return g ? sg__accum_grad(a, g, false) : sg__status_or_nomem(ctx);
    }
    /* Non-masked semantics: every element of a's dense form has derivative g0, so a leaf's
     * gradient is the full dense array, O(numel). */
    sg_tensor *g = filled(ctx, a->dtype, a->ndim, a->shape, g0);
    return g ? sg__accum_grad(a, g, true) : sg__status_or_nomem(ctx);
}

/* Sum of every element of COO a's dense form (duplicates included) -> shape (). Summed in
 * entry order in double precision. */
sg_tensor *sg__sparse_sum(sg_tensor *a)
{
    if (!a) return NULL;
    if (!check_coo("sg_sum", a)) return NULL;
    sg_tensor *out = sg__tmp(a->ctx, a->dtype, 0, NULL, false);
    if (!out) return NULL;
    int64_t n = a->values->numel;
    SG__DISPATCH_FLOAT(a->dtype, T, {
        const T *v = a->values->data;
        double s = 0;
        for (int64_t i = 0; i < n; i++) s += v[i];
        *(T *)out->data = (T)s;
    });
    if (sg__needs_grad(a->ctx, 1, &a) && !sg__node_new(a->ctx, sum_backward, "sparse_sum", out, 1, &a))
        return NULL;
    return out;
}

/* ---------------------------------------------------------------- to_dense / to_sparse */

static int pass_backward(sg_node *n, sg_tensor *gout) { return sg__accum_grad(n->in[0], gout, false); }

sg_tensor *sg_to_dense(sg_tensor *x)
{
    if (!x) return NULL;
    if (x->layout == SG_DENSE) return x;
    sg_tensor *out = sg__densify(x);
    if (!out) return NULL;
    if (sg__needs_grad(x->ctx, 1, &x)) {
        sg_node *nd = sg__node_new(x->ctx, pass_backward, "to_dense", out, 1, &x);
        if (!nd) return NULL;
        nd->accepts_sparse_gout = true;
    }
    return out;
}

sg_tensor *sg_to_sparse(sg_tensor *x, int sparse_dim)
{
    if (!x) return NULL;
    sg_ctx *ctx = x->ctx;
    if (!sg__is_float(x->dtype)) return sg__fail(ctx, SG_ERR_DTYPE, "sg_to_sparse: float tensor needed");
    if (x->layout == SG_COO) {
        if (sparse_dim == x->sparse_dim) return x;
        return sg__fail(ctx, SG_ERR_LAYOUT, "sg_to_sparse: operand is COO with sparse_dim %d, not %d",
                        x->sparse_dim, sparse_dim);
    }
    if (sparse_dim < 1 || sparse_dim > x->ndim)
        return sg__fail(ctx, SG_ERR_ARG, "sg_to_sparse: sparse_dim %d outside 1..%d", sparse_dim, x->ndim);
    int64_t R = sg__prod(x->shape, 0, sparse_dim), D = sg__prod(x->shape, sparse_dim, x->ndim);
    int64_t U = 0;
    SG__DISPATCH_FLOAT(x->dtype, T, {
        const T *v = x->data;
        for (int64_t r = 0; r < R; r++)
            for (int64_t j = 0; j < D; j++)
                if (v[r * D + j] != 0) {
                    U++;
                    break;
                }
    });
    sg_tensor *out = sg__coo_alloc(ctx, x->dtype, x->ndim, x->shape, sparse_dim, U);
    if (!out) return NULL;
    int64_t *idx = out->indices->data;
    size_t rowbytes = (size_t)D * sg_dtype_size(x->dtype);
    int64_t u = 0;
    SG__DISPATCH_FLOAT(x->dtype, T, {
        const T *v = x->data;
        for (int64_t r = 0; r < R; r++)
            for (int64_t j = 0; j < D; j++)
                if (v[r * D + j] != 0) {
                    memcpy((unsigned char *)out->values->data + (size_t)u * rowbytes, v + r * D, rowbytes);
                    sg__coo_put_row(idx, sparse_dim, U, x->shape, u++, r);
                    break;
                }
    });
    out->coalesced = true;
    if (sg__needs_grad(ctx, 1, &x)) {
        sg_node *nd = sg__node_new(ctx, pass_backward, "to_sparse", out, 1, &x);
        if (!nd) return NULL;
        nd->accepts_sparse_gout = true;
    }
    return out;
}

/* ---------------------------------------------------------------- sparse_mask */

/* Values of src's dense form at the rows of the coalesced pattern p: a dense tape tensor
 * shaped like p's values. src is dense or COO; a COO src is coalesced and merged with p. */
static sg_tensor *values_at(sg_tensor *src, const sg_tensor *p)
{
    sg_ctx *ctx = p->ctx;
    sg_tensor *out = sg__tmp(ctx, src->dtype, p->values->ndim, p->values->shape, false);
    if (!out) return NULL;
    int64_t D = sg__coo_rowsize(p), U = p->nnz;
    size_t rowbytes = (size_t)D * sg_dtype_size(src->dtype);
    unsigned char *o = out->data;
    if (src->layout == SG_COO && src->sparse_dim > p->sparse_dim) src = sg__densify(src);
    else if (src->layout == SG_COO) src = sg_coalesce(sg__coo_expand(src, p->sparse_dim));
    if (!src) return NULL;
    if (src->layout == SG_DENSE) {
        const unsigned char *x = src->data;
        for (int64_t u = 0; u < U; u++) memcpy(o + (size_t)u * rowbytes, x + (size_t)sg__coo_row(p, u) * rowbytes, rowbytes);
        return out;
    }
    const unsigned char *x = src->values->data;
    int64_t e = 0;
    for (int64_t u = 0; u < U; u++) {
        int64_t r = sg__coo_row(p, u);
        while (e < src->nnz && sg__coo_row(src, e) < r) e++;
        if (e < src->nnz && sg__coo_row(src, e) == r) memcpy(o + (size_t)u * rowbytes, x + (size_t)e * rowbytes, rowbytes);
        else memset(o + (size_t)u * rowbytes, 0, rowbytes);
    }
    return out;
}

static int mask_backward(sg_node *n, sg_tensor *gout)
{
    sg_tensor *p = n->out; /* coalesced: the mask's pattern */
    sg_tensor *v = values_at(gout, p);
    sg_tensor *g = v ? sg__coo_wrap(p->ctx, p->ndim, p->shape, p->sparse_dim, p->indices, v, true) : NULL;
    return g ? sg__accum_grad(n->in[0], g, false) : sg__status_or_nomem(p->ctx);
}

sg_tensor *sg_sparse_mask(sg_tensor *x, sg_tensor *mask)
{
    if (!x || !mask) return NULL;
    sg_ctx *ctx = x->ctx;
    if (mask->ctx != ctx) return sg__fail(ctx, SG_ERR_ARG, "sg_sparse_mask: operands of different contexts");
    if (mask->layout != SG_COO) return sg__fail(ctx, SG_ERR_LAYOUT, "sg_sparse_mask: mask must be COO");
    if (!sg__is_float(x->dtype)) return sg__fail(ctx, SG_ERR_DTYPE, "sg_sparse_mask: float x needed");
    if (!sg__same_shape(x, mask)) {
        char sa[64], sb[64];
        return sg__fail(ctx, SG_ERR_SHAPE, "sg_sparse_mask: shapes %s and %s differ", sg__shape_str(x, sa, sizeof sa),
                        sg__shape_str(mask, sb, sizeof sb));
    }
    if (x->layout == SG_COO && x->sparse_dim > mask->sparse_dim)
        return sg__fail(ctx, SG_ERR_LAYOUT, "sg_sparse_mask: COO x has sparse_dim %d, more than the mask's %d",
                        x->sparse_dim, mask->sparse_dim);
    sg_tensor *p = sg_coalesce(mask);
    sg_tensor *v = p ? values_at(x, p) : NULL;
    sg_tensor *out = v ? sg__coo_wrap(ctx, x->ndim, x->shape, p->sparse_dim, p->indices, v, true) : NULL;
    if (!out) return NULL;
    if (sg__needs_grad(ctx, 1, &x)) {
        sg_node *nd = sg__node_new(ctx, mask_backward, "sparse_mask", out, 1, &x);
        if (!nd) return NULL;
        nd->accepts_sparse_gout = true;
    }
    return out;
}
