/* The training loop: each epoch shuffles the training edges (a stream keyed by the seed and
 * the epoch), cuts them into batches of opts.batch edges, and each batch into chunks of
 * opts.chunk edges that share opts.negs uniform negatives (a stream keyed by seed, epoch,
 * batch, chunk) plus, with chunk_negs, the chunk's own true entities. A batch is one tape:
 * the chunks' ranking losses and the N3 term, divided by the batch's queries (two per
 * edge: its tail and head queries, or with reciprocal relations (h, r, t) and
 * (t, r + R, h)), then one backward and one optimizer step. The loop reads as its parts:
 * shuffle, batch, report, save if due; at an epoch's end evaluate if due; one cleanup
 * path (run_free).
 *
 * Determinism: every draw is counter-based and every parallel loop is inside sgrad's ops,
 * so the tables are the same bits for any thread count, and a run resumed at a batch
 * boundary ((epoch, batch) and the optimizer's state) continues bit for bit.
 *
 * Ranks (sg_kge_set_dist, P > 1): the same loop on every rank, one global batch a step,
 * so every rank makes the same collective calls in the same order whatever its share.
 * Each chunk's units (queries with reciprocal relations, else edges) are cut into P
 * contiguous slices (slice_of); a rank scores its slice against the chunk's negatives
 * (drawn from the same stream as in one process) and, with chunk_negs, against all the
 * chunk's true rows, masking each query's own. The entity rows a step needs are listed
 * first (list_rows, in the order chunk_loss asks for them) and fetched in one lookup of
 * the sharded table; ent_rows hands them out. So a rank's loss terms are exactly the one
 * process's terms of its slices: the model differs from one process's only by the order
 * of float sums (the relation gradient summed per rank, then over ranks; an entity row's
 * gradient summed in (rank, position) order; the N3 and loss sums per rank).
 */
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    sg_kge *m;
    const sg_kge_opts *o;
    kge_tables *tb;
    sg_kge_result *res;
    sg_model_error *err;
    tc_events ev;
    sg_optim *opt;
    kg_filter filter;
    bool has_filter;
    int64_t *perm;          /* the epoch's edge order */
    int64_t *xs, *rs, *ys;  /* a chunk's query rows, relation rows, true rows (2 chunk) */
    int64_t *negs;          /* its negatives (negs + 2 chunk) */
    int64_t n_edges, n_batches;
    kge_position at;
    double t0;
    int64_t edges;          /* trained by this call */
    bool stop;
    /* ranks only (dist non-NULL): */
    sg_kge_dist *dist;
    sg_tensor *shard;       /* this rank's entity rows [ebegin, eend); E is freed meanwhile */
    int64_t ebegin, eend;
    sg_optim *opt_rel;      /* the relation table's (opt steps the shard) */
    int64_t *want;          /* the step's entity ids in the order ent_rows hands them out */
    int64_t *iota;          /* iota[i] = i, i < cap_want: positions in the lookup */
    int64_t n_want, cap_want;
    sg_tensor *rows;        /* their lookup; rows [0, used) handed out */
    int64_t used;
} kge_run;

static sg_rank_loss_kind rank_kind(sg_kge_loss l)
{
    switch (l) {
    case SG_KGE_LOGISTIC: return SG_RANK_LOGISTIC;
    case SG_KGE_MARGIN: return SG_RANK_MARGIN;
    case SG_KGE_SELFADV: return SG_RANK_SELFADV;
    default: return SG_RANK_SOFTMAX;
    }
}

