/* sgrad_dist: data-parallel training over MPI, the optional module of sgrad (library
 * sgrad_dist, pkg-config sgrad_dist, CMake sgrad::sgrad_dist). Built only when MPI is
 * found; it is a client of sgrad.h alone, and sgrad itself never links MPI.
 *
 * Every rank runs the same program on its own share of the batch: sg_backward, then
 * sg_dist_reduce_grads (collective: every rank of the communicator calls it with the same
 * parameters in the same order), then sg_optim_step. Afterwards every rank holds the same
 * gradients, hence takes the same step.
 *
 * Determinism: the reduced gradient of each parameter is the sum of the ranks' gradients
 * in rank order, ((g0 + g1) + g2) + ..., element by element, then (by default) divided by
 * the rank count; MPI's own reductions, whose order MPI does not fix, are never used for
 * values. So it is bitwise identical for any thread count and for every rank, and equals
 * what one process gets by adding the ranks' gradients as dense arrays in rank order
 * (each rank's duplicate rows summed first, in their order) and dividing by the rank
 * count (with coalesce_local 0: accumulating every rank's gradient on one tape, in rank
 * order, and coalescing).
 *
 * - A dense gradient goes through a reduce-scatter (MPI_Alltoallv: rank j receives every
 *   rank's j-th slice and sums it in rank order) and an MPI_Allgatherv of the sums, in
 *   buckets of at most bucket_bytes (small parameters share one bucket).
 * - A row-sparse gradient (COO, sparse_dim 1) is coalesced locally (by default), then its
 *   (indices, values) are exchanged with MPI_Allgatherv and summed in rank order: the
 *   result is a coalesced COO gradient of the rows any rank touched, O(rows touched).
 * - The rule: the sparse exchange is used when it sends no more bytes than the dense one
 *   would, N (8 + D s) <= 2 (V D s + ceil(V / 8)), with N the entries summed over ranks,
 *   V x D the parameter, s the value size, 8 the int64 index; the left side is P / (P - 1)
 *   times the bytes a rank sends on average in the allgather, the right side P / (P - 1)
 *   times the bytes of the reduce-scatter + allgather of the table plus a bitmap of the
 *   rows touched (reduced with MPI_BOR, exact in any order). Otherwise the dense exchange
 *   runs and the result is the same coalesced COO gradient of the rows some rank touched
 *   (values equal to the sparse exchange's, but for the sign of a zero), so the choice
 *   changes bytes, never the optimizer's semantics (LazyAdam and Adagrad still step only
 *   touched rows).
 * - A parameter with no gradient on a rank contributes zeros there; one that got a dense
 *   gradient on some rank is exchanged dense and gets a dense gradient everywhere.
 * - Before any value moves, one small allgather compares every rank's parameter count and
 *   each parameter's dtype and shape: a disagreement gives every rank the same error
 *   (no rank hangs waiting for a message that never comes). Two parameters of one shape
 *   given in different orders cannot be told apart by this check.
 *
 * Failures of MPI itself (a broken connection) come back as SG_ERR_IO with MPI's
 * message: the module duplicates the communicator and sets MPI_ERRORS_RETURN on its copy.
 * A rank that died or stopped is caught by a deadline instead, since MPI without fault
 * tolerance (Open MPI 4) returns no error for it and never completes the collective:
 * every collective of the module (the table's too) is started non-blocking and given at
 * most the handle's timeout (sg_dist_set_timeout; default SGRAD_DIST_TIMEOUT seconds from
 * the environment, else SG_DIST_TIMEOUT_DEFAULT) to complete. Past it the call fails
 * with SG_ERR_IO, "<function>: rank r of P: no answer from the other ranks within T s in
 * <collective>: a rank has died or stopped"; the collective stays pending, so the handle
 * refuses every later one at once (SG_ERR_IO) and the program should end the job
 * (MPI_Abort: MPI_Finalize would wait for the missing rank). Under a plain mpirun,
 * Open MPI ends the whole job itself within a second or two of a rank's death, before
 * any deadline; with `mpirun --enable-recovery` it leaves the survivors running and the
 * deadline is what stops them.
 */
#ifndef SGRAD_DIST_H
#define SGRAD_DIST_H

#include <mpi.h>

#include "sgrad.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sg_dist sg_dist;

typedef enum {
    SG_DIST_AUTO,         /* the byte rule above */
    SG_DIST_FORCE_SPARSE, /* row-sparse gradients always exchanged sparse */
    SG_DIST_FORCE_DENSE   /* always dense (the rows touched still travel as a bitmap) */
} sg_dist_sparse_mode;

