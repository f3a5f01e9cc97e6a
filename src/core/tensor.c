/* Tensors: construction (persistent and tape), accessors, small utilities.
 * Invariants: see core/core.h. Persistent tensors are linked in ctx->persistent and own
 * their data or borrow the caller's (sg_tensor_wrap); views never are persistent; a
 * persistent COO tensor owns its indices and values tensors, which are not linked
 * themselves. */
#include "core/core.h"

#include <math.h>
#include <stdio.h>

size_t sg_dtype_size(sg_dtype dtype)
{
    switch (dtype) {
    case SG_F32: return 4;
    case SG_F64: return 8;
    case SG_I32: return 4;
    case SG_I64: return 8;
    case SG_DTYPE_INVALID: break;
    }
    return 0;
}

const char *sg__dtype_name(sg_dtype d)
{
    switch (d) {
    case SG_F32: return "f32";
    case SG_F64: return "f64";
    case SG_I32: return "i32";
    case SG_I64: return "i64";
    case SG_DTYPE_INVALID: break;
    }
    return "?";
}

int64_t sg__prod(const int64_t *shape, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= shape[i];
    return p;
}

int64_t sg__numel(int ndim, const int64_t *shape) { return sg__prod(shape, 0, ndim); }

bool sg__same_shape(const sg_tensor *a, const sg_tensor *b)
{
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

const char *sg__shape_str(const sg_tensor *t, char *buf, size_t n)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "(");
    for (int i = 0; i < t->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ",%lld" : "%lld", (long long)t->shape[i]);
    if (k < n) snprintf(buf + k, n - k, ")");
    return buf;
}

/* Checks dtype, ndim and dims; the element count must fit in memory arithmetic. */
static int check_shape(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape)
{
    if (dtype != SG_F32 && dtype != SG_F64 && dtype != SG_I32 && dtype != SG_I64)
        return sg__failc(ctx, SG_ERR_DTYPE, "unknown dtype %d", (int)dtype);
    if (ndim < 0 || ndim > SG_MAX_DIMS)
        return sg__failc(ctx, SG_ERR_SHAPE, "ndim %d outside 0..%d", ndim, SG_MAX_DIMS);
    if (ndim > 0 && !shape) return sg__failc(ctx, SG_ERR_NULL, "NULL shape");
    /* The product of the non-zero dims is bounded too, so that products over any subset
     * of dims (row sizes of an empty tensor, say) cannot overflow. */
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return sg__failc(ctx, SG_ERR_SHAPE, "dimension %d is negative (%lld)", i, (long long)shape[i]);
        if (shape[i] == 0) continue;
        if (n > (INT64_MAX / 16) / shape[i]) return sg__failc(ctx, SG_ERR_SHAPE, "tensor too large");
        n *= shape[i];
    }
    return SG_OK;
}

static void init_header(sg_tensor *t, sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape)
{
    memset(t, 0, sizeof *t);
    t->ctx = ctx;
    t->dtype = dtype;
    t->layout = SG_DENSE;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->numel = sg__numel(ndim, shape);
}

static void link_persistent(sg_tensor *t)
{
    sg_ctx *ctx = t->ctx;
    t->persistent = true;
    t->next_persistent = ctx->persistent;
    if (ctx->persistent) ctx->persistent->prev_persistent = t;
    ctx->persistent = t;
}

/* A persistent dense tensor, unlinked, with zeroed data. */
static sg_tensor *persistent_dense(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape)
{
    if (check_shape(ctx, dtype, ndim, shape)) return NULL;
    sg_tensor *t = sg__malloc(ctx, sizeof *t);
    if (!t) return NULL;
    init_header(t, ctx, dtype, ndim, shape);
    t->data = sg__calloc(ctx, (size_t)t->numel ? (size_t)t->numel : 1, sg_dtype_size(dtype));
    if (!t->data) {
        sg__free(ctx, t);
        return NULL;
    }
    t->persistent = true;
    t->owns_data = true;
    return t;
}

