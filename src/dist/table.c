/* Sharded tables (include/sgrad_dist.h, "sharded tables"): rows split by range across the
 * ranks, lookups and gradients moved to and from the owners with MPI_Alltoallv.
 *
 * Invariants: every rank makes the same collectives in the same order with matching
 * counts, so a local failure (bad indices, a failed allocation) is announced in a
 * collective every rank makes anyway (the count exchange, or an agreement of statuses)
 * before any data moves. The latest lookup's routing (each position's slot in the send
 * order, the counts per rank, the rows each requester asked this rank for) is kept until
 * the table's backward; the requested rows live on the tape, as the lookup's output does.
 * Rows travel as one MPI datatype of dim elements, so every count is a row count.
 * Checkpoints: one sg_checkpoint_save file per rank, "<path>.<rank>-of-<P>"; a load is
 * agreed on every rank's metadata before any shard changes; a load by another rank count
 * (values only) reads the old shards that overlap this rank's rows.
 */
#define _POSIX_C_SOURCE 200809L /* opendir: naming the rank count of another save */
#include "dist/dist.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TB_SLOT, TB_SEND_IDX, TB_SEND_ROWS, TB_RECV_ROWS, TB_COUNT };

struct sg_dist_table {
    sg_dist *d; /* its collectives go through d's communicator and deadline */
    sg_ctx *ctx;
    MPI_Comm comm;
    int rank, size;
    sg_dtype dtype;
    int64_t rows, dim, begin, end;
    sg_tensor *shard;
    MPI_Datatype rowtype;
    int *scount, *sdispl, *rcount, *rdispl; /* (size) each, in rows */
    int64_t *pairs;                         /* (size, 2) sent and (size, 2) received */
    sg_tensor *buf[TB_COUNT];
    sg_tensor *out, *requested; /* the latest lookup's output and the rows asked of us */
    int64_t n, m;               /* its positions and the rows this shard served */
    int pending;                /* a lookup awaits its backward */
    sg_dist_table_stats stats;
};

#define TFAIL(t, ...) sg__dist_fail((t)->ctx, __VA_ARGS__)
/* Starts collective `start` of function fn (filling request q) and completes it within
 * the handle's deadline, returning the status on failure. */
#define TWAIT(t, fn, what, q, start)                        \
    do {                                                    \
        int rc_ = SG__DIST_RUN((t)->d, fn, what, q, start); \
        if (rc_) return rc_;                                \
    } while (0)

/* floor(r rows / P) without overflow: rows = q P + rem. */
static int64_t range_begin(int64_t rows, int P, int r)
{
    int64_t q = rows / P, rem = rows % P;
    return (int64_t)r * q + ((int64_t)r * rem) / P;
}

static int owner_of(const sg_dist_table *t, int64_t g)
{
    int P = t->size;
    int o = (int)((double)g / (double)t->rows * P);
    if (o < 0) o = 0;
    if (o > P - 1) o = P - 1;
    while (o + 1 < P && range_begin(t->rows, P, o + 1) <= g) o++;
    while (o > 0 && range_begin(t->rows, P, o) > g) o--;
    return o;
}

static void table_release(sg_dist_table *t)
{
    if (t->rowtype != MPI_DATATYPE_NULL) MPI_Type_free(&t->rowtype);
    for (int i = 0; i < TB_COUNT; i++) sg_tensor_free(t->buf[i]);
    sg_tensor_free(t->shard);
    free(t->scount);
    free(t->pairs);
    free(t);
}

