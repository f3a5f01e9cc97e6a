/* COO tensors: the validating constructor for user data, accessors, concatenation (the
 * sparse + sparse rule), sparse_dim expansion and index-tensor checks shared by the gathers.
 * Invariants: every COO tensor built here has indices (sparse_dim, nnz) int64 in range and
 * values (nnz, dense dims...) of its dtype; `coalesced` is set only after checking that the
 * rows are strictly increasing. Nothing here is recorded on the tape. */
#include "sparse/sparse.h"

/* Validates a COO tensor's parts given by the user (fn names the caller in messages) and
 * builds it, persistent or on the tape, with copies of them. */
static sg_tensor *coo_from_user(sg_ctx *ctx, const char *fn, bool persistent, sg_dtype dtype,
                                int ndim, const int64_t *shape, int sparse_dim, int64_t nnz,
                                const int64_t *indices, const void *values)
{
    if (!ctx) return NULL;
    if (!sg__is_float(dtype))
        return sg__fail(ctx, SG_ERR_DTYPE, "%s: values must be f32 or f64", fn);
    if (ndim < 1 || ndim > SG_MAX_DIMS || !shape)
        return sg__fail(ctx, SG_ERR_SHAPE, "%s: ndim %d outside 1..%d (or NULL shape)", fn,
                        ndim, SG_MAX_DIMS);
    if (sparse_dim < 1 || sparse_dim > ndim)
        return sg__fail(ctx, SG_ERR_SHAPE, "%s: sparse_dim %d outside 1..%d", fn, sparse_dim, ndim);
    if (nnz < 0) return sg__fail(ctx, SG_ERR_SHAPE, "%s: negative nnz %lld", fn, (long long)nnz);
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0)
            return sg__fail(ctx, SG_ERR_SHAPE, "%s: dimension %d is negative", fn, d);
    if (nnz > 0 && (!indices || !values))
        return sg__fail(ctx, SG_ERR_NULL, "%s: NULL indices or values", fn);
    for (int d = 0; d < sparse_dim; d++)
        for (int64_t e = 0; e < nnz; e++) {
            int64_t i = indices[(int64_t)d * nnz + e];
            if (i < 0 || i >= shape[d])
                return sg__fail(ctx, SG_ERR_INDEX,
                                "%s: index %lld of entry %lld is outside [0, %lld) in dim %d", fn,
                                (long long)i, (long long)e, (long long)shape[d], d);
        }
    sg_tensor *t = persistent ? sg__coo_new_persistent(ctx, dtype, ndim, shape, sparse_dim, nnz)
                              : sg__coo_alloc(ctx, dtype, ndim, shape, sparse_dim, nnz);
    if (!t) return NULL;
    int64_t rowsize = sg__coo_rowsize(t);
    if (nnz > 0) {
        memcpy(t->indices->data, indices, (size_t)(sparse_dim * nnz) * sizeof(int64_t));
        memcpy(t->values->data, values, (size_t)(nnz * rowsize) * sg_dtype_size(dtype));
    }
    bool sorted = true;
    for (int64_t e = 1; e < nnz && sorted; e++) sorted = sg__coo_row(t, e - 1) < sg__coo_row(t, e);
    t->coalesced = sorted;
    return t;
}

sg_tensor *sg_coo_new(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape,
                      int sparse_dim, int64_t nnz, const int64_t *indices, const void *values)
{
    return coo_from_user(ctx, "sg_coo_new", true, dtype, ndim, shape, sparse_dim, nnz, indices,
                         values);
}

sg_tensor *sg_coo_new_tmp(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape,
                          int sparse_dim, int64_t nnz, const int64_t *indices, const void *values)
{
    return coo_from_user(ctx, "sg_coo_new_tmp", false, dtype, ndim, shape, sparse_dim, nnz,
                         indices, values);
}

int sg_coo_sparse_dim(const sg_tensor *t) { return t && t->layout == SG_COO ? t->sparse_dim : -1; }
int sg_coo_dense_dim(const sg_tensor *t) { return t && t->layout == SG_COO ? t->dense_dim : -1; }
int64_t sg_coo_nnz(const sg_tensor *t) { return t && t->layout == SG_COO ? t->nnz : -1; }
int sg_coo_is_coalesced(const sg_tensor *t) { return t && t->layout == SG_COO && t->coalesced; }
sg_tensor *sg_coo_indices(sg_tensor *t) { return t && t->layout == SG_COO ? t->indices : NULL; }
sg_tensor *sg_coo_values(sg_tensor *t) { return t && t->layout == SG_COO ? t->values : NULL; }

sg_tensor *sg__coo_alloc(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape,
                         int sparse_dim, int64_t nnz)
{
    int64_t ishape[2] = {sparse_dim, nnz};
    int64_t vshape[SG_MAX_DIMS];
    vshape[0] = nnz;
    for (int d = sparse_dim; d < ndim; d++) vshape[1 + d - sparse_dim] = shape[d];
    sg_tensor *ind = sg__tmp(ctx, SG_I64, 2, ishape, false);
    sg_tensor *val = ind ? sg__tmp(ctx, dtype, 1 + ndim - sparse_dim, vshape, false) : NULL;
    if (!val) return NULL;
    return sg__coo_wrap(ctx, ndim, shape, sparse_dim, ind, val, false);
}

