/* -replicas R: R copies of the model in one process, each trained by its own
 * 1-thread trainer (w2v_train, in a thread of its own) on its share of the corpus and
 * merged as under mpirun (sg_w2v_merger in sgrad_models.h: the ranks are the replicas, the merges
 * run on shared memory). The vectors depend on R, never on -threads: at most `threads`
 * replicas compute at once (the others wait for a slot), and a merge is the same sum
 * whichever thread computes it. So -threads 1 and -threads 2 give the same file while
 * each replica's updates stay on its own core's cache lines, which is what keeps one
 * model's 2-thread steps from scaling (docs/word2vec.md "Replicas").
 *
 * A merge is two barriers: every replica arrives with its tables (giving up its slot),
 * then each takes a slot again and merges its block of rows into every replica's tables
 * and the shared base, then waits for the others' blocks. Element j becomes
 * base + ((x_0 - base) + (x_1 - base) + ...), summed in replica order (so 2 replicas
 * give mpirun -np 2's bits; from 3 on, the ring's order differs). A replica that fails
 * marks the run failed, which wakes every waiting replica with an error. A stop asked by
 * replica 0's event callback is seen by every replica at the next full merge, after
 * which all stop with the same tables. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "replicas.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

void w2v_rep_take_slot(rep_shared *s)
{
    while (s->slots == 0 && !s->failed) pthread_cond_wait(&s->cv, &s->mu);
    if (!s->failed) s->slots--;
}

static void give_slot(rep_shared *s)
{
    s->slots++;
    pthread_cond_broadcast(&s->cv);
}

/* Under the lock: waits, without a slot, until every replica has arrived; the last one
 * runs `last` first. Returns with a slot; false if the run failed. */
static bool barrier(rep_shared *s, void (*last)(rep_shared *))
{
    give_slot(s);
    const uint64_t g = s->generation;
    if (++s->arrived == s->replicas) {
        if (last) last(s);
        s->arrived = 0;
        s->generation++;
        pthread_cond_broadcast(&s->cv);
    } else {
        while (s->generation == g && !s->failed) pthread_cond_wait(&s->cv, &s->mu);
    }
    w2v_rep_take_slot(s);
    return !s->failed;
}

int64_t w2v_rep_merges_run, w2v_rep_full_merges_run; /* tests: merges so far, and full ones
                                                         (the first included) */
bool w2v_rep_hot_report_active; /* tests: hot merges say some replica is active, so the
                                   done replicas run every one (the skip's baseline) */

/* Run by the last replica to arrive at a merge: whether any is still active, and where
 * every replica's tables are. */
static void gather(rep_shared *s)
{
    w2v_rep_merges_run++;
    w2v_rep_full_merges_run += s->level == 0;
    s->any_active = false;
    for (int r = 0; r < s->replicas; r++) {
        s->any_active |= s->active[r];
        if (s->level == 0) s->stop |= s->want_stop[r];
        for (int k = 0; k < 3; k++) s->x[k][r] = s->tables[r][k] ? sg_tensor_f32(s->tables[r][k]) : NULL;
    }
}

/* Rows [lo, hi) of table k (in, out, hs) in every replica and in base: merged. */
static void merge_rows(const rep_shared *s, int k, int64_t lo, int64_t hi, int64_t dim)
{
    float *restrict b = s->base[k];
    float *const *x = s->x[k];
    if (s->replicas == 2) { /* the common case, in one pass the compiler vectorises */
        float *restrict x0 = x[0], *restrict x1 = x[1];
        for (int64_t j = lo * dim; j < hi * dim; j++) x0[j] = x1[j] = b[j] = b[j] + ((x0[j] - b[j]) + (x1[j] - b[j]));
        return;
    }
    for (int64_t j = lo * dim; j < hi * dim; j++) {
        float d = x[0][j] - b[j];
        for (int r = 1; r < s->replicas; r++) d += x[r][j] - b[j];
        b[j] += d;
        for (int r = 0; r < s->replicas; r++) x[r][j] = b[j];
    }
}