/* The optimizer of opts over p[0..n) of t's context; NULL with the reason. */
static sg_optim *make_optim(const kge_tables *t, const sg_kge_opts *o, sg_tensor *const *p, int n,
                            sg_model_error *e)
{
    sg_optim *opt = NULL;
    if (o->optim == SG_KGE_ADAGRAD || o->optim == SG_KGE_ROWWISE_ADAGRAD) {
        sg_adagrad_opts a = SG_ADAGRAD_OPTS_DEFAULT;
        a.lr = o->lr;
        opt = o->optim == SG_KGE_ADAGRAD ? sg_optim_adagrad(t->ctx, &a) : sg_optim_rowwise_adagrad(t->ctx, &a);
    } else if (o->optim == SG_KGE_SGD) {
        sg_sgd_opts s = SG_SGD_OPTS_DEFAULT;
        s.lr = o->lr;
        opt = sg_optim_sgd(t->ctx, &s);
    } else {
        sg_adam_opts a = SG_ADAM_OPTS_DEFAULT;
        a.lr = o->lr;
        opt = sg_optim_lazy_adam(t->ctx, &a);
    }
    /* the finite guard: a non-finite gradient refuses the whole step, so a diverged run
     * keeps the tables of its last finite step (a read of the gradient; no bit changes) */
    bool ok = opt != NULL && !sg_optim_set_check_finite(opt, 1);
    for (int i = 0; ok && i < n; i++) ok = !sg_optim_add_param(opt, p[i]);
    if (!ok) {
        tc_fail_ctx(e, t->ctx, "cannot make the optimizer: ");
        sg_optim_free(opt);
        return NULL;
    }
    return opt;
}

/* The filter of the validation ranking: every known triple. 0 or -1. */
static int setup_filter(kge_run *r)
{
    sg_kge *m = r->m;
    if (!r->o->eval_every || m->valid.n == 0) return 0;
    const kg_triples *sets[3] = {&m->train, &m->valid, &m->test};
    if (kg_filter_build(&r->filter, sets, 3, m->tb.n_ent, m->tb.n_rel))
        return tc_fail(r->err, SG_ERR_NOMEM, "out of memory for the validation filter");
    r->has_filter = true;
    return 0;
}

/* A rank's tables: its shard of E filled from E's start values (then E is freed: no rank
 * holds the whole table while training), and one optimizer for each table. 0 or -1. */
static int ranks_setup(kge_run *r)
{
    kge_tables *t = r->tb;
    sg_kge_dist *d = r->dist;
    r->shard = d->table(d, t->ctx, t->n_ent, t->dim, &r->ebegin, &r->eend, r->err);
    if (!r->shard) return -1;
    memcpy(sg_tensor_f32(r->shard), sg_tensor_f32(t->E) + r->ebegin * t->dim,
           (size_t)((r->eend - r->ebegin) * t->dim) * sizeof(float));
    sg_tensor_free(t->E);
    t->E = NULL;
    r->opt = make_optim(t, r->o, &r->shard, 1, r->err);
    r->opt_rel = r->opt ? make_optim(t, r->o, &t->R, 1, r->err) : NULL;
    return r->opt_rel ? 0 : -1;
}

/* Loads o.resume: the tables (one process), or the replicated file and then this rank's
 * shard. Every rank reads the same replicated file, so a refusal (another rank count,
 * other options) is the same on every rank, before any shard moves. 0 or -1. */
static int resume(kge_run *r)
{
    if (!r->dist) return kge_checkpoint_resume(r->m, r->opt, &r->at, r->err);
    if (kge_checkpoint_resume(r->m, r->opt_rel, &r->at, r->err)) return -1;
    return r->dist->load(r->dist, r->o->resume, r->opt, r->err);
}

/* The run's buffers, optimizer, filter, and its start (a checkpoint's position). */
static int run_setup(kge_run *r)
{
    const sg_kge_opts *o = r->o;
    const int64_t chunk = o->chunk < o->batch ? o->chunk : o->batch;
    r->n_edges = r->m->train.n;
    r->n_batches = (r->n_edges + o->batch - 1) / o->batch;
    r->perm = malloc((size_t)r->n_edges * sizeof *r->perm);
    r->xs = malloc((size_t)(2 * chunk) * sizeof *r->xs);
    r->rs = malloc((size_t)(2 * chunk) * sizeof *r->rs);
    r->ys = malloc((size_t)(2 * chunk) * sizeof *r->ys);
    r->negs = malloc((size_t)(o->negs + 2 * chunk) * sizeof *r->negs);
    if (!r->perm || !r->xs || !r->rs || !r->ys || !r->negs) return tc_fail(r->err, SG_ERR_NOMEM, "out of memory");
    sg_tensor *both[2] = {r->tb->E, r->tb->R};
    if (r->dist ? ranks_setup(r) : !(r->opt = make_optim(r->tb, o, both, 2, r->err))) return -1;
    if (setup_filter(r)) return -1;
    memset(&r->at, 0, sizeof r->at);
    if (o->resume && resume(r)) {
        r->res->refused = true;
        return -1;
    }
    if (o->resume)
        tc_info(&r->ev, 1, "resuming from %s: epoch %d of %d, batch %lld, step %lld", o->resume,
                r->at.epoch < o->epochs ? r->at.epoch + 1 : o->epochs, o->epochs, (long long)r->at.batch,
                (long long)r->at.steps);
    r->res->steps = 0;
    r->res->epochs_done = r->at.epoch;
    r->t0 = tc_now();
    return 0;
}

