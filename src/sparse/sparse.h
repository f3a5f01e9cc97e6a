/* The sparse layer's private header: COO kernels (construction and validation, densify,
 * coalesce, concatenation, index-add) and the flattened "row" of a COO entry. No tape
 * code: the layers above (autograd, ops) call these kernels; they call only core. The row of entry e is its sparse index flattened
 * row-major over the sparse dims, so rows order exactly like lexicographic indices and a
 * dense tensor of the same shape stores that entry's dense block at row * rowsize. */
#ifndef SG_SPARSE_H
#define SG_SPARSE_H

#include "core/core.h"

/* Elements in one entry's dense block: product of the dense dims (1 when dense_dim 0). */
static inline int64_t sg__coo_rowsize(const sg_tensor *t)
{
    return sg__prod(t->shape, t->sparse_dim, t->ndim);
}

/* Number of distinct rows: product of the sparse dims. */
static inline int64_t sg__coo_rows(const sg_tensor *t) { return sg__prod(t->shape, 0, t->sparse_dim); }

/* Flattened row of entry e of a COO tensor (indices assumed in range). */
static inline int64_t sg__coo_row(const sg_tensor *t, int64_t e)
{
    const int64_t *idx = t->indices->data;
    if (t->sparse_dim == 1) return idx[e];
    int64_t r = 0;
    for (int d = 0; d < t->sparse_dim; d++) r = r * t->shape[d] + idx[(int64_t)d * t->nnz + e];
    return r;
}

/* Writes row r unflattened as column e of an index matrix (sparse_dim, nnz). */
static inline void sg__coo_put_row(int64_t *idx, int sparse_dim, int64_t nnz, const int64_t *shape,
                                   int64_t e, int64_t r)
{
    if (sparse_dim == 1) {
        idx[e] = r;
        return;
    }
    for (int d = sparse_dim - 1; d >= 0; d--) {
        idx[(int64_t)d * nnz + e] = r % shape[d];
        r /= shape[d];
    }
}

/* A tape COO tensor with uninitialised indices (sparse_dim, nnz) and values (nnz, dense
 * dims of shape...), not flagged coalesced. NULL + NOMEM on failure. (coo.c) */
sg_tensor *sg__coo_alloc(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape,
                         int sparse_dim, int64_t nnz);

/* t re-expressed with a larger sparse_dim (each entry's dense block split into entries):
 * the same dense meaning; the values are a view of t's (no copy). Returns t itself when sparse_dim equals
 * t's. Tape tensor; NULL + NOMEM on failure. (coo.c) */
sg_tensor *sg__coo_expand(const sg_tensor *t, int sparse_dim);

/* Index tensor check shared by the gathers: idx dense, int32/int64, every entry in
 * [0, limit). Records SG_ERR_LAYOUT / SG_ERR_DTYPE / SG_ERR_INDEX naming `op`. (coo.c) */
bool sg__check_index(const char *op, const sg_tensor *idx, int64_t limit);

/* ---- kernels used by the layers above */
/* Concatenation of two COO tensors of the same shape (tape tensor). */
sg_tensor *sg__coo_concat(const sg_tensor *a, const sg_tensor *b);
/* dst += alpha * src without validation (src built by the library). */
void sg__index_add_unchecked(sg_tensor *dst, const sg_tensor *src, double alpha);
/* The entries of an int32/int64 tensor as an int64 (1, n) tape tensor: a view of idx's
 * buffer for int64 (no copy), a converted copy for int32. (src/sparse/coo.c) */
sg_tensor *sg__index_row_i64(const sg_tensor *idx);
/* Dense tape copy of t's meaning (COO summed into zeros). */
sg_tensor *sg__densify(const sg_tensor *t); /* (densify.c) */

#endif