bool w2v_rep_merge_every_row; /* tests: merge every row, as if each were marked */

static bool row_changed(const rep_shared *s, int k, int64_t row)
{
    if (w2v_rep_merge_every_row) return true;
    for (int q = 0; q < s->replicas; q++)
        if (s->dirty[q][k][row]) return true;
    return false;
}

/* Replica r's block of the rows the merge at `level` covers, in each table: the rows
 * some replica changed since their last merge (w2v_parallel's dirty), in runs. */
static void merge_block(rep_shared *s, const w2v_parallel *p, int r)
{
    sg_tensor *const *tables = s->tables[0];
    for (int k = 0; k < 3; k++) {
        if (!tables[k]) continue;
        const int64_t dim = sg_tensor_shape(tables[k])[1];
        int64_t lo, hi;
        sg_w2v_hot_rows(p, s->level, k, sg_tensor_shape(tables[k])[0], &lo, &hi);
        const int64_t n = hi - lo, a = lo + n * r / s->replicas, b = lo + n * (r + 1) / s->replicas;
        for (int64_t i = a; i < b; i++) {
            if (!row_changed(s, k, i)) continue;
            int64_t j = i + 1;
            while (j < b && row_changed(s, k, j)) j++;
            merge_rows(s, k, i, j, dim);
            for (int q = 0; q < s->replicas; q++) memset(s->dirty[q][k] + i, 0, (size_t)(j - i));
            i = j; /* row j is unchanged (or past the block) */
        }
    }
}

/* The first barrier of a merge, entered with the lock held: this replica's tables and
 * whether it is still active; *any_active (when not NULL) whether any replica is. */
static bool arrive(rep_thread *me, sg_tensor *const *tables, int level, bool active, bool *any_active)
{
    rep_shared *s = me->s;
    for (int k = 0; k < 3; k++) s->tables[me->r][k] = tables[k];
    s->active[me->r] = active;
    s->want_stop[me->r] = me->par.want_stop;
    s->level = level;
    const bool ok = barrier(s, gather);
    if (any_active) *any_active = s->any_active || (level > 0 && w2v_rep_hot_report_active);
    me->par.stop = s->stop;
    return ok;
}

/* The merge (collective over the replicas) of `level`'s rows; `active` and *any_active
 * as w2v_parallel's sync. */
static int rep_merge(w2v_parallel *p, sg_tensor *const *tables, int level, bool active, bool *any_active)
{
    rep_thread *me = p->impl;
    rep_shared *s = me->s;
    pthread_mutex_lock(&s->mu);
    bool ok = arrive(me, tables, level, active, any_active);
    pthread_mutex_unlock(&s->mu);
    if (ok) merge_block(s, p, me->r); /* disjoint rows: outside the lock */
    pthread_mutex_lock(&s->mu);
    ok = ok && barrier(s, NULL);
    pthread_mutex_unlock(&s->mu);
    return ok ? 0 : -1;
}

static int rep_first(w2v_parallel *p, sg_tensor *const *tables, bool active, bool *any_active)
{
    rep_thread *me = p->impl;
    rep_shared *s = me->s;
    pthread_mutex_lock(&s->mu);
    bool ok = arrive(me, tables, 0, active, any_active);
    if (ok && me->r == 0) { /* replica 0's starting tables for all, and the base */
        for (int k = 0; k < 3 && ok; k++) {
            if (!tables[k]) continue;
            const size_t bytes = (size_t)sg_tensor_numel(tables[k]) * sizeof(float);
            if (!(s->base[k] = malloc(bytes))) {
                tc_fail(&me->err, SG_ERR_NOMEM, "out of memory for the replicas' merge");
                s->failed = true;
                pthread_cond_broadcast(&s->cv);
                ok = false;
                break;
            }
            memcpy(s->base[k], s->x[k][0], bytes);
            for (int r = 1; r < s->replicas; r++) memcpy(s->x[k][r], s->base[k], bytes);
        }
    }
    if (ok) ok = barrier(s, NULL);
    pthread_mutex_unlock(&s->mu);
    return ok ? 0 : -1;
}