sg_dist_table *sg_dist_table_new(sg_dist *d, sg_dtype dtype, int64_t rows, int64_t dim)
{
    if (!d) return NULL;
    sg_ctx *ctx = sg__dist_ctx(d);
    MPI_Comm comm = sg__dist_comm(d);
    int rank = sg_dist_rank(d), P = sg_dist_size(d);
    const char *fn = "sg_dist_table_new";
    int st = SG_OK;
    if (dtype != SG_F32 && dtype != SG_F64)
        st = sg__dist_fail(ctx, SG_ERR_DTYPE, "%s: the table must be f32 or f64", fn);
    else if (rows < 1 || dim < 1 || dim > INT_MAX || rows > INT64_MAX / dim)
        st = sg__dist_fail(ctx, SG_ERR_ARG, "%s: rows %lld and dim %lld must be >= 1 (dim <= INT_MAX)", fn,
                           (long long)rows, (long long)dim);
    /* one MPI_MAX over (x, -x) pairs gives every rank the largest and smallest of each
     * argument and the worst status, without a per-rank buffer */
    int64_t mine[7] = {dtype, rows, dim, -(int64_t)dtype, -rows, -dim, st}, top[7];
    MPI_Request q;
    if (SG__DIST_RUN(d, fn, "MPI_Allreduce (table shape)", q,
                     MPI_Iallreduce(mine, top, 7, MPI_INT64_T, MPI_MAX, comm, &q)))
        return NULL;
    if (!st && top[6])
        st = sg__dist_fail(ctx, (int)top[6], "%s: another rank refused its arguments (%s)", fn,
                           sg_status_string((int)top[6]));
    else if (!st && top[0] != -top[3])
        st = sg__dist_fail(ctx, SG_ERR_DTYPE, "%s: ranks disagree on the dtype", fn);
    else if (!st && (top[1] != -top[4] || top[2] != -top[5]))
        st = sg__dist_fail(ctx, SG_ERR_SHAPE,
                           "%s: ranks disagree on the table: rows from %lld to %lld, dim from %lld to %lld "
                           "(this rank: %lld x %lld)", fn, (long long)-top[4], (long long)top[1],
                           (long long)-top[5], (long long)top[2], (long long)rows, (long long)dim);
    if (st) return NULL;

    sg_dist_table *t = calloc(1, sizeof *t);
    if (t) {
        t->d = d;
        t->ctx = ctx;
        t->comm = comm;
        t->rank = rank;
        t->size = P;
        t->dtype = dtype;
        t->rows = rows;
        t->dim = dim;
        t->begin = range_begin(rows, P, rank);
        t->end = range_begin(rows, P, rank + 1);
        t->rowtype = MPI_DATATYPE_NULL;
        t->scount = malloc((size_t)P * 4 * sizeof *t->scount);
        t->pairs = malloc((size_t)P * 4 * sizeof *t->pairs);
    }
    if (!t || !t->scount || !t->pairs) {
        st = sg__dist_fail(ctx, SG_ERR_NOMEM, "%s: out of memory", fn);
    } else {
        t->sdispl = t->scount + P;
        t->rcount = t->sdispl + P;
        t->rdispl = t->rcount + P;
        t->shard = sg_tensor_new(ctx, dtype, 2, (int64_t[]){t->end - t->begin, dim});
        if (!t->shard || !sg_tensor_requires_grad(t->shard, 1)) st = sg_ctx_status(ctx);
        else if (MPI_Type_contiguous((int)dim, dtype == SG_F64 ? MPI_DOUBLE : MPI_FLOAT, &t->rowtype) != MPI_SUCCESS ||
                 MPI_Type_commit(&t->rowtype) != MPI_SUCCESS)
            st = sg__dist_fail(ctx, SG_ERR_IO, "%s: MPI_Type_contiguous failed on rank %d", fn, rank);
    }
    if (sg__dist_agree(d, st, fn, "to allocate its shard")) {
        if (t) table_release(t);
        return NULL;
    }
    return t;
}

void sg_dist_table_free(sg_dist_table *t)
{
    if (t) table_release(t);
}

sg_tensor *sg_dist_table_shard(const sg_dist_table *t) { return t ? t->shard : NULL; }

int sg_dist_table_range(const sg_dist_table *t, int rank, int64_t *begin, int64_t *end)
{
    if (!t || !begin || !end) return SG_ERR_NULL;
    if (rank < 0 || rank >= t->size)
        return TFAIL(t, SG_ERR_ARG, "sg_dist_table_range: rank %d outside [0, %d)", rank, t->size);
    *begin = range_begin(t->rows, t->size, rank);
    *end = range_begin(t->rows, t->size, rank + 1);
    return SG_OK;
}

int sg_dist_table_stats_get(const sg_dist_table *t, sg_dist_table_stats *out)
{
    if (!t || !out) return SG_ERR_NULL;
    *out = t->stats;
    return SG_OK;
}

