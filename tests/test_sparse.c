/* Sparse kernels: COO construction and validation, concatenation, index-add (against a
 * naive loop, bitwise across thread counts, errors that change nothing) and coalesce
 * (against an independent qsort-based implementation on duplicate-heavy random data). */
#include "sparse/sparse.h"
#include "testutil.h"

/* ---- small deterministic generator, independent of the library's */

/* Dense meaning of a COO description by the plainest loop (f64). */
static void naive_dense(int ndim, const int64_t *shape, int sd, int64_t nnz, const int64_t *idx,
                        const double *val, double *out)
{
    int64_t numel = 1, D = 1;
    for (int d = 0; d < ndim; d++) numel *= shape[d];
    for (int d = sd; d < ndim; d++) D *= shape[d];
    for (int64_t i = 0; i < numel; i++) out[i] = 0;
    for (int64_t e = 0; e < nnz; e++) {
        int64_t r = 0;
        for (int d = 0; d < sd; d++) r = r * shape[d] + idx[d * nnz + e];
        for (int64_t j = 0; j < D; j++) out[r * D + j] += val[e * D + j];
    }
}

/* A random COO f64 tensor of `shape` with nnz entries whose rows are drawn from `range`
 * distinct values (small range: many duplicates). Caller frees idx/val. */
static sg_tensor *random_coo(sg_ctx *ctx, int ndim, const int64_t *shape, int sd, int64_t nnz,
                             int64_t range, int64_t **idx_out, double **val_out)
{
    int64_t rows = 1, D = 1;
    for (int d = 0; d < sd; d++) rows *= shape[d];
    for (int d = sd; d < ndim; d++) D *= shape[d];
    if (range > rows) range = rows;
    int64_t *idx = malloc((size_t)(sd * nnz + 1) * sizeof *idx);
    double *val = malloc((size_t)(nnz * D + 1) * sizeof *val);
    for (int64_t e = 0; e < nnz; e++) {
        int64_t r = (int64_t)(tu_rand() % (uint64_t)range) * (rows / range);
        for (int d = sd - 1; d >= 0; d--) {
            idx[d * nnz + e] = r % shape[d];
            r /= shape[d];
        }
    }
    for (int64_t i = 0; i < nnz * D; i++) val[i] = tu_rand_unit();
    sg_tensor *t = sg_coo_new(ctx, SG_F64, ndim, shape, sd, nnz, idx, val);
    *idx_out = idx;
    *val_out = val;
    return t;
}

TEST(coo_new_copies_and_reports_parts)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t shape[3] = {4, 5, 2};
    int64_t idx[2 * 3] = {0, 3, 3, /* dim 0 */ 1, 4, 4 /* dim 1 */};
    double val[3 * 2] = {1, 2, 3, 4, 5, 6};
    sg_tensor *t = sg_coo_new(ctx, SG_F64, 3, shape, 2, 3, idx, val);
    CHECK(t != NULL);
    CHECK(sg_tensor_layout(t) == SG_COO);
    CHECK(sg_coo_sparse_dim(t) == 2 && sg_coo_dense_dim(t) == 1 && sg_coo_nnz(t) == 3);
    CHECK(!sg_coo_is_coalesced(t)); /* (3,4) appears twice */
    CHECK(sg_tensor_numel(t) == 40);
    idx[0] = 2; /* copies: changing the caller's arrays changes nothing */
    val[0] = 100;
    CHECK(((int64_t *)sg_tensor_data(sg_coo_indices(t)))[0] == 0);
    CHECK(sg_tensor_get(t, (0 * 5 + 1) * 2 + 0) == 1.0);
    CHECK(sg_tensor_get(t, (3 * 5 + 4) * 2 + 1) == 4.0 + 6.0); /* duplicates sum */
    CHECK(sg_tensor_dim(sg_coo_values(t), 0) == 3 && sg_tensor_dim(sg_coo_values(t), 1) == 2);
    CHECK(sg_tensor_data(t) == NULL);

    int64_t sidx[2] = {1, 3};
    double sval[2] = {1, 2};
    sg_tensor *s = sg_coo_new(ctx, SG_F64, 1, (int64_t[]){4}, 1, 2, sidx, sval);
    CHECK(sg_coo_is_coalesced(s)); /* established by the constructor's check */
    sg_tensor *e = sg_coo_new(ctx, SG_F32, 2, (int64_t[]){0, 3}, 1, 0, NULL, NULL);
    CHECK(e != NULL && sg_coo_nnz(e) == 0 && sg_tensor_numel(e) == 0);
    sg_ctx_free(ctx);
}