int w2v_rep_sync(w2v_parallel *p, sg_tensor *const *tables, bool active, bool *any_active)
{
    rep_thread *me = p->impl;
    return me->s->base[0] ? rep_merge(p, tables, 0, active, any_active) : rep_first(p, tables, active, any_active);
}

static int rep_merge_hot(w2v_parallel *p, sg_tensor *const *tables, int level, bool active, bool *any_active)
{
    return rep_merge(p, tables, level, active, any_active);
}

void w2v_rep_finish(rep_shared *s, int rc)
{
    pthread_mutex_lock(&s->mu);
    if (rc) s->failed = true;
    give_slot(s);
    pthread_mutex_unlock(&s->mu);
}

static void *rep_run(void *arg)
{
    rep_thread *me = arg;
    rep_shared *s = me->s;
    pthread_mutex_lock(&s->mu);
    w2v_rep_take_slot(s);
    const bool failed = s->failed;
    pthread_mutex_unlock(&s->mu);
    me->rc = failed ? -1 : w2v_train(&me->cfg, me->v, &me->res, &me->model, &me->err);
    w2v_rep_finish(s, me->rc == SG_STOPPED ? 0 : me->rc);
    return NULL;
}

static void rep_free(rep_thread *th, rep_shared *s, int R)
{
    for (int r = 0; th && r < R; r++)
        for (int k = 0; k < 3; k++) free(th[r].par.dirty[k]);
    for (int k = 0; k < 3; k++) {
        free(s->base[k]);
        free(s->x[k]);
    }
    free(s->tables);
    free(s->active);
    free(s->want_stop);
    free(s->dirty);
    free(th);
}

/* The shared state and each replica's dirty rows; 0, or -1 with the reason. */
static int rep_alloc(rep_shared *s, rep_thread **th, const w2v_config *cfg, const tc_vocab *v, sg_model_error *e)
{
    const int R = s->replicas;
    *th = calloc((size_t)R, sizeof **th);
    s->tables = calloc((size_t)R, sizeof *s->tables);
    s->active = calloc((size_t)R, sizeof *s->active);
    s->want_stop = calloc((size_t)R, sizeof *s->want_stop);
    for (int k = 0; k < 3; k++) s->x[k] = calloc((size_t)R, sizeof *s->x[k]);
    s->dirty = calloc((size_t)R, sizeof *s->dirty);
    bool ok = *th && s->tables && s->active && s->want_stop && s->x[0] && s->x[1] && s->x[2] && s->dirty;
    const int64_t rows[3] = {v->size, cfg->negative > 0 ? v->size : 0, cfg->hs ? v->size - 1 : 0};
    for (int r = 0; ok && r < R; r++) {
        s->dirty[r] = (*th)[r].par.dirty;
        for (int k = 0; k < 3; k++)
            if (rows[k] > 0 && !((*th)[r].par.dirty[k] = calloc((size_t)rows[k], 1))) ok = false;
    }
    if (!ok) return tc_fail(e, SG_ERR_NOMEM, "out of memory for %d replicas", R);
    if (pthread_mutex_init(&s->mu, NULL)) return tc_fail(e, SG_ERR_STATE, "cannot set up the replicas' lock");
    if (pthread_cond_init(&s->cv, NULL)) {
        pthread_mutex_destroy(&s->mu);
        return tc_fail(e, SG_ERR_STATE, "cannot set up the replicas' lock");
    }
    return 0;
}

/* Each replica's part of the vocabulary pass's record (NULL: each reads its share of the
 * corpus, recording its first epoch): none without a record, or when the corpus no longer
 * matches it. */
