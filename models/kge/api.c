/* The public functions of sgrad_kge.h over the engine: the handle (options with their
 * strings copied, the names, the triples read, the tables), training from files,
 * evaluation against files, predictions, files and accessors.
 *
 * Invariants: m->o's strings point into m (checkpoint, resume) or are NULL; the
 * dictionaries hold exactly the tables' rows between calls (an evaluation reads its files'
 * new names into them and truncates them back).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "engine.h"

#include <stdlib.h>
#include <string.h>

/* A copy of s (NULL for NULL); false when out of memory. */
static bool dup_or_null(const char *s, char **out)
{
    *out = s ? strdup(s) : NULL;
    return !s || *out;
}

/* Drops what m read and trained (not its options). */
static void drop_data(sg_kge *m)
{
    kge_tables_free(&m->tb);
    kg_dict_free(&m->ents);
    kg_dict_free(&m->rels);
    kg_triples_free(&m->train);
    kg_triples_free(&m->valid);
    kg_triples_free(&m->test);
    m->ent_train = m->rel_train = 0;
}

sg_kge *sg_kge_new(const sg_kge_opts *opts, sg_model_error *err)
{
    tc_ok(err);
    const sg_kge_opts o = opts ? *opts : sg_kge_opts_default(SG_KGE_COMPLEX);
    sg_kge *m = calloc(1, sizeof *m);
    if (!m || !dup_or_null(o.checkpoint, &m->checkpoint) || !dup_or_null(o.resume, &m->resume)) {
        tc_fail(err, SG_ERR_NOMEM, "out of memory");
        sg_kge_free(m);
        return NULL;
    }
    m->o = o;
    m->o.checkpoint = m->checkpoint;
    m->o.resume = m->resume;
    if (kge_opts_check(&m->o, err)) {
        sg_kge_free(m);
        return NULL;
    }
    return m;
}

void sg_kge_free(sg_kge *m)
{
    if (!m) return;
    drop_data(m);
    free(m->checkpoint);
    free(m->resume);
    free(m);
}

/* Reads path (NULL: nothing) into m's dictionaries and *out. 0 or -1. */
static int read_file(sg_kge *m, const char *path, kg_triples *out, sg_model_error *e)
{
    return path ? kg_read_tsv(path, &m->ents, &m->rels, out, e) : 0;
}

int kge_prepare(sg_kge *m, const char *train, const char *valid, const char *test, sg_model_error *e)
{
    /* read into n first: a bad file (or no memory) leaves m's model as it was */
    sg_kge n;
    memset(&n, 0, sizeof n);
    int rc = kg_dict_init(&n.ents) || kg_dict_init(&n.rels) ? tc_fail(e, SG_ERR_NOMEM, "out of memory") : 0;
    if (!rc) rc = read_file(&n, train, &n.train, e);
    n.ent_train = n.ents.n;
    n.rel_train = n.rels.n;
    if (!rc && (read_file(&n, valid, &n.valid, e) || read_file(&n, test, &n.test, e))) rc = -1;
    if (!rc && (n.train.n >= INT32_MAX || n.ent_train >= INT32_MAX))
        rc = tc_fail(e, SG_ERR_ARG, "%s: more than 2^31 edges or entities", train);
    if (!rc) rc = kge_tables_init(&n.tb, &m->o, n.ents.n, n.rels.n, e);
    if (rc) {
        drop_data(&n);
        return -1;
    }
    drop_data(m);
    m->tb = n.tb;
    m->ents = n.ents, m->rels = n.rels;
    m->train = n.train, m->valid = n.valid, m->test = n.test;
    m->ent_train = n.ent_train, m->rel_train = n.rel_train;
    return 0;
}

int sg_kge_train_files(sg_kge *m, const char *train, const char *valid, const char *test, sg_kge_result *res,
                       sg_model_error *err)
{
    sg_kge_result scratch;
    if (!res) res = &scratch;
    memset(res, 0, sizeof *res);
    res->valid_mrr = -1;
    tc_ok(err);
    if (!m || !train) return tc_fail(err, SG_ERR_NULL, "NULL model or training file"), SG_ERR_NULL;
    if (kge_prepare(m, train, valid, test, err)) return err && err->status ? err->status : SG_ERR_STATE;
    res->entities = m->ents.n, res->relations = m->rels.n;
    res->entities_train = m->ent_train, res->relations_train = m->rel_train;
    res->train_edges = m->train.n, res->valid_edges = m->valid.n, res->test_edges = m->test.n;
    const int rc = kge_train(m, res, err);
    if (rc == SG_STOPPED) return tc_fail(err, SG_STOPPED, "stopped at step %lld", (long long)res->steps), SG_STOPPED;
    return rc ? err && err->status ? err->status : SG_ERR_STATE : SG_OK;
}