TEST(coo_new_validates)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t shape[2] = {3, 4};
    double val[2] = {1, 2};
    int64_t bad_hi[4] = {0, 3, 1, 1}, bad_neg[4] = {0, 1, -1, 2}, ok[4] = {0, 2, 1, 3};
    CHECK(sg_coo_new(ctx, SG_F64, 2, shape, 2, 2, bad_hi, val) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_INDEX);
    CHECK(sg_coo_new(ctx, SG_F64, 2, shape, 2, 2, bad_neg, val) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_INDEX);
    CHECK(sg_coo_new(ctx, SG_I64, 2, shape, 2, 2, ok, val) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_DTYPE);
    CHECK(sg_coo_new(ctx, SG_F64, 2, shape, 3, 2, ok, val) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_SHAPE);
    CHECK(sg_coo_new(ctx, SG_F64, 2, shape, 0, 2, ok, val) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_SHAPE);
    CHECK(sg_coo_new(ctx, SG_F64, 2, (int64_t[]){3, -4}, 1, 2, ok, val) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_SHAPE);
    CHECK(sg_coo_new(ctx, SG_F64, 2, shape, 1, -1, ok, val) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_SHAPE);
    CHECK(sg_coo_new(ctx, SG_F64, 2, shape, 1, 2, NULL, val) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_NULL);
    CHECK(sg_ctx_mem_stats(ctx).bytes_in_use == 0); /* nothing allocated on error */
    CHECK(sg_coo_new(NULL, SG_F64, 2, shape, 2, 2, ok, val) == NULL);
    CHECK(sg_coo_nnz(NULL) == -1 && sg_coo_indices(NULL) == NULL && sg_coalesce(NULL) == NULL);
    sg_ctx_free(ctx);
}

TEST(concat_keeps_every_entry_and_meets_at_the_larger_sparse_dim)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t shape[2] = {5, 3};
    int64_t *ia, *ib;
    double *va, *vb;
    sg_tensor *a = random_coo(ctx, 2, shape, 1, 7, 3, &ia, &va);  /* row-sparse */
    sg_tensor *b = random_coo(ctx, 2, shape, 2, 9, 15, &ib, &vb); /* element-sparse */
    sg_tensor *c = sg__coo_concat(a, b);
    CHECK(c != NULL && sg_coo_sparse_dim(c) == 2 && sg_coo_nnz(c) == 7 * 3 + 9);
    double da[15], db[15];
    naive_dense(2, shape, 1, 7, ia, va, da);
    naive_dense(2, shape, 2, 9, ib, vb, db);
    for (int64_t i = 0; i < 15; i++) CHECK_NEAR(sg_tensor_get(c, i), da[i] + db[i], 1e-12);
    sg_tensor *e = sg__coo_concat(a, a);
    CHECK(sg_coo_nnz(e) == 14 && !sg_coo_is_coalesced(e));
    free(ia), free(ib), free(va), free(vb);
    sg_ctx_free(ctx);
}

/* ---- index-add */

static void index_add_case(int ndim, const int64_t *shape, int sd, int64_t nnz, int64_t range, double alpha)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t *idx;
    double *val;
    sg_tensor *src = random_coo(ctx, ndim, shape, sd, nnz, range, &idx, &val);
    sg_tensor *dst = sg_tensor_new(ctx, SG_F64, ndim, shape);
    sg_tensor_fill_uniform(dst, -1, 1);
    int64_t n = sg_tensor_numel(dst);
    double *want = malloc((size_t)n * sizeof *want), *add = malloc((size_t)n * sizeof *add);
    naive_dense(ndim, shape, sd, nnz, idx, val, add);
    for (int64_t i = 0; i < n; i++) want[i] = sg_tensor_f64(dst)[i] + alpha * add[i];
    CHECK_STATUS(ctx, sg_index_add_scaled_(dst, src, alpha), SG_OK);
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(sg_tensor_f64(dst)[i] - want[i]);
        if (e > worst) worst = e;
    }
    CHECK(worst < 1e-9);
    free(want), free(add), free(idx), free(val);
    sg_ctx_free(ctx);
}

