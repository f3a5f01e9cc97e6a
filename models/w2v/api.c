/* The public word2vec API (sgrad_models.h): a handle holding the options, the vocabulary
 * (with the vocabulary pass's record of the corpus, replayed by the epochs), the trained or
 * loaded tables, or a vectors file read for queries.
 *
 * Invariants: m->cfg's strings point into m (checkpoint, resume) or are set only for the
 * length of a call (train, corpus_codes, source). A query works on m->unit, the word
 * vectors at unit length, made once per set of tables and dropped when they change.
 * m->model holds tables only for m->vocab (a new vocabulary drops them), so a training
 * call on a model that holds tables trains them on (continued training).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "w2v.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

sg_w2v_opts sg_w2v_opts_default(void)
{
    w2v_config c;
    w2v_config_default(&c);
    return (sg_w2v_opts){.size = c.size, .window = c.window, .negative = c.negative, .hs = c.hs, .iter = c.iter,
                         .threads = c.threads, .cbow = c.cbow, .replicas = c.replicas, .min_count = c.min_count,
                         .batch = c.batch, .sync_every = c.sync_every, .token_cache = c.token_cache,
                         .sample = c.sample, .alpha = c.alpha, .seed = c.seed, .engine = c.engine,
                         .verbose = c.ev.verbose, .prefetch_min = c.prefetch_min};
}

static void config_of_opts(w2v_config *c, const sg_w2v_opts *o)
{
    w2v_config_default(c);
    c->size = o->size, c->window = o->window, c->negative = o->negative, c->hs = o->hs, c->iter = o->iter;
    c->threads = o->threads, c->cbow = o->cbow, c->hogwild = o->hogwild, c->replicas = o->replicas;
    c->min_count = o->min_count, c->batch = o->batch, c->sync_every = o->sync_every;
    c->save_every = o->save_every, c->token_cache = o->token_cache, c->sample = o->sample, c->alpha = o->alpha;
    c->seed = o->seed, c->engine = o->engine, c->prefetch_min = o->prefetch_min, c->par = o->merger;
    c->epoch_words = o->epoch_words;
    c->ev = (tc_events){o->on_event, o->event_ud, o->verbose};
}

sg_w2v_opts sg_w2v_options(const sg_w2v *m)
{
    if (!m) return sg_w2v_opts_default();
    const w2v_config *c = &m->cfg;
    return (sg_w2v_opts){.size = c->size, .window = c->window, .negative = c->negative, .hs = c->hs, .iter = c->iter,
                         .threads = c->threads, .cbow = c->cbow, .hogwild = c->hogwild, .replicas = c->replicas,
                         .min_count = c->min_count, .batch = c->batch, .sync_every = c->sync_every,
                         .save_every = c->save_every, .token_cache = c->token_cache, .sample = c->sample,
                         .alpha = c->alpha, .seed = c->seed, .engine = c->engine, .checkpoint = c->checkpoint,
                         .resume = c->resume, .verbose = c->ev.verbose, .on_event = c->ev.fn, .event_ud = c->ev.ud,
                         .merger = c->par, .prefetch_min = c->prefetch_min, .epoch_words = c->epoch_words};
}

/* A copy of s (NULL for NULL); false when out of memory. */
static bool dup_or_null(const char *s, char **out)
{
    *out = s ? strdup(s) : NULL;
    return !s || *out;
}

sg_w2v *sg_w2v_new(const sg_w2v_opts *opts, sg_model_error *err)
{
    tc_ok(err);
    const sg_w2v_opts o = opts ? *opts : sg_w2v_opts_default();
    sg_w2v *m = calloc(1, sizeof *m);
    if (!m || !dup_or_null(o.checkpoint, &m->checkpoint) || !dup_or_null(o.resume, &m->resume)) {
        tc_fail(err, SG_ERR_NOMEM, "out of memory");
        sg_w2v_free(m);
        return NULL;
    }
    config_of_opts(&m->cfg, &o);
    m->cfg.checkpoint = m->checkpoint;
    m->cfg.resume = m->resume;
    tc_vocab_init(&m->vocab);
    if (w2v_config_check(&m->cfg, err)) {
        sg_w2v_free(m);
        return NULL;
    }
    return m;
}