sg_tensor *sg_tensor_new(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape)
{
    if (!ctx) return NULL;
    sg_tensor *t = persistent_dense(ctx, dtype, ndim, shape);
    if (t) link_persistent(t);
    return t;
}

sg_tensor *sg_tensor_from_data(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape,
                               const void *data)
{
    if (!ctx) return NULL;
    if (!data) return sg__fail(ctx, SG_ERR_NULL, "sg_tensor_from_data: NULL data");
    sg_tensor *t = sg_tensor_new(ctx, dtype, ndim, shape);
    if (t) memcpy(t->data, data, (size_t)t->numel * sg_dtype_size(dtype));
    return t;
}

sg_tensor *sg_tensor_wrap(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape, void *data)
{
    if (!ctx) return NULL;
    if (!data) return sg__fail(ctx, SG_ERR_NULL, "sg_tensor_wrap: NULL data");
    if (check_shape(ctx, dtype, ndim, shape)) return NULL;
    size_t esize = sg_dtype_size(dtype);
    if ((uintptr_t)data % esize)
        return sg__fail(ctx, SG_ERR_ARG, "sg_tensor_wrap: data %p is not aligned to %zu bytes",
                        data, esize);
    sg_tensor *t = sg__malloc(ctx, sizeof *t);
    if (!t) return NULL;
    init_header(t, ctx, dtype, ndim, shape);
    t->data = data;
    t->borrows_data = true;
    link_persistent(t);
    return t;
}

sg_tensor *sg__coo_new_persistent(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape,
                                  int sparse_dim, int64_t nnz)
{
    if (check_shape(ctx, dtype, ndim, shape)) return NULL;
    if (!sg__is_float(dtype)) return sg__fail(ctx, SG_ERR_DTYPE, "COO values must be f32 or f64");
    if (sparse_dim < 1 || sparse_dim > ndim)
        return sg__fail(ctx, SG_ERR_ARG, "sparse_dim %d outside 1..%d", sparse_dim, ndim);
    if (nnz < 0) return sg__fail(ctx, SG_ERR_ARG, "negative nnz %lld", (long long)nnz);
    int64_t ishape[2] = {sparse_dim, nnz};
    int64_t vshape[SG_MAX_DIMS];
    vshape[0] = nnz;
    for (int i = sparse_dim; i < ndim; i++) vshape[1 + i - sparse_dim] = shape[i];
    sg_tensor *t = sg__malloc(ctx, sizeof *t);
    if (!t) return NULL;
    init_header(t, ctx, dtype, ndim, shape);
    t->layout = SG_COO;
    t->sparse_dim = sparse_dim;
    t->dense_dim = ndim - sparse_dim;
    t->nnz = nnz;
    t->indices = persistent_dense(ctx, SG_I64, 2, ishape);
    t->values = t->indices ? persistent_dense(ctx, dtype, 1 + ndim - sparse_dim, vshape) : NULL;
    if (!t->values) {
        if (t->indices) {
            sg__free(ctx, t->indices->data);
            sg__free(ctx, t->indices);
        }
        sg__free(ctx, t);
        return NULL;
    }
    link_persistent(t);
    t->owns_data = true;
    return t;
}

static void free_dense_persistent(sg_ctx *ctx, sg_tensor *t)
{
    if (t->owns_data) sg__free(ctx, t->data);
    sg__free(ctx, t);
}

void sg__tensor_destroy(sg_tensor *t)
{
    sg_ctx *ctx = t->ctx;
    if (t->prev_persistent) t->prev_persistent->next_persistent = t->next_persistent;
    else if (ctx->persistent == t) ctx->persistent = t->next_persistent;
    if (t->next_persistent) t->next_persistent->prev_persistent = t->prev_persistent;
    if (t->layout == SG_COO) {
        free_dense_persistent(ctx, t->indices);
        free_dense_persistent(ctx, t->values);
        sg__free(ctx, t);
        return;
    }
    free_dense_persistent(ctx, t);
}

