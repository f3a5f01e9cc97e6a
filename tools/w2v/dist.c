/* sgrad-w2v under mpirun (built only with SGRAD_MPI; main.c calls it under W2V_WITH_MPI):
 * one model trained by P ranks, each on its share of the corpus, combined by periodic
 * merging of the whole tables (sg_w2v_merger in sgrad_models.h): every sync the ranks' changes to the
 * tables since the previous sync are summed and added to the tables of the previous
 * sync, which every rank keeps (`base`), by ring_merge. Invariants: after each sync every
 * rank holds the same tables and base equals them; every collective here is entered by
 * every rank in the same order (the trainer's step counts decide, never local data), and
 * MPI errors return (MPI_ERRORS_RETURN on a duplicate of MPI_COMM_WORLD) rather than end
 * the job silently. Every collective is the non-blocking form completed by `finish`
 * within the timeout: Open MPI 4 reports no error to the ranks left when one dies (and,
 * under `mpirun --enable-recovery`, leaves them waiting), so the deadline is what turns
 * a dead or stopped rank into a message and an exit. ring_merge uses point-to-point
 * messages (Open MPI's non-blocking allreduce made 2-rank runs 1.19x slower than its
 * blocking one): block b of P is summed in the ring's order from rank b, then sent to
 * every rank, the same bits everywhere (on 2 ranks a + b, the same either way).
 */
#include "w2v_tool.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

/* Floats per MPI call and per scratch buffer: MPI counts are int. */
#define W2V_DIST_CHUNK ((int64_t)1 << 22)

typedef struct {
    MPI_Comm comm;
    float *base[3]; /* the tables at the last sync: in, out, hs */
    float *scratch; /* ring_merge's two blocks: 2 (W2V_DIST_CHUNK / P + 1) floats */
    /* merge_hot's allreduce of the active flags: here, not on its stack, as a merge that
     * fails leaves it pending */
    int hot_active, hot_active_ranks;
} w2v_dist;

static bool mpi_started;
static int world_rank, world_size;
static double timeout_s; /* -dist-timeout, else SGRAD_DIST_TIMEOUT, else 300 */
static bool stalled;     /* a collective timed out and is still pending */

static int mpi_failed(int err, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS) len = 0;
    msg[len] = 0;
    fprintf(stderr, "sgrad-w2v: MPI failed in %s: %s\n", what, msg);
    return -1;
}

/* Completes the n requests q (err: what starting them returned) within timeout_s. 0, or
 * -1 with a message (MPI's error, or no answer in time: the requests then stay pending
 * and no later exchange starts). */
static int finish_all(int err, int n, MPI_Request *q, const char *what)
{
    if (err != MPI_SUCCESS) return mpi_failed(err, what);
    const double deadline = MPI_Wtime() + timeout_s;
    for (;;) {
        int done = 0;
        if ((err = MPI_Testall(n, q, &done, MPI_STATUSES_IGNORE)) != MPI_SUCCESS) return mpi_failed(err, what);
        if (done) return 0;
        if (MPI_Wtime() > deadline) break;
    }
    stalled = true;
    fprintf(stderr, "sgrad-w2v: rank %d of %d: no answer from the other ranks within %g s in %s: a rank has "
                    "died or stopped (-dist-timeout)\n", world_rank, world_size, timeout_s, what);
    return -1;
}
/* `start` (an MPI_I... call filling request q) made only while no collective is stalled,
 * then finished; 0 or -1. */
#define RUN(q, what, start) (stalled ? -1 : finish_all((start), 1, &(q), what))

/* Block b of n floats cut in `parts`: its first element and length. */
static int64_t block_at(int64_t n, int parts, int b)
{
    const int64_t at = (n + parts - 1) / parts * b;
    return at < n ? at : n;
}
static int block_len(int64_t n, int parts, int b)
{
    return (int)(block_at(n, parts, b + 1) - block_at(n, parts, b));
}

/* Merges one chunk of a table (x, base: n <= W2V_DIST_CHUNK floats) over the ranks:
 * x = base = base + (sum over the ranks of x - base), the same bits on every rank. A ring
 * reduce-scatter leaves rank r the sum of block r + 1, which it alone computes; a ring
 * allgather then sends the finished blocks round. The first step sends a block of x as it
 * is (every rank holds the same base, so the receiver takes its difference itself): no
 * pass writes the deltas out. Non-blocking sends and receives completed within the
 * timeout, entered by every rank in the same order, as a collective. 0 or -1. */
