/* The dist layer: data-parallel gradient exchange over MPI (include/sgrad_dist.h).
 *
 * A client of the public API only (sgrad.h): it reads gradients with sg_tensor_grad and
 * puts the reduced ones back with sg_tensor_set_grad, so libsgrad_dist links libsgrad
 * like any program and sgrad itself never sees MPI.
 *
 * Invariants: every rank makes the same sequence of collective calls with the same
 * counts. Hence every decision that shapes a collective (the parameter count, errors,
 * the dense/sparse choice, buffer sizes) is taken from data all ranks have gathered, and
 * a failure local to one rank is first announced in a collective that every rank makes
 * anyway (the header allgather, the allocation agreement), never by leaving one out.
 * Values are only ever summed here, in rank order; MPI reduces nothing but the status
 * (MPI_MAX) and the bitmap of rows touched (MPI_BOR), where order cannot matter.
 * Every collective is the non-blocking form run by SG__DIST_RUN, against the
 * handle's deadline: Open MPI 4 without ULFM neither returns an error nor completes a
 * collective whose peer died, so the deadline is what turns a dead rank into an error.
 */
#include "dist/dist.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KIND_NONE, KIND_DENSE, KIND_ROWS }; /* a rank's gradient of one parameter */
enum { META_DTYPE, META_NDIM, META_SHAPE, META_KIND = META_SHAPE + SG_MAX_DIMS, META_NNZ, META_LEN };

/* Scratch buffers: persistent tensors of the context (so its memory accounting sees
 * them), grown on demand and kept between calls. The handle itself and its per-rank
 * arrays are malloc'ed (they are small and fixed). */
enum { BUF_LOCAL, BUF_META, BUF_PLAN, BUF_STAGE, BUF_RECV, BUF_IDX, BUF_VAL, BUF_BITS, BUF_COUNT };

struct sg_dist {
    sg_ctx *ctx;
    MPI_Comm comm;
    int rank, size;
    sg_dist_opts opts;
    double timeout; /* seconds a collective may wait (sg_dist_set_timeout) */
    int stalled;    /* a collective timed out and is still pending on comm */
    int64_t *header;      /* (size, 2): every rank's parameter count and local status */
    int *counts, *displs; /* (size) each: what each rank sends or holds in a collective */
    int *rcounts, *rdispls; /* (size) each: what this rank receives from each rank */
    sg_tensor *buf[BUF_COUNT];
    sg_dist_stats stats;
    sg_dist_param_stats *pstats;
    int64_t pstats_cap;
};
/* What the exchange does with parameter i, the same on every rank. */
typedef struct {
    sg_tensor *local;  /* this rank's gradient (coalesced if asked), or NULL */
    int kind;          /* KIND_* over all ranks: the largest */
    sg_dtype dtype;
    int64_t rows, row; /* leading dimension and elements per row */
    int64_t nnz_total;
    int as_sparse;     /* KIND_ROWS exchanged as (indices, values) */
    sg_tensor *dense_in, *dense_out; /* dense exchange: what this rank sends, the sum */
    int64_t bits_off;  /* KIND_ROWS exchanged dense: its bitmap of rows touched in BITS */
    int64_t idx_off, val_off; /* as_sparse: where its gathered entries start in IDX/VAL */
    sg_tensor *result; /* set in the last phase */
} plan_item;

/* A run of one dense item's elements inside the staging bucket. */
typedef struct {
    void *dst;
    int64_t off, count, item;
} segment;

/* failf and mpi_failed: the layer's error helpers (dist.h) with this handle's context. */
#define failf(d, ...) sg__dist_fail((d)->ctx, __VA_ARGS__)
#define mpi_failed(d, err, what) sg__dist_mpi_failed((d)->ctx, (d)->rank, (err), (what))

/* Starts a collective of sg_dist_reduce_grads (`start` fills request q) and completes it,
 * returning on failure. */
#define WAIT(d, q, what, start)                                            \
    do {                                                                   \
        int rc_ = SG__DIST_RUN(d, "sg_dist_reduce_grads", what, q, start); \
        if (rc_) return rc_;                                               \
    } while (0)

int sg__dist_fail(sg_ctx *ctx, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sg_ctx_set_error(ctx, status, msg);
}

int sg__dist_mpi_failed(sg_ctx *ctx, int rank, int err, const char *what)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", err);
    return sg__dist_fail(ctx, SG_ERR_IO, "sg_dist: %s failed on rank %d: %s", what, rank, s);
}

