/* Helpers private to the op files in src/ops: uniform input checks (each records an error
 * naming the op and the offending shapes or dtypes) and the one parallel loop that every
 * op kernel goes through. Defined in src/ops/common.c. */
#ifndef SG_OPS_H
#define SG_OPS_H

#include "internal.h"

/* Work on items [lo, hi) of a kernel; ud is the kernel's job description. */
typedef void (*sg__op_range_fn)(void *ud, int64_t lo, int64_t hi);

/* Runs fn over [0, n) in chunks of `grain` items (the last chunk may be shorter), spread
 * over the context's threads when there are two chunks or more. Chunk boundaries depend
 * only on n and grain, never on the thread count, so a kernel whose chunks write disjoint
 * outputs (or per-chunk partials combined in chunk order) is bitwise deterministic. */
void sg__op_parallel(sg_ctx *ctx, int64_t n, int64_t grain, sg__op_range_fn fn, void *ud);

/* Elements per chunk for cheap elementwise kernels: small tensors stay on one thread. */
#define SG__OP_GRAIN ((int64_t)1 << 15)

/* Items per chunk for a kernel whose item is a row of `len` elements: about SG__OP_GRAIN
 * elements per chunk, at least one row. */
static inline int64_t sg__op_row_grain(int64_t len)
{
    return len > 0 && len < SG__OP_GRAIN ? SG__OP_GRAIN / len : 1;
}

const char *sg__op_dtype_name(sg_dtype d);

/* Each check records an error on t's context and returns false when it fails. */
bool sg__op_check_dense(const char *op, const sg_tensor *t); /* SG_ERR_LAYOUT for COO */
bool sg__op_check_float(const char *op, const sg_tensor *t); /* dense f32/f64, else
                                                                LAYOUT or DTYPE */
/* a and b share a context (SG_ERR_ARG) and a dtype (SG_ERR_DTYPE). */
bool sg__op_check_pair(const char *op, const sg_tensor *a, const sg_tensor *b);
/* dim in [-ndim, ndim) normalised into *out; SG_ERR_ARG otherwise. */
bool sg__op_check_dim(const char *op, const sg_tensor *t, int dim, int *out);

/* Views t as (outer, len, inner) around dimension dim (already normalised). */
void sg__op_split(const sg_tensor *t, int dim, int64_t *outer, int64_t *len, int64_t *inner);

#endif
