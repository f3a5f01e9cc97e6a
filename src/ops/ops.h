/* The ops layer's private header: uniform input checks shared by the op files (each
 * records an error naming the op and the offending shapes or dtypes; src/ops/common.c) and
 * the COO paths of generic ops that one op file lends another. Includes only the layers
 * below (autograd, sparse, core). */
#ifndef SG_OPS_H
#define SG_OPS_H

#include "autograd/tape.h"

/* Each check records an error on t's context and returns false when it fails. The checks
 * of an operand an op reads whole also make it current (sg__param_sync of every row). */
bool sg__op_check_dense(const char *op, const sg_tensor *t); /* SG_ERR_LAYOUT for COO */
bool sg__op_check_float(const char *op, const sg_tensor *t); /* dense f32/f64, else
                                                                LAYOUT or DTYPE */
/* sg__op_check_float without the sync: for a table of which the op reads (and syncs)
 * only the rows it names. */
bool sg__op_check_table(const char *op, const sg_tensor *t);
/* a and b share a context (SG_ERR_ARG) and a dtype (SG_ERR_DTYPE). */
bool sg__op_check_pair(const char *op, const sg_tensor *a, const sg_tensor *b);
/* dim in [-ndim, ndim) normalised into *out; SG_ERR_ARG otherwise. */
bool sg__op_check_dim(const char *op, const sg_tensor *t, int dim, int *out);

/* A new tape tensor s * x of x's shape (dense float x, one parallel pass); NULL when out of
 * memory (recorded). */
sg_tensor *sg__op_scaled(const sg_tensor *x, double s);

/* Adds scale * dir to x's gradient, dir a float tape tensor of x's shape that the backward
 * owns (a loss's saved direction): handed over as it is when scale is 1, else scaled into
 * a new tape tensor first. Returns the status (SG_ERR_NOMEM recorded). */
int sg__op_accum_scaled(sg_tensor *x, sg_tensor *dir, double scale);
/* exp of x[0..n) in place, vectorised, bitwise the same on every CPU (ops/vexp.c). */
void sg__vexp(double *x, int64_t n);

/* Views t as (outer, len, inner) around dimension dim (already normalised). */
void sg__op_split(const sg_tensor *t, int dim, int64_t *outer, int64_t *len, int64_t *inner);

/* Log-sum-exp of a slice of len >= 1 values x[0], x[stride], ... (f32/f64), split for
 * accuracy (src/ops/softmax.c): *max = the largest value m, returned rest = the sum of
 * exp(x - m) over every value but one maximum (both computed in the dtype, so the doubles
 * convert back exactly): log(sum(exp(x))) = m + log1p(rest), and log_softmax is
 * (x - m) - log1p(rest). NaN in, NaN out. */
double sg__softmax_rest(sg_dtype dtype, const void *x, int64_t len, int64_t stride, double *max);

/* ---- numpy broadcasting of up to SG__BCAST_MAX dense operands (src/ops/elementwise.c;
 * the binary ops and sg_where, src/ops/select.c): the output shape, padded on the left to
 * 4 dims (d), and each operand's element strides over that padded index (0 along the dims
 * it is stretched along). When no operand is stretched the output is one flat row
 * (d = {1, 1, 1, numel}, unit strides). */
#define SG__BCAST_MAX 3
typedef struct {
    int ndim;
    int64_t shape[SG_MAX_DIMS];
    int64_t d[4];
    int64_t st[SG__BCAST_MAX][4];
    int64_t numel;
} sg__bcast;
/* Fills bc from the shapes of in[0..n), n <= SG__BCAST_MAX; false (nothing recorded) when
 * they do not broadcast. */
bool sg__bcast_init(sg__bcast *bc, int n, sg_tensor *const *in);
/* True when t has the output's shape (no dim of t is stretched). */
bool sg__bcast_full(const sg__bcast *bc, const sg_tensor *t);
/* Offset of operand k's element at the start of padded output row r (a row = last dim). */
static inline int64_t sg__bcast_row_off(const sg__bcast *bc, int k, int64_t r)
{
    int64_t i2 = r % bc->d[2];
    r /= bc->d[2];
    int64_t i1 = r % bc->d[1];
    int64_t i0 = r / bc->d[1];
    return i0 * bc->st[k][0] + i1 * bc->st[k][1] + i2 * bc->st[k][2];
}

/* ---- sparse paths of generic ops (src/ops/sparse_ops.c), recorded on the tape like any op.
 * The generic entry points (sg_add, sg_scale, sg_matmul, sg_sum) call these when an
 * operand is COO. */
sg_tensor *sg__sparse_add(sg_tensor *a, sg_tensor *b); /* COO + COO -> COO (concat) */
sg_tensor *sg__sparse_scale(sg_tensor *a, double s);  /* COO * s -> COO */
sg_tensor *sg__sparse_transpose(sg_tensor *a, int dim0, int dim1); /* 2-D COO -> COO */
sg_tensor *sg__spmm(sg_tensor *a, sg_tensor *b);      /* COO (M,K) @ dense (K,N) */
sg_tensor *sg__sparse_sum(sg_tensor *a);              /* COO -> scalar */

/* ---- the kernels of dense products (src/ops/matmul.c) */
enum { SG__MM_AUTO, SG__MM_DIRECT, SG__MM_BLAS };
/* The kernel a product C (M,N) = op(A) (M,K) @ op(B) (K,N) takes: SG__MM_BLAS or
 * SG__MM_DIRECT (the hand-written kernel), a function of the shape alone. */
int sg__matmul_kernel(int64_t M, int64_t N, int64_t K);
/* For tests and benchmarks: every product takes `kernel` (SG__MM_DIRECT, or SG__MM_BLAS
 * where the build has one and the shape fits its ints) until SG__MM_AUTO is set back.
 * Process-wide; change it only while no product runs. */
void sg__matmul_force(int kernel);
/* The BLAS the build calls ("blis", ...), or NULL when it has none (SGRAD_BLAS=OFF). */
const char *sg__matmul_blas(void);

#endif