sg_tensor *sg__tmp(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape, bool zero)
{
    if (check_shape(ctx, dtype, ndim, shape)) return NULL;
    int64_t n = sg__numel(ndim, shape);
    size_t bytes = (size_t)n * sg_dtype_size(dtype);
    size_t hdr = (sizeof(sg_tensor) + 63) & ~(size_t)63;
    unsigned char *p = sg__arena_alloc(ctx, hdr + bytes);
    if (!p) return NULL;
    sg_tensor *t = (sg_tensor *)p;
    init_header(t, ctx, dtype, ndim, shape);
    t->data = p + hdr;
    if (zero) memset(t->data, 0, bytes);
    return t;
}

sg_tensor *sg__tmp_like(const sg_tensor *t, bool zero)
{
    return sg__tmp(t->ctx, t->dtype, t->ndim, t->shape, zero);
}

sg_tensor *sg__tmp_uniform(const sg_tensor *t, double v)
{
    sg_tensor *u = sg__tmp(t->ctx, t->dtype, 0, t->shape, false); /* one element */
    if (!u) return NULL;
    u->ndim = t->ndim; /* then t's shape over it */
    for (int i = 0; i < t->ndim; i++) u->shape[i] = t->shape[i];
    u->numel = t->numel;
    u->uniform = true;
    SG__DISPATCH_FLOAT(t->dtype, T, { *(T *)u->data = (T)v; });
    return u;
}

typedef struct {
    const sg_tensor *u;
    void *dst;
} expand_job;

static void expand_range(void *ud, int64_t lo, int64_t hi)
{
    const expand_job *J = ud;
    SG__DISPATCH_FLOAT(J->u->dtype, T, {
        T *d = J->dst;
        const T v = *(const T *)J->u->data;
        for (int64_t i = lo; i < hi; i++) d[i] = v;
    });
}

sg_tensor *sg__expand_uniform(const sg_tensor *u)
{
    sg_tensor *g = sg__tmp_like(u, false);
    if (!g) return NULL;
    expand_job J = {u, g->data};
    sg__parallel_for(u->ctx, u->numel, SG__GRAIN, expand_range, &J);
    return g;
}

sg_tensor *sg_tensor_new_tmp(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape)
{
    if (!ctx) return NULL;
    return sg__tmp(ctx, dtype, ndim, shape, true);
}

sg_tensor *sg__view(sg_ctx *ctx, sg_dtype dtype, int ndim, const int64_t *shape, void *data)
{
    if (check_shape(ctx, dtype, ndim, shape)) return NULL;
    sg_tensor *t = sg__arena_alloc(ctx, sizeof *t);
    if (!t) return NULL;
    init_header(t, ctx, dtype, ndim, shape);
    t->data = data;
    return t;
}

sg_tensor *sg__coo_wrap(sg_ctx *ctx, int ndim, const int64_t *shape, int sparse_dim,
                        sg_tensor *indices, sg_tensor *values, bool coalesced)
{
    sg_tensor *t = sg__arena_alloc(ctx, sizeof *t);
    if (!t) return NULL;
    init_header(t, ctx, values->dtype, ndim, shape);
    t->layout = SG_COO;
    t->sparse_dim = sparse_dim;
    t->dense_dim = ndim - sparse_dim;
    t->nnz = values->ndim ? values->shape[0] : 0;
    t->indices = indices;
    t->values = values;
    t->coalesced = coalesced;
    return t;
}

sg_tensor *sg_tensor_requires_grad(sg_tensor *t, int requires_grad)
{
    if (!t) return NULL;
    if (!sg__is_float(t->dtype))
        return sg__fail(t->ctx, SG_ERR_DTYPE, "only float tensors can require grad");
    if (t->node) return sg__fail(t->ctx, SG_ERR_ARG, "requires_grad is set on leaves only");
    t->requires_grad = requires_grad != 0;
    return t;
}