int sg_w2v_set_options(sg_w2v *m, const sg_w2v_opts *opts, sg_model_error *err)
{
    tc_ok(err);
    if (!m || !opts) return tc_fail(err, SG_ERR_NULL, "NULL model or options"), SG_ERR_NULL;
    w2v_config c;
    config_of_opts(&c, opts);
    c.vocab_given = m->cfg.vocab_given;
    if (w2v_config_check(&c, err)) return err ? err->status : SG_ERR_ARG;
    const w2v_config *was = &m->cfg;
    if (m->model.ctx && !m->wv && (c.size != was->size || c.hs != was->hs || (c.negative > 0) != (was->negative > 0)))
        return tc_fail(err, SG_ERR_ARG, "the model's tables fix size (%d), hs (%d) and whether negative is 0 (%d)",
                       was->size, was->hs, was->negative), SG_ERR_ARG;
    char *checkpoint, *resume;
    if (!dup_or_null(opts->checkpoint, &checkpoint) || !dup_or_null(opts->resume, &resume)) {
        free(checkpoint);
        return tc_fail(err, SG_ERR_NOMEM, "out of memory"), SG_ERR_NOMEM;
    }
    free(m->checkpoint);
    free(m->resume);
    m->checkpoint = checkpoint, m->resume = resume;
    m->cfg = c;
    m->cfg.checkpoint = checkpoint, m->cfg.resume = resume;
    return SG_OK;
}

/* Drops the tables (and the queries' unit rows) of m. */
static void drop_tables(sg_w2v *m)
{
    free(m->unit);
    m->unit = NULL;
    sg_wordvec_free(m->wv);
    m->wv = NULL;
    w2v_model_free(&m->model);
}

void sg_w2v_free(sg_w2v *m)
{
    if (!m) return;
    drop_tables(m);
    tc_vocab_free(&m->vocab);
    tc_codes_free(&m->codes);
    free(m->corpus);
    free(m->checkpoint);
    free(m->resume);
    free(m);
}

/* ---- the vocabulary */

/* v's words and counts added to the empty vocabulary of m. */
static int copy_vocab(tc_vocab *to, const tc_vocab *from)
{
    for (int64_t i = 0; i < from->size; i++)
        if (tc_vocab_add(to, from->words[i], from->counts[i]) < 0) return -1;
    to->total_tokens = from->total_tokens;
    to->lines = from->lines;
    to->corpus_bytes = from->corpus_bytes;
    to->corpus_hash = from->corpus_hash;
    return 0;
}

/* Counts corpus into m's vocabulary, recording its tokens when the epochs can replay them;
 * a record that outgrew token_cache (or met no memory) leaves the epochs reading. */
static int count_corpus(sg_w2v *m, const char *corpus)
{
    tc_codes_start(&m->codes, w2v_replays_corpus(&m->cfg) ? m->cfg.token_cache : 0);
    const int rc = tc_vocab_count_file_codes(&m->vocab, corpus, &m->codes) ||
                   tc_vocab_finalize_codes(&m->vocab, m->cfg.min_count, &m->codes);
    /* the first epoch's own record would outgrow it too; a replica's share may fit */
    if (!m->codes.code && m->codes.dropped && m->cfg.replicas <= 1) m->cfg.token_cache = 0;
    return rc ? -1 : 0;
}

/* The vocabulary of the resume checkpoint, when it holds one: 1, 0 (none, or a file it
 * cannot be read from: the corpus is counted, and sg_w2v_check_resume says what is wrong
 * with the file), -1 out of memory. */
static int resume_vocab(sg_w2v *m, sg_model_error *err)
{
    if (!m->cfg.resume) return 0;
    tc_vocab v;
    tc_vocab_init(&v);
    int got = w2v_checkpoint_vocab(m->cfg.resume, &v, NULL);
    if (got == 1 && copy_vocab(&m->vocab, &v)) got = tc_fail(err, SG_ERR_NOMEM, "out of memory");
    else if (got < 0) got = 0;
    tc_vocab_free(&v);
    if (got <= 0) tc_vocab_free(&m->vocab);
    return got;
}