sg_tensor *sg__coo_expand(const sg_tensor *t, int sparse_dim)
{
    if (sparse_dim == t->sparse_dim) return (sg_tensor *)t;
    int64_t split = sg__prod(t->shape, t->sparse_dim, sparse_dim); /* new entries per entry */
    int64_t nnz = t->nnz * split;
    int64_t ishape[2] = {sparse_dim, nnz};
    int64_t vshape[SG_MAX_DIMS];
    vshape[0] = nnz;
    for (int d = sparse_dim; d < t->ndim; d++) vshape[1 + d - sparse_dim] = t->shape[d];
    /* Entry e's block splits into rows r * split + s, s in [0, split); the values keep
     * their order, so the new values are a view of t's. */
    sg_tensor *ind = sg__tmp(t->ctx, SG_I64, 2, ishape, false);
    sg_tensor *val = ind ? sg__view(t->ctx, t->dtype, 1 + t->ndim - sparse_dim, vshape, t->values->data) : NULL;
    sg_tensor *o = val ? sg__coo_wrap(t->ctx, t->ndim, t->shape, sparse_dim, ind, val, false) : NULL;
    if (!o) return NULL;
    int64_t *idx = ind->data;
    for (int64_t e = 0; e < t->nnz; e++) {
        int64_t r = sg__coo_row(t, e);
        for (int64_t s = 0; s < split; s++)
            sg__coo_put_row(idx, sparse_dim, nnz, t->shape, e * split + s, r * split + s);
    }
    o->coalesced = t->coalesced;
    return o;
}

sg_tensor *sg__coo_concat(const sg_tensor *a, const sg_tensor *b)
{
    if (a->sparse_dim != b->sparse_dim) { /* meet at the larger sparse_dim: no value blow-up */
        int sd = a->sparse_dim > b->sparse_dim ? a->sparse_dim : b->sparse_dim;
        a = sg__coo_expand(a, sd);
        b = a ? sg__coo_expand(b, sd) : NULL;
        if (!b) return NULL;
    }
    int sd = a->sparse_dim;
    int64_t na = a->nnz, nb = b->nnz, n = na + nb;
    sg_tensor *o = sg__coo_alloc(a->ctx, a->dtype, a->ndim, a->shape, sd, n);
    if (!o) return NULL;
    int64_t *oi = o->indices->data;
    const int64_t *ai = a->indices->data, *bi = b->indices->data;
    for (int d = 0; d < sd; d++) {
        if (na) memcpy(oi + d * n, ai + d * na, (size_t)na * sizeof *oi);
        if (nb) memcpy(oi + d * n + na, bi + d * nb, (size_t)nb * sizeof *oi);
    }
    size_t rowbytes = (size_t)sg__coo_rowsize(a) * sg_dtype_size(a->dtype);
    unsigned char *ov = o->values->data;
    if (na) memcpy(ov, a->values->data, (size_t)na * rowbytes);
    if (nb) memcpy(ov + (size_t)na * rowbytes, b->values->data, (size_t)nb * rowbytes);
    if (!na) o->coalesced = b->coalesced;
    else if (!nb) o->coalesced = a->coalesced;
    else o->coalesced = a->coalesced && b->coalesced && sg__coo_row(a, na - 1) < sg__coo_row(b, 0);
    return o;
}

typedef struct {
    const sg_tensor *idx;
    int64_t limit;
} range_job;

/* True when an index of idx at positions [lo, hi) is outside [0, limit). */
static bool out_of_range(void *vj, int64_t lo, int64_t hi)
{
    const range_job *j = vj;
    bool bad = false;
    for (int64_t i = lo; i < hi; i++) {
        int64_t v = sg__idx_at(j->idx, i);
        bad |= v < 0 || v >= j->limit;
    }
    return bad;
}

bool sg__check_index(const char *op, const sg_tensor *idx, int64_t limit)
{
    sg_ctx *ctx = idx->ctx;
    if (idx->layout != SG_DENSE) {
        sg__fail(ctx, SG_ERR_LAYOUT, "%s: index tensor must be dense", op);
        return false;
    }
    if (!sg__is_int(idx->dtype)) {
        sg__fail(ctx, SG_ERR_DTYPE, "%s: index tensor must be int32 or int64", op);
        return false;
    }
    int64_t n = idx->numel;
    if (!sg__parallel_any(ctx, n, SG__GRAIN, out_of_range, &(range_job){idx, limit})) return true;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = sg__idx_at(idx, i);
        if (v < 0 || v >= limit) {
            sg__fail(ctx, SG_ERR_INDEX, "%s: index %lld at position %lld is outside [0, %lld)", op,
                     (long long)v, (long long)i, (long long)limit);
            break;
        }
    }
    return false;
}

sg_tensor *sg__index_row_i64(const sg_tensor *idx)
{
    int64_t shape[2] = {1, idx->numel};
    if (idx->dtype == SG_I64) return sg__view(idx->ctx, SG_I64, 2, shape, idx->data);
    sg_tensor *o = sg__tmp(idx->ctx, SG_I64, 2, shape, false);
    if (!o) return NULL;
    int64_t *d = o->data;
    const int32_t *s = idx->data;
    for (int64_t i = 0; i < idx->numel; i++) d[i] = s[i];
    return o;
}