static int ring_merge(w2v_dist *d, float *x, float *base, int64_t n, const char *what)
{
    int P = 1, r = 0;
    MPI_Comm_size(d->comm, &P);
    MPI_Comm_rank(d->comm, &r);
    if (P == 1) return 0;
    const int next = (r + 1) % P, prev = (r + P - 1) % P;
    float *in = d->scratch, *partial = d->scratch + W2V_DIST_CHUNK / P + 1;
    MPI_Request q[2];
    for (int s = 0; s < P - 1; s++) {
        const int sb = (r - s + P) % P, rb = (r - s - 1 + 2 * P) % P;
        if (stalled) return -1;
        int err = MPI_Irecv(in, block_len(n, P, rb), MPI_FLOAT, prev, 0, d->comm, &q[0]);
        if (err == MPI_SUCCESS)
            err = MPI_Isend(s == 0 ? x + block_at(n, P, sb) : partial, block_len(n, P, sb), MPI_FLOAT, next, 0,
                            d->comm, &q[1]);
        if (finish_all(err, 2, q, what)) return -1;
        float *xb = x + block_at(n, P, rb), *bb = base + block_at(n, P, rb);
        const int len = block_len(n, P, rb);
        /* in: the previous rank's x at the first step, then its partial sum of deltas */
        if (s == 0 && P == 2)
            for (int j = 0; j < len; j++) xb[j] = bb[j] = bb[j] + ((xb[j] - bb[j]) + (in[j] - bb[j]));
        else if (s == 0)
            for (int j = 0; j < len; j++) partial[j] = (xb[j] - bb[j]) + (in[j] - bb[j]);
        else if (s < P - 2)
            for (int j = 0; j < len; j++) partial[j] = (xb[j] - bb[j]) + in[j];
        else
            for (int j = 0; j < len; j++) xb[j] = bb[j] = bb[j] + ((xb[j] - bb[j]) + in[j]);
    }
    for (int s = 0; s < P - 1; s++) {
        const int sb = (r + 1 - s + P) % P, rb = (r - s + P) % P;
        if (stalled) return -1;
        int err = MPI_Irecv(x + block_at(n, P, rb), block_len(n, P, rb), MPI_FLOAT, prev, 1, d->comm, &q[0]);
        if (err == MPI_SUCCESS)
            err = MPI_Isend(x + block_at(n, P, sb), block_len(n, P, sb), MPI_FLOAT, next, 1, d->comm, &q[1]);
        if (finish_all(err, 2, q, what)) return -1;
        memcpy(base + block_at(n, P, rb), x + block_at(n, P, rb), (size_t)block_len(n, P, rb) * sizeof(float));
    }
    return 0;
}

/* The first call records the tables after making every rank's rank 0's (one seed gives
 * them all the same start; the broadcast makes that a fact). */
static int record_base(w2v_dist *d, sg_tensor *const *tables)
{
    for (int k = 0; k < 3; k++) {
        if (!tables[k]) continue;
        float *x = sg_tensor_f32(tables[k]);
        const int64_t n = sg_tensor_numel(tables[k]);
        for (int64_t i = 0; i < n; i += W2V_DIST_CHUNK) {
            int c = (int)(n - i < W2V_DIST_CHUNK ? n - i : W2V_DIST_CHUNK);
            MPI_Request q;
            if (RUN(q, "the first sync", MPI_Ibcast(x + i, c, MPI_FLOAT, 0, d->comm, &q))) return -1;
        }
        if (!(d->base[k] = malloc((size_t)n * sizeof(float)))) {
            fprintf(stderr, "sgrad-w2v: out of memory for the sync's copy of the tables\n");
            return -1;
        }
        memcpy(d->base[k], x, (size_t)n * sizeof(float));
    }
    return 0;
}

