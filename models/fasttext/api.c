/* The public fastText API (sgrad_models.h): a handle over ft_model, trained or loaded.
 *
 * Invariants: a handle's model is complete (dictionary, tables) from its creation to its
 * free; m->unit, the vocabulary's vectors at unit length, is made by the first query. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "ft.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct sg_ft {
    ft_model m;
    char *label; /* the options' label prefix, owned (a trained model's cfg.label) */
};

sg_ft_opts sg_ft_opts_default(sg_ft_kind kind)
{
    ft_config c;
    if (kind == SG_FT_SUPERVISED) ft_config_default(&c);
    else ft_config_default_vectors(&c, kind);
    return (sg_ft_opts){.kind = c.kind, .label = c.label, .dim = c.dim, .epoch = c.epoch,
                        .word_ngrams = c.word_ngrams, .minn = c.minn, .maxn = c.maxn, .neg = c.neg,
                        .threads = c.threads, .batch = c.batch, .bucket = c.bucket, .min_count = c.min_count,
                        .min_count_label = c.min_count_label, .lr = c.lr, .seed = c.seed, .loss = c.loss,
                        .verbose = c.verbose, .ws = c.ws, .sample = c.sample, .lr_update_rate = c.lr_update_rate};
}

const char *sg_ft_kind_name(sg_ft_kind kind) { return kind >= SG_FT_SUPERVISED && kind <= SG_FT_CBOW ? ft_kind_name(kind) : "?"; }
const char *sg_ft_loss_name(sg_ft_loss loss) { return loss >= SG_FT_SOFTMAX && loss <= SG_FT_OVA ? ft_loss_name(loss) : "?"; }
int sg_ft_loss_parse(const char *name, sg_ft_loss *loss) { return name && ft_loss_parse(name, loss) ? 0 : -1; }

static void config_of_opts(ft_config *c, const sg_ft_opts *o, const char *input)
{
    *c = (ft_config){.kind = o->kind, .input = input, .label = o->label, .dim = o->dim, .epoch = o->epoch,
                     .word_ngrams = o->word_ngrams, .minn = o->minn, .maxn = o->maxn, .neg = o->neg,
                     .threads = o->threads, .batch = o->batch, .bucket = o->bucket, .min_count = o->min_count,
                     .min_count_label = o->min_count_label, .lr = o->lr, .seed = o->seed, .loss = o->loss,
                     .verbose = o->verbose, .ws = o->ws, .sample = o->sample, .lr_update_rate = o->lr_update_rate,
                     .ev = {o->on_event, o->event_ud, o->verbose}};
}

/* Sizes the trainer's arrays take as int: out of range is refused, not wrapped. */
static int check_sizes(const sg_ft_opts *o, sg_model_error *err)
{
    if (o->dim < 1 || o->epoch < 1 || o->word_ngrams < 1 || o->minn < 0 || o->maxn < 0 || o->maxn >= SG_MAX_WORD ||
        o->neg < 1 || o->threads < 0 || o->batch < 1 || o->bucket < 0 || o->bucket > INT32_MAX || o->min_count < 0 ||
        o->min_count_label < 0 || !(o->lr > 0) || o->ws < 1 || !(o->sample >= 0 && o->sample <= 1) ||
        o->kind < SG_FT_SUPERVISED || o->kind > SG_FT_CBOW || o->loss < SG_FT_SOFTMAX || o->loss > SG_FT_OVA)
        return tc_fail(err, SG_ERR_ARG, "an option out of its range (dim, epoch, word_ngrams, minn, maxn, neg, "
                                        "threads, batch, bucket, min counts, lr, ws, sample, kind or loss)");
    return 0;
}

int sg_ft_opts_check(const sg_ft_opts *opts, sg_model_error *err)
{
    tc_ok(err);
    if (!opts || !opts->label) return tc_fail(err, SG_ERR_NULL, "NULL options or label prefix"), SG_ERR_NULL;
    ft_config c;
    config_of_opts(&c, opts, NULL);
    return check_sizes(opts, err) || ft_config_check(&c, err) ? SG_ERR_ARG : SG_OK;
}

