/* sgrad-kge train under mpirun (built only with SGRAD_MPI; main.c calls it under
 * KGE_WITH_MPI): the sg_kge_dist of sgrad_kge.h over sgrad_dist.h. The entity table is an
 * sg_dist_table (rows split by range over the ranks; lookups, gradients and the shards'
 * checkpoints are its collectives), the relation gradient goes through
 * sg_dist_reduce_grads (plain sum, rank order), and the few scalars a step agrees on
 * (loss, failure and stop flags, the validation MRR) through MPI_Allreduce.
 *
 * Invariants: every collective here is entered by every rank in the same order (the
 * engine's loop decides, one global batch a step, never local data); MPI errors return
 * (MPI_ERRORS_RETURN on a duplicate of MPI_COMM_WORLD). The scalars' sums are exact on 2
 * ranks (one addition) and only reported, never trained on: MPI's order for more ranks
 * changes no model bit. The table's and reduce's collectives have sgrad_dist's deadline
 * (SGRAD_DIST_TIMEOUT); this file's own blocking MPI_Allreduce and MPI_Allgatherv have
 * none (Open MPI ends a job whose rank died).
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "kge_tool.h"

#include "sgrad_dist.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    sg_kge_dist pub;
    MPI_Comm comm;
    sg_dist *d;
    sg_dist_table *t;
    sg_ctx *ctx;
    int64_t rows, dim;
    bool verbose; /* each rank says which rows it holds */
} kge_mpi;

static int mpi_fail(sg_model_error *e, int err, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS) len = 0;
    msg[len] = 0;
    snprintf(e->message, sizeof e->message, "MPI failed in %s: %s", what, msg);
    e->status = SG_ERR_IO;
    return -1;
}

/* The context's error as *e's. -1. */
static int ctx_fail(sg_model_error *e, sg_ctx *ctx, const char *what)
{
    snprintf(e->message, sizeof e->message, "%s: %s", what, sg_ctx_message(ctx));
    e->status = sg_ctx_status(ctx) ? sg_ctx_status(ctx) : SG_ERR_STATE;
    return -1;
}

static sg_tensor *table(sg_kge_dist *p, sg_ctx *ctx, int64_t rows, int64_t dim, int64_t *begin, int64_t *end,
                        sg_model_error *e)
{
    kge_mpi *k = p->impl;
    const sg_dist_opts o = {.average = 0, .coalesce_local = 1, .sparse_mode = SG_DIST_AUTO, .bucket_bytes = 0};
    k->ctx = ctx, k->rows = rows, k->dim = dim;
    if (!(k->d = sg_dist_new(ctx, k->comm, &o))) return ctx_fail(e, ctx, "sg_dist_new"), NULL;
    if (!(k->t = sg_dist_table_new(k->d, SG_F32, rows, dim)) || sg_dist_table_range(k->t, p->rank, begin, end))
        return ctx_fail(e, ctx, "the sharded entity table"), NULL;
    if (k->verbose)
        fprintf(stderr, KGE_PROG ": rank %d of %d: entity rows [%lld, %lld) of %lld (%lld rows, %.1f MB)\n", p->rank,
                p->ranks, (long long)*begin, (long long)*end, (long long)rows, (long long)(*end - *begin),
                (double)(*end - *begin) * (double)dim * 4.0 / 1e6);
    return sg_dist_table_shard(k->t);
}

static sg_tensor *lookup(sg_kge_dist *p, sg_tensor *idx, sg_model_error *e)
{
    kge_mpi *k = p->impl;
    sg_tensor *x = sg_dist_table_lookup(k->t, idx);
    if (!x) ctx_fail(e, k->ctx, "the entity rows' lookup");
    return x;
}

static int backward(sg_kge_dist *p, sg_model_error *e)
{
    kge_mpi *k = p->impl;
    return sg_dist_table_backward(k->t) ? ctx_fail(e, k->ctx, "the entity rows' gradients") : 0;
}

static int reduce(sg_kge_dist *p, sg_tensor *rel, sg_model_error *e)
{
    kge_mpi *k = p->impl;
    return sg_dist_reduce_grads(k->d, &rel, 1) ? ctx_fail(e, k->ctx, "the relation gradients' sum") : 0;
}

static int sum(sg_kge_dist *p, double *x, int n, sg_model_error *e)
{
    kge_mpi *k = p->impl;
    const int err = MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, k->comm);
    return err == MPI_SUCCESS ? 0 : mpi_fail(e, err, "MPI_Allreduce");
}

/* Every rank's shard, in rank order, into full (MPI counts are int: the table must hold
 * at most INT_MAX floats). */
