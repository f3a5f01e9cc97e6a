/* sgrad-w2v -replicas R: R copies of the model in one process, each trained by its own
 * 1-thread trainer (w2v_train, in a thread of its own) on its share of the corpus and
 * merged as under mpirun (w2v_parallel in w2v.h: the ranks are the replicas, the merges
 * run on shared memory). The vectors depend on R, never on -threads: at most `threads`
 * replicas compute at once (the others wait for a slot), and a merge is the same sum
 * whichever thread computes it. So -threads 1 and -threads 2 give the same file while
 * each replica's updates stay on its own core's cache lines, which is what keeps one
 * model's 2-thread steps from scaling (tools/w2v/README.md "Replicas").
 *
 * A merge is two barriers: every replica arrives with its tables (giving up its slot),
 * then each takes a slot again and merges its block of rows into every replica's tables
 * and the shared base, then waits for the others' blocks. Element j becomes
 * base + ((x_0 - base) + (x_1 - base) + ...), summed in replica order (so 2 replicas
 * give mpirun -np 2's bits; from 3 on, the ring's order differs). A replica that fails
 * marks the run failed, which wakes every waiting replica with an error. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "w2v.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int replicas, slots; /* slots: replicas that may compute now */
    int arrived;         /* at the current barrier */
    uint64_t generation; /* barriers passed */
    bool failed;
    bool any_active;
    const w2v_model **models;
    bool *active;
    float **x[3]; /* each replica's tables (in, out, hs) at the current merge */
    uint8_t ***dirty; /* dirty[q]: replica q's w2v_parallel dirty rows (in, out, hs) */
    float *base[3]; /* the tables at the last merge: in, out, hs */
    /* the merge under way: its level (0 full, else hot) */
    int level;
} rep_shared;

typedef struct {
    rep_shared *s;
    int r;
    w2v_parallel par;
    w2v_config cfg;
    const tc_vocab *v;
    FILE *log;
    w2v_result res;
    w2v_model model;
    int rc;
} rep_thread;

static void take_slot(rep_shared *s)
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
    take_slot(s);
    return !s->failed;
}

static int64_t rep_merges_run, rep_full_merges_run; /* tests: merges so far, and full ones
                                                       (the first included) */
static bool rep_hot_report_active; /* tests: hot merges say some replica is active, so
                                      the done replicas run every one (the skip's baseline) */

/* Run by the last replica to arrive at a merge: whether any is still active, and where
 * every replica's tables are. */