static int sync_tables(sg_w2v_merger *p, sg_tensor *const *tables, bool active, bool *any_active)
{
    w2v_dist *d = p->impl;
    int flags[2] = {active, 0}, sums[2];
    MPI_Request q;
    if (RUN(q, "a sync", MPI_Iallreduce(flags, sums, 2, MPI_INT, MPI_SUM, d->comm, &q))) return -1;
    *any_active = sums[0] > 0;
    /* a local failure (out of memory) must not leave the others waiting: agreed first */
    int ranks = 1;
    MPI_Comm_size(d->comm, &ranks);
    int ok = d->scratch ||
             (d->scratch = malloc((size_t)2 * (W2V_DIST_CHUNK / ranks + 1) * sizeof(float)));
    int all_ok = 0;
    if (RUN(q, "a sync", MPI_Iallreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, d->comm, &q))) return -1;
    if (!all_ok) {
        fprintf(stderr, "sgrad-w2v: out of memory for a sync (on %s)\n", ok ? "another rank" : "this rank");
        return -1;
    }
    if (!d->base[0]) {
        /* the plan decides the merges' sizes: one computed otherwise (another libm) must
         * not mismatch messages */
        uint64_t h = tc_fnv1a(TC_FNV_OFFSET, &p->hot_levels, sizeof p->hot_levels);
        h = tc_fnv1a(h, p->hot_period, sizeof p->hot_period);
        h = tc_fnv1a(h, p->hot_in, sizeof p->hot_in);
        h = tc_fnv1a(h, p->hot_out, sizeof p->hot_out);
        h = tc_fnv1a(h, p->hot_node, sizeof p->hot_node);
        if (w2v_dist_agree(p, true, h, "the plan of hot-row merges")) return -1;
        ok = record_base(d, tables) == 0;
        if (RUN(q, "the first sync", MPI_Iallreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, d->comm, &q))) return -1;
        return ok ? 0 : -1;
    }
    for (int k = 0; k < 3; k++) {
        if (!tables[k]) continue;
        float *x = sg_tensor_f32(tables[k]), *base = d->base[k];
        const int64_t n = sg_tensor_numel(tables[k]);
        for (int64_t i = 0; i < n; i += W2V_DIST_CHUNK)
            if (ring_merge(d, x + i, base + i, n - i < W2V_DIST_CHUNK ? n - i : W2V_DIST_CHUNK, "a sync"))
                return -1;
    }
    return 0;
}

/* sg_w2v_merger's merge_hot: the rows of hot level `level`, the same ring merge
 * as a sync's on parts of the tables. Whether any rank is active is gathered too (else
 * ranks whose shares are done would run every hot merge up to the next sync: 3 ranks at
 * -sync-every 1000000 ran 82k an epoch, 20 s on a tiny corpus); its allreduce runs while
 * the ring's messages do, and is finished last. */
static int merge_hot(sg_w2v_merger *p, sg_tensor *const *tables, int level, bool active, bool *any_active)
{
    w2v_dist *d = p->impl;
    d->hot_active = active;
    MPI_Request q;
    if (stalled) return -1;
    int err = MPI_Iallreduce(&d->hot_active, &d->hot_active_ranks, 1, MPI_INT, MPI_SUM, d->comm, &q);
    if (err != MPI_SUCCESS) return mpi_failed(err, "a merge of hot rows");
    for (int k = 0; k < 3; k++) {
        if (!tables[k]) continue;
        int64_t lo, hi;
        sg_w2v_hot_rows(p, level, k, sg_tensor_shape(tables[k])[0], &lo, &hi);
        const int64_t dim = sg_tensor_shape(tables[k])[1], n = (hi - lo) * dim;
        float *x = sg_tensor_f32(tables[k]) + lo * dim, *base = d->base[k] + lo * dim;
        for (int64_t i = 0; i < n; i += W2V_DIST_CHUNK)
            if (ring_merge(d, x + i, base + i, n - i < W2V_DIST_CHUNK ? n - i : W2V_DIST_CHUNK, "a merge of hot rows"))
                return -1;
    }
    if (finish_all(MPI_SUCCESS, 1, &q, "a merge of hot rows")) return -1;
    *any_active = d->hot_active_ranks > 0;
    return 0;
}