/* This rank's checks of idx, then the routing: each position's owner and slot in the send
 * order, the indices to send (as the owners' local rows) and the counts per owner. */
static int route(sg_dist_table *t, sg_tensor *idx)
{
    const char *fn = "sg_dist_table_lookup";
    if (!idx) return TFAIL(t, SG_ERR_NULL, "%s: NULL idx", fn);
    if (sg_tensor_ctx(idx) != t->ctx) return TFAIL(t, SG_ERR_ARG, "%s: idx belongs to another context", fn);
    if (sg_tensor_layout(idx) != SG_DENSE) return TFAIL(t, SG_ERR_LAYOUT, "%s: idx must be dense", fn);
    sg_dtype it = sg_tensor_dtype(idx);
    if (it != SG_I64 && it != SG_I32) return TFAIL(t, SG_ERR_DTYPE, "%s: idx must be int32 or int64", fn);
    if (sg_tensor_ndim(idx) > SG_MAX_DIMS - 1)
        return TFAIL(t, SG_ERR_ARG, "%s: idx has %d dims (at most %d)", fn, sg_tensor_ndim(idx), SG_MAX_DIMS - 1);
    int64_t n = sg_tensor_numel(idx);
    if (n > INT_MAX || (n > 0 && t->dim > INT64_MAX / n))
        return TFAIL(t, SG_ERR_ARG, "%s: %lld indices are too many for one exchange", fn, (long long)n);
    const int64_t *i64 = it == SG_I64 ? sg_tensor_data(idx) : NULL;
    const int32_t *i32 = it == SG_I32 ? sg_tensor_data(idx) : NULL;
    for (int64_t i = 0; i < n; i++) {
        int64_t g = i64 ? i64[i] : i32[i];
        if (g < 0 || g >= t->rows)
            return TFAIL(t, SG_ERR_INDEX, "%s: rank %d: index %lld at position %lld is outside [0, %lld)", fn,
                         t->rank, (long long)g, (long long)i, (long long)t->rows);
    }
    int64_t *slot = sg__dist_scratch(t->ctx, &t->buf[TB_SLOT], (size_t)(n ? n : 1) * sizeof *slot);
    int64_t *send = slot ? sg__dist_scratch(t->ctx, &t->buf[TB_SEND_IDX], (size_t)(n ? n : 1) * sizeof *send) : NULL;
    if (!send) return sg_ctx_status(t->ctx);
    int P = t->size;
    memset(t->scount, 0, (size_t)P * sizeof *t->scount);
    for (int64_t i = 0; i < n; i++) t->scount[owner_of(t, i64 ? i64[i] : i32[i])]++;
    int at = 0;
    for (int r = 0; r < P; r++) {
        t->sdispl[r] = at;
        at += t->scount[r];
    }
    int *fill = t->rcount; /* free until the count exchange */
    memcpy(fill, t->sdispl, (size_t)P * sizeof *fill);
    for (int64_t i = 0; i < n; i++) {
        int64_t g = i64 ? i64[i] : i32[i];
        int o = owner_of(t, g);
        slot[i] = fill[o]++;
        send[slot[i]] = g - range_begin(t->rows, P, o);
    }
    t->n = n;
    return SG_OK;
}