int sg__dist_wait(sg_dist *d, const char *fn, const char *what, int err, MPI_Request *req)
{
    if (err != MPI_SUCCESS) return mpi_failed(d, err, what);
    const double deadline = MPI_Wtime() + d->timeout;
    for (;;) {
        int done = 0;
        if ((err = MPI_Test(req, &done, MPI_STATUS_IGNORE)) != MPI_SUCCESS) return mpi_failed(d, err, what);
        if (done) return SG_OK;
        if (MPI_Wtime() > deadline) break;
    }
    d->stalled = 1;
    return failf(d, SG_ERR_IO, "%s: rank %d of %d: no answer from the other ranks within %g s in %s: a rank "
                 "has died or stopped (sg_dist_set_timeout, SGRAD_DIST_TIMEOUT)", fn, d->rank, d->size,
                 d->timeout, what);
}

int sg__dist_stalled(sg_dist *d, const char *fn)
{
    if (!d->stalled) return 0;
    failf(d, SG_ERR_IO, "%s: rank %d of %d: an earlier collective timed out waiting for another rank; this "
          "handle cannot exchange again (end the job)", fn, d->rank, d->size);
    return 1;
}

void *sg__dist_scratch(sg_ctx *ctx, sg_tensor **slot, size_t bytes)
{
    sg_tensor *t = *slot;
    size_t have = t ? (size_t)sg_tensor_numel(t) * 8 : 0;
    if (t && have >= bytes) return sg_tensor_data(t);
    size_t want = have + have / 2 > bytes ? have + have / 2 : bytes;
    int64_t words = (int64_t)((want + 7) / 8);
    if (words < 1) words = 1;
    sg_tensor *n = sg_tensor_new(ctx, SG_I64, 1, &words);
    if (!n) return NULL;
    sg_tensor_free(t);
    *slot = n;
    return sg_tensor_data(n);
}

static void *scratch(sg_dist *d, int slot, size_t bytes) { return sg__dist_scratch(d->ctx, &d->buf[slot], bytes); }

int sg__dist_agree(sg_dist *d, int mine, const char *fn, const char *what)
{
    int worst = 0;
    MPI_Request q;
    int rc = SG__DIST_RUN(d, fn, "MPI_Allreduce (status)", q,
                          MPI_Iallreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, d->comm, &q));
    if (rc) return rc;
    if (!worst) return SG_OK;
    if (mine) return mine;
    return failf(d, worst, "%s: another rank failed %s (%s)", fn, what, sg_status_string(worst));
}

MPI_Comm sg__dist_comm(const sg_dist *d) { return d->comm; }
sg_ctx *sg__dist_ctx(const sg_dist *d) { return d->ctx; }

static MPI_Datatype mpi_type(sg_dtype t) { return t == SG_F64 ? MPI_DOUBLE : MPI_FLOAT; }

sg_dist *sg_dist_new(sg_ctx *ctx, MPI_Comm comm, const sg_dist_opts *opts)
{
    if (!ctx) return NULL;
    sg_dist_opts o = SG_DIST_OPTS_DEFAULT;
    if (opts) o = *opts;
    if (o.bucket_bytes == 0) o.bucket_bytes = (size_t)25 << 20;
    if ((o.average != 0 && o.average != 1) || (o.coalesce_local != 0 && o.coalesce_local != 1) ||
        o.sparse_mode < SG_DIST_AUTO || o.sparse_mode > SG_DIST_FORCE_DENSE || o.bucket_bytes < 64) {
        sg_ctx_set_error(ctx, SG_ERR_ARG,
                         "sg_dist_new: average and coalesce_local must be 0 or 1, sparse_mode an "
                         "sg_dist_sparse_mode, bucket_bytes 0 or >= 64");
        return NULL;
    }
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        sg_ctx_set_error(ctx, SG_ERR_STATE, "sg_dist_new: MPI is not initialised (call MPI_Init first)");
        return NULL;
    }
    if (comm == MPI_COMM_NULL) {
        sg_ctx_set_error(ctx, SG_ERR_NULL, "sg_dist_new: MPI_COMM_NULL");
        return NULL;
    }
    double timeout = SG_DIST_TIMEOUT_DEFAULT;
    const char *env = getenv("SGRAD_DIST_TIMEOUT");
    int env_st = SG_OK;
    if (env) {
        char *end = NULL;
        timeout = strtod(env, &end);
        if (end == env || *end || !(timeout > 0)) {
            env_st = sg__dist_fail(ctx, SG_ERR_ARG, "sg_dist_new: SGRAD_DIST_TIMEOUT=%s is not a number of "
                                   "seconds > 0", env);
            timeout = SG_DIST_TIMEOUT_DEFAULT;
        }
    }
    sg_dist *d = calloc(1, sizeof *d);
    if (!d) {
        sg_ctx_set_error(ctx, SG_ERR_NOMEM, "sg_dist_new: out of memory");
        return NULL;
    }
    d->ctx = ctx;
    d->opts = o;
    d->timeout = timeout;
    d->comm = MPI_COMM_NULL;
    MPI_Comm_rank(comm, &d->rank);
    MPI_Comm_size(comm, &d->size);
    MPI_Request q;
    if (sg__dist_wait(d, "sg_dist_new", "MPI_Comm_dup", MPI_Comm_idup(comm, &d->comm, &q), &q)) {
        free(d); /* a pending duplication keeps its communicator: not freed */
        return NULL;
    }
    MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    if (sg__dist_agree(d, env_st, "sg_dist_new", "to read SGRAD_DIST_TIMEOUT")) {
        if (!d->stalled) MPI_Comm_free(&d->comm);
        free(d);
        return NULL;
    }
    d->header = malloc((size_t)d->size * 2 * sizeof *d->header);
    d->counts = malloc((size_t)d->size * 4 * sizeof *d->counts);
    if (!d->header || !d->counts) {
        sg_ctx_set_error(ctx, SG_ERR_NOMEM, "sg_dist_new: out of memory");
        sg_dist_free(d);
        return NULL;
    }
    d->displs = d->counts + d->size;
    d->rcounts = d->displs + d->size;
    d->rdispls = d->rcounts + d->size;
    return d;
}