/* The epoch's edge order: a Fisher-Yates shuffle of 0..n-1 from the epoch's stream. */
static void shuffle(kge_run *r, int ep)
{
    tc_rng g = kge_stream(r->o->seed, KGE_STREAM_SHUFFLE, (uint64_t)ep, 0, 0);
    for (int64_t i = 0; i < r->n_edges; i++) r->perm[i] = i;
    for (int64_t i = r->n_edges - 1; i > 0; i--) {
        const int64_t j = tc_rng_below(&g, (uint32_t)(i + 1));
        const int64_t x = r->perm[i];
        r->perm[i] = r->perm[j], r->perm[j] = x;
    }
}

/* The chunk's uniform negatives into r->negs[0..negs); returns negs. */
static int64_t draw_negatives(kge_run *r, int ep, int64_t b, int64_t c)
{
    tc_rng g = kge_stream(r->o->seed, KGE_STREAM_NEGS, (uint64_t)ep, (uint64_t)b, (uint64_t)c);
    for (int64_t j = 0; j < r->o->negs; j++) r->negs[j] = tc_rng_below(&g, (uint32_t)r->m->ent_train);
    return r->o->negs;
}

static int64_t chunk_units(kge_run *r, const int64_t *edges, int64_t M);

/* ---- a rank's share of a step (dist non-NULL) */

/* This rank's contiguous slice [*a, *a + *n) of a chunk's U units. */
static void slice_of(const kge_run *r, int64_t U, int64_t *a, int64_t *n)
{
    const int64_t P = r->dist->ranks, k = r->dist->rank;
    *a = U * k / P;
    *n = U * (k + 1) / P - *a;
}

/* Appends ids[0..n) to the step's list. 0 or -1. */
static int want_push(kge_run *r, const int64_t *ids, int64_t n)
{
    if (r->n_want + n > r->cap_want) {
        const int64_t cap = 2 * (r->n_want + n);
        int64_t *w = realloc(r->want, (size_t)cap * sizeof *w), *p = NULL;
        if (w) r->want = w, p = realloc(r->iota, (size_t)cap * sizeof *p);
        if (!p) return tc_fail(r->err, SG_ERR_NOMEM, "out of memory");
        r->iota = p;
        for (int64_t i = r->cap_want; i < cap; i++) p[i] = i;
        r->cap_want = cap;
    }
    memcpy(r->want + r->n_want, ids, (size_t)n * sizeof *ids);
    r->n_want += n;
    return 0;
}

/* The entity ids of this rank's slices of batch b, in the order chunk_loss and side_loss
 * ask ent_rows for them, fetched in one lookup into r->rows. Collective. 0 or -1. */