sg_ft *sg_ft_train_file(const char *input, const sg_ft_opts *opts, sg_ft_result *res, sg_model_error *err)
{
    tc_ok(err);
    sg_ft_result scratch;
    if (!res) res = &scratch;
    memset(res, 0, sizeof *res);
    const sg_ft_opts o = opts ? *opts : sg_ft_opts_default(SG_FT_SUPERVISED);
    if (!input || !o.label) return tc_fail(err, SG_ERR_NULL, "NULL input or label prefix"), NULL;
    if (check_sizes(&o, err)) return NULL;
    sg_ft *f = calloc(1, sizeof *f);
    if (!f || !(f->label = strdup(o.label))) {
        free(f);
        return tc_fail(err, SG_ERR_NOMEM, "out of memory"), NULL;
    }
    ft_config c;
    config_of_opts(&c, &o, input);
    c.label = f->label;
    const int rc = o.kind == SG_FT_SUPERVISED ? ft_train(&c, &f->m, res, err) : ft_train_vectors(&c, &f->m, res, err);
    f->m.cfg.input = NULL; /* the caller's string: not kept */
    if (rc == SG_STOPPED) tc_fail(err, SG_STOPPED, "stopped at step %lld", (long long)res->steps);
    if (rc == 0 || rc == SG_STOPPED) return f;
    free(f->label);
    free(f);
    return NULL;
}

int sg_ft_save(const sg_ft *f, const char *path, sg_model_error *err)
{
    tc_ok(err);
    if (!f || !path) return tc_fail(err, SG_ERR_NULL, "NULL model or path"), SG_ERR_NULL;
    return ft_model_save(&f->m, path, err) ? err ? err->status : SG_ERR_IO : SG_OK;
}

int sg_ft_write_vectors(const sg_ft *f, const char *path, sg_model_error *err)
{
    tc_ok(err);
    if (!f || !path) return tc_fail(err, SG_ERR_NULL, "NULL model or path"), SG_ERR_NULL;
    return ft_write_vec(&f->m, path, err) ? err ? err->status : SG_ERR_IO : SG_OK;
}

sg_ft *sg_ft_load(const char *path, sg_ft_kind kind, sg_model_error *err)
{
    tc_ok(err);
    if (!path) return tc_fail(err, SG_ERR_NULL, "NULL path"), NULL;
    sg_ft *f = calloc(1, sizeof *f);
    if (!f) return tc_fail(err, SG_ERR_NOMEM, "out of memory"), NULL;
    if (ft_model_load(&f->m, path, 1, kind != SG_FT_SUPERVISED, err)) {
        free(f);
        return NULL;
    }
    return f;
}

void sg_ft_free(sg_ft *f)
{
    if (!f) return;
    ft_model_free(&f->m);
    free(f->label);
    free(f);
}

sg_ft_kind sg_ft_kind_of(const sg_ft *f) { return f ? f->m.cfg.kind : SG_FT_SUPERVISED; }
int sg_ft_dim(const sg_ft *f) { return f ? f->m.cfg.dim : 0; }
int64_t sg_ft_words(const sg_ft *f) { return f ? f->m.dict.words.size : 0; }
int64_t sg_ft_labels(const sg_ft *f) { return f ? f->m.dict.labels.size : 0; }

const char *sg_ft_word(const sg_ft *f, int64_t i)
{
    return f && i >= 0 && i < f->m.dict.words.size ? f->m.dict.words.words[i] : NULL;
}

const char *sg_ft_label(const sg_ft *f, int64_t i)
{
    return f && i >= 0 && i < f->m.dict.labels.size ? f->m.dict.labels.words[i] : NULL;
}

int64_t sg_ft_find_word(const sg_ft *f, const char *token)
{
    char word[TC_MAX_WORD];
    if (!f || !token) return -1;
    sg_word_as_read(token, word);
    return tc_vocab_find(&f->m.dict.words, word);
}

int sg_ft_word_vector(const sg_ft *f, const char *token, float *out, sg_model_error *err)
{
    tc_ok(err);
    char word[TC_MAX_WORD];
    if (!f || !token || !out) return tc_fail(err, SG_ERR_NULL, "NULL model, token or output"), SG_ERR_NULL;
    sg_word_as_read(token, word);
    return ft_word_vector(&f->m, word, out) ? tc_fail(err, SG_ERR_NOMEM, "out of memory"), SG_ERR_NOMEM : SG_OK;
}