int sg_dist_set_timeout(sg_dist *d, double seconds)
{
    if (!d) return SG_ERR_NULL;
    if (!(seconds > 0))
        return failf(d, SG_ERR_ARG, "sg_dist_set_timeout: %g s: the timeout must be > 0 (INFINITY: none)",
                     seconds);
    d->timeout = seconds;
    return SG_OK;
}

void sg_dist_free(sg_dist *d)
{
    if (!d) return;
    MPI_Comm_free(&d->comm);
    for (int i = 0; i < BUF_COUNT; i++) sg_tensor_free(d->buf[i]);
    free(d->header);
    free(d->counts);
    free(d->pstats);
    free(d);
}

int sg_dist_rank(const sg_dist *d) { return d ? d->rank : -1; }
int sg_dist_size(const sg_dist *d) { return d ? d->size : -1; }

static int64_t bitmap_bytes(int64_t rows) { return (rows + 7) / 8; }

static void shape_str(const int64_t *m, char *buf, size_t n)
{
    int64_t nd = m[META_NDIM];
    size_t at = (size_t)snprintf(buf, n, "(");
    for (int64_t k = 0; k < nd && k < SG_MAX_DIMS && at < n; k++)
        at += (size_t)snprintf(buf + at, n - at, k ? ",%lld" : "%lld", (long long)m[META_SHAPE + k]);
    if (at < n) snprintf(buf + at, n - at, ")");
}

/* This rank's checks of params[0..n) and its metadata record for each; the plan's local
 * gradients (coalesced when asked, a COO of another sparse_dim made dense). Allocates
 * every buffer whose size this rank knows alone. Errors recorded on ctx. */