int sg_tensor_get_requires_grad(const sg_tensor *t) { return t ? t->requires_grad : 0; }
sg_ctx *sg_tensor_ctx(const sg_tensor *t) { return t ? t->ctx : NULL; }
sg_dtype sg_tensor_dtype(const sg_tensor *t) { return t ? t->dtype : SG_DTYPE_INVALID; }
sg_layout sg_tensor_layout(const sg_tensor *t) { return t ? t->layout : SG_LAYOUT_INVALID; }
int sg_tensor_ndim(const sg_tensor *t) { return t ? t->ndim : -1; }
const int64_t *sg_tensor_shape(const sg_tensor *t) { return t ? t->shape : NULL; }
int64_t sg_tensor_numel(const sg_tensor *t) { return t ? t->numel : -1; }

int64_t sg_tensor_dim(const sg_tensor *t, int i)
{
    if (!t) return -1;
    if (i < 0) i += t->ndim;
    if (i < 0 || i >= t->ndim) return -1;
    return t->shape[i];
}

void *sg_tensor_data(sg_tensor *t) { return t && t->layout == SG_DENSE ? t->data : NULL; }
float *sg_tensor_f32(sg_tensor *t) { return t && t->layout == SG_DENSE && t->dtype == SG_F32 ? t->data : NULL; }
double *sg_tensor_f64(sg_tensor *t) { return t && t->layout == SG_DENSE && t->dtype == SG_F64 ? t->data : NULL; }

double sg__dense_at(const sg_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case SG_F32: return ((const float *)t->data)[i];
    case SG_F64: return ((const double *)t->data)[i];
    case SG_I32: return ((const int32_t *)t->data)[i];
    case SG_I64: return (double)((const int64_t *)t->data)[i];
    case SG_DTYPE_INVALID: break;
    }
    return 0;
}

double sg_tensor_get(const sg_tensor *t, int64_t i)
{
    if (!t || i < 0 || i >= t->numel) return NAN;
    if (t->layout == SG_DENSE) return sg__dense_at(t, i);
    int64_t dsize = sg__prod(t->shape, t->sparse_dim, t->ndim);
    int64_t row = i / dsize, off = i % dsize;
    const int64_t *idx = t->indices->data;
    double s = 0;
    for (int64_t e = 0; e < t->nnz; e++) {
        int64_t r = 0;
        for (int d = 0; d < t->sparse_dim; d++) r = r * t->shape[d] + idx[d * t->nnz + e];
        if (r == row) s += sg__dense_at(t->values, e * dsize + off);
    }
    return s;
}

int sg__check_float_dense(const sg_tensor *t, const char *fn)
{
    if (!t) return SG_ERR_NULL;
    if (t->layout != SG_DENSE) return sg__failc(t->ctx, SG_ERR_LAYOUT, "%s: dense tensor needed", fn);
    if (!sg__is_float(t->dtype)) return sg__failc(t->ctx, SG_ERR_DTYPE, "%s: float tensor needed", fn);
    return SG_OK;
}

int sg_tensor_fill(sg_tensor *t, double value)
{
    int rc = sg__check_float_dense(t, "sg_tensor_fill");
    if (rc) return rc;
    SG__DISPATCH_FLOAT(t->dtype, T, {
        T *d = t->data;
        for (int64_t i = 0; i < t->numel; i++) d[i] = (T)value;
    });
    return SG_OK;
}

int sg_tensor_fill_uniform(sg_tensor *t, double lo, double hi)
{
    int rc = sg__check_float_dense(t, "sg_tensor_fill_uniform");
    if (rc) return rc;
    if (!(lo <= hi) || !isfinite(lo) || !isfinite(hi))
        return sg__failc(t->ctx, SG_ERR_VALUE, "sg_tensor_fill_uniform: bad range [%g, %g)", lo, hi);
    SG__DISPATCH_FLOAT(t->dtype, T, {
        T *d = t->data;
        for (int64_t i = 0; i < t->numel; i++) d[i] = (T)(lo + (hi - lo) * sg_rand_uniform(t->ctx));
    });
    return SG_OK;
}