int sg_w2v_build_vocab(sg_w2v *m, const char *corpus, const sg_vocab *given, sg_model_error *err)
{
    tc_ok(err);
    if (!m) return tc_fail(err, SG_ERR_NULL, "NULL model"), SG_ERR_NULL;
    drop_tables(m); /* they were another vocabulary's */
    tc_vocab_free(&m->vocab);
    tc_codes_free(&m->codes);
    free(m->corpus);
    m->corpus = NULL;
    m->has_vocab = false;
    m->cfg.vocab_given = given != NULL;
    const int from_ckpt = resume_vocab(m, err);
    if (from_ckpt < 0) return SG_ERR_NOMEM;
    int rc = 0;
    if (from_ckpt || given) {
        rc = (given && !from_ckpt && copy_vocab(&m->vocab, given)) || (corpus && tc_vocab_scan_file(&m->vocab, corpus)) ||
             tc_vocab_finalize(&m->vocab, m->cfg.min_count);
    } else if (corpus) {
        rc = count_corpus(m, corpus);
    } else {
        return tc_fail(err, SG_ERR_ARG, "no corpus and no vocabulary given"), SG_ERR_ARG;
    }
    if (rc) {
        const int status = errno == ENOMEM || !corpus ? SG_ERR_NOMEM : SG_ERR_IO;
        return tc_fail(err, status, "cannot read %s: %s", corpus ? corpus : "the vocabulary", strerror(errno)), status;
    }
    m->has_vocab = true;
    if (corpus && !(m->corpus = strdup(corpus))) return tc_fail(err, SG_ERR_NOMEM, "out of memory"), SG_ERR_NOMEM;
    return SG_OK;
}

const sg_vocab *sg_w2v_vocab(const sg_w2v *m) { return m && m->has_vocab ? &m->vocab : NULL; }

int sg_w2v_check_resume(const sg_w2v *m, sg_model_error *err)
{
    tc_ok(err);
    if (!m || !m->cfg.resume) return SG_OK;
    w2v_config cfg = m->cfg;
    cfg.train = m->corpus;
    return w2v_checkpoint_check(m->cfg.resume, &cfg, &m->vocab, err) ? err ? err->status : SG_ERR_STATE : SG_OK;
}

/* ---- training */

/* Trains m with cfg (its corpus or source set): one model, or -replicas; the tables m
 * holds (trained or loaded) are trained on, as one model. */
static int train(sg_w2v *m, w2v_config *cfg, sg_w2v_result *res, sg_model_error *err)
{
    sg_w2v_result scratch;
    if (!res) res = &scratch;
    memset(res, 0, sizeof *res);
    tc_ok(err);
    if (!m->has_vocab) return tc_fail(err, SG_ERR_STATE, "build the vocabulary before training"), SG_ERR_STATE;
    cfg->more = m->model.ctx != NULL;
    if (cfg->more && (cfg->replicas > 1 || cfg->par))
        return tc_fail(err, SG_ERR_ARG, "continued training trains one model (replicas 1, no ranks)"), SG_ERR_ARG;
    free(m->unit); /* the tables change */
    m->unit = NULL;
    int rc;
    if (cfg->replicas > 1) {
        sg_ctx_opts co = {.threads = cfg->threads};
        sg_ctx *c = sg_ctx_new(&co); /* the library's reading of threads (0: every core) */
        const int threads = c ? sg_ctx_threads(c) : 1;
        sg_ctx_free(c);
        rc = w2v_replicas_train(cfg, &m->vocab, threads, res, &m->model, err);
    } else {
        rc = w2v_train(cfg, &m->vocab, res, &m->model, err);
    }
    tc_codes_free(&m->codes); /* replayed: a second training reads the corpus */
    if (rc == SG_STOPPED) return tc_fail(err, SG_STOPPED, "stopped at step %lld", (long long)res->steps), SG_STOPPED;
    return rc ? err && err->status ? err->status : SG_ERR_STATE : SG_OK;
}

int sg_w2v_train_file(sg_w2v *m, const char *corpus, sg_w2v_result *res, sg_model_error *err)
{
    if (!m || !corpus) return tc_fail(err, SG_ERR_NULL, "NULL model or corpus"), SG_ERR_NULL;
    w2v_config cfg = m->cfg;
    cfg.train = corpus;
    cfg.corpus_codes = m->codes.code && m->corpus && !strcmp(m->corpus, corpus) ? &m->codes : NULL;
    return train(m, &cfg, res, err);
}