/* Word vectors' sentence vector: the mean of the words' unit vectors (fastText's
 * getSentenceVector for skipgram and cbow: each vector divided by its norm when nonzero). */
static int mean_unit_vectors(const ft_model *m, char *const *tokens, int64_t n, bool eol, float *out)
{
    const int64_t D = m->cfg.dim;
    float *v = malloc((size_t)D * sizeof *v);
    double *sum = calloc((size_t)D, sizeof *sum);
    int64_t count = 0, rc = v && sum ? 0 : -1;
    char word[TC_MAX_WORD];
    for (int64_t i = 0; !rc && i < n + eol; i++) {
        if (i < n) sg_word_as_read(tokens[i], word);
        if ((rc = ft_word_vector(m, i < n ? word : FT_EOS, v))) break;
        double norm = 0;
        for (int64_t d = 0; d < D; d++) norm += (double)v[d] * v[d];
        for (int64_t d = 0; norm > 0 && d < D; d++) sum[d] += v[d] / sqrt(norm);
        count++;
    }
    for (int64_t d = 0; !rc && d < D; d++) out[d] = count ? (float)(sum[d] / (double)count) : 0.0f;
    free(v);
    free(sum);
    return rc ? -1 : 0;
}

int sg_ft_sentence_vector(const sg_ft *f, char *const *tokens, int64_t n, bool eol, float *out,
                          sg_model_error *err)
{
    tc_ok(err);
    if (!f || (n && !tokens) || !out) return tc_fail(err, SG_ERR_NULL, "NULL model, tokens or output"), SG_ERR_NULL;
    if (f->m.cfg.kind != SG_FT_SUPERVISED)
        return mean_unit_vectors(&f->m, tokens, n, eol, out) ? tc_fail(err, SG_ERR_NOMEM, "out of memory"),
               SG_ERR_NOMEM : SG_OK;
    const int64_t D = f->m.cfg.dim;
    ft_ids rows = {0}, labels = {0};
    int64_t n_words;
    double *h = malloc((size_t)D * sizeof *h);
    int rc = !h || ft_dict_line(&f->m.dict, (char **)tokens, n, eol, &rows, &labels, &n_words) ? -1 : 0;
    if (!rc) ft_input_mean(&f->m, &rows, h);
    for (int64_t d = 0; !rc && d < D; d++) out[d] = (float)h[d];
    free(h);
    ft_ids_free(&rows);
    ft_ids_free(&labels);
    return rc ? tc_fail(err, SG_ERR_NOMEM, "out of memory"), SG_ERR_NOMEM : SG_OK;
}

int sg_ft_predict(sg_ft *f, char *const *tokens, int64_t n, bool eol, double *score, int64_t *inputs,
                  int64_t *gold, int64_t gold_cap, int64_t *n_gold, sg_model_error *err)
{
    tc_ok(err);
    if (!f || (n && !tokens) || !score) return tc_fail(err, SG_ERR_NULL, "NULL model, tokens or scores"), SG_ERR_NULL;
    if (f->m.cfg.kind != SG_FT_SUPERVISED) return tc_fail(err, SG_ERR_ARG, "not a classifier"), SG_ERR_ARG;
    ft_ids rows = {0}, labels = {0};
    int64_t n_words;
    int rc = ft_dict_line(&f->m.dict, (char **)tokens, n, eol, &rows, &labels, &n_words) ||
             (rows.n && ft_predict_scores(&f->m, &rows, score));
    if (inputs) *inputs = rows.n;
    if (n_gold) *n_gold = labels.n;
    for (int64_t i = 0; gold && i < labels.n && i < gold_cap; i++) gold[i] = labels.v[i];
    ft_ids_free(&rows);
    ft_ids_free(&labels);
    return rc ? tc_fail(err, SG_ERR_NOMEM, "out of memory"), SG_ERR_NOMEM : SG_OK;
}

int64_t sg_ft_nearest(sg_ft *f, const float *query, int64_t k, const int64_t *ban, int n_ban, int64_t *best,
                      double *sim)
{
    if (!f || !query || k < 1) return -1;
    return ft_nearest(&f->m, &f->m.unit, query, k, ban, n_ban, best, sim);
}