typedef struct {
    int average;           /* 1 (default): divide the sum by the rank count, as PyTorch
                              DDP does, so a per-rank mean loss gives the global mean's
                              gradient; 0: the plain sum */
    int coalesce_local;    /* 1 (default): sum duplicate rows on each rank before sending;
                              0: send the entries as they are (more bytes; a row's entries
                              are then summed in rank, then entry order, which may round
                              differently from summing each rank's first) */
    sg_dist_sparse_mode sparse_mode;
    size_t bucket_bytes;   /* cap of a dense bucket; 0: 25 MiB (PyTorch DDP's default) */
} sg_dist_opts;
#define SG_DIST_OPTS_DEFAULT {1, 1, SG_DIST_AUTO, 0}

/* A handle for gradient exchange over comm (an intracommunicator; duplicated, so the
 * caller's communicator and its error handler are untouched). Collective over comm. opts
 * NULL: SG_DIST_OPTS_DEFAULT. MPI must be initialised. Returns NULL on error, recorded on
 * ctx: SG_ERR_NULL, SG_ERR_ARG (bad options; SGRAD_DIST_TIMEOUT set on some rank but not
 * a number of seconds > 0: on every rank), SG_ERR_STATE (MPI not initialised), SG_ERR_IO
 * (MPI failed), SG_ERR_NOMEM. */
SG_API sg_dist *sg_dist_new(sg_ctx *ctx, MPI_Comm comm, const sg_dist_opts *opts);
/* The default timeout of a collective, in seconds: a rank waits for the others at most
 * this long. A legitimate wait is the imbalance between ranks, a step's work or one
 * rank's checkpoint write, far below five minutes; a dead rank costs at most this long. */
#define SG_DIST_TIMEOUT_DEFAULT 300.0

/* Sets how long each later collective of d (and of its tables) may wait for the other
 * ranks: seconds > 0, INFINITY for no deadline. This rank only (not collective): give
 * every rank the same. SG_ERR_NULL, SG_ERR_ARG (seconds not > 0, or NaN). */
SG_API int sg_dist_set_timeout(sg_dist *d, double seconds);

/* Frees the handle and its communicator (collective, as MPI_Comm_free). NULL: no-op. Free
 * it before sg_ctx_free of its context and before MPI_Finalize. */
SG_API void sg_dist_free(sg_dist *d);
SG_API int sg_dist_rank(const sg_dist *d); /* -1 for d NULL */
SG_API int sg_dist_size(const sg_dist *d); /* -1 for d NULL */

/* Replaces the gradient of each of params[0..n) (persistent dense f32/f64 leaves that
 * require grad, the same list on every rank) by the reduced gradient described above: a
 * tape tensor (dense, or coalesced COO) set with sg_tensor_set_grad, living until
 * sg_tape_reset. A parameter no rank has a gradient for is left without one. Collective.
 * Errors (the same on every rank, nothing changed): SG_ERR_NULL, SG_ERR_ARG (n < 0,
 * a tensor of another context), SG_ERR_STATE (the ranks disagree on n, or a parameter
 * does not require grad), SG_ERR_SHAPE / SG_ERR_DTYPE (the ranks disagree on parameter i's
 * shape / dtype; the message names i and the ranks), SG_ERR_INDEX (an index received out
 * of range). SG_ERR_IO (MPI failed) and SG_ERR_NOMEM may leave some gradients replaced and
 * others not (the ranks may then disagree: stop training). */
SG_API int sg_dist_reduce_grads(sg_dist *d, sg_tensor *const *params, int64_t n);

typedef enum {
    SG_DIST_NONE,  /* no rank had a gradient */
    SG_DIST_DENSE, /* dense gradient, dense exchange */
    SG_DIST_SPARSE_AS_SPARSE, /* row-sparse, exchanged as (indices, values) */
    SG_DIST_SPARSE_AS_DENSE   /* row-sparse, exchanged dense by the rule (or forced) */
} sg_dist_choice;

/* What the last sg_dist_reduce_grads did, for this rank. Bytes are payload bytes this
 * rank handed to MPI for other ranks (what MPI's algorithms put on the wire may differ). */
typedef struct {
    int64_t reduces;           /* calls that succeeded so far */
    int64_t n_params;
    uint64_t bytes_sent;       /* values, indices and bitmaps, this rank */
    uint64_t bytes_check;      /* the agreement check's allgather, this rank */
    uint64_t bytes_all_dense;  /* what this rank would have sent had every gradient been
                                  exchanged dense */
    double seconds;            /* wall time of the call */
} sg_dist_stats;