static int list_rows(kge_run *r, int ep, int64_t b, int64_t n_edges)
{
    const sg_kge_opts *o = r->o;
    const int64_t lo = b * o->batch;
    int rc = 0;
    r->n_want = r->used = 0;
    for (int64_t at = 0, c = 0; !rc && at < n_edges; at += o->chunk, c++) {
        const int64_t M = n_edges - at < o->chunk ? n_edges - at : o->chunk;
        draw_negatives(r, ep, b, c);
        const int64_t U = chunk_units(r, r->perm + lo + at, M);
        int64_t a, n;
        slice_of(r, U, &a, &n);
        if (!n) continue;
        const int64_t cn = o->chunk_negs ? U : 0;
        rc = want_push(r, r->xs + a, n) || want_push(r, r->ys + a, n) || want_push(r, r->negs, o->negs) ||
             want_push(r, r->ys, cn);
        if (!rc && !r->tb->reciprocal) /* the head side's negatives */
            rc = want_push(r, r->negs, o->negs) || want_push(r, r->xs, o->chunk_negs ? M : 0);
    }
    /* every rank enters the lookup, a failed one with no ids, so that none waits */
    sg_tensor *idx = kge_index(r->tb->ctx, r->want, rc ? 0 : r->n_want);
    r->rows = idx ? r->dist->lookup(r->dist, idx, r->err) : NULL;
    if (!idx) tc_fail_ctx(r->err, r->tb->ctx, "");
    return rc || !r->rows ? -1 : 0;
}

/* The optimizers' step (opt, then opt_rel under ranks) after the step's loss; a loss or a
 * gradient that is not finite refuses it (the finite guard changes nothing then), so the
 * tables keep the last finite step's values. 0 or -1. */
static int apply_step(kge_run *r, int ep, double loss)
{
    const long long step = (long long)r->at.steps + 1;
    if (!isfinite(loss))
        return tc_fail(r->err, SG_ERR_VALUE, "training diverged at epoch %d, step %lld: loss %g; try a lower -lr",
                       ep + 1, step, loss);
    int rc = sg_optim_step(r->opt);
    if (!rc && r->opt_rel) rc = sg_optim_step(r->opt_rel);
    if (rc == SG_ERR_VALUE)
        return tc_fail(r->err, SG_ERR_VALUE,
                       "training diverged at epoch %d, step %lld: non-finite gradient; try a lower -lr", ep + 1, step);
    return rc ? tc_fail_ctx(r->err, r->tb->ctx, "training step failed: ") : 0;
}

/* A rank's step after its loss L (NULL: none, or a local failure): backward, the entity
 * rows' gradients to their owners, the relation gradient summed over the ranks, the
 * loss summed (with a failure flag, so that every rank fails together), the same step
 * everywhere. Collective. 0 or -1. */
static int rank_step(kge_run *r, int ep, sg_tensor *L, bool none, double *loss)
{
    sg_kge_dist *d = r->dist;
    const bool ok = (L || none) && (!L || !sg_backward(L));
    if (!ok && r->err && !r->err->status) tc_fail_ctx(r->err, r->tb->ctx, "training step failed: ");
    if (d->backward(d, r->err) || d->reduce(d, r->tb->R, r->err)) return -1;
    double x[2] = {ok ? *loss : 0.0, ok ? 0.0 : 1.0};
    if (d->sum(d, x, 2, r->err)) return -1;
    if (x[1] != 0) return ok ? tc_fail(r->err, SG_ERR_STATE, "another rank's training step failed") : -1;
    *loss = x[0];
    return apply_step(r, ep, *loss); /* the same loss on every rank: a non-finite one fails all */
}

/* The whole entity table into E (allocated when absent) on every rank. Collective: the
 * ranks agree on E's allocation first, so a rank that has none fails with the others
 * rather than leave them waiting in the gather. */
static int gather(kge_run *r)
{
    kge_tables *t = r->tb;
    const int64_t shape[2] = {t->n_ent, t->dim};
    const bool ok = t->E || (t->E = sg_tensor_requires_grad(sg_tensor_new(t->ctx, SG_F32, 2, shape), 1));
    if (!ok) tc_fail_ctx(r->err, t->ctx, "cannot gather the entity table: ");
    double bad = ok ? 0.0 : 1.0;
    if (r->dist->sum(r->dist, &bad, 1, r->err)) return -1;
    if (bad != 0) return ok ? tc_fail(r->err, SG_ERR_NOMEM, "another rank could not gather the entity table") : -1;
    return r->dist->gather(r->dist, sg_tensor_f32(t->E), r->err);
}

/* Every rank stops when one was asked to (its event callback), and fails when one failed
 * (failed: this rank's step; the finite guard may refuse one rank's shard step alone).
 * Collective. 0 or -1. */
