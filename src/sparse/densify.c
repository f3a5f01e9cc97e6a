/* Dense forms of COO tensors: the library's densify and the public sg_tensor_copy, which
 * accepts a COO source (index-added into zeros). */
#include "sparse/sparse.h"

sg_tensor *sg__densify(const sg_tensor *t)
{
    sg_tensor *d = sg__tmp(t->ctx, t->dtype, t->ndim, t->shape, t->layout == SG_COO);
    if (!d) return NULL;
    if (t->layout == SG_COO) sg__index_add_unchecked(d, t, 1.0);
    else memcpy(d->data, t->data, (size_t)t->numel * sg_dtype_size(t->dtype));
    return d;
}

int sg_tensor_copy(sg_tensor *dst, const sg_tensor *src)
{
    if (!dst || !src) return dst ? sg__failc(dst->ctx, SG_ERR_NULL, "sg_tensor_copy: NULL source") : SG_ERR_NULL;
    int rc = sg__check_float_dense(dst, "sg_tensor_copy");
    if (rc) return rc;
    if (!sg__is_float(src->dtype)) return sg__failc(dst->ctx, SG_ERR_DTYPE, "sg_tensor_copy: float source needed");
    if (!sg__same_shape(dst, src)) {
        char a[64], b[64];
        return sg__failc(dst->ctx, SG_ERR_SHAPE, "sg_tensor_copy: shapes %s and %s differ",
                         sg__shape_str(dst, a, sizeof a), sg__shape_str(src, b, sizeof b));
    }
    if (src->layout == SG_DENSE && src->dtype == dst->dtype) {
        memmove(dst->data, src->data, (size_t)dst->numel * sg_dtype_size(dst->dtype));
        return SG_OK;
    }
    if (src->layout == SG_DENSE) {
        for (int64_t i = 0; i < dst->numel; i++) {
            double v = sg__dense_at(src, i);
            if (dst->dtype == SG_F32) ((float *)dst->data)[i] = (float)v;
            else ((double *)dst->data)[i] = v;
        }
        return SG_OK;
    }
    if (src->dtype != dst->dtype)
        return sg__failc(dst->ctx, SG_ERR_DTYPE, "sg_tensor_copy: COO source must have dst's dtype");
    memset(dst->data, 0, (size_t)dst->numel * sg_dtype_size(dst->dtype));
    sg__index_add_unchecked(dst, src, 1.0);
    return SG_OK;
}