static int local_prepare(sg_dist *d, sg_tensor *const *params, int64_t n, plan_item **plan_out,
                         int64_t **meta_out)
{
    if (n < 0) return failf(d, SG_ERR_ARG, "sg_dist_reduce_grads: n = %lld is negative", (long long)n);
    if (n > 0 && !params) return failf(d, SG_ERR_NULL, "sg_dist_reduce_grads: NULL params");
    if (n > INT_MAX / META_LEN / d->size)
        return failf(d, SG_ERR_ARG, "sg_dist_reduce_grads: %lld parameters are too many", (long long)n);
    int64_t *meta = scratch(d, BUF_LOCAL, (size_t)(n ? n : 1) * META_LEN * sizeof *meta);
    int64_t *all = meta ? scratch(d, BUF_META, (size_t)(n ? n : 1) * META_LEN * (size_t)d->size * sizeof *all) : NULL;
    plan_item *plan = all ? scratch(d, BUF_PLAN, (size_t)(n ? n : 1) * sizeof *plan + (size_t)(n + 1) * sizeof(segment)) : NULL;
    if (!plan) return sg_ctx_status(d->ctx);
    if (d->pstats_cap < n) {
        sg_dist_param_stats *ps = realloc(d->pstats, (size_t)n * sizeof *ps);
        if (!ps) return failf(d, SG_ERR_NOMEM, "sg_dist_reduce_grads: out of memory");
        d->pstats = ps;
        d->pstats_cap = n;
    }
    for (int64_t i = 0; i < n; i++) {
        sg_tensor *p = params[i];
        if (!p) return failf(d, SG_ERR_NULL, "sg_dist_reduce_grads: parameter %lld is NULL", (long long)i);
        if (sg_tensor_ctx(p) != d->ctx)
            return failf(d, SG_ERR_ARG, "sg_dist_reduce_grads: parameter %lld belongs to another context",
                         (long long)i);
        sg_dtype dt = sg_tensor_dtype(p);
        if (sg_tensor_layout(p) != SG_DENSE || (dt != SG_F32 && dt != SG_F64))
            return failf(d, SG_ERR_ARG, "sg_dist_reduce_grads: parameter %lld is not a dense f32/f64 tensor",
                         (long long)i);
        if (!sg_tensor_get_requires_grad(p))
            return failf(d, SG_ERR_STATE, "sg_dist_reduce_grads: parameter %lld does not require grad",
                         (long long)i);
        sg_tensor *g = sg_tensor_grad(p);
        int kind = KIND_NONE;
        if (g && sg_tensor_layout(g) == SG_COO && sg_coo_sparse_dim(g) == 1 && sg_tensor_ndim(p) >= 1) {
            kind = KIND_ROWS;
            if (d->opts.coalesce_local) g = sg_coalesce(g);
        } else if (g) {
            kind = KIND_DENSE;
            if (sg_tensor_layout(g) == SG_COO) g = sg_to_dense(g);
        }
        if (kind != KIND_NONE && !g) return sg_ctx_status(d->ctx);
        int64_t *m = meta + i * META_LEN;
        memset(m, 0, META_LEN * sizeof *m);
        m[META_DTYPE] = dt;
        m[META_NDIM] = sg_tensor_ndim(p);
        for (int k = 0; k < sg_tensor_ndim(p); k++) m[META_SHAPE + k] = sg_tensor_dim(p, k);
        m[META_KIND] = kind;
        m[META_NNZ] = kind == KIND_ROWS ? sg_coo_nnz(g) : 0;
        plan[i] = (plan_item){.local = g};
    }
    *plan_out = plan;
    *meta_out = meta;
    return SG_OK;
}

/* Every rank compares the gathered records, so every rank reaches the same verdict. */
static int check_agreement(sg_dist *d, const int64_t *all, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const int64_t *m0 = all + i * META_LEN;
        for (int r = 1; r < d->size; r++) {
            const int64_t *m = all + ((int64_t)r * n + i) * META_LEN;
            if (m[META_DTYPE] != m0[META_DTYPE])
                return failf(d, SG_ERR_DTYPE,
                             "sg_dist_reduce_grads: ranks disagree on parameter %lld: dtype %s on "
                             "rank 0, %s on rank %d (same parameters, same order on every rank?)",
                             (long long)i, m0[META_DTYPE] == SG_F64 ? "f64" : "f32",
                             m[META_DTYPE] == SG_F64 ? "f64" : "f32", r);
            if (memcmp(m + META_NDIM, m0 + META_NDIM, (1 + SG_MAX_DIMS) * sizeof *m) != 0) {
                char a[96], b[96];
                shape_str(m0, a, sizeof a);
                shape_str(m, b, sizeof b);
                return failf(d, SG_ERR_SHAPE,
                             "sg_dist_reduce_grads: ranks disagree on parameter %lld: shape %s on "
                             "rank 0, %s on rank %d (same parameters, same order on every rank?)",
                             (long long)i, a, b, r);
            }
        }
    }
    return SG_OK;
}

/* The sum over ranks, in rank order, of the staged bucket stage[0..used), in place:
 * reduce-scatter by MPI_Alltoallv (rank j sums slice j), then MPI_Allgatherv of the
 * sums; then the segments' results are copied out. */