int sg_w2v_train_tokens(sg_w2v *m, sg_token_read_fn read, void *ud, sg_w2v_result *res, sg_model_error *err)
{
    if (!m || !read) return tc_fail(err, SG_ERR_NULL, "NULL model or token reader"), SG_ERR_NULL;
    if (m->cfg.replicas > 1 || m->cfg.par)
        return tc_fail(err, SG_ERR_ARG, "replicas and ranks take their shares of a corpus file"), SG_ERR_ARG;
    const w2v_source src = {read, ud};
    w2v_config cfg = m->cfg;
    cfg.source = &src;
    return train(m, &cfg, res, err);
}

/* ---- files */

int sg_w2v_save(const sg_w2v *m, const char *path, sg_model_error *err)
{
    tc_ok(err);
    if (!m || !path) return tc_fail(err, SG_ERR_NULL, "NULL model or path"), SG_ERR_NULL;
    if (!m->model.ctx) return tc_fail(err, SG_ERR_STATE, "no trained model to save"), SG_ERR_STATE;
    return w2v_model_save(path, &m->cfg, &m->vocab, &m->model, err) ? err ? err->status : SG_ERR_IO : SG_OK;
}

sg_w2v *sg_w2v_load(const char *path, int threads, sg_model_error *err)
{
    sg_w2v *m = sg_w2v_new(NULL, err);
    if (!m) return NULL;
    if (!path) tc_fail(err, SG_ERR_NULL, "NULL path");
    if (!path || w2v_model_load(path, threads, &m->cfg, &m->vocab, &m->model, err)) {
        sg_w2v_free(m);
        return NULL;
    }
    m->cfg.threads = threads > 0 ? threads : 0;
    m->has_vocab = true;
    return m;
}

sg_w2v *sg_w2v_load_vectors(const char *path, int binary, sg_model_error *err)
{
    sg_w2v *m = sg_w2v_new(NULL, err);
    if (!m) return NULL;
    m->model.ctx = sg_ctx_new(NULL);
    m->wv = m->model.ctx ? sg_wordvec_read(m->model.ctx, path, binary) : NULL;
    if (!m->wv) {
        if (m->model.ctx) tc_fail_ctx(err, m->model.ctx, "");
        else tc_fail(err, SG_ERR_NOMEM, "out of memory");
        sg_w2v_free(m);
        return NULL;
    }
    m->cfg.size = (int)sg_wordvec_dim(m->wv);
    return m;
}

sg_tensor *sg_w2v_table(const sg_w2v *m, int which)
{
    if (!m) return NULL;
    if (m->wv) return which == 0 ? sg_wordvec_vectors(m->wv) : NULL;
    return which == 0 ? m->model.in : which == 1 ? m->model.out : which == 2 ? m->model.hs : NULL;
}

int64_t sg_w2v_size(const sg_w2v *m) { return !m ? 0 : m->wv ? sg_wordvec_count(m->wv) : m->vocab.size; }
int64_t sg_w2v_dim(const sg_w2v *m) { return m ? m->cfg.size : 0; }
int sg_w2v_threads(const sg_w2v *m) { return m && m->model.ctx ? sg_ctx_threads(m->model.ctx) : 0; }

const char *sg_w2v_word(const sg_w2v *m, int64_t i)
{
    if (!m || i < 0 || i >= sg_w2v_size(m)) return NULL;
    return m->wv ? sg_wordvec_word(m->wv, i) : m->vocab.words[i];
}

int64_t sg_w2v_find(const sg_w2v *m, const char *word)
{
    if (!m || !word) return -1;
    return m->wv ? sg_wordvec_find(m->wv, word) : tc_vocab_find(&m->vocab, word);
}

int64_t sg_w2v_lookup_packed(const sg_w2v *m, const char *buf, int64_t len, const int64_t *lens, int64_t n,
                             int32_t *ids, int64_t cap, sg_model_error *err)
{
    tc_ok(err);
    if (!m || (cap > 0 && !ids)) return tc_fail(err, SG_ERR_NULL, "NULL model or ids"), -SG_ERR_NULL;
    int64_t tokens;
    const int rc = tc_packed_check(buf, len, lens, n, &tokens, err);
    if (rc) return -rc;
    const int64_t need = tokens + n;
    if (need > cap) return tc_fail(err, SG_ERR_ARG, "%lld ids do not fit in %lld", (long long)need, (long long)cap), -SG_ERR_ARG;
    char word[TC_MAX_WORD];
    const char *p = buf;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t t = 0; t < lens[i]; t++) {
            sg_word_as_read(p, word);
            p += strlen(p) + 1;
            if (!word[0]) continue; /* no file holds an empty word: it is not read */
            const int64_t id = sg_w2v_find(m, word);
            ids[k++] = id < 0 ? SG_W2V_OOV : (int32_t)id;
        }
        ids[k++] = SG_W2V_EOS;
    }
    return k;
}