TEST(index_add_matches_naive_loop)
{
    index_add_case(2, (int64_t[]){50, 8}, 1, 400, 20, 1.0);   /* duplicate-heavy rows */
    index_add_case(2, (int64_t[]){50, 8}, 1, 400, 50, -0.5);  /* scaled */
    index_add_case(3, (int64_t[]){6, 7, 3}, 2, 300, 42, 2.0); /* flattened 2-D sparse index */
    index_add_case(2, (int64_t[]){9, 11}, 2, 200, 99, 1.0);   /* dense_dim 0 */
    index_add_case(1, (int64_t[]){17}, 1, 60, 17, 1.0);
    index_add_case(2, (int64_t[]){50, 8}, 1, 0, 1, 1.0); /* empty */
}

TEST(index_add_is_bitwise_equal_for_1_and_2_threads)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t V = 3000, D = 24, nnz = 20000;
    int64_t *idx = malloc((size_t)nnz * sizeof *idx);
    float *val = malloc((size_t)(nnz * D) * sizeof *val);
    for (int64_t e = 0; e < nnz; e++) idx[e] = (int64_t)(tu_rand() % 200) * 15; /* many duplicates */
    for (int64_t i = 0; i < nnz * D; i++) val[i] = (float)tu_rand_unit() * 1000.0f; /* order-sensitive sums */
    sg_tensor *src = sg_coo_new(ctx, SG_F32, 2, (int64_t[]){V, D}, 1, nnz, idx, val);
    sg_tensor *d1 = sg_tensor_new(ctx, SG_F32, 2, (int64_t[]){V, D});
    sg_tensor *d2 = sg_tensor_new(ctx, SG_F32, 2, (int64_t[]){V, D});
    sg_tensor_fill(d1, 0.1);
    sg_tensor_fill(d2, 0.1);
    sg_ctx_set_threads(ctx, 1);
    CHECK_STATUS(ctx, sg_index_add_(d1, src), SG_OK);
    sg_ctx_set_threads(ctx, 2);
    CHECK_STATUS(ctx, sg_index_add_(d2, src), SG_OK);
    CHECK(memcmp(sg_tensor_data(d1), sg_tensor_data(d2), (size_t)(V * D) * sizeof(float)) == 0);
    /* and the sums are in entry order: compare with a sequential float loop */
    float *want = malloc((size_t)(V * D) * sizeof *want);
    for (int64_t i = 0; i < V * D; i++) want[i] = 0.1f;
    for (int64_t e = 0; e < nnz; e++)
        for (int64_t j = 0; j < D; j++) want[idx[e] * D + j] += val[e * D + j];
    CHECK(memcmp(sg_tensor_data(d2), want, (size_t)(V * D) * sizeof(float)) == 0);
    free(idx), free(val), free(want);
    sg_ctx_free(ctx);
}

TEST(index_add_skewed_rows_any_thread_count)
{
    /* Zipf-like rows (most entries hit a few low rows), a 2-D sparse index, and thread
     * counts whose cut points fall in different places: all bitwise equal to one thread. */
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t shape[3] = {300, 40, 8}, nnz = 30000;
    int64_t *idx = malloc((size_t)(2 * nnz) * sizeof *idx);
    float *val = malloc((size_t)(nnz * 8) * sizeof *val);
    for (int64_t e = 0; e < nnz; e++) {
        int64_t r = (int64_t)(tu_rand() % (1 + tu_rand() % 12000));
        idx[e] = r / 40, idx[nnz + e] = r % 40;
    }
    for (int64_t i = 0; i < nnz * 8; i++) val[i] = (float)tu_rand_unit() * 100.0f;
    sg_tensor *src = sg_coo_new(ctx, SG_F32, 3, shape, 2, nnz, idx, val);
    sg_tensor *ref = sg_tensor_new(ctx, SG_F32, 3, shape);
    sg_ctx_set_threads(ctx, 1);
    CHECK_STATUS(ctx, sg_index_add_scaled_(ref, src, 0.3), SG_OK);
    int threads[4] = {2, 3, 7, 64};
    for (int k = 0; k < 4; k++) {
        sg_tensor *d = sg_tensor_new(ctx, SG_F32, 3, shape);
        sg_ctx_set_threads(ctx, threads[k]);
        CHECK_STATUS(ctx, sg_index_add_scaled_(d, src, 0.3), SG_OK);
        CHECK(memcmp(sg_tensor_data(d), sg_tensor_data(ref), (size_t)(300 * 40 * 8) * sizeof(float)) == 0);
        sg_tensor_free(d);
    }
    /* and the reference is right: a plain loop in entry order */
    float *want = calloc((size_t)(300 * 40 * 8), sizeof *want);
    for (int64_t e = 0; e < nnz; e++)
        for (int j = 0; j < 8; j++) want[(idx[e] * 40 + idx[nnz + e]) * 8 + j] += 0.3f * val[e * 8 + j];
    CHECK(memcmp(sg_tensor_data(ref), want, (size_t)(300 * 40 * 8) * sizeof(float)) == 0);
    free(idx), free(val), free(want);
    sg_ctx_free(ctx);
}