static int flush_bucket(sg_dist *d, sg_dtype dt, void *stage, int64_t used, void *recv,
                        const segment *segs, int64_t nsegs)
{
    int P = d->size, me = d->rank;
    size_t esz = sg_dtype_size(dt);
    if (P > 1) {
        for (int j = 0; j < P; j++) {
            d->displs[j] = (int)(used * j / P);
            d->counts[j] = (int)(used * (j + 1) / P) - d->displs[j];
        }
        int mine = d->counts[me];
        for (int r = 0; r < P; r++) {
            d->rcounts[r] = mine;
            d->rdispls[r] = r * mine;
        }
        MPI_Datatype T = mpi_type(dt);
        MPI_Request q;
        WAIT(d, q, "MPI_Alltoallv (dense reduce-scatter)",
             MPI_Ialltoallv(stage, d->counts, d->displs, T, recv, d->rcounts, d->rdispls, T, d->comm, &q));
        if (dt == SG_F64) {
            double *acc = (double *)stage + d->displs[me];
            const double *in = recv;
            for (int64_t i = 0; i < mine; i++) {
                double s = in[i];
                for (int r = 1; r < P; r++) s += in[(int64_t)r * mine + i];
                acc[i] = d->opts.average ? s / (double)P : s;
            }
        } else {
            float *acc = (float *)stage + d->displs[me];
            const float *in = recv;
            for (int64_t i = 0; i < mine; i++) {
                float s = in[i];
                for (int r = 1; r < P; r++) s += in[(int64_t)r * mine + i];
                acc[i] = d->opts.average ? s / (float)P : s;
            }
        }
        WAIT(d, q, "MPI_Allgatherv (dense sums)",
             MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, stage, d->counts, d->displs, T, d->comm, &q));
        int64_t lo = d->displs[me], hi = lo + mine;
        for (int64_t s = 0; s < nsegs; s++) {
            int64_t a = segs[s].off, b = a + segs[s].count;
            int64_t in_mine = (b < hi ? b : hi) - (a > lo ? a : lo);
            if (in_mine < 0) in_mine = 0;
            uint64_t bytes = (uint64_t)((segs[s].count - in_mine) + in_mine * (P - 1)) * esz;
            d->pstats[segs[s].item].bytes_sent += bytes;
            d->stats.bytes_sent += bytes;
        }
    }
    for (int64_t s = 0; s < nsegs; s++)
        memcpy(segs[s].dst, (unsigned char *)stage + (size_t)segs[s].off * esz, (size_t)segs[s].count * esz);
    return SG_OK;
}

/* The dense exchange of every item that has one, in parameter order, through buckets of
 * at most stage_bytes (one dtype per bucket; a large item spans several). */
static int exchange_dense(sg_dist *d, plan_item *plan, int64_t n, segment *segs, void *stage,
                          size_t stage_bytes, void *recv)
{
    int64_t used = 0, nsegs = 0;
    sg_dtype bucket_dt = SG_F32;
    for (int64_t i = 0; i < n; i++) {
        plan_item *it = &plan[i];
        if (!it->dense_out) continue;
        size_t esz = sg_dtype_size(it->dtype);
        if (used && it->dtype != bucket_dt) {
            int rc = flush_bucket(d, bucket_dt, stage, used, recv, segs, nsegs);
            if (rc) return rc;
            used = nsegs = 0;
        }
        bucket_dt = it->dtype;
        int64_t cap = (int64_t)(stage_bytes / esz);
        int64_t total = sg_tensor_numel(it->dense_out), pos = 0;
        const unsigned char *src = it->dense_in ? sg_tensor_data(it->dense_in) : NULL;
        unsigned char *dst = sg_tensor_data(it->dense_out);
        while (pos < total) {
            int64_t take = cap - used < total - pos ? cap - used : total - pos;
            unsigned char *at = (unsigned char *)stage + (size_t)used * esz;
            if (src) memcpy(at, src + (size_t)pos * esz, (size_t)take * esz);
            else memset(at, 0, (size_t)take * esz);
            segs[nsegs++] = (segment){dst + (size_t)pos * esz, used, take, i};
            used += take;
            pos += take;
            if (used == cap) {
                int rc = flush_bucket(d, bucket_dt, stage, used, recv, segs, nsegs);
                if (rc) return rc;
                used = nsegs = 0;
            }
        }
    }
    return used ? flush_bucket(d, bucket_dt, stage, used, recv, segs, nsegs) : SG_OK;
}

/* Divides the values of a reduced row-sparse gradient by the rank count (average). */
static void average_values(sg_dist *d, sg_tensor *coo)
{
    if (!d->opts.average || d->size == 1) return;
    sg_tensor *v = sg_coo_values(coo);
    int64_t m = sg_tensor_numel(v);
    if (sg_tensor_dtype(v) == SG_F64) {
        double *x = sg_tensor_data(v);
        for (int64_t i = 0; i < m; i++) x[i] /= (double)d->size;
    } else {
        float *x = sg_tensor_data(v);
        for (int64_t i = 0; i < m; i++) x[i] /= (float)d->size;
    }
}

/* The coalesced COO gradient of the rows set in bits, with their values from the dense
 * sum (already averaged), as the sparse exchange would give. */