/* ---- evaluation */

/* The triples of t that the model has rows for into (h, r, tl)[0..*n); counts unseen and
 * unknown into out. */
static void known_triples(const sg_kge *m, const kg_triples *t, int64_t *h, int64_t *r, int64_t *tl, int64_t *n,
                          sg_kge_metrics *out)
{
    *n = 0;
    for (int64_t i = 0; i < t->n; i++) {
        if (t->h[i] >= m->tb.n_ent || t->t[i] >= m->tb.n_ent || t->r[i] >= m->tb.n_rel) {
            out->unknown++;
            continue;
        }
        out->unseen += t->h[i] >= m->ent_train || t->t[i] >= m->ent_train || t->r[i] >= m->rel_train;
        h[*n] = t->h[i], r[*n] = t->r[i], tl[*n] = t->t[i];
        (*n)++;
    }
}

/* Ranks test (read) with the filter of fs[0..nf) (read); results into out. */
static int rank_file(sg_kge *m, const kg_triples *test, kg_triples *fs, int nf, sg_kge_metrics *out,
                     sg_model_error *e)
{
    kg_filter f;
    memset(&f, 0, sizeof f);
    const kg_triples **sets = malloc((size_t)(nf ? nf : 1) * sizeof *sets);
    int64_t *buf = malloc((size_t)(5 * test->n + 1) * sizeof *buf), n;
    double *ranks = buf ? (double *)(buf + 3 * test->n) : NULL;
    int rc = !sets || !buf ? tc_fail(e, SG_ERR_NOMEM, "out of memory") : 0;
    for (int i = 0; !rc && i < nf; i++) sets[i] = &fs[i];
    if (!rc && nf && kg_filter_build(&f, sets, nf, m->ents.n, m->rels.n))
        rc = tc_fail(e, SG_ERR_NOMEM, "out of memory for the filter");
    if (!rc) {
        known_triples(m, test, buf, buf + test->n, buf + 2 * test->n, &n, out);
        rc = kge_rank_triples(&m->tb, buf, buf + test->n, buf + 2 * test->n, n, nf ? &f : NULL, ranks, e);
    }
    if (!rc) {
        const int64_t unseen = out->unseen, unknown = out->unknown;
        kge_metrics_of(ranks, n, out);
        out->unseen = unseen, out->unknown = unknown;
    }
    kg_filter_free(&f);
    free(sets);
    free(buf);
    return rc;
}

int sg_kge_evaluate(sg_kge *m, const char *test, const char *const *filters, int n_filters, sg_kge_metrics *out,
                    sg_model_error *err)
{
    tc_ok(err);
    memset(out, 0, sizeof *out);
    if (!m || !test || (n_filters > 0 && !filters) || n_filters < 0)
        return tc_fail(err, SG_ERR_NULL, "NULL model, test file or filters"), SG_ERR_NULL;
    if (!m->tb.ctx) return tc_fail(err, SG_ERR_STATE, "no trained or loaded model to evaluate"), SG_ERR_STATE;
    const int64_t ne = m->ents.n, nr = m->rels.n;
    kg_triples t = {0};
    kg_triples *fs = calloc((size_t)(n_filters + 1), sizeof *fs);
    int rc = fs ? kg_read_tsv(test, &m->ents, &m->rels, &t, err) : tc_fail(err, SG_ERR_NOMEM, "out of memory");
    for (int i = 0; !rc && i < n_filters; i++) rc = kg_read_tsv(filters[i], &m->ents, &m->rels, &fs[i], err);
    if (!rc) rc = rank_file(m, &t, fs, n_filters, out, err);
    for (int i = 0; fs && i < n_filters; i++) kg_triples_free(&fs[i]);
    free(fs);
    kg_triples_free(&t);
    kg_dict_truncate(&m->ents, ne);
    kg_dict_truncate(&m->rels, nr);
    return rc ? err && err->status ? err->status : SG_ERR_STATE : SG_OK;
}

/* ---- predictions */

/* The row of name in d (below rows), or -1 with SG_ERR_INDEX naming it as `what`. */
static int64_t row_of(const kg_dict *d, int64_t rows, const char *name, const char *what, sg_model_error *e)
{
    const int64_t i = name ? kg_dict_find(d, name, strlen(name)) : -1;
    if (i >= 0 && i < rows) return i;
    tc_fail(e, SG_ERR_INDEX, "%s %s: not in the model", what, name ? name : "(NULL)");
    return -1;
}