/* The words of m's rows in order, as the writers take them (malloc'd array). */
static const char **row_words(const sg_w2v *m)
{
    const int64_t V = sg_w2v_size(m);
    const char **w = malloc((size_t)(V ? V : 1) * sizeof *w);
    for (int64_t i = 0; w && i < V; i++) w[i] = sg_w2v_word(m, i);
    return w;
}

int sg_w2v_write_vectors(const sg_w2v *m, const char *path, int table, int binary, sg_model_error *err)
{
    tc_ok(err);
    sg_tensor *t = (table == 0 || table == 1) ? sg_w2v_table(m, table) : NULL;
    if (!t || !path) return tc_fail(err, SG_ERR_ARG, "no such table (%d) or no path", table), SG_ERR_ARG;
    const char **words = row_words(m);
    if (!words) return tc_fail(err, SG_ERR_NOMEM, "out of memory"), SG_ERR_NOMEM;
    const int rc = sg_wordvec_write(path, t, words, binary);
    free(words);
    return rc ? tc_fail_ctx(err, sg_tensor_ctx(t), ""), sg_ctx_status(sg_tensor_ctx(t)) : SG_OK;
}

int sg_w2v_write_classes(const sg_w2v *m, const char *path, int k, sg_model_error *err)
{
    tc_ok(err);
    sg_tensor *t = sg_w2v_table(m, 0);
    const int64_t V = sg_w2v_size(m);
    if (!t || !path || k < 1 || k > V)
        return tc_fail(err, SG_ERR_ARG, "k-means needs a model and 1 <= k <= %lld words", (long long)V), SG_ERR_ARG;
    int32_t *cl = malloc((size_t)V * sizeof *cl);
    const char **words = row_words(m);
    int rc = SG_OK;
    if (!cl || !words || w2v_kmeans(sg_tensor_f32(t), V, sg_w2v_dim(m), k, W2V_KMEANS_ITERS, sg_w2v_threads(m), cl,
                                    &m->cfg.ev))
        rc = SG_ERR_NOMEM, tc_fail(err, rc, "out of memory for -classes");
    else if (w2v_classes_write(path, (char *const *)words, cl, V))
        rc = SG_ERR_IO, tc_fail(err, rc, "cannot write %s: %s", path, tc_out_strerror(errno));
    free(cl);
    free(words);
    return rc;
}

/* ---- queries */

/* m's word vectors at unit length (made once); NULL out of memory. */
static const float *unit_rows(sg_w2v *m)
{
    sg_tensor *t = sg_w2v_table(m, 0);
    if (!m->unit && t) m->unit = w2v_unit_rows(t);
    return m->unit;
}

int sg_w2v_word_vector(const sg_w2v *m, const char *word, float *out, sg_model_error *err)
{
    tc_ok(err);
    const int64_t i = sg_w2v_find(m, word), D = sg_w2v_dim(m);
    if (i < 0) return tc_fail(err, SG_ERR_INDEX, "%s: not in the vocabulary", word ? word : "(NULL)"), SG_ERR_INDEX;
    memcpy(out, sg_tensor_f32(sg_w2v_table(m, 0)) + i * D, (size_t)D * sizeof *out);
    return SG_OK;
}