static int agree_stop(kge_run *r, bool failed)
{
    if (!r->dist) return failed ? -1 : 0;
    double x[2] = {r->stop ? 1.0 : 0.0, failed ? 1.0 : 0.0};
    if (r->dist->sum(r->dist, x, 2, r->err)) return -1;
    r->stop = x[0] != 0;
    if (x[1] != 0) return failed ? -1 : tc_fail(r->err, SG_ERR_STATE, "another rank's training step failed");
    return 0;
}

/* Entity rows idx[0..n) on the tape: one process looks them up in E; a rank takes the
 * next n rows of its step's lookup, which listed the same ids in the same order (checked:
 * a mismatch is a bug, reported rather than trained on), by index_select, whose gradient
 * is the rows taken (sg_narrow's would be the whole lookup's size each time). NULL on
 * error. */
static sg_tensor *ent_rows(kge_run *r, const int64_t *idx, int64_t n)
{
    if (!r->dist) return sg_embedding(r->tb->E, kge_index(r->tb->ctx, idx, n), NULL);
    if (r->used + n > r->n_want || memcmp(r->want + r->used, idx, (size_t)n * sizeof *idx)) {
        tc_fail(r->err, SG_ERR_STATE, "internal error: a step's entity rows were listed out of order");
        return NULL;
    }
    sg_tensor *x = sg_index_select(r->rows, 0, kge_index(r->tb->ctx, r->iota + r->used, n));
    r->used += n;
    return x;
}

/* One side's ranking loss: queries q with true rows y (m, the slice at unit a of the
 * chunk's U units, true ids ys[0..U)) against the chunk's uniform negatives and, with
 * chunk_negs, the chunk's true rows ys[0..U), each query's own masked. */
static sg_tensor *side_loss(kge_run *r, sg_tensor *q, sg_tensor *y, const int64_t *ys, int64_t U, int64_t a)
{
    const sg_kge_opts *o = r->o;
    if (o->chunk_negs) memcpy(r->negs + o->negs, ys, (size_t)U * sizeof *ys);
    const int64_t n = o->negs + (o->chunk_negs ? U : 0);
    sg_tensor *nrows = ent_rows(r, r->negs, n);
    const sg_rank_loss_opts lo = {rank_kind(o->loss), o->margin, o->adv_temp, o->chunk_negs ? o->negs + a : -1};
    return sg_ranking_loss(kge_score_rows(r->tb, q, y), kge_score_cross(r->tb, q, nrows, NULL), &lo);
}

/* a + b where either may be NULL (none yet). */
static sg_tensor *add_opt(sg_tensor *a, sg_tensor *b) { return !a ? b : !b ? a : sg_add(a, b); }

/* The chunk's edges[0..M) as units: xs, rs, ys[0..M) the tail queries (h, r) -> t and,
 * with reciprocal relations, [M, 2M) the inverse ones (t, r + R) -> h. Returns the units:
 * 2M with reciprocal relations (queries), else M (edges, each ranked on both sides). */
static int64_t chunk_units(kge_run *r, const int64_t *edges, int64_t M)
{
    const sg_kge *m = r->m;
    const int64_t R = r->tb->n_rel;
    for (int64_t i = 0; i < M; i++) {
        const int64_t e = edges[i], h = m->train.h[e], rel = m->train.r[e], tl = m->train.t[e];
        r->xs[i] = h, r->rs[i] = rel, r->ys[i] = tl;
        r->xs[M + i] = tl, r->rs[M + i] = rel + R, r->ys[M + i] = h; /* reciprocal only */
    }
    return r->tb->reciprocal ? 2 * M : M;
}

/* Units [a, a + n) of a chunk of M edges (U units, from chunk_units) as one loss: the sum
 * of its ranking losses, and its N3 sum added to *reg. NULL on error (recorded). */