typedef struct {
    sg_dist_choice choice;
    int64_t nnz_total;    /* entries summed over ranks (row-sparse; 0 otherwise) */
    int64_t rows_out;     /* rows of the reduced COO gradient (row-sparse) */
    uint64_t bytes_sent;  /* this rank, for this parameter */
    uint64_t bytes_sparse_est; /* the rule's two sides, in bytes: N (8 + D s) */
    uint64_t bytes_dense_est;  /* and 2 (V D s + ceil(V / 8)) (row-sparse only) */
} sg_dist_param_stats;

/* Stats of the last reduce; SG_ERR_NULL for a NULL argument. */
SG_API int sg_dist_stats_get(const sg_dist *d, sg_dist_stats *out);
/* Parameter i of the last reduce (i in [0, n_params)); SG_ERR_ARG out of range. */
SG_API int sg_dist_param_stats_get(const sg_dist *d, int64_t i, sg_dist_param_stats *out);

/* ---------------------------------------------------------------- sharded tables
 * A (rows, dim) float table split across the ranks of an sg_dist handle by row range:
 * rank r owns rows [floor(r R / P), floor((r + 1) R / P)) as its shard, a persistent
 * (shard rows, dim) tensor that requires grad; no rank holds the rest of the table or its
 * optimizer state. Range, not hash: the owner of a row is arithmetic (no table of owners),
 * a shard is one contiguous tensor that an ordinary sgrad optimizer steps and a checkpoint
 * stores as is. Its cost: ids sorted by frequency (word2vec's vocabulary) put the hot
 * rows on the first ranks; permute such ids (a fixed bijection, e.g. a multiplicative
 * hash mod R) before the lookup to spread them.
 *
 * A step: out = sg_dist_table_lookup(t, idx) (collective: every rank sends each index to
 * its owner and gets the row back, MPI_Alltoallv); out is an ordinary tensor to build the
 * loss on; sg_backward; sg_dist_table_backward(t) (collective: out's gradient rows go
 * back to their owners); sg_optim_step of the optimizer the shard is registered with.
 * The shard's gradient is a COO tensor of the rows received, in (requesting rank,
 * position in its batch) order, so an optimizer that sums duplicate rows sums them in
 * that order: the shards' parameters after any number of steps are bitwise those of one
 * unsharded (R, dim) table trained on every rank's batch concatenated in rank order, with
 * the same optimizer (the test checks SGD with momentum and weight decay, and Adagrad),
 * for any thread count. Each index moves 8 bytes to its owner and dim values back, and
 * dim values again in the backward; duplicates are not merged (merging the backward's
 * would change the order of the sums).
 *
 * Errors are agreed before data moves, so a rank's bad input is an error on every rank,
 * never a hang. */

typedef struct sg_dist_table sg_dist_table;

/* A table of rows x dim (dtype SG_F32 or SG_F64) over d's communicator; the shard starts
 * at zeros (fill it: sg_dist_table_range gives the global rows it holds). Collective; every
 * rank must give the same dtype, rows and dim. NULL on error, the same on every rank:
 * SG_ERR_NULL, SG_ERR_ARG (rows < 1, dim < 1, rows x dim or dim over INT_MAX elements),
 * SG_ERR_DTYPE, SG_ERR_SHAPE (the ranks disagree on rows or dim; the message gives the
 * range of each over the ranks), SG_ERR_NOMEM, SG_ERR_IO (MPI failed). */
SG_API sg_dist_table *sg_dist_table_new(sg_dist *d, sg_dtype dtype, int64_t rows, int64_t dim);
/* Frees the table and its shard (not collective; the shard is first unregistered from its
 * optimizer, as sg_tensor_free does). Before sg_dist_free of its handle. NULL: no-op. */
SG_API void sg_dist_table_free(sg_dist_table *t);
/* This rank's shard: (end - begin, dim), owned by the table; register it with an
 * optimizer, fill it, checkpoint it (sg_dist_table_save). NULL for t NULL. */
SG_API sg_tensor *sg_dist_table_shard(const sg_dist_table *t);
/* The global rows [*begin, *end) that rank `rank` owns. SG_ERR_NULL, SG_ERR_ARG (rank
 * outside [0, P)). */
SG_API int sg_dist_table_range(const sg_dist_table *t, int rank, int64_t *begin, int64_t *end);