static sg_tensor *rows_from_dense(sg_dist *d, sg_tensor *param, plan_item *it, const unsigned char *bits)
{
    int64_t k = 0;
    for (int64_t r = 0; r < it->rows; r++) k += (bits[r >> 3] >> (r & 7)) & 1;
    size_t esz = sg_dtype_size(it->dtype);
    int64_t ishape[1] = {k}, vshape[1] = {k * it->row};
    sg_tensor *ind = sg_tensor_new_tmp(d->ctx, SG_I64, 1, ishape);
    sg_tensor *val = ind ? sg_tensor_new_tmp(d->ctx, it->dtype, 1, vshape) : NULL;
    if (!val) return NULL;
    int64_t *ip = sg_tensor_data(ind);
    unsigned char *vp = sg_tensor_data(val);
    const unsigned char *sum = sg_tensor_data(it->dense_out);
    size_t rowbytes = (size_t)it->row * esz;
    int64_t e = 0;
    for (int64_t r = 0; r < it->rows; r++) {
        if (!((bits[r >> 3] >> (r & 7)) & 1)) continue;
        ip[e] = r;
        memcpy(vp + (size_t)e * rowbytes, sum + (size_t)r * rowbytes, rowbytes);
        e++;
    }
    return sg_coo_new_tmp(d->ctx, it->dtype, sg_tensor_ndim(param), sg_tensor_shape(param), 1, k, ip, vp);
}

