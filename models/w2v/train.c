/* The training loop: each epoch streams the corpus (or replays its token ids) into
 * batches, and each batch is one sgrad step. The loop reads as its parts: draw, step,
 * check, report, merge if due, save if due; one cleanup path (run_free).
 *
 * Several trainers (cfg->par: the program's MPI ranks, or -replicas, replicas.c): each
 * reads only its share of the corpus lines in every epoch, the learning rate and progress
 * count its words times the rank count (the shares are about equal in bytes), and every
 * cfg->sync_every steps, then at each epoch's end until every rank's share is done, the
 * ranks merge their tables through cfg->par->sync, and with 3+ ranks their hot rows in
 * between (w2v_plan_hot_merges, w2v_merge_due). Without cfg->par none of this runs.
 *
 * Threads: with 2+ threads the next batch is drawn on one thread while the other runs the
 * backward half; the forward half uses every thread. Called inside this region, the
 * library runs the backward's loops as tasks, which the drawing thread takes up once its
 * batch is drawn (at the region's end). Drawing depends only on the corpus and the random
 * stream, so results are the same. Hogwild mode instead runs the backward's racy update
 * on every thread.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "w2v.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A run: the trainer, the model, the optimizer and the counters between steps. */
typedef struct {
    const w2v_config *cfg;
    const tc_vocab *v;
    w2v_result *res;
    sg_model_error *err;
    w2v_trainer t;
    w2v_model m;
    sg_optim *opt;
    w2v_lr_record lr_rec;
    double alpha;
    int64_t total;       /* epochs x corpus tokens */
    int ranks;           /* the words read by all ranks: about ranks x this one's */
    int64_t share_begin; /* this rank's share's first byte */
    w2v_position at;     /* where the run starts (a checkpoint's position, or the start) */
    w2v_position saved;  /* the position of the coming checkpoint, taken before its fill */
    int threads, all_threads;
    bool pick;           /* w2v_pick: a step on one thread when that is faster */
    w2v_pick pk;
    double t0;
    int64_t tokens0;     /* read before this process: not in its speed */
    double epoch_loss, start_loss; /* start: the first step's loss per example */
    int64_t epoch_n;
    int64_t lr_tokens;   /* tokens read before the coming step's batch */
    int64_t since_sync;
    bool any_active;
    bool stop;           /* the event callback asked to stop */
    bool started;        /* run_start set the trainer's random stream (the model's rng follows it) */
} w2v_run;

/* The setup: trainer, model, optimizer, the starting position (a checkpoint's). */
static int run_setup(w2v_run *r)
{
    const w2v_config *cfg = r->cfg;
    w2v_parallel *par = cfg->par;
    r->alpha = w2v_alpha(cfg);
    r->ranks = par ? par->ranks : 1;
    const int64_t epoch_words = cfg->epoch_words > 0 ? cfg->epoch_words : r->v->total_tokens;
    r->total = (int64_t)cfg->iter * epoch_words;
    r->lr_rec = (w2v_lr_record){1, 0, r->total};
    if (w2v_config_check(cfg, r->err) || w2v_vocab_check(r->v, r->err)) return -1;
    if (epoch_words <= 0)
        return tc_fail(r->err, SG_ERR_ARG, "the vocabulary counted no tokens (count the corpus, or hand in "
                                           "its tokens, before training; or give the corpus's words per epoch)");
    if ((cfg->source && (par || cfg->checkpoint || cfg->resume)) || (!cfg->source && !cfg->train))
        return tc_fail(r->err, SG_ERR_ARG, cfg->source ? "tokens handed in train one model without checkpoints"
                                                         : "no corpus to train on");
    if (cfg->more && (par || cfg->checkpoint || cfg->resume))
        return tc_fail(r->err, SG_ERR_ARG, "continued training trains one model without checkpoints or resume "
                                           "(save the model between training calls)");
    int64_t share_end = 0;
    if (par && w2v_corpus_share(cfg->train, par->rank, par->ranks, &r->share_begin, &share_end))
        return tc_fail(r->err, SG_ERR_IO, "cannot read %s: %s", cfg->train, strerror(errno));
    if (w2v_trainer_setup(&r->t, cfg, r->v, &r->m, r->err) ||
        w2v_model_setup(&r->t, &r->m, &r->opt, &r->lr_rec, r->err))
        return -1;
    r->t.share_end = share_end;
    memset(&r->at, 0, sizeof r->at);
    r->at.rng = cfg->more ? r->m.rng : cfg->seed;
    if (cfg->resume && w2v_checkpoint_load(cfg->resume, cfg, r->v, &r->m, r->opt, &r->at, r->err)) {
        r->res->refused = true; /* refused before training, as the identity checks refuse */
        return -1;
    }
    return 0;
}