TEST(index_add_errors_change_nothing)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t shape[2] = {4, 3};
    sg_tensor *dst = sg_tensor_new(ctx, SG_F64, 2, shape);
    sg_tensor_fill(dst, 7);
    /* A COO assembled by hand from parts, with one index out of range after valid ones. */
    int64_t ishape[2] = {1, 3};
    sg_tensor *ind = sg_tensor_new_tmp(ctx, SG_I64, 2, ishape);
    int64_t *ii = sg_tensor_data(ind);
    ii[0] = 1, ii[1] = 2, ii[2] = 4;
    sg_tensor *val = sg_tensor_new_tmp(ctx, SG_F64, 2, (int64_t[]){3, 3});
    sg_tensor_fill(val, 1);
    sg_tensor *bad = sg__coo_wrap(ctx, 2, shape, 1, ind, val, false);
    CHECK_STATUS(ctx, sg_index_add_(dst, bad), SG_ERR_INDEX);
    ii[2] = -1;
    CHECK_STATUS(ctx, sg_index_add_scaled_(dst, bad, 2.0), SG_ERR_INDEX);
    for (int64_t i = 0; i < 12; i++) CHECK(sg_tensor_f64(dst)[i] == 7);
    ii[2] = 3;
    sg_tensor *wrong_shape = sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){4, 4});
    CHECK_STATUS(ctx, sg_index_add_(wrong_shape, bad), SG_ERR_SHAPE);
    sg_tensor *wrong_dtype = sg_tensor_new(ctx, SG_F32, 2, shape);
    CHECK_STATUS(ctx, sg_index_add_(wrong_dtype, bad), SG_ERR_DTYPE);
    CHECK_STATUS(ctx, sg_index_add_(dst, dst), SG_ERR_LAYOUT);
    CHECK_STATUS(ctx, sg_index_add_scaled_(dst, bad, NAN), SG_ERR_VALUE);
    CHECK_STATUS(ctx, sg_index_add_(dst, NULL), SG_ERR_NULL);
    for (int64_t i = 0; i < 12; i++) CHECK(sg_tensor_f64(dst)[i] == 7);
    CHECK_STATUS(ctx, sg_index_add_(dst, bad), SG_OK);
    CHECK(sg_tensor_f64(dst)[3 * 3] == 8);
    sg_ctx_free(ctx);
}

/* ---- coalesce against an independent implementation: qsort by (row, position) */

typedef struct {
    int64_t row, pos;
} rowpos;
static int cmp_rowpos(const void *a, const void *b)
{
    const rowpos *x = a, *y = b;
    if (x->row != y->row) return x->row < y->row ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static void coalesce_case(int ndim, const int64_t *shape, int sd, int64_t nnz, int64_t range, int threads)
{
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = threads});
    int64_t *idx;
    double *val;
    sg_tensor *t = random_coo(ctx, ndim, shape, sd, nnz, range, &idx, &val);
    int64_t D = 1;
    for (int d = sd; d < ndim; d++) D *= shape[d];
    rowpos *rp = malloc((size_t)(nnz + 1) * sizeof *rp);
    for (int64_t e = 0; e < nnz; e++) {
        int64_t r = 0;
        for (int d = 0; d < sd; d++) r = r * shape[d] + idx[d * nnz + e];
        rp[e] = (rowpos){r, e};
    }
    qsort(rp, (size_t)nnz, sizeof *rp, cmp_rowpos);
    sg_tensor *c = sg_coalesce(t);
    CHECK(c != NULL && sg_coo_is_coalesced(c));
    CHECK((c == t) == (nnz <= 1)); /* only a trivially sorted input is returned as is */
    const int64_t *ci = sg_tensor_data(sg_coo_indices(c));
    const double *cv = sg_tensor_data(sg_coo_values(c));
    int64_t u = -1, U = sg_coo_nnz(c);
    double *acc = malloc((size_t)D * sizeof *acc);
    int mism_idx = 0, mism_val = 0;
    for (int64_t k = 0; k <= nnz; k++) {
        bool new_row = k == nnz || k == 0 || rp[k].row != rp[k - 1].row;
        if (new_row && u >= 0) { /* compare the finished row u */
            int64_t r = rp[k - 1].row, got = 0;
            for (int d = 0; d < sd; d++) got = got * shape[d] + ci[d * U + u];
            mism_idx += got != r;
            for (int64_t j = 0; j < D; j++) mism_val += memcmp(&acc[j], &cv[u * D + j], sizeof(double)) != 0;
        }
        if (k == nnz) break;
        if (new_row) {
            u++;
            for (int64_t j = 0; j < D; j++) acc[j] = val[rp[k].pos * D + j];
        } else {
            for (int64_t j = 0; j < D; j++) acc[j] += val[rp[k].pos * D + j];
        }
    }
    CHECK(u + 1 == U);
    CHECK(mism_idx == 0);
    CHECK(mism_val == 0); /* bitwise: duplicates summed in their original order */
    CHECK(sg_coalesce(c) == c); /* already coalesced: the tensor itself */
    free(acc), free(rp), free(idx), free(val);
    sg_ctx_free(ctx);
}