static void gather(rep_shared *s)
{
    rep_merges_run++;
    rep_full_merges_run += s->level == 0;
    s->any_active = false;
    for (int r = 0; r < s->replicas; r++) {
        s->any_active |= s->active[r];
        const w2v_model *m = s->models[r];
        sg_tensor *t[3] = {m->in, m->out, m->hs};
        for (int k = 0; k < 3; k++) s->x[k][r] = t[k] ? sg_tensor_f32(t[k]) : NULL;
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

static bool rep_merge_every_row; /* tests: merge every row, as if each were marked */

static bool row_changed(const rep_shared *s, int k, int64_t row)
{
    if (rep_merge_every_row) return true;
    for (int q = 0; q < s->replicas; q++)
        if (s->dirty[q][k][row]) return true;
    return false;
}

/* Replica r's block of the rows the merge at `level` covers, in each table: the rows
 * some replica changed since their last merge (w2v_parallel's dirty), in runs. */
static void merge_block(rep_shared *s, const w2v_parallel *p, int r)
{
    const w2v_model *m0 = s->models[0];
    const sg_tensor *tables[3] = {m0->in, m0->out, m0->hs};
    for (int k = 0; k < 3; k++) {
        if (!tables[k]) continue;
        const int64_t dim = sg_tensor_shape(tables[k])[1];
        int64_t lo, hi;
        w2v_hot_rows(p, s->level, k, sg_tensor_shape(tables[k])[0], &lo, &hi);
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
static bool arrive(rep_thread *me, const w2v_model *m, int level, bool active, bool *any_active)
{
    rep_shared *s = me->s;
    s->models[me->r] = m;
    s->active[me->r] = active;
    s->level = level;
    const bool ok = barrier(s, gather);
    if (any_active) *any_active = s->any_active || (level > 0 && rep_hot_report_active);
    return ok;
}

/* The merge (collective over the replicas) of `level`'s rows; `active` and *any_active
 * as w2v_parallel's sync. */
static int rep_merge(w2v_parallel *p, const w2v_model *m, int level, bool active, bool *any_active)
{
    rep_thread *me = p->impl;
    rep_shared *s = me->s;
    pthread_mutex_lock(&s->mu);
    bool ok = arrive(me, m, level, active, any_active);
    pthread_mutex_unlock(&s->mu);
    if (ok) merge_block(s, p, me->r); /* disjoint rows: outside the lock */
    pthread_mutex_lock(&s->mu);
    ok = ok && barrier(s, NULL);
    pthread_mutex_unlock(&s->mu);
    return ok ? 0 : -1;
}

static int rep_first(w2v_parallel *p, const w2v_model *m, bool active, bool *any_active)
{
    rep_thread *me = p->impl;
    rep_shared *s = me->s;
    pthread_mutex_lock(&s->mu);
    bool ok = arrive(me, m, 0, active, any_active);
    if (ok && me->r == 0) { /* replica 0's starting tables for all, and the base */
        const sg_tensor *t0[3] = {m->in, m->out, m->hs};
        for (int k = 0; k < 3 && ok; k++) {
            if (!t0[k]) continue;
            const size_t bytes = (size_t)sg_tensor_numel(t0[k]) * sizeof(float);
            if (!(s->base[k] = malloc(bytes))) {
                fprintf(stderr, "sgrad-w2v: out of memory for the replicas' merge\n");
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

static int rep_sync(w2v_parallel *p, const w2v_model *m, bool active, bool *any_active)
{
    rep_thread *me = p->impl;
    return me->s->base[0] ? rep_merge(p, m, 0, active, any_active) : rep_first(p, m, active, any_active);
}

static int rep_merge_hot(w2v_parallel *p, const w2v_model *m, int level, bool active, bool *any_active)
{
    return rep_merge(p, m, level, active, any_active);
}

/* A replica's thread is done (rc: w2v_train's): its slot goes back, and a failure wakes
 * every replica waiting at a merge, which then fails too. */
static void rep_finish(rep_shared *s, int rc)
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
    take_slot(s);
    const bool failed = s->failed;
    pthread_mutex_unlock(&s->mu);
    me->rc = failed ? -1 : w2v_train(&me->cfg, me->v, me->log, &me->res, &me->model);
    rep_finish(s, me->rc);
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
    free(s->models);
    free(s->active);
    free(s->dirty);
    free(th);
}

int w2v_replicas_train(const w2v_config *cfg, const tc_vocab *v, FILE *log, int threads, w2v_result *res,
                       w2v_model *mout)
{
    const int R = cfg->replicas, slots = threads < 1 ? 1 : threads < R ? threads : R;
    rep_shared s = {.replicas = R, .slots = slots};
    rep_thread *th = calloc((size_t)R, sizeof *th);
    pthread_t *tid = calloc((size_t)R, sizeof *tid);
    s.models = calloc((size_t)R, sizeof *s.models);
    s.active = calloc((size_t)R, sizeof *s.active);
    for (int k = 0; k < 3; k++) s.x[k] = calloc((size_t)R, sizeof *s.x[k]);
    s.dirty = calloc((size_t)R, sizeof *s.dirty);
    bool ok = th && tid && s.models && s.active && s.x[0] && s.x[1] && s.x[2] && s.dirty;
    const int64_t rows[3] = {v->size, cfg->negative > 0 ? v->size : 0, cfg->hs ? v->size - 1 : 0};
    for (int r = 0; ok && r < R; r++) {
        s.dirty[r] = th[r].par.dirty;
        for (int k = 0; k < 3; k++)
            if (rows[k] > 0 && !(th[r].par.dirty[k] = calloc((size_t)rows[k], 1))) ok = false;
    }
    if (!ok) {
        fprintf(stderr, "sgrad-w2v: out of memory for %d replicas\n", R);
        rep_free(th, &s, R);
        free(tid);
        return -1;
    }
    if (pthread_mutex_init(&s.mu, NULL)) {
        fprintf(stderr, "sgrad-w2v: cannot set up the replicas' lock\n");
        rep_free(th, &s, R);
        free(tid);
        return -1;
    }
    if (pthread_cond_init(&s.cv, NULL)) {
        fprintf(stderr, "sgrad-w2v: cannot set up the replicas' lock\n");
        pthread_mutex_destroy(&s.mu);
        rep_free(th, &s, R);
        free(tid);
        return -1;
    }
    /* each replica replays its part of the vocabulary pass's record; without one, or when
     * the corpus no longer matches it, each reads its share (recording its first epoch) */
    tc_codes *share = NULL;
    if (cfg->corpus_codes && cfg->corpus_codes->code && w2v_replays_corpus(cfg) &&
        (!(share = calloc((size_t)R, sizeof *share)) ||
         w2v_share_records(cfg->train, v, cfg->corpus_codes, R, share))) {
        free(share);
        share = NULL;
    }
    int started = 0, rc = 0;
    for (int r = 0; r < R; r++) {
        rep_thread *t = &th[r];
        t->s = &s;
        t->r = r;
        t->v = v;
        t->cfg = *cfg;
        t->cfg.threads = 1;
        t->cfg.par = &t->par;
        t->cfg.corpus_codes = share ? &share[r] : NULL;
        t->log = r == 0 ? log : NULL;
        if (r > 0) t->cfg.log = NULL; /* replica 0 writes the progress log */
        t->par.rank = r;
        t->par.ranks = R;
        t->par.sync_steps = cfg->sync_every;
        t->par.sync = rep_sync;
        t->par.merge_hot = rep_merge_hot;
        t->par.threads = slots;
        t->par.impl = t;
        if (pthread_create(&tid[r], NULL, rep_run, t)) {
            fprintf(stderr, "sgrad-w2v: cannot start replica %d's thread\n", r);
            pthread_mutex_lock(&s.mu);
            s.failed = true; /* the started ones stop at their first merge */
            pthread_cond_broadcast(&s.cv);
            pthread_mutex_unlock(&s.mu);
            rc = -1;
            break;
        }
        started++;
    }
    for (int r = 0; r < started; r++) {
        pthread_join(tid[r], NULL);
        if (th[r].rc) rc = -1;
    }
    for (int r = 1; r < started; r++) w2v_model_free(&th[r].model);
    if (rc == 0) {
        *res = th[0].res;
        for (int r = 1; r < R; r++) res->tokens += th[r].res.tokens;
        *mout = th[0].model;
    } else if (started > 0) {
        w2v_model_free(&th[0].model);
    }
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
    rep_free(th, &s, R);
    free(tid);
    free(share);
    return rc;
}