int w2v_dist_agree(sg_w2v_merger *p, bool ok, uint64_t hash, const char *what)
{
    MPI_Comm comm = p ? ((w2v_dist *)p->impl)->comm : MPI_COMM_WORLD;
    int ranks = 1, rank = 0;
    MPI_Comm_size(comm, &ranks);
    MPI_Comm_rank(comm, &rank);
    uint64_t mine[2] = {ok, hash};
    uint64_t *all = malloc((size_t)ranks * sizeof mine);
    int have = all != NULL, all_have = 0;
    MPI_Request q;
    int rc = RUN(q, what, MPI_Iallreduce(&have, &all_have, 1, MPI_INT, MPI_MIN, comm, &q));
    if (rc || !all_have) {
        if (!rc) fprintf(stderr, "sgrad-w2v: out of memory checking %s\n", what);
        free(all);
        return -1;
    }
    if (RUN(q, what, MPI_Iallgather(mine, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, comm, &q))) {
        free(all);
        return -1;
    }
    for (int r = 0; r < ranks && rc == 0; r++)
        if (!all[2 * r]) {
            if (r != rank)
                fprintf(stderr, "sgrad-w2v: rank %d of %d: rank %d failed at %s (its message above)\n",
                        rank, ranks, r, what);
            rc = -1;
        } else if (all[2 * r + 1] != all[1]) {
            fprintf(stderr, "sgrad-w2v: rank %d of %d: ranks 0 and %d disagree on %s; every rank "
                            "must be given the same flags and corpus\n", rank, ranks, r, what);
            rc = -1;
        }
    free(all);
    return rc;
}

int w2v_dist_start(int *argc, char ***argv, w2v_flags *cfg, sg_w2v_merger **out)
{
    *out = NULL;
    int err = MPI_Init(argc, argv);
    if (err != MPI_SUCCESS) return mpi_failed(err, "MPI_Init");
    mpi_started = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int ranks = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    world_rank = rank;
    world_size = ranks;
    if (ranks == 1) return 0;
    timeout_s = cfg->dist_timeout;
    const char *env = getenv("SGRAD_DIST_TIMEOUT");
    if (timeout_s == 0 && env && !tc_parse_real(env, 1e-3, 1e9, &timeout_s)) {
        fprintf(stderr, "sgrad-w2v: rank %d of %d: SGRAD_DIST_TIMEOUT=%s is not a number of seconds "
                        "(0.001 to 1e9)\n", rank, ranks, env);
        return -1;
    }
    if (timeout_s == 0) timeout_s = 300; /* as sgrad_dist's SG_DIST_TIMEOUT_DEFAULT */
    uint64_t h = TC_FNV_OFFSET; /* the arguments, each NUL-ended */
    for (int i = 1; i < *argc; i++) h = tc_fnv1a(h, (*argv)[i], strlen((*argv)[i]) + 1);
    if (w2v_dist_agree(NULL, true, h, "the command line")) return -1;
    if (cfg->o.checkpoint || cfg->o.resume) {
        fprintf(stderr, "sgrad-w2v: -checkpoint and -resume are not supported under mpirun (%d ranks); "
                        "train with one process to checkpoint\n", ranks);
        return -1;
    }
    w2v_dist *d = calloc(1, sizeof *d);
    sg_w2v_merger *p = calloc(1, sizeof *p);
    int ok = d && p, all_ok = 0;
    MPI_Request q;
    int rc = RUN(q, "the start", MPI_Iallreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &q));
    if (rc || !all_ok) {
        if (!rc) fprintf(stderr, "sgrad-w2v: out of memory at the start\n");
        free(d);
        free(p);
        return -1;
    }
    if (RUN(q, "MPI_Comm_dup", MPI_Comm_idup(MPI_COMM_WORLD, &d->comm, &q))) {
        free(d);
        free(p);
        return -1;
    }
    MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    *p = (sg_w2v_merger){.rank = rank, .ranks = ranks, .sync_steps = cfg->o.sync_every,
                        .sync = sync_tables, .merge_hot = merge_hot, .impl = d};
    cfg->o.merger = p;
    *out = p;
    return 0;
}

void w2v_dist_abort(sg_w2v_merger *p)
{
    (void)p;
    MPI_Abort(MPI_COMM_WORLD, 1);
}

void w2v_dist_end(sg_w2v_merger *p)
{
    if (stalled) MPI_Abort(MPI_COMM_WORLD, 1);
    if (p) {
        w2v_dist *d = p->impl;
        for (int k = 0; k < 3; k++) free(d->base[k]);
        free(d->scratch);
        MPI_Comm_free(&d->comm);
        free(d);
        free(p);
    }
    if (mpi_started) MPI_Finalize();
    mpi_started = false;
}