sg_tensor *sg_dist_table_lookup(sg_dist_table *t, sg_tensor *idx)
{
    if (!t) return NULL;
    const char *fn = "sg_dist_table_lookup";
    const int P = t->size, me = t->rank;
    t->pending = 0;
    int st = route(t, idx);
    int64_t *sent = t->pairs, *got = t->pairs + 2 * P;
    for (int r = 0; r < P; r++) {
        sent[2 * r] = st ? 0 : t->scount[r];
        sent[2 * r + 1] = st;
    }
    /* 1. counts and statuses: every rank learns every rank's verdict */
    MPI_Request q;
    if (SG__DIST_RUN(t->d, fn, "MPI_Alltoall (lookup counts)", q,
                     MPI_Ialltoall(sent, 2, MPI_INT64_T, got, 2, MPI_INT64_T, t->comm, &q)))
        return NULL;
    for (int r = 0; r < P; r++) {
        if (!got[2 * r + 1]) continue;
        if (!st) TFAIL(t, (int)got[2 * r + 1], "%s: rank %d refused its indices (%s)", fn, r,
                       sg_status_string((int)got[2 * r + 1]));
        return NULL;
    }
    int64_t m = 0;
    for (int r = 0; r < P; r++) {
        t->rdispl[r] = (int)(m < INT_MAX ? m : INT_MAX);
        t->rcount[r] = (int)got[2 * r];
        m += got[2 * r];
    }
    /* 2. buffers (this rank's verdict on them, agreed) */
    const int64_t n = t->n, D = t->dim;
    size_t esz = sg_dtype_size(t->dtype);
    sg_tensor *requested = NULL, *out = NULL;
    void *recv = NULL;
    if (m > INT_MAX || (m > 0 && D > INT64_MAX / m)) {
        st = TFAIL(t, SG_ERR_ARG, "%s: rank %d was asked for %lld rows, too many for one exchange", fn, me,
                   (long long)m);
    } else {
        int nd = sg_tensor_ndim(idx);
        int64_t oshape[SG_MAX_DIMS];
        for (int k = 0; k < nd; k++) oshape[k] = sg_tensor_dim(idx, k);
        oshape[nd] = D;
        requested = sg_tensor_new_tmp(t->ctx, SG_I64, 1, (int64_t[]){m});
        out = requested ? sg_tensor_new_tmp(t->ctx, t->dtype, nd + 1, oshape) : NULL;
        recv = out ? sg__dist_scratch(t->ctx, &t->buf[TB_RECV_ROWS], (size_t)(n ? n : 1) * (size_t)D * esz) : NULL;
        if (!recv) st = sg_ctx_status(t->ctx);
    }
    if (sg__dist_agree(t->d, st, fn, "to allocate its buffers")) return NULL;

    /* 3. the indices to their owners; 4. the owners read their rows (caught up, as an op
     * reads a parameter), agreed; 5. the rows back */
    if (SG__DIST_RUN(t->d, fn, "MPI_Alltoallv (lookup indices)", q,
                     MPI_Ialltoallv(sg_tensor_data(t->buf[TB_SEND_IDX]), t->scount, t->sdispl, MPI_INT64_T,
                                    sg_tensor_data(requested), t->rcount, t->rdispl, MPI_INT64_T, t->comm, &q)))
        return NULL;
    sg_tensor *served = NULL;
    if (m > 0) {
        int was = sg_set_grad_enabled(t->ctx, 0);
        served = sg_index_select(t->shard, 0, requested);
        sg_set_grad_enabled(t->ctx, was);
        if (!served) st = sg_ctx_status(t->ctx);
    }
    if (sg__dist_agree(t->d, st, fn, "to read its rows")) return NULL;
    /* a rank that serves nothing sends from any buffer but recv: Open MPI's non-blocking
     * alltoallv takes sendbuf == recvbuf for MPI_IN_PLACE and then sends recv's rows */
    if (SG__DIST_RUN(t->d, fn, "MPI_Alltoallv (lookup rows)", q,
                     MPI_Ialltoallv(served ? sg_tensor_data(served) : (void *)t->pairs, t->rcount, t->rdispl,
                                    t->rowtype, recv, t->scount, t->sdispl, t->rowtype, t->comm, &q)))
        return NULL;
    const int64_t *slot = sg_tensor_data(t->buf[TB_SLOT]);
    unsigned char *o = sg_tensor_data(out);
    const size_t rowb = (size_t)D * esz;
    for (int64_t i = 0; i < n; i++) memcpy(o + (size_t)i * rowb, (unsigned char *)recv + (size_t)slot[i] * rowb, rowb);
    sg_tensor_requires_grad(out, 1);
    t->out = out;
    t->requested = requested;
    t->m = m;
    t->pending = 1;
    t->stats.lookups++;
    t->stats.rows_requested = n;
    t->stats.rows_served = m;
    t->stats.bytes_lookup = (uint64_t)(P - 1) * 2 * sizeof(int64_t) + (uint64_t)(n - t->scount[me]) * 8 +
                            (uint64_t)(m - t->rcount[me]) * rowb;
    return out;
}