/* Path entries over the corpus: sum of count x path length (for the settings' line). */
static int64_t tree_entries(const tc_huffman *tree, const int64_t *counts)
{
    int64_t sum = 0;
    for (int64_t w = 0; w < tree->n; w++) sum += counts[w] * (tree->offsets[w + 1] - tree->offsets[w]);
    return sum;
}

/* The settings (level 2) and a resume's position (level 1) as INFO lines. */
static void run_describe(const w2v_run *r)
{
    const w2v_config *cfg = r->cfg;
    const w2v_trainer *t = &r->t;
    const int64_t T = cfg->negative + 1, V = r->v->size;
    tc_info(&cfg->ev, 2, "%s, %s%s%s, alpha %g, batch %lld examples, row hit caps: input %d, output %d, inner "
                         "nodes %d", cfg->cbow ? "cbow" : "skip-gram", T > 1 ? "negative sampling" : "",
            T > 1 && cfg->hs ? " + " : "", cfg->hs ? "hierarchical softmax" : "", r->alpha, (long long)t->cap,
            t->in_row_cap, t->row_cap, t->node_cap);
    int64_t longest = 0;
    for (int64_t w = 0; cfg->hs && w < V; w++)
        if (t->tree.offsets[w + 1] - t->tree.offsets[w] > longest) longest = t->tree.offsets[w + 1] - t->tree.offsets[w];
    if (cfg->hs)
        tc_info(&cfg->ev, 2, "Huffman tree: %lld inner nodes, paths %.2f nodes on average (by count), %lld at most",
                (long long)(V - 1), (double)tree_entries(&t->tree, r->v->counts) / (double)r->v->train_words,
                (long long)longest);
    if (cfg->resume)
        tc_info(&cfg->ev, 1, "resuming from %s: epoch %d of %d, step %lld, %.1f%% of the words", cfg->resume,
                r->at.epoch < cfg->iter ? r->at.epoch + 1 : cfg->iter, cfg->iter, (long long)r->at.steps,
                100.0 * (double)r->at.tokens / (double)r->total);
}

/* Merge `due` (w2v_merge_due's: 0 full, else a hot level), counted in res; 0 or -1. A full
 * merge tells every rank whether one asked to stop. */
static int run_merge(w2v_run *r, int due, bool active)
{
    w2v_parallel *par = r->cfg->par;
    sg_tensor *tables[3];
    w2v_model_tables(&r->m, tables);
    r->res->merges++;
    const int rc = due == 0 ? par->sync(par, tables, active, &r->any_active)
                            : par->merge_hot(par, tables, due, active, &r->any_active);
    if (rc) /* a merge that failed for its own reason has said so */
        return r->err && r->err->status ? -1 : tc_fail(r->err, SG_ERR_STATE, "the merge of the ranks' tables failed");
    if (due == 0 && par->stop) r->stop = true;
    return 0;
}

/* Where the records to replay come from (checkpoints record the reader's byte offset,
 * which a replay has not got): the vocabulary pass's, of this trainer's share (the whole
 * corpus, or a replica's part of it); else the first epoch's tokens, for the later ones.
 * Then the position's state, the clocks and the first merge. */