int sg_dist_reduce_grads(sg_dist *d, sg_tensor *const *params, int64_t n)
{
    if (!d) return SG_ERR_NULL;
    double t0 = MPI_Wtime();
    const int P = d->size;
    d->stats.n_params = 0;
    d->stats.bytes_sent = d->stats.bytes_check = d->stats.bytes_all_dense = 0;

    /* 1. local checks, then the header: every rank's count and verdict */
    plan_item *plan = NULL;
    int64_t *meta = NULL;
    int st = local_prepare(d, params, n, &plan, &meta);
    int64_t head[2] = {n, st};
    MPI_Request q;
    WAIT(d, q, "MPI_Allgather (header)",
         MPI_Iallgather(head, 2, MPI_INT64_T, d->header, 2, MPI_INT64_T, d->comm, &q));
    d->stats.bytes_check += (uint64_t)(P - 1) * sizeof head;
    for (int r = 0; r < P; r++) {
        int rst = (int)d->header[2 * r + 1];
        if (!rst) continue;
        if (st) return st;
        return failf(d, rst, "sg_dist_reduce_grads: rank %d refused its arguments (%s)", r, sg_status_string(rst));
    }
    for (int r = 1; r < P; r++)
        if (d->header[2 * r] != d->header[0])
            return failf(d, SG_ERR_STATE,
                         "sg_dist_reduce_grads: ranks disagree on the parameter count: %lld on rank 0, "
                         "%lld on rank %d", (long long)d->header[0], (long long)d->header[2 * r], r);

    /* 2. every rank's records; the same verdict and the same plan everywhere */
    int64_t *all = sg_tensor_data(d->buf[BUF_META]);
    if (n > 0)
        WAIT(d, q, "MPI_Allgather (parameter records)",
             MPI_Iallgather(meta, (int)(n * META_LEN), MPI_INT64_T, all, (int)(n * META_LEN), MPI_INT64_T,
                            d->comm, &q));
    d->stats.bytes_check += (uint64_t)(P - 1) * (uint64_t)n * META_LEN * sizeof *meta;
    int rc = check_agreement(d, all, n);
    if (rc) return rc;
    int64_t dense_elems_bytes = 0, bits_total = 0, idx_total = 0, val_total = 0;
    for (int64_t i = 0; i < n; i++) {
        plan_item *it = &plan[i];
        const int64_t *m0 = all + i * META_LEN;
        it->dtype = (sg_dtype)m0[META_DTYPE];
        size_t esz = sg_dtype_size(it->dtype);
        int64_t numel = sg_tensor_numel(params[i]);
        it->rows = m0[META_NDIM] ? m0[META_SHAPE] : 1;
        it->row = it->rows ? numel / it->rows : 0;
        it->kind = KIND_NONE;
        for (int r = 0; r < P; r++) {
            const int64_t *m = all + ((int64_t)r * n + i) * META_LEN;
            if (m[META_KIND] > it->kind) it->kind = (int)m[META_KIND];
            if (m[META_KIND] == KIND_ROWS) it->nnz_total += m[META_NNZ];
        }
        sg_dist_param_stats *ps = &d->pstats[i];
        *ps = (sg_dist_param_stats){0};
        uint64_t dense_side = 2 * ((uint64_t)numel * esz + (it->kind == KIND_ROWS ? (uint64_t)bitmap_bytes(it->rows) : 0));
        if (it->kind == KIND_ROWS) {
            ps->nnz_total = it->nnz_total;
            ps->bytes_sparse_est = (uint64_t)it->nnz_total * (8 + (uint64_t)it->row * esz);
            ps->bytes_dense_est = dense_side;
            it->as_sparse = d->opts.sparse_mode == SG_DIST_FORCE_SPARSE ||
                            (d->opts.sparse_mode == SG_DIST_AUTO && ps->bytes_sparse_est <= ps->bytes_dense_est);
            if (it->nnz_total > INT_MAX || it->row > INT_MAX) it->as_sparse = 0;
        }
        if (it->kind != KIND_NONE) d->stats.bytes_all_dense += dense_side * (uint64_t)(P - 1) / (uint64_t)P;
        if (it->kind == KIND_ROWS && it->as_sparse) {
            it->idx_off = idx_total;
            it->val_off = val_total;
            idx_total += it->nnz_total;
            val_total += it->nnz_total * it->row * (int64_t)esz;
            ps->choice = SG_DIST_SPARSE_AS_SPARSE;
        } else if (it->kind != KIND_NONE) {
            dense_elems_bytes += numel * (int64_t)esz;
            if (it->kind == KIND_ROWS) {
                it->bits_off = bits_total;
                bits_total += bitmap_bytes(it->rows);
                ps->choice = SG_DIST_SPARSE_AS_DENSE;
            } else {
                ps->choice = SG_DIST_DENSE;
            }
        }
    }
    if (bits_total > INT_MAX)
        return failf(d, SG_ERR_ARG, "sg_dist_reduce_grads: the row bitmaps (%lld bytes) exceed one MPI message",
                     (long long)bits_total);

    /* 3. buffers whose sizes every rank now knows, then agreement that all have them */
    size_t max_stage = (size_t)1 << 30;
    size_t stage_bytes = d->opts.bucket_bytes < max_stage ? d->opts.bucket_bytes : max_stage;
    if ((int64_t)stage_bytes > dense_elems_bytes) stage_bytes = (size_t)dense_elems_bytes;
    stage_bytes &= ~(size_t)7;
    if (dense_elems_bytes && stage_bytes < 8) stage_bytes = 8;
    void *stage = NULL, *recv = NULL;
    unsigned char *bits = NULL;
    int64_t *idx = NULL;
    unsigned char *val = NULL;
    st = SG_OK;
    if (stage_bytes) {
        stage = scratch(d, BUF_STAGE, stage_bytes);
        recv = stage ? scratch(d, BUF_RECV, stage_bytes + (size_t)P * 8) : NULL;
        if (!recv) st = sg_ctx_status(d->ctx);
    }
    if (!st && bits_total) {
        bits = scratch(d, BUF_BITS, (size_t)bits_total);
        if (!bits) st = sg_ctx_status(d->ctx);
        else memset(bits, 0, (size_t)bits_total);
    }
    if (!st && idx_total) {
        idx = scratch(d, BUF_IDX, (size_t)idx_total * sizeof *idx);
        val = idx ? scratch(d, BUF_VAL, (size_t)val_total + 1) : NULL;
        if (!val) st = sg_ctx_status(d->ctx);
    }
    for (int64_t i = 0; i < n && !st; i++) {
        plan_item *it = &plan[i];
        if (it->kind == KIND_NONE || (it->kind == KIND_ROWS && it->as_sparse)) continue;
        sg_tensor *p = params[i];
        it->dense_out = sg_tensor_new_tmp(d->ctx, it->dtype, sg_tensor_ndim(p), sg_tensor_shape(p));
        if (!it->dense_out) { st = sg_ctx_status(d->ctx); break; }
        if (it->kind == KIND_DENSE) { /* a row-sparse gradient here, dense on another rank */
            it->dense_in = it->local && sg_tensor_layout(it->local) == SG_COO ? sg_to_dense(it->local) : it->local;
            if (it->local && !it->dense_in) { st = sg_ctx_status(d->ctx); break; }
        } else if (it->local) {
            it->dense_in = sg_tensor_new_tmp(d->ctx, it->dtype, sg_tensor_ndim(p), sg_tensor_shape(p));
            if (!it->dense_in || sg_index_add_(it->dense_in, it->local)) { st = sg_ctx_status(d->ctx); break; }
            const int64_t *li = sg_tensor_data(sg_coo_indices(it->local));
            unsigned char *b = bits + it->bits_off;
            for (int64_t e = 0; e < sg_coo_nnz(it->local); e++) b[li[e] >> 3] |= (unsigned char)(1u << (li[e] & 7));
        }
    }
    rc = sg__dist_agree(d, st, "sg_dist_reduce_grads", "to allocate its buffers");
    if (rc) return rc;

    /* 4. the exchanges, in an order every rank shares */
    if (bits_total && P > 1) {
        WAIT(d, q, "MPI_Allreduce (rows touched)",
             MPI_Iallreduce(MPI_IN_PLACE, bits, (int)bits_total, MPI_UNSIGNED_CHAR, MPI_BOR, d->comm, &q));
        uint64_t bytes = (uint64_t)bits_total * 2 * (uint64_t)(P - 1) / (uint64_t)P;
        d->stats.bytes_sent += bytes;
        for (int64_t i = 0; i < n; i++)
            if (plan[i].kind == KIND_ROWS && !plan[i].as_sparse)
                d->pstats[i].bytes_sent += (uint64_t)bitmap_bytes(plan[i].rows) * 2 * (uint64_t)(P - 1) / (uint64_t)P;
    }
    segment *segs = (segment *)(void *)(plan + (n ? n : 1));
    rc = exchange_dense(d, plan, n, segs, stage, stage_bytes, recv);
    if (rc) return rc;
    for (int64_t i = 0; i < n; i++) {
        plan_item *it = &plan[i];
        if (it->kind != KIND_ROWS || !it->as_sparse) continue;
        int64_t at = 0;
        for (int r = 0; r < P; r++) {
            const int64_t *m = all + ((int64_t)r * n + i) * META_LEN;
            d->counts[r] = m[META_KIND] == KIND_ROWS ? (int)m[META_NNZ] : 0;
            d->displs[r] = (int)at;
            at += d->counts[r];
        }
        int mine = d->counts[d->rank];
        const void *li = mine ? sg_tensor_data(sg_coo_indices(it->local)) : NULL;
        const void *lv = mine ? sg_tensor_data(sg_coo_values(it->local)) : NULL;
        WAIT(d, q, "MPI_Allgatherv (sparse indices)",
             MPI_Iallgatherv(li, mine, MPI_INT64_T, idx + it->idx_off, d->counts, d->displs, MPI_INT64_T,
                             d->comm, &q));
        if (it->row > 0) {
            if (sg__dist_stalled(d, "sg_dist_reduce_grads")) return SG_ERR_IO;
            MPI_Datatype rowt;
            int err = MPI_Type_contiguous((int)it->row, mpi_type(it->dtype), &rowt);
            if (err != MPI_SUCCESS) return mpi_failed(d, err, "MPI_Type_contiguous");
            MPI_Type_commit(&rowt);
            err = MPI_Iallgatherv(lv, mine, rowt, val + it->val_off, d->counts, d->displs, rowt, d->comm, &q);
            MPI_Type_free(&rowt); /* MPI keeps it until the collective completes */
            WAIT(d, q, "MPI_Allgatherv (sparse values)", err);
        }
        uint64_t bytes = (uint64_t)mine * (8 + (uint64_t)it->row * sg_dtype_size(it->dtype)) * (uint64_t)(P - 1);
        d->pstats[i].bytes_sent += bytes;
        d->stats.bytes_sent += bytes;
    }

    /* 5. local results (no collective from here on), then the gradients, all at once */
    for (int64_t i = 0; i < n; i++) {
        plan_item *it = &plan[i];
        sg_tensor *p = params[i];
        if (it->kind == KIND_DENSE) {
            it->result = it->dense_out;
        } else if (it->kind == KIND_ROWS && !it->as_sparse) {
            it->result = rows_from_dense(d, p, it, bits + it->bits_off);
        } else if (it->kind == KIND_ROWS) {
            sg_tensor *cat = sg_coo_new_tmp(d->ctx, it->dtype, sg_tensor_ndim(p), sg_tensor_shape(p), 1,
                                            it->nnz_total, idx + it->idx_off, val + it->val_off);
            it->result = cat ? sg_coalesce(cat) : NULL;
            if (it->result) average_values(d, it->result);
        } else {
            continue;
        }
        if (!it->result) return sg_ctx_status(d->ctx);
        if (it->kind == KIND_ROWS) d->pstats[i].rows_out = sg_coo_nnz(it->result);
    }
    for (int64_t i = 0; i < n; i++) {
        if (!plan[i].result) continue;
        rc = sg_tensor_set_grad(params[i], plan[i].result);
        if (rc) return rc;
    }
    d->stats.n_params = n;
    d->stats.reduces++;
    d->stats.seconds = MPI_Wtime() - t0;
    return SG_OK;
}

int sg_dist_stats_get(const sg_dist *d, sg_dist_stats *out)
{
    if (!d || !out) return SG_ERR_NULL;
    *out = d->stats;
    return SG_OK;
}

int sg_dist_param_stats_get(const sg_dist *d, int64_t i, sg_dist_param_stats *out)
{
    if (!d || !out) return SG_ERR_NULL;
    if (i < 0 || i >= d->stats.n_params)
        return sg_ctx_set_error(d->ctx, SG_ERR_ARG, "sg_dist_param_stats_get: parameter index out of range");
    *out = d->pstats[i];
    return SG_OK;
}