static int gather(sg_kge_dist *p, float *full, sg_model_error *e)
{
    kge_mpi *k = p->impl;
    if (k->rows * k->dim > INT_MAX) {
        snprintf(e->message, sizeof e->message, "the entity table (%lld x %lld) is too large to gather at the end",
                 (long long)k->rows, (long long)k->dim);
        e->status = SG_ERR_ARG;
        return -1;
    }
    int *counts = malloc(2 * (size_t)p->ranks * sizeof *counts);
    /* the ranks agree on the allocation first: one without counts fails with the others
     * rather than leave them waiting in MPI_Allgatherv */
    int bad = counts == NULL;
    const int aerr = MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, k->comm);
    if (aerr != MPI_SUCCESS || bad) {
        free(counts);
        if (aerr != MPI_SUCCESS) return mpi_fail(e, aerr, "MPI_Allreduce");
        snprintf(e->message, sizeof e->message, "out of memory for the entity table's gather (on some rank)");
        e->status = SG_ERR_NOMEM;
        return -1;
    }
    for (int r = 0; r < p->ranks; r++) {
        int64_t b, en;
        sg_dist_table_range(k->t, r, &b, &en);
        counts[r] = (int)((en - b) * k->dim);
        counts[p->ranks + r] = (int)(b * k->dim);
    }
    sg_tensor *shard = sg_dist_table_shard(k->t);
    const int err = MPI_Allgatherv(sg_tensor_f32(shard), counts[p->rank], MPI_FLOAT, full, counts,
                                   counts + p->ranks, MPI_FLOAT, k->comm);
    free(counts);
    return err == MPI_SUCCESS ? 0 : mpi_fail(e, err, "MPI_Allgatherv");
}

static int save(sg_kge_dist *p, const char *path, sg_optim *opt, sg_model_error *e)
{
    kge_mpi *k = p->impl;
    return sg_dist_table_save(k->t, path, opt) ? ctx_fail(e, k->ctx, "cannot write the shards' checkpoint") : 0;
}

static int load(sg_kge_dist *p, const char *path, sg_optim *opt, sg_model_error *e)
{
    kge_mpi *k = p->impl;
    if (!sg_dist_table_load(k->t, path, opt)) return 0;
    snprintf(e->message, sizeof e->message, "cannot resume from %s (rank %d of %d): %s", path, p->rank, p->ranks,
             sg_ctx_message(k->ctx));
    e->status = sg_ctx_status(k->ctx) ? sg_ctx_status(k->ctx) : SG_ERR_STATE;
    return -1;
}

static void release(sg_kge_dist *p)
{
    kge_mpi *k = p->impl;
    sg_dist_table_free(k->t);
    sg_dist_free(k->d);
    k->t = NULL, k->d = NULL;
}

/* The ranks agree on the command line (its hash) or all fail here. 0 or -1. */
static int agree_args(kge_mpi *k, int argc, char **argv)
{
    uint64_t h = TC_FNV_OFFSET, mm[2];
    for (int i = 1; i < argc; i++) h = tc_fnv1a(h, argv[i], strlen(argv[i]) + 1);
    mm[0] = h, mm[1] = ~h;
    if (MPI_Allreduce(MPI_IN_PLACE, mm, 2, MPI_UINT64_T, MPI_MAX, k->comm) != MPI_SUCCESS) return -1;
    if (mm[0] == h && ~mm[1] == h) return 0;
    fprintf(stderr, KGE_PROG ": rank %d of %d: the ranks disagree on the command line: give every rank the same "
                    "flags\n", k->pub.rank, k->pub.ranks);
    return -1;
}

int kge_dist_start(int *argc, char ***argv, bool verbose, sg_kge_dist **out)
{
    *out = NULL;
    /* The ranks meet at every step's exchanges; a rank that spins while it waits keeps a
     * shared core from the rank it waits for (on this 2-core machine, under other load,
     * a 2-rank epoch ran 1.4x to 4x slower than with yielding). Unless the user chose,
     * Open MPI yields while it polls; read at MPI_Init. */
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
    int err = MPI_Init(argc, argv);
    if (err != MPI_SUCCESS) return fprintf(stderr, KGE_PROG ": MPI_Init failed\n"), -1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    kge_mpi *k = calloc(1, sizeof *k);
    if (!k) return fprintf(stderr, KGE_PROG ": out of memory\n"), -1;
    MPI_Comm_size(MPI_COMM_WORLD, &k->pub.ranks);
    MPI_Comm_rank(MPI_COMM_WORLD, &k->pub.rank);
    if (MPI_Comm_dup(MPI_COMM_WORLD, &k->comm) != MPI_SUCCESS) {
        free(k);
        return fprintf(stderr, KGE_PROG ": MPI_Comm_dup failed\n"), -1;
    }
    MPI_Comm_set_errhandler(k->comm, MPI_ERRORS_RETURN);
    k->verbose = verbose;
    k->pub.table = table, k->pub.lookup = lookup, k->pub.backward = backward, k->pub.reduce = reduce;
    k->pub.sum = sum, k->pub.gather = gather, k->pub.save = save, k->pub.load = load, k->pub.release = release;
    k->pub.impl = k;
    *out = &k->pub;
    return k->pub.ranks > 1 ? agree_args(k, *argc, *argv) : 0;
}

int kge_dist_agree(sg_kge_dist *p, int rc)
{
    kge_mpi *k = p->impl;
    int worst = rc;
    if (MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, k->comm) != MPI_SUCCESS) return rc ? rc : 1;
    return worst;
}

void kge_dist_end(sg_kge_dist *p)
{
    if (!p) return;
    kge_mpi *k = p->impl;
    MPI_Comm_free(&k->comm);
    free(k);
    MPI_Finalize();
}