int sg_dist_table_backward(sg_dist_table *t)
{
    if (!t) return SG_ERR_NULL;
    const char *fn = "sg_dist_table_backward";
    const int me = t->rank;
    const int64_t n = t->n, D = t->dim;
    const size_t esz = sg_dtype_size(t->dtype), rowb = (size_t)D * esz;
    int st = SG_OK;
    void *send = NULL, *recv = NULL;
    if (!t->pending) {
        st = TFAIL(t, SG_ERR_STATE, "%s: no lookup of this table since its last backward", fn);
    } else {
        sg_tensor *g = sg_tensor_grad(t->out);
        if (g && sg_tensor_layout(g) == SG_COO) g = sg_to_dense(g);
        send = sg__dist_scratch(t->ctx, &t->buf[TB_SEND_ROWS], (size_t)(n ? n : 1) * rowb);
        recv = send ? sg__dist_scratch(t->ctx, &t->buf[TB_RECV_ROWS], (size_t)(t->m ? t->m : 1) * rowb) : NULL;
        if (!recv || (sg_tensor_grad(t->out) && !g)) {
            st = sg_ctx_status(t->ctx);
        } else {
            const int64_t *slot = sg_tensor_data(t->buf[TB_SLOT]);
            const unsigned char *gv = g ? sg_tensor_data(g) : NULL;
            for (int64_t i = 0; i < n; i++) {
                unsigned char *dst = (unsigned char *)send + (size_t)slot[i] * rowb;
                if (gv) memcpy(dst, gv + (size_t)i * rowb, rowb);
                else memset(dst, 0, rowb);
            }
        }
    }
    int rc = sg__dist_agree(t->d, st, fn, "to prepare its gradient rows");
    if (rc) return rc;
    MPI_Request q;
    TWAIT(t, fn, "MPI_Alltoallv (gradient rows)", q,
          MPI_Ialltoallv(send, t->scount, t->sdispl, t->rowtype, recv, t->rcount, t->rdispl, t->rowtype, t->comm, &q));
    t->pending = 0;
    t->stats.bytes_backward = (uint64_t)(n - t->scount[me]) * rowb;
    sg_tensor *coo = sg_coo_new_tmp(t->ctx, t->dtype, 2, sg_tensor_shape(t->shard), 1, t->m,
                                    sg_tensor_data(t->requested), recv);
    if (!coo) return sg_ctx_status(t->ctx);
    rc = sg_tensor_set_grad(t->shard, coo);
    if (!rc) t->stats.backwards++;
    return rc;
}

enum { META_RANK, META_RANKS, META_BEGIN, META_END, META_ROWS, META_DIM, META_ID, META_N };
static const char *const meta_keys[META_N] = {"sgrad_dist.rank",    "sgrad_dist.ranks", "sgrad_dist.row_begin",
                                              "sgrad_dist.row_end", "sgrad_dist.rows",  "sgrad_dist.dim",
                                              "sgrad_dist.save_id"};
static const char *const shard_name = "shard";

/* "<path>.<rank>-of-<P>" into buf; SG_ERR_NULL / SG_ERR_ARG (too long) recorded. */
static int shard_path(sg_dist_table *t, const char *fn, const char *path, char *buf, size_t n)
{
    if (!path) return TFAIL(t, SG_ERR_NULL, "%s: NULL path", fn);
    int k = snprintf(buf, n, "%s.%d-of-%d", path, t->rank, t->size);
    if (k < 0 || (size_t)k >= n) return TFAIL(t, SG_ERR_ARG, "%s: path too long", fn);
    return SG_OK;
}

int sg_dist_table_save(sg_dist_table *t, const char *path, sg_optim *opt)
{
    if (!t) return SG_ERR_NULL;
    const char *fn = "sg_dist_table_save";
    uint64_t id = ((uint64_t)time(NULL) << 20) ^ (uint64_t)(MPI_Wtime() * 1e6);
    MPI_Request q;
    TWAIT(t, fn, "MPI_Bcast (save id)", q, MPI_Ibcast(&id, 1, MPI_UINT64_T, 0, t->comm, &q));
    char file[4096], vals[META_N][32];
    int st = shard_path(t, fn, path, file, sizeof file);
    if (!st) {
        long long v[META_N] = {t->rank, t->size, (long long)t->begin, (long long)t->end, (long long)t->rows,
                               (long long)t->dim, 0};
        for (int k = 0; k < META_ID; k++) snprintf(vals[k], sizeof vals[k], "%lld", v[k]);
        snprintf(vals[META_ID], sizeof vals[META_ID], "%llu", (unsigned long long)id);
        const char *vp[META_N];
        for (int k = 0; k < META_N; k++) vp[k] = vals[k];
        sg_checkpoint_meta meta = {META_N, meta_keys, vp};
        st = sg_checkpoint_save(t->ctx, file, &t->shard, 1, &shard_name, opt, &meta);
    }
    return sg__dist_agree(t->d, st, fn, "to write its shard");
}