static sg_tensor *chunk_loss(kge_run *r, int64_t M, int64_t U, int64_t a, int64_t n, sg_tensor **reg)
{
    kge_tables *t = r->tb;
    sg_tensor *x = ent_rows(r, r->xs + a, n);
    sg_tensor *rr = sg_embedding(t->R, kge_index(t->ctx, r->rs + a, n), NULL);
    sg_tensor *y = ent_rows(r, r->ys + a, n);
    sg_tensor *loss = side_loss(r, kge_query(t, x, rr, false), y, r->ys, U, a);
    if (!t->reciprocal) /* the head side: Q_h(r, t) ranks the heads */
        loss = add_opt(loss, side_loss(r, kge_query(t, y, rr, true), x, r->xs, M, a));
    if (r->o->reg == SG_KGE_REG_N3) {
        sg_tensor *n3 = add_opt(add_opt(kge_n3(t, x, true), kge_n3(t, y, true)), kge_n3(t, rr, false));
        *reg = add_opt(*reg, t->reciprocal ? n3 : sg_scale(n3, 2.0)); /* each row in two queries */
    }
    return loss;
}

/* The batch's loss per query (sum over chunks' units [a, a + n) of this rank's slice, N3
 * term added, divided by the batch's 2 n_edges queries); NULL with *none set when this
 * rank has no units in the batch, NULL alone on error. */
static sg_tensor *batch_loss(kge_run *r, int ep, int64_t b, int64_t n_edges, bool *none)
{
    const sg_kge_opts *o = r->o;
    const int64_t lo = b * o->batch;
    sg_tensor *total = NULL, *reg = NULL;
    bool ok = true;
    for (int64_t at = 0, c = 0; ok && at < n_edges; at += o->chunk, c++) {
        const int64_t M = n_edges - at < o->chunk ? n_edges - at : o->chunk;
        draw_negatives(r, ep, b, c);
        const int64_t U = chunk_units(r, r->perm + lo + at, M);
        int64_t a = 0, n = U;
        if (r->dist) slice_of(r, U, &a, &n);
        if (!n) continue;
        sg_tensor *l = chunk_loss(r, M, U, a, n, &reg);
        ok = l != NULL;
        total = add_opt(total, l);
    }
    *none = ok && !total;
    if (!ok || !total) return NULL;
    if (reg) total = sg_add(total, sg_scale(reg, o->reg_coef));
    return sg_scale(total, 1.0 / (double)(2 * n_edges));
}

/* Batch b of epoch ep: its tape, backward and step (a rank's: its share, the exchanges,
 * the same step on every rank). *loss: the batch's loss per query. */
static int train_batch(kge_run *r, int ep, int64_t b, double *loss, int64_t *queries)
{
    const sg_kge_opts *o = r->o;
    const int64_t lo = b * o->batch, n = r->n_edges - lo < o->batch ? r->n_edges - lo : o->batch;
    *queries = 2 * n;
    bool none = false;
    const int listed = r->dist ? list_rows(r, ep, b, n) : 0;
    sg_tensor *L = listed ? NULL : batch_loss(r, ep, b, n, &none);
    *loss = L ? sg_tensor_get(L, 0) : none ? 0.0 : NAN;
    int rc;
    if (r->dist) /* entered after a local failure too (L NULL), so that every rank fails together */
        rc = rank_step(r, ep, L, none && !listed, loss);
    else
        rc = L && !sg_backward(L) ? apply_step(r, ep, *loss) : -1;
    if (rc && r->err && !r->err->status) tc_fail_ctx(r->err, r->tb->ctx, "training step failed: ");
    sg_tape_reset(r->tb->ctx);
    return rc;
}

/* Counts the step and sends its event (the callback may ask to stop). */
static void report(kge_run *r, int ep, int64_t n, double loss, int64_t queries)
{
    const sg_kge_opts *o = r->o;
    r->at.steps++;
    r->res->steps++;
    r->edges += n;
    r->at.epoch_loss += loss * (double)queries;
    r->at.epoch_queries += queries;
    const int64_t done = (int64_t)ep * r->n_edges + r->at.batch * o->batch;
    const sg_event e = {.kind = SG_EVENT_STEP, .epoch = ep + 1, .epochs = o->epochs, .words = n,
                        .words_done = done < (int64_t)(ep + 1) * r->n_edges ? done : (int64_t)(ep + 1) * r->n_edges,
                        .total_words = (int64_t)o->epochs * r->n_edges, .steps = r->at.steps, .examples = n,
                        .loss = loss * (double)queries, .lr = o->lr, .elapsed_s = tc_now() - r->t0,
                        .threads = sg_ctx_threads(r->tb->ctx), .valid_mrr = -1};
    if (tc_emit(&r->ev, &e)) r->stop = true;
}