static tc_codes *rep_shares(const w2v_config *cfg, const tc_vocab *v)
{
    tc_codes *share = NULL;
    if (cfg->corpus_codes && cfg->corpus_codes->code && w2v_replays_corpus(cfg) &&
        (!(share = calloc((size_t)cfg->replicas, sizeof *share)) ||
         w2v_share_records(cfg->train, v, cfg->corpus_codes, cfg->replicas, share))) {
        free(share);
        share = NULL;
    }
    return share;
}

/* Starts replica r's thread: replica 0 sends the events. 0, or -1 (the run failed). */
static int rep_start(rep_thread *t, pthread_t *tid, const w2v_config *cfg, const tc_codes *share, sg_model_error *e)
{
    rep_shared *s = t->s;
    t->cfg = *cfg;
    t->cfg.threads = 1;
    t->cfg.par = &t->par;
    t->cfg.corpus_codes = share ? &share[t->r] : NULL;
    if (t->r > 0) t->cfg.ev = (tc_events){0}; /* replica 0 reports the progress */
    t->par.rank = t->r;
    t->par.ranks = s->replicas;
    t->par.sync_steps = cfg->sync_every;
    t->par.sync = w2v_rep_sync;
    t->par.merge_hot = rep_merge_hot;
    t->par.threads = s->slots;
    t->par.impl = t;
    if (!pthread_create(tid, NULL, rep_run, t)) return 0;
    pthread_mutex_lock(&s->mu);
    s->failed = true; /* the started ones stop at their first merge */
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return tc_fail(e, SG_ERR_STATE, "cannot start replica %d's thread", t->r);
}

/* Waits for the started replicas; the result is replica 0's (tokens: all of theirs). The
 * error is the first replica's that is not a merge failing after another's failure. */
static int rep_collect(rep_thread *th, const pthread_t *tid, int started, int rc, w2v_result *res,
                       w2v_model *mout, sg_model_error *e)
{
    const sg_model_error *first = NULL;
    bool stopped = false;
    for (int r = 0; r < started; r++) {
        pthread_join(tid[r], NULL);
        stopped |= th[r].rc == SG_STOPPED;
        if (th[r].rc && th[r].rc != SG_STOPPED) {
            rc = -1;
            if (!first || (first->status == SG_ERR_STATE && strstr(first->message, "merge"))) first = &th[r].err;
        }
    }
    if (first && e) *e = *first;
    for (int r = 1; r < started; r++) w2v_model_free(&th[r].model);
    if (rc == 0) {
        *res = th[0].res;
        for (int r = 1; r < started; r++) res->tokens += th[r].res.tokens;
        *mout = th[0].model;
        return stopped ? SG_STOPPED : 0;
    }
    if (started > 0) w2v_model_free(&th[0].model);
    return rc;
}

int w2v_replicas_train(const w2v_config *cfg, const tc_vocab *v, int threads, w2v_result *res, w2v_model *mout,
                       sg_model_error *e)
{
    const int R = cfg->replicas, slots = threads < 1 ? 1 : threads < R ? threads : R;
    rep_shared s = {.replicas = R, .slots = slots};
    rep_thread *th = NULL;
    pthread_t *tid = calloc((size_t)R, sizeof *tid);
    if (!tid || rep_alloc(&s, &th, cfg, v, e)) {
        if (!tid) tc_fail(e, SG_ERR_NOMEM, "out of memory for %d replicas", R);
        rep_free(th, &s, R);
        free(tid);
        return -1;
    }
    tc_codes *share = rep_shares(cfg, v);
    int started = 0, rc = 0;
    for (; started < R && !rc; started += !rc) {
        th[started] = (rep_thread){.s = &s, .r = started, .v = v, .par = th[started].par};
        rc = rep_start(&th[started], &tid[started], cfg, share, e);
    }
    rc = rep_collect(th, tid, started, rc, res, mout, e);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
    rep_free(th, &s, R);
    free(tid);
    free(share);
    return rc;
}