static int run_start(w2v_run *r)
{
    const w2v_config *cfg = r->cfg;
    w2v_parallel *par = cfg->par;
    if (cfg->corpus_codes && cfg->corpus_codes->code && w2v_replays_corpus(cfg))
        r->t.replay = cfg->corpus_codes;
    else if (!cfg->checkpoint && !cfg->resume && cfg->token_cache > 0 && cfg->iter > 1)
        tc_codes_start(&r->t.rec, cfg->token_cache); /* without memory, none: read */
    run_describe(r);
    r->t.rng.s = r->at.rng;
    r->started = true;
    r->t.tokens = r->at.tokens;
    r->res->steps = r->at.steps;
    r->res->examples = r->at.examples;
    r->threads = sg_ctx_threads(r->m.ctx);
    /* the progress counts every rank's words: per thread of them all */
    r->all_threads = !par ? r->threads : par->threads > 0 ? par->threads : r->ranks * r->threads;
    r->t0 = tc_now();
    r->tokens0 = r->t.tokens;
    r->epoch_loss = r->at.epoch_loss;
    r->start_loss = r->at.start_loss;
    r->epoch_n = r->at.epoch_examples;
    r->any_active = true;
    r->pick = r->threads > 1 && !cfg->hogwild;
    for (int k = 0; par && k < 3; k++) r->t.dirty[k] = par->dirty[k];
    if (par && w2v_plan_hot_merges(&r->t, par, r->alpha)) return tc_fail(r->err, SG_ERR_NOMEM, "out of memory");
    return par ? run_merge(r, 0, true) : 0; /* the common start */
}

/* Opens the epoch's reader at its start (a share's first byte) or a checkpoint's offset,
 * and sets the trainer's place there. An epoch that replays a record, or takes ids from a
 * source, reads no file (a closed reader). */
static int epoch_open(w2v_run *r, int ep)
{
    const w2v_config *cfg = r->cfg;
    w2v_trainer *t = &r->t;
    const bool mid_epoch = ep == r->at.epoch && r->at.offset > 0; /* an epoch's start has read nothing */
    const bool read = !t->replay && !cfg->source;
    if (read && tc_reader_open(&t->rd, cfg->train)) goto io_error;
    if (mid_epoch) {
        if (tc_reader_seek(&t->rd, r->at.offset)) goto io_error;
        t->epoch_done = r->at.epoch_done;
        t->len = r->at.len;
        t->pos = r->at.pos;
        memcpy(t->sen, r->at.sentence, (size_t)r->at.len * sizeof *t->sen);
        return 0;
    }
    if (read && r->share_begin > 0 && tc_reader_seek(&t->rd, r->share_begin)) goto io_error;
    t->epoch_done = false;
    t->len = t->pos = 0;
    t->at_tok = 0;
    t->src_at = t->src_n = 0;
    r->res->epochs_replayed += t->replay != NULL;
    r->epoch_loss = 0;
    r->epoch_n = 0;
    return 0;
io_error:
    return tc_fail(r->err, SG_ERR_IO, "cannot read %s: %s", cfg->train, strerror(errno));
}

/* Draws a batch (the epoch's first), timed. */
static void draw(w2v_run *r)
{
    const double tp = tc_now();
    w2v_fill_batch(&r->t);
    r->res->t_draw += tc_now() - tp;
}

/* The backward half beside the next batch's drawing (2 threads, deterministic mode). */
static int backward_beside_draw(w2v_run *r, sg_tensor *loss)
{
    double t_bwd = 0, t_fill = 0;
    int st = SG_OK;
    const double tp = tc_now();
#ifdef _OPENMP
#pragma omp parallel sections num_threads(2)
#endif
    {
#ifdef _OPENMP
#pragma omp section
#endif
        {
            const double t_in = tc_now();
            st = w2v_step_backward(r->m.ctx, loss, r->opt);
            t_bwd = tc_now() - t_in;
        }
#ifdef _OPENMP
#pragma omp section
#endif
        {
            const double t_in = tc_now();
            w2v_fill_batch(&r->t);
            t_fill = tc_now() - t_in;
        }
    }
    r->res->t_backward += t_bwd;
    r->res->t_draw += t_fill;
    r->res->t_overlapped += tc_now() - tp;
    return st;
}