/* The rank count of another save of path (a file "<base>.0-of-<Q>" beside it), or 0. */
static int other_save_ranks(const char *path, int not_this)
{
    char dir[4096] = ".";
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (slash == path) snprintf(dir, sizeof dir, "/");
    else if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t bl = strlen(base);
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d));) {
        int q = 0;
        char tail;
        if (!strncmp(e->d_name, base, bl) && sscanf(e->d_name + bl, ".0-of-%d%c", &q, &tail) == 1 && q > 0 &&
            q != not_this)
            found = q;
    }
    closedir(d);
    return found;
}

/* Checks the metadata of `file`, the shard of rank k of Q ranks, against the table;
 * *id gets its save id. SG_ERR_IO when the file cannot be read. */
static int check_shard_file(sg_dist_table *t, const char *fn, const char *file, int k, int Q, uint64_t *id)
{
    sg_checkpoint_meta meta = {0};
    int st = sg_checkpoint_read_meta(t->ctx, file, &meta);
    if (st) return st;
    long long want[META_ID] = {k, Q, (long long)range_begin(t->rows, Q, k), (long long)range_begin(t->rows, Q, k + 1),
                               (long long)t->rows, (long long)t->dim};
    for (int j = 0; j < META_N && !st; j++) {
        const char *v = sg_checkpoint_meta_get(&meta, meta_keys[j]);
        char *end = NULL;
        unsigned long long u = v ? strtoull(v, &end, 10) : 0;
        if (!v || !*v || *end)
            st = TFAIL(t, SG_ERR_FORMAT, "%s: %s has no valid %s (not a shard of sg_dist_table_save)", fn, file,
                       meta_keys[j]);
        else if (j == META_ID)
            *id = u;
        else if ((long long)u != want[j])
            st = TFAIL(t, SG_ERR_STATE, "%s: %s holds %s %s, this table %lld (another table)", fn, file,
                       meta_keys[j], v, want[j]);
    }
    sg_checkpoint_meta_free(t->ctx, &meta);
    return st;
}

/* The old shards [k0, k1) of a save by Q ranks that overlap this rank's rows. */
static void overlapping(const sg_dist_table *t, int Q, int *k0, int *k1)
{
    *k0 = owner_of(&(sg_dist_table){.rows = t->rows, .size = Q}, t->begin);
    *k1 = t->end > t->begin ? owner_of(&(sg_dist_table){.rows = t->rows, .size = Q}, t->end - 1) + 1 : *k0;
}

/* Phase 1 of a load: which files this rank reads (Q = the save's rank count; Q != P only
 * without an optimizer), their metadata checked, and their common save id. */
static int plan_load(sg_dist_table *t, const char *fn, const char *path, sg_optim *opt, int *Q_out, uint64_t *id)
{
    char file[4096];
    int st = shard_path(t, fn, path, file, sizeof file);
    if (st) return st;
    st = check_shard_file(t, fn, file, t->rank, t->size, id);
    *Q_out = t->size;
    if (st != SG_ERR_IO) return st;
    int Q = other_save_ranks(path, t->size);
    if (!Q) return TFAIL(t, SG_ERR_IO, "%s: rank %d cannot read its shard file %s", fn, t->rank, file);
    if (opt)
        return TFAIL(t, SG_ERR_STATE,
                     "%s: %s was saved by %d ranks, this job has %d: a load with an optimizer needs the rank "
                     "count of the save (without one, the values are re-partitioned)", fn, path, Q, t->size);
    sg_ctx_clear_error(t->ctx);
    int k0, k1;
    overlapping(t, Q, &k0, &k1);
    *Q_out = Q;
    for (int k = k0; k < k1; k++) {
        uint64_t idk = 0;
        snprintf(file, sizeof file, "%s.%d-of-%d", path, k, Q);
        st = check_shard_file(t, fn, file, k, Q, &idk);
        if (st == SG_ERR_IO) st = TFAIL(t, SG_ERR_IO, "%s: rank %d cannot read %s", fn, t->rank, file);
        if (st) return st;
        if (k > k0 && idk != *id)
            return TFAIL(t, SG_ERR_STATE, "%s: the shard files of %s come from different saves", fn, path);
        *id = idk;
    }
    return SG_OK;
}