static int predict(sg_kge *m, const char *ent, const char *rel, bool head_side, int k, int64_t *rows,
                   float *scores, const char **names, int *n, sg_model_error *err)
{
    tc_ok(err);
    *n = 0;
    if (!m || !m->tb.ctx || k < 1 || !rows || !scores)
        return tc_fail(err, SG_ERR_ARG, "predictions need a model, k >= 1 and output arrays"), SG_ERR_ARG;
    const int64_t x = row_of(&m->ents, m->tb.n_ent, ent, "entity", err);
    const int64_t r = x < 0 ? -1 : row_of(&m->rels, m->tb.n_rel, rel, "relation", err);
    if (r < 0) return SG_ERR_INDEX;
    if (kge_predict(&m->tb, x, r, head_side, k, rows, scores, n, err)) return err ? err->status : SG_ERR_STATE;
    for (int i = 0; names && i < *n; i++) names[i] = kge_dict_name(&m->ents, rows[i]);
    return SG_OK;
}

int sg_kge_predict_tails(sg_kge *m, const char *head, const char *relation, int k, int64_t *rows, float *scores,
                         const char **names, int *n, sg_model_error *err)
{
    return predict(m, head, relation, false, k, rows, scores, names, n, err);
}

int sg_kge_predict_heads(sg_kge *m, const char *relation, const char *tail, int k, int64_t *rows, float *scores,
                         const char **names, int *n, sg_model_error *err)
{
    return predict(m, tail, relation, true, k, rows, scores, names, n, err);
}

/* ---- files */

int sg_kge_save(const sg_kge *m, const char *path, sg_model_error *err)
{
    tc_ok(err);
    if (!m || !path) return tc_fail(err, SG_ERR_NULL, "NULL model or path"), SG_ERR_NULL;
    if (!m->tb.ctx) return tc_fail(err, SG_ERR_STATE, "no trained model to save"), SG_ERR_STATE;
    return kge_model_save(m, path, err) ? err ? err->status : SG_ERR_IO : SG_OK;
}

sg_kge *sg_kge_load(const char *path, int threads, sg_model_error *err)
{
    sg_kge *m = sg_kge_new(NULL, err);
    if (!m) return NULL;
    if (!path) tc_fail(err, SG_ERR_NULL, "NULL path");
    if (!path || kge_model_load(m, path, threads, err)) {
        sg_kge_free(m);
        return NULL;
    }
    return m;
}

int sg_kge_export(const sg_kge *m, const char *dir, sg_model_error *err)
{
    tc_ok(err);
    if (!m || !dir) return tc_fail(err, SG_ERR_NULL, "NULL model or directory"), SG_ERR_NULL;
    if (!m->tb.ctx) return tc_fail(err, SG_ERR_STATE, "no model to export"), SG_ERR_STATE;
    return kge_export(m, dir, err) ? err ? err->status : SG_ERR_IO : SG_OK;
}

void sg_kge_set_dist(sg_kge *m, sg_kge_dist *d)
{
    if (m) m->dist = d;
}

/* ---- accessors */

const sg_kge_opts *sg_kge_options(const sg_kge *m) { return m ? &m->o : NULL; }
int64_t sg_kge_entities(const sg_kge *m) { return m && m->tb.ctx ? m->tb.n_ent : 0; }
int64_t sg_kge_relations(const sg_kge *m) { return m && m->tb.ctx ? m->tb.n_rel : 0; }
int64_t sg_kge_entities_train(const sg_kge *m) { return m && m->tb.ctx ? m->ent_train : 0; }
int64_t sg_kge_relations_train(const sg_kge *m) { return m && m->tb.ctx ? m->rel_train : 0; }

const char *sg_kge_entity_name(const sg_kge *m, int64_t i)
{
    return m && i >= 0 && i < sg_kge_entities(m) ? kge_dict_name(&m->ents, i) : NULL;
}

const char *sg_kge_relation_name(const sg_kge *m, int64_t i)
{
    return m && i >= 0 && i < sg_kge_relations(m) ? kge_dict_name(&m->rels, i) : NULL;
}

int64_t sg_kge_find_entity(const sg_kge *m, const char *name)
{
    const int64_t i = m && name && m->tb.ctx ? kg_dict_find(&m->ents, name, strlen(name)) : -1;
    return i < sg_kge_entities(m) ? i : -1;
}

int64_t sg_kge_find_relation(const sg_kge *m, const char *name)
{
    const int64_t i = m && name && m->tb.ctx ? kg_dict_find(&m->rels, name, strlen(name)) : -1;
    return i < sg_kge_relations(m) ? i : -1;
}

float *sg_kge_table(sg_kge *m, int which, int64_t *rows, int64_t *cols)
{
    if (!m || !m->tb.ctx || (which != 0 && which != 1)) return NULL;
    if (rows) *rows = which ? m->tb.rrows : m->tb.n_ent;
    if (cols) *cols = which ? m->tb.rdim : m->tb.dim;
    return sg_tensor_f32(which ? m->tb.R : m->tb.E);
}