/* One step on the drawn batch: forward, then the backward with the next batch's drawing
 * (beside it, or after it); *loss the step's loss, *save_now whether a checkpoint follows
 * (its position taken before the next batch is drawn). 0, or -1 with the reason. */
static int step(w2v_run *r, int ep, double *loss, bool *save_now)
{
    const w2v_config *cfg = r->cfg;
    r->lr_rec = (w2v_lr_record){sg_optim_steps(r->opt) + 1, r->lr_tokens * r->ranks, r->total};
    const int64_t n = r->t.n;
    const bool one = r->pick && w2v_pick_one(&r->pk);
    if (r->pick) sg_ctx_set_threads(r->m.ctx, one ? 1 : r->threads);
    const double t_step = tc_now();
    sg_tensor *l = w2v_step_forward(&r->t, &r->m, r->opt);
    r->res->t_forward += tc_now() - t_step;
    int st = l ? SG_OK : -1;
    *loss = l ? sg_tensor_get(l, 0) : 0;
    r->lr_tokens = r->t.tokens;
    /* a checkpoint after this step resumes by drawing the batch drawn next */
    *save_now = cfg->checkpoint && cfg->save_every > 0 && (sg_optim_steps(r->opt) + 1) % cfg->save_every == 0;
    if (*save_now) w2v_take_position(&r->t, ep, &r->saved);
    const double tp = tc_now();
    if (l && r->pick && !one) {
        st = backward_beside_draw(r, l);
    } else if (l) {
        st = w2v_step_backward(r->m.ctx, l, r->opt);
        const double t_mid = tc_now();
        r->res->t_backward += t_mid - tp;
        w2v_fill_batch(&r->t);
        r->res->t_draw += tc_now() - t_mid;
        if (r->pick) r->res->t_overlapped += tc_now() - tp; /* the two, in turn */
    }
    if (r->pick) {
        w2v_pick_record(&r->pk, one, tc_now() - t_step, n);
        r->res->steps_one_thread += one;
    }
    if (st) return tc_fail_ctx(r->err, r->m.ctx, "training step failed: ");
    return 0;
}

/* The step's loss: finite, and not past W2V_DIVERGED_FACTOR times the first step's per
 * example. 0, or -1 with the reason. */
static int check(w2v_run *r, double l, int64_t n)
{
    const double done = 100.0 * (double)r->t.tokens / (double)r->total;
    if (!isfinite(l))
        return tc_fail(r->err, SG_ERR_VALUE, "training diverged (loss %g) at %.1f%%; try a lower -alpha or -batch",
                       l, done);
    if (r->start_loss == 0) r->start_loss = l / (double)n;
    if (l / (double)n > W2V_DIVERGED_FACTOR * r->start_loss)
        return tc_fail(r->err, SG_ERR_VALUE, "training diverged (loss per example %g, %g at the start) at "
                                             "%.1f%%; try a lower -alpha or -batch",
                       l / (double)n, r->start_loss, done);
    return 0;
}

/* Counts the step and sends its event (the callback may ask to stop). */
static int report(w2v_run *r, int ep, double l, int64_t n)
{
    const w2v_config *cfg = r->cfg;
    r->epoch_loss += l;
    r->epoch_n += n;
    r->res->examples += n;
    r->res->steps++;
    const sg_event e = {.kind = SG_EVENT_STEP, .epoch = ep + 1, .epochs = cfg->iter,
                        .words = r->lr_tokens * r->ranks, .words_done = r->t.tokens * r->ranks,
                        .total_words = r->total, .steps = r->res->steps, .examples = n, .loss = l,
                        .lr = w2v_lr_decay(r->alpha, r->lr_rec.words, r->total), .elapsed_s = tc_now() - r->t0,
                        .threads = r->all_threads};
    if (tc_emit(&cfg->ev, &e)) {
        if (cfg->par) cfg->par->want_stop = true; /* every rank stops at the next full merge */
        else r->stop = true;
    }
    return 0;
}