/* Phase 2 without the save's rank count: every overlapping old shard read whole, then
 * its rows copied into this shard (nothing is written until all were read). */
static int load_repartitioned(sg_dist_table *t, const char *path, int Q)
{
    int k0, k1, st = SG_OK;
    overlapping(t, Q, &k0, &k1);
    sg_tensor *old[64] = {0};
    if (k1 - k0 > 64)
        return TFAIL(t, SG_ERR_ARG, "sg_dist_table_load: rank %d would read %d shards (at most 64)", t->rank,
                     k1 - k0);
    for (int k = k0; k < k1 && !st; k++) {
        char file[4096];
        snprintf(file, sizeof file, "%s.%d-of-%d", path, k, Q);
        int64_t b = range_begin(t->rows, Q, k), e = range_begin(t->rows, Q, k + 1);
        sg_tensor *o = old[k - k0] = sg_tensor_new(t->ctx, t->dtype, 2, (int64_t[]){e - b, t->dim});
        st = o ? sg_checkpoint_load(t->ctx, file, &o, 1, &shard_name, NULL, NULL) : sg_ctx_status(t->ctx);
    }
    size_t rowb = (size_t)t->dim * sg_dtype_size(t->dtype);
    for (int k = k0; k < k1; k++) {
        int64_t b = range_begin(t->rows, Q, k), e = range_begin(t->rows, Q, k + 1);
        int64_t lo = b > t->begin ? b : t->begin, hi = e < t->end ? e : t->end;
        if (!st && hi > lo)
            memcpy((unsigned char *)sg_tensor_data(t->shard) + (size_t)(lo - t->begin) * rowb,
                   (unsigned char *)sg_tensor_data(old[k - k0]) + (size_t)(lo - b) * rowb, (size_t)(hi - lo) * rowb);
        sg_tensor_free(old[k - k0]);
    }
    return st;
}

int sg_dist_table_load(sg_dist_table *t, const char *path, sg_optim *opt)
{
    if (!t) return SG_ERR_NULL;
    const char *fn = "sg_dist_table_load";
    uint64_t id = 0, lo = 0, hi = 0;
    int Q = 0;
    int st = plan_load(t, fn, path, opt, &Q, &id);
    int rc = sg__dist_agree(t->d, st, fn, "to check its shard files");
    if (rc) return rc;
    /* one save id across ranks (a rank with no rows reads no file and has none) */
    uint64_t mn = t->end > t->begin ? id : UINT64_MAX, mx = t->end > t->begin ? id : 0;
    MPI_Request q;
    TWAIT(t, fn, "MPI_Allreduce (save id)", q, MPI_Iallreduce(&mn, &lo, 1, MPI_UINT64_T, MPI_MIN, t->comm, &q));
    TWAIT(t, fn, "MPI_Allreduce (save id)", q, MPI_Iallreduce(&mx, &hi, 1, MPI_UINT64_T, MPI_MAX, t->comm, &q));
    if (lo != hi)
        return TFAIL(t, SG_ERR_STATE, "%s: the shard files of %s come from different saves (save_id differs)", fn,
                     path);
    if (Q == t->size) {
        char file[4096];
        shard_path(t, fn, path, file, sizeof file);
        st = sg_checkpoint_load(t->ctx, file, &t->shard, 1, &shard_name, opt, NULL);
    } else {
        st = load_repartitioned(t, path, Q);
    }
    return sg__dist_agree(t->d, st, fn, "to load its shard (the other ranks' shards were loaded)");
}