int sg_w2v_sentence_vector(const sg_w2v *m, const char *const *words, int64_t n, float *out, int64_t *found,
                           sg_model_error *err)
{
    tc_ok(err);
    const int64_t D = sg_w2v_dim(m);
    const float *x = m ? sg_tensor_f32(sg_w2v_table(m, 0)) : NULL;
    double *sum = calloc((size_t)(D > 0 ? D : 1), sizeof *sum);
    if (!x || !sum) return free(sum), tc_fail(err, SG_ERR_NOMEM, "out of memory or no vectors"), SG_ERR_NOMEM;
    int64_t k = 0;
    for (int64_t j = 0; j < n; j++) {
        const int64_t i = sg_w2v_find(m, words[j]);
        double norm = 0;
        for (int64_t d = 0; i >= 0 && d < D; d++) norm += (double)x[i * D + d] * x[i * D + d];
        if (i < 0) continue;
        k++;
        for (int64_t d = 0; norm > 0 && d < D; d++) sum[d] += x[i * D + d] / sqrt(norm);
    }
    for (int64_t d = 0; d < D; d++) out[d] = k ? (float)(sum[d] / (double)k) : 0.0f;
    if (found) *found = k;
    free(sum);
    return SG_OK;
}

int sg_w2v_nearest(sg_w2v *m, const float *query, const int64_t *exclude, int n_exclude, int k, int64_t *rows,
                   float *sims)
{
    const float *unit = m ? unit_rows(m) : NULL;
    if (!unit || !query) return -1;
    return w2v_nearest(unit, sg_w2v_size(m), sg_w2v_dim(m), query, exclude, n_exclude, k, rows, sims);
}

int sg_w2v_neighbors(sg_w2v *m, const char *word, int k, int64_t *rows, float *sims, int *n, sg_model_error *err)
{
    tc_ok(err);
    *n = 0;
    int64_t q = sg_w2v_find(m, word);
    if (q < 0) return tc_fail(err, SG_ERR_INDEX, "%s: not in the vocabulary", word ? word : "(NULL)"), SG_ERR_INDEX;
    const float *unit = unit_rows(m);
    if (!unit) return tc_fail(err, SG_ERR_NOMEM, "out of memory"), SG_ERR_NOMEM;
    *n = w2v_nearest(unit, sg_w2v_size(m), sg_w2v_dim(m), unit + q * sg_w2v_dim(m), &q, 1, k, rows, sims);
    return SG_OK;
}

int sg_w2v_analogy(sg_w2v *m, const char *a, const char *b, const char *c, int k, int64_t *rows, float *sims,
                   int *n, sg_model_error *err)
{
    tc_ok(err);
    *n = 0;
    const char *w[3] = {a, b, c};
    int64_t ex[3];
    for (int i = 0; i < 3; i++)
        if ((ex[i] = sg_w2v_find(m, w[i])) < 0)
            return tc_fail(err, SG_ERR_INDEX, "%s: not in the vocabulary", w[i] ? w[i] : "(NULL)"), SG_ERR_INDEX;
    const int64_t D = sg_w2v_dim(m);
    const float *unit = unit_rows(m);
    float *q = malloc((size_t)D * sizeof *q);
    if (!unit || !q) return free(q), tc_fail(err, SG_ERR_NOMEM, "out of memory"), SG_ERR_NOMEM;
    for (int64_t d = 0; d < D; d++) q[d] = unit[ex[1] * D + d] - unit[ex[0] * D + d] + unit[ex[2] * D + d];
    *n = w2v_nearest(unit, sg_w2v_size(m), D, q, ex, 3, k, rows, sims);
    free(q);
    return SG_OK;
}

static const char *word_of(const void *m, int64_t i) { return sg_w2v_word(m, i); }

int sg_w2v_evaluate(sg_w2v *m, const char *questions, int64_t restrict_rows, sg_w2v_eval *ev, sg_model_error *err)
{
    tc_ok(err);
    memset(ev, 0, sizeof *ev);
    int64_t R = sg_w2v_size(m);
    if (restrict_rows > 0 && restrict_rows < R) R = restrict_rows;
    const float *unit = m ? unit_rows(m) : NULL;
    if (!unit) return tc_fail(err, SG_ERR_NOMEM, "out of memory"), SG_ERR_NOMEM;
    return w2v_evaluate(unit, R, sg_w2v_dim(m), word_of, m, questions, ev, err) ? err ? err->status : SG_ERR_IO
                                                                              : SG_OK;
}

void sg_w2v_eval_free(sg_w2v_eval *ev)
{
    if (!ev) return;
    for (int64_t s = 0; s < ev->n_sections; s++) free(ev->sections[s].name);
    free(ev->sections);
    memset(ev, 0, sizeof *ev);
}