/* Rows idx of the table: idx dense int32/int64, any shape of up to 3 dims, values in
 * [0, rows) -> (idx's shape..., dim), a tape tensor (until sg_tape_reset) that requires
 * grad (a leaf: the table's backward is sg_dist_table_backward). Collective; ranks may give
 * different shapes (empty included). The rows are read as an op reads a parameter (exact
 * lazy SGD's lagging rows are brought up to date first). sg_dist_table_backward applies to
 * the latest lookup. NULL on error, on every rank: SG_ERR_NULL, SG_ERR_ARG (idx of
 * another context, over 3 dims or INT_MAX entries), SG_ERR_LAYOUT, SG_ERR_DTYPE,
 * SG_ERR_INDEX (an index outside [0, rows); the message names the rank and position),
 * SG_ERR_NOMEM, SG_ERR_IO. */
SG_API sg_tensor *sg_dist_table_lookup(sg_dist_table *t, sg_tensor *idx);
/* Sends the gradient of the latest lookup's output (zeros where it has none) to the rows'
 * owners and sets each shard's gradient (sg_tensor_set_grad) to the COO tensor of the rows
 * it received (nnz 0 when none: the shard still takes its step, as an unsharded table
 * would). Call after sg_backward and before sg_optim_step and sg_tape_reset, once per
 * lookup. Collective. Errors, on every rank: SG_ERR_NULL, SG_ERR_STATE (no lookup since
 * the last backward), SG_ERR_NOMEM, SG_ERR_IO (SG_ERR_NOMEM after the exchange leaves
 * that rank's shard without its gradient). */
SG_API int sg_dist_table_backward(sg_dist_table *t);

/* Traffic of the latest lookup and backward, this rank; bytes are payload handed to MPI
 * for other ranks (a rank's requests to itself do not count). */
typedef struct {
    int64_t lookups, backwards; /* calls that succeeded so far */
    int64_t rows_requested;     /* indices this rank looked up */
    int64_t rows_served;        /* rows this rank's shard served (every rank's requests) */
    uint64_t bytes_lookup;      /* counts, indices sent, rows sent back */
    uint64_t bytes_backward;    /* gradient rows sent */
} sg_dist_table_stats;
SG_API int sg_dist_table_stats_get(const sg_dist_table *t, sg_dist_table_stats *out);

/* Checkpoints per shard. sg_dist_table_save: every rank writes its shard (and opt's state;
 * opt may be NULL, else its one parameter must be the shard) with sg_checkpoint_save to
 * its own file "<path>.<rank>-of-<P>" (atomically, as that function does), with the
 * metadata sgrad_dist.rank, .ranks, .row_begin, .row_end, .rows, .dim and .save_id (one
 * id per collective save, the same in every rank's file). Collective; SG_OK on every
 * rank only when every rank's file was written (a failure leaves the others' new files:
 * do not load that set). Errors: SG_ERR_NULL, SG_ERR_ARG (path too long, as
 * sg_checkpoint_save), SG_ERR_IO, SG_ERR_NOMEM, the same on every rank.
 * sg_dist_table_load: every rank reads "<path>.<rank>-of-<P>" into its shard (and opt,
 * registered as at the save; as sg_checkpoint_load), so training resumes exactly: in
 * deterministic mode N steps, a save, a load into fresh processes and M more steps give
 * the parameters of N + M steps. Another rank count Q (found as "<path>.0-of-<Q>" beside
 * path when this rank's file is missing): with opt NULL the values are re-partitioned,
 * each rank reading the old shards that overlap its rows (holding them at once while it
 * copies: up to R/Q + 1 rows more); the optimizer state, whose per-row bookkeeping is not
 * split, is then not loaded (start a fresh optimizer). With opt, another rank count is
 * refused: SG_ERR_STATE on every rank, naming Q. Every file read is checked first (rank,
 * ranks, rows, dim, row range, one save_id across all), and agreed, before any shard
 * changes; a rank whose sg_checkpoint_load then fails after the others loaded (a tensor
 * or an optimizer that differs: SG_ERR_DTYPE, SG_ERR_STATE) makes the call fail
 * everywhere with the others' shards loaded. As sg_checkpoint_load, a load restores the
 * context's random generator from the (last) file it reads. Collective. Errors: those of
 * sg_checkpoint_load, SG_ERR_IO (no file for this rank and no other save beside it). */
SG_API int sg_dist_table_save(sg_dist_table *t, const char *path, sg_optim *opt);
SG_API int sg_dist_table_load(sg_dist_table *t, const char *path, sg_optim *opt);

#ifdef __cplusplus
}
#endif
#endif