/* A checkpoint at the current position. */
static int save_checkpoint(kge_run *r)
{
    const sg_event e = {.kind = SG_EVENT_SAVE, .steps = r->at.steps, .valid_mrr = -1};
    tc_emit(&r->ev, &e);
    sg_kge_dist *d = r->dist;
    if (!d) return kge_checkpoint_save(r->m, r->opt, &r->at, r->err);
    if (d->save(d, r->o->checkpoint, r->opt, r->err)) return -1; /* the shards' files */
    double bad = d->rank == 0 && kge_checkpoint_save(r->m, r->opt_rel, &r->at, r->err) ? 1.0 : 0.0;
    if (d->sum(d, &bad, 1, r->err)) return -1;
    if (bad != 0 && d->rank)
        return tc_fail(r->err, SG_ERR_IO, "rank 0 could not write the checkpoint %s", r->o->checkpoint);
    return bad != 0 ? -1 : 0;
}

/* The MRR of the first n validation triples into *mrr. 0 or -1. */
static int rank_valid(kge_run *r, int64_t n, double *mrr)
{
    const sg_kge *m = r->m;
    double *ranks = malloc((size_t)(2 * n) * sizeof *ranks);
    if (!ranks) return tc_fail(r->err, SG_ERR_NOMEM, "out of memory");
    const int rc = kge_rank_triples(r->tb, m->valid.h, m->valid.r, m->valid.t, n, &r->filter, ranks, r->err);
    sg_kge_metrics met;
    if (!rc) kge_metrics_of(ranks, n, &met), *mrr = r->res->valid_mrr = met.mrr;
    free(ranks);
    return rc;
}

/* rank_valid under ranks: the table gathered, rank 0 ranks, every rank gets its MRR (and
 * its failure); the whole table is dropped again. Collective. 0 or -1. */
static int validate_ranks(kge_run *r, int64_t n, double *mrr)
{
    sg_kge_dist *d = r->dist;
    if (gather(r)) return -1;
    const int rc = d->rank == 0 ? rank_valid(r, n, mrr) : 0;
    sg_tensor_free(r->tb->E);
    r->tb->E = NULL;
    double x[2] = {rc ? 1.0 : 0.0, d->rank == 0 && !rc ? *mrr : 0.0};
    if (d->sum(d, x, 2, r->err)) return -1;
    if (x[0] != 0) return rc ? -1 : tc_fail(r->err, SG_ERR_STATE, "rank 0 failed the validation ranking");
    *mrr = r->res->valid_mrr = x[1];
    return 0;
}

/* The validation MRR over the first max_eval triples; -1 when none is due. */
static int validate(kge_run *r, int ep, double *mrr)
{
    const sg_kge *m = r->m;
    *mrr = -1;
    if (!r->has_filter || (ep + 1) % r->o->eval_every) return 0;
    const int64_t n = r->o->max_eval > 0 && r->o->max_eval < m->valid.n ? r->o->max_eval : m->valid.n;
    if (r->dist) return validate_ranks(r, n, mrr);
    return rank_valid(r, n, mrr);
}