/* The merge due after this step, if any (ranks and replicas). */
static int merge_if_due(w2v_run *r)
{
    w2v_parallel *par = r->cfg->par;
    const int due = par ? w2v_merge_due(par, ++r->since_sync) : -1;
    if (due < 0) return 0;
    if (due == 0) r->since_sync = 0;
    const double tp = tc_now();
    const int rc = run_merge(r, due, true);
    r->res->t_sync += tc_now() - tp;
    return rc;
}

/* A checkpoint at the position r->saved (or the one given), the counters now. */
static int save_checkpoint(w2v_run *r)
{
    const sg_event e = {.kind = SG_EVENT_SAVE, .steps = r->res->steps};
    tc_emit(&r->cfg->ev, &e); /* the log covers the checkpoint: a resume continues it */
    r->saved.steps = r->res->steps;
    r->saved.examples = r->res->examples;
    r->saved.start_loss = r->start_loss;
    r->saved.epoch_loss = r->epoch_loss;
    r->saved.epoch_examples = r->epoch_n;
    return w2v_checkpoint_save(r->cfg->checkpoint, r->cfg, r->v, &r->m, r->opt, &r->saved, r->err);
}

static int save_if_due(w2v_run *r, bool save_now) { return save_now ? save_checkpoint(r) : 0; }

/* This rank's share is done: it joins the others' merges (the ones their steps make)
 * until every rank's is. */
static int merge_until_all_done(w2v_run *r)
{
    w2v_parallel *par = r->cfg->par;
    const double tp = tc_now();
    while (par && r->any_active && !r->stop) {
        r->since_sync = w2v_next_merge(par, r->since_sync);
        int due = w2v_merge_due(par, r->since_sync);
        if (due > 0) {
            if (run_merge(r, due, false)) return -1;
            if (!r->any_active) due = 0; /* every share is done: on to the full merge */
        }
        if (due == 0) {
            r->since_sync = 0;
            if (run_merge(r, 0, false)) return -1;
        }
    }
    r->res->t_sync += tc_now() - tp;
    return 0;
}

/* The epoch's end: the merges of done shares, its event, and with -save-every 0 a
 * checkpoint (the last epoch's is run_finish's). */
static int epoch_end(w2v_run *r, int ep)
{
    const w2v_config *cfg = r->cfg;
    tc_reader_close(&r->t.rd);
    if (r->t.src_failed)
        return tc_fail(r->err, SG_ERR_ARG, "the token source failed or gave an id outside [-2, %lld)",
                       (long long)r->v->size);
    if (r->pick) sg_ctx_set_threads(r->m.ctx, r->threads);
    if (!r->stop && merge_until_all_done(r)) return -1;
    if (r->stop) return 0;
    const sg_event e = {.kind = SG_EVENT_EPOCH, .epoch = ep + 1, .epochs = cfg->iter, .steps = r->res->steps,
                        .examples = r->epoch_n, .loss = r->epoch_n ? r->epoch_loss / (double)r->epoch_n : NAN,
                        .elapsed_s = tc_now() - r->t0, .threads = r->all_threads,
                        .words_done = r->t.tokens * r->ranks, .total_words = r->total};
    tc_emit(&cfg->ev, &e);
    if (!cfg->checkpoint || cfg->save_every != 0 || ep + 1 >= cfg->iter) return 0;
    w2v_epoch_start_position(&r->t, ep + 1, &r->saved);
    return save_checkpoint(r);
}

/* One epoch: draw, then step by step until the epoch's batches are done. */
static int run_epoch(w2v_run *r, int ep)
{
    if (epoch_open(r, ep)) return -1;
    r->lr_tokens = r->t.tokens;
    r->since_sync = 0;
    r->any_active = true;
    draw(r);
    while (r->t.n > 0 && !r->stop) {
        const int64_t n = r->t.n;
        double l;
        bool save_now;
        if (step(r, ep, &l, &save_now) || check(r, l, n) || report(r, ep, l, n) || merge_if_due(r) ||
            save_if_due(r, save_now))
            return -1;
    }
    return epoch_end(r, ep);
}

