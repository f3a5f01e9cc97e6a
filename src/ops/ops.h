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

/* Views t as (outer, len, inner) around dimension dim (already normalised). */
void sg__op_split(const sg_tensor *t, int dim, int64_t *outer, int64_t *len, int64_t *inner);

/* Log-sum-exp of a slice of len >= 1 values x[0], x[stride], ... (f32/f64), split for
 * accuracy (src/ops/softmax.c): *max = the largest value m, returned rest = the sum of
 * exp(x - m) over every value but one maximum (both computed in the dtype, so the doubles
 * convert back exactly): log(sum(exp(x))) = m + log1p(rest), and log_softmax is
 * (x - m) - log1p(rest). NaN in, NaN out. */
double sg__softmax_rest(sg_dtype dtype, const void *x, int64_t len, int64_t stride, double *max);

/* ---- sparse paths of generic ops (src/ops/sparse_ops.c), recorded on the tape like any op.
 * The generic entry points (sg_add, sg_scale, sg_matmul, sg_sum) call these when an
 * operand is COO. */
sg_tensor *sg__sparse_add(sg_tensor *a, sg_tensor *b); /* COO + COO -> COO (concat) */
sg_tensor *sg__sparse_scale(sg_tensor *a, double s);  /* COO * s -> COO */
sg_tensor *sg__sparse_transpose(sg_tensor *a, int dim0, int dim1); /* 2-D COO -> COO */
sg_tensor *sg__spmm(sg_tensor *a, sg_tensor *b);      /* COO (M,K) @ dense (K,N) */
sg_tensor *sg__sparse_sum(sg_tensor *a);              /* COO -> scalar */

#endif