/* The epoch's end: validation if due, its event, and with -save-every 0 a checkpoint. */
static int epoch_end(kge_run *r, int ep)
{
    const sg_kge_opts *o = r->o;
    double mrr;
    if (validate(r, ep, &mrr)) return -1;
    const double loss = r->at.epoch_queries ? r->at.epoch_loss / (double)r->at.epoch_queries : NAN;
    r->res->final_loss = loss;
    r->res->epochs_done = ep + 1;
    const sg_event e = {.kind = SG_EVENT_EPOCH, .epoch = ep + 1, .epochs = o->epochs, .steps = r->at.steps,
                        .examples = r->n_edges, .loss = loss, .elapsed_s = tc_now() - r->t0,
                        .threads = sg_ctx_threads(r->tb->ctx), .words_done = (int64_t)(ep + 1) * r->n_edges,
                        .total_words = (int64_t)o->epochs * r->n_edges, .valid_mrr = mrr};
    if (tc_emit(&r->ev, &e)) r->stop = true;
    r->at = (kge_position){.epoch = ep + 1, .steps = r->at.steps};
    if (!o->checkpoint || o->save_every != 0 || ep + 1 >= o->epochs) return 0;
    return save_checkpoint(r);
}

/* One epoch from the position's batch on. */
static int run_epoch(kge_run *r, int ep)
{
    const sg_kge_opts *o = r->o;
    shuffle(r, ep);
    while (r->at.batch < r->n_batches && !r->stop) {
        double loss;
        int64_t queries;
        const int64_t b = r->at.batch, n = r->n_edges - b * o->batch < o->batch ? r->n_edges - b * o->batch : o->batch;
        const int rc = train_batch(r, ep, b, &loss, &queries);
        if (!rc) {
            r->at.batch++;
            report(r, ep, n, loss, queries);
        }
        if (agree_stop(r, rc != 0)) return -1;
        if (o->checkpoint && o->save_every > 0 && r->at.steps % o->save_every == 0 && save_checkpoint(r)) return -1;
    }
    if (r->stop) return 0;
    /* epoch_end's collectives agree on its failures themselves */
    return epoch_end(r, ep) || agree_stop(r, false) ? -1 : 0;
}

/* The results, the last event, and the final checkpoint (a stopped run writes none). */
static int run_finish(kge_run *r)
{
    sg_kge_result *res = r->res;
    res->seconds = tc_now() - r->t0;
    res->edges = r->edges;
    res->edges_per_sec = res->seconds > 0 ? (double)r->edges / res->seconds : 0;
    const sg_event e = {.kind = SG_EVENT_END, .epoch = r->o->epochs, .epochs = r->o->epochs,
                        .steps = r->at.steps, .loss = res->final_loss, .elapsed_s = res->seconds,
                        .words = r->edges, .words_done = (int64_t)res->epochs_done * r->n_edges,
                        .total_words = (int64_t)r->o->epochs * r->n_edges,
                        .threads = sg_ctx_threads(r->tb->ctx), .valid_mrr = res->valid_mrr};
    tc_emit(&r->ev, &e);
    if (r->stop) return SG_STOPPED;
    return r->o->checkpoint ? save_checkpoint(r) : 0;
}

static void run_free(kge_run *r)
{
    sg_optim_free(r->opt);
    sg_optim_free(r->opt_rel);
    free(r->want);
    free(r->iota);
    if (r->dist) r->dist->release(r->dist); /* the shard with its table */
    if (r->has_filter) kg_filter_free(&r->filter);
    free(r->perm);
    free(r->xs);
    free(r->rs);
    free(r->ys);
    free(r->negs);
}

int kge_train(sg_kge *m, sg_kge_result *res, sg_model_error *e)
{
    kge_run r;
    memset(&r, 0, sizeof r);
    r.m = m;
    r.o = &m->o;
    r.tb = &m->tb;
    r.res = res;
    r.err = e;
    r.ev = (tc_events){m->o.on_event, m->o.event_ud, m->o.verbose};
    r.dist = m->dist && m->dist->ranks > 1 ? m->dist : NULL;
    res->valid_mrr = -1;
    int rc = run_setup(&r);
    for (int ep = r.at.epoch; !rc && !r.stop && ep < m->o.epochs; ep++) rc = run_epoch(&r, ep);
    if (!rc && r.dist) rc = gather(&r); /* the model whole on every rank */
    if (!rc) rc = run_finish(&r);
    run_free(&r);
    /* a failed ranked run holds no whole entity table (E freed, or only gathered in
     * part): the handle is left an empty model, so queries fail with "no trained model" */
    if (rc && rc != SG_STOPPED && r.dist) kge_tables_free(&m->tb);
    return rc;
}
