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

/* The optimizer of opts over both tables; NULL with the reason. */
static sg_optim *make_optim(const kge_tables *t, const sg_kge_opts *o, sg_model_error *e)
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
    if (!opt || sg_optim_add_param(opt, t->E) || sg_optim_add_param(opt, t->R)) {
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
    if (!(r->opt = make_optim(r->tb, o, r->err)) || setup_filter(r)) return -1;
    memset(&r->at, 0, sizeof r->at);
    if (o->resume && kge_checkpoint_resume(r->m, r->opt, &r->at, r->err)) {
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

/* One side's ranking loss: queries q with true rows y (M, looked up from ys) against the
 * chunk's uniform negatives and, with chunk_negs, the true rows ys[0..M). */
static sg_tensor *side_loss(kge_run *r, sg_tensor *q, sg_tensor *y, const int64_t *ys, int64_t M)
{
    const sg_kge_opts *o = r->o;
    if (o->chunk_negs) memcpy(r->negs + o->negs, ys, (size_t)M * sizeof *ys);
    const int64_t n = o->negs + (o->chunk_negs ? M : 0);
    sg_tensor *nrows = sg_embedding(r->tb->E, kge_index(r->tb->ctx, r->negs, n), NULL);
    const sg_rank_loss_opts lo = {rank_kind(o->loss), o->margin, o->adv_temp, o->chunk_negs ? o->negs : -1};
    return sg_ranking_loss(kge_score_rows(r->tb, q, y), kge_score_cross(r->tb, q, nrows, NULL), &lo);
}

/* a + b where either may be NULL (none yet). */
static sg_tensor *add_opt(sg_tensor *a, sg_tensor *b) { return !a ? b : !b ? a : sg_add(a, b); }

/* Edges perm[lo..lo+M) as one chunk: its ranking loss (sum over queries) and its N3 sum
 * (*reg, summed over its queries' rows). NULL on error (recorded on the context). */
static sg_tensor *chunk_loss(kge_run *r, const int64_t *edges, int64_t M, sg_tensor **reg)
{
    const sg_kge *m = r->m;
    kge_tables *t = r->tb;
    const int64_t R = t->n_rel;
    for (int64_t i = 0; i < M; i++) {
        const int64_t e = edges[i], h = m->train.h[e], rel = m->train.r[e], tl = m->train.t[e];
        r->xs[i] = h, r->rs[i] = rel, r->ys[i] = tl;
        r->xs[M + i] = tl, r->rs[M + i] = rel + R, r->ys[M + i] = h; /* reciprocal only */
    }
    const int64_t Q = t->reciprocal ? 2 * M : M;
    sg_tensor *x = sg_embedding(t->E, kge_index(t->ctx, r->xs, Q), NULL);
    sg_tensor *rr = sg_embedding(t->R, kge_index(t->ctx, r->rs, Q), NULL);
    sg_tensor *y = sg_embedding(t->E, kge_index(t->ctx, r->ys, Q), NULL);
    sg_tensor *loss = side_loss(r, kge_query(t, x, rr, false), y, r->ys, Q);
    if (!t->reciprocal) /* the head side: Q_h(r, t) ranks the heads */
        loss = add_opt(loss, side_loss(r, kge_query(t, y, rr, true), x, r->xs, M));
    if (r->o->reg == SG_KGE_REG_N3) {
        sg_tensor *n3 = add_opt(add_opt(kge_n3(t, x, true), kge_n3(t, y, true)), kge_n3(t, rr, false));
        *reg = add_opt(*reg, t->reciprocal ? n3 : sg_scale(n3, 2.0)); /* each row in two queries */
    }
    return loss;
}

/* Batch b of epoch ep: its tape, backward and step. *loss: its loss per query. */
static int train_batch(kge_run *r, int ep, int64_t b, double *loss, int64_t *queries)
{
    const sg_kge_opts *o = r->o;
    const int64_t lo = b * o->batch, n = r->n_edges - lo < o->batch ? r->n_edges - lo : o->batch;
    sg_tensor *total = NULL, *reg = NULL;
    bool ok = true;
    for (int64_t at = 0, c = 0; ok && at < n; at += o->chunk, c++) {
        const int64_t M = n - at < o->chunk ? n - at : o->chunk;
        draw_negatives(r, ep, b, c);
        sg_tensor *l = chunk_loss(r, r->perm + lo + at, M, &reg);
        ok = l != NULL;
        total = add_opt(total, l);
    }
    *queries = 2 * n;
    if (ok && reg) total = sg_add(total, sg_scale(reg, o->reg_coef));
    sg_tensor *L = ok ? sg_scale(total, 1.0 / (double)*queries) : NULL;
    *loss = L ? sg_tensor_get(L, 0) : NAN;
    const int rc = L && !sg_backward(L) && !sg_optim_step(r->opt) ? 0 : -1;
    if (rc) tc_fail_ctx(r->err, r->tb->ctx, "training step failed: ");
    sg_tape_reset(r->tb->ctx);
    if (!rc && !isfinite(*loss))
        return tc_fail(r->err, SG_ERR_VALUE, "training diverged (loss %g) at epoch %d, batch %lld; try a lower -lr",
                       *loss, ep + 1, (long long)b + 1);
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
    return kge_checkpoint_save(r->m, r->opt, &r->at, r->err);
}

/* The validation MRR over the first max_eval triples; -1 when none is due. */
static int validate(kge_run *r, int ep, double *mrr)
{
    const sg_kge *m = r->m;
    *mrr = -1;
    if (!r->has_filter || (ep + 1) % r->o->eval_every) return 0;
    const int64_t n = r->o->max_eval > 0 && r->o->max_eval < m->valid.n ? r->o->max_eval : m->valid.n;
    double *ranks = malloc((size_t)(2 * n) * sizeof *ranks);
    if (!ranks) return tc_fail(r->err, SG_ERR_NOMEM, "out of memory");
    const int rc = kge_rank_triples(r->tb, m->valid.h, m->valid.r, m->valid.t, n, &r->filter, ranks, r->err);
    sg_kge_metrics met;
    if (!rc) kge_metrics_of(ranks, n, &met), *mrr = r->res->valid_mrr = met.mrr;
    free(ranks);
    return rc;
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
        if (train_batch(r, ep, b, &loss, &queries)) return -1;
        r->at.batch++;
        report(r, ep, n, loss, queries);
        if (o->checkpoint && o->save_every > 0 && r->at.steps % o->save_every == 0 && save_checkpoint(r)) return -1;
    }
    return r->stop ? 0 : epoch_end(r, ep);
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
    res->valid_mrr = -1;
    int rc = run_setup(&r);
    for (int ep = r.at.epoch; !rc && !r.stop && ep < m->o.epochs; ep++) rc = run_epoch(&r, ep);
    if (!rc) rc = run_finish(&r);
    run_free(&r);
    return rc;
}