TEST(coalesce_matches_qsort_reference)
{
    coalesce_case(2, (int64_t[]){1000, 4}, 1, 5000, 300, 1);     /* ~17 duplicates a row */
    coalesce_case(2, (int64_t[]){1000, 4}, 1, 5000, 300, 2);
    coalesce_case(2, (int64_t[]){70000, 2}, 1, 60000, 70000, 2); /* three byte passes, parallel */
    coalesce_case(2, (int64_t[]){300000, 3}, 1, 200000, 300000, 3); /* more chunks than threads */
    coalesce_case(3, (int64_t[]){40, 50, 3}, 2, 3000, 2000, 1);  /* flattened rows */
    coalesce_case(2, (int64_t[]){300, 300}, 2, 4000, 500, 2);    /* dense_dim 0 */
    coalesce_case(2, (int64_t[]){(int64_t)1 << 20, (int64_t)1 << 20}, 2, 5000, 3000, 1);  /* rows >= 2^32: */
    coalesce_case(2, (int64_t[]){(int64_t)1 << 20, (int64_t)1 << 20}, 2, 40000, 9000, 2); /* wide pairs */
    coalesce_case(2, (int64_t[]){(int64_t)1 << 20, (int64_t)1 << 20}, 2, 100000, 90000, 3);
    coalesce_case(2, (int64_t[]){5, 4}, 1, 50, 1, 1);            /* one row: no byte pass */
    coalesce_case(2, (int64_t[]){5, 4}, 1, 0, 1, 1);             /* empty */
}

TEST(coalesce_large_rows_need_more_byte_passes)
{
    /* rows up to 2^40: five byte passes; rows that differ only in high bytes */
    sg_ctx *ctx = sg_ctx_new(NULL);
    int64_t shape[2] = {(int64_t)1 << 20, (int64_t)1 << 20};
    int64_t idx[2 * 4] = {5, 1, 5, 0, /* dim 0 */ 3, 7, 3, 9};
    double val[4] = {1, 2, 4, 8};
    sg_tensor *t = sg_coo_new(ctx, SG_F64, 2, shape, 2, 4, idx, val);
    sg_tensor *c = sg_coalesce(t);
    CHECK(sg_coo_nnz(c) == 3);
    const int64_t *ci = sg_tensor_data(sg_coo_indices(c));
    const double *cv = sg_tensor_data(sg_coo_values(c));
    CHECK(ci[0] == 0 && ci[1] == 1 && ci[2] == 5);
    CHECK(ci[3] == 9 && ci[4] == 7 && ci[5] == 3);
    CHECK(cv[0] == 8 && cv[1] == 2 && cv[2] == 5);
    sg_ctx_free(ctx);
}

TEST(coalesce_rejects_dense)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    sg_tensor *d = sg_tensor_new(ctx, SG_F32, 1, (int64_t[]){3});
    CHECK(sg_coalesce(d) == NULL);
    CHECK_STATUS(ctx, sg_ctx_status(ctx), SG_ERR_LAYOUT);
    sg_ctx_free(ctx);
}

TEST_MAIN()