/* The run's results and its end: the last event, and the final checkpoint (resuming from
 * it trains no more); a stopped run writes none. */
static int run_finish(w2v_run *r)
{
    const w2v_config *cfg = r->cfg;
    w2v_result *res = r->res;
    w2v_parallel *par = cfg->par;
    if (res->steps == 0 && par)
        return tc_fail(r->err, SG_ERR_VALUE, "share %d of %d of %s gave no training examples (no sentence of two "
                                             "vocabulary words; fewer ranks or replicas)", par->rank + 1, r->ranks,
                       cfg->train);
    if (res->steps == 0)
        return tc_fail(r->err, SG_ERR_VALUE, "%s gave no training examples (no sentence of two vocabulary words)",
                       cfg->train ? cfg->train : "the tokens handed in");
    sg_tape_reset(r->m.ctx);
    res->seconds = tc_now() - r->t0;
    res->final_loss = r->epoch_n ? r->epoch_loss / (double)r->epoch_n : NAN;
    /* With ranks or replicas, every rank's words: the shares split each epoch's corpus, so
     * all of them read `total` together (they never resume). This rank's own count times
     * the ranks is off by as much as the shares' words differ (1% on Brown's 2 shares). */
    res->tokens = r->t.tokens - r->tokens0;
    const int64_t trained = par ? r->total : res->tokens;
    res->threads = par ? r->all_threads : r->threads;
    res->words_per_sec_thread = (double)trained / (res->seconds > 0 ? res->seconds : 1e-9) / res->threads;
    const sg_event e = {.kind = SG_EVENT_END, .epoch = cfg->iter, .epochs = cfg->iter,
                        .words_done = r->t.tokens * r->ranks, .total_words = r->total, .steps = res->steps,
                        .loss = res->final_loss, .lr = r->alpha * 1e-4, .elapsed_s = res->seconds,
                        .threads = r->all_threads, .words = res->tokens};
    tc_emit(&cfg->ev, &e);
    if (r->stop) return SG_STOPPED;
    if (!cfg->checkpoint) return 0;
    w2v_epoch_start_position(&r->t, cfg->iter, &r->saved);
    return save_checkpoint(r);
}

/* The one cleanup path: the model goes to *mout on success (or a stop), and a continued
 * run's always (the caller's tables, at the last step done), with the random stream
 * where this run left it; else it is freed. A kept model keeps no tape, optimizer or
 * index tensors of the run. */
static void run_free(w2v_run *r, int rc, w2v_model *mout)
{
    const bool keep = (rc == 0 || rc == SG_STOPPED || r->cfg->more) && mout;
    if (keep && r->m.ctx) sg_tape_reset(r->m.ctx);
    sg_optim_free(r->opt);
    if (keep) w2v_trainer_free_tensors(&r->t);
    if (keep && r->started) r->m.rng = r->t.rng.s;
    w2v_trainer_free(&r->t);
    if (keep) *mout = r->m;
    else w2v_model_free(&r->m);
}

int w2v_train(const w2v_config *cfg, const tc_vocab *v, w2v_result *res, w2v_model *mout, sg_model_error *e)
{
    w2v_run r;
    memset(&r, 0, sizeof r);
    memset(res, 0, sizeof *res);
    r.cfg = cfg;
    r.v = v;
    r.res = res;
    r.err = e;
    res->vocab_size = v->size;
    if (cfg->more && mout) r.m = *mout; /* the tables to train on */
    int rc = run_setup(&r) || run_start(&r) ? -1 : 0;
    for (int ep = r.at.epoch; !rc && !r.stop && ep < cfg->iter; ep++) rc = run_epoch(&r, ep);
    if (!rc) rc = run_finish(&r);
    run_free(&r, rc, mout);
    return rc;
}
