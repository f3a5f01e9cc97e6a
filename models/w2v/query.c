/* Queries on word vectors (a model's, or a vectors file's read with sg_wordvec_read):
 * nearest neighbours by cosine, and the analogy benchmark (questions-words format).
 *
 * Invariants: every query works on unit-length copies of the rows (zero rows stay zero
 * and never win); the query words themselves are excluded from the answers; ties go to
 * the lower (more frequent) row, so answers do not depend on thread count.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* getline, strtok_r, strdup */
#endif
#include "w2v.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

float *w2v_unit_rows(sg_tensor *vec)
{
    const int64_t V = sg_tensor_dim(vec, 0), D = sg_tensor_dim(vec, 1);
    const float *x = sg_tensor_f32(vec);
    float *u = malloc((size_t)(V * D > 0 ? V * D : 1) * sizeof *u);
    if (!u || !x) {
        free(u);
        return NULL;
    }
    for (int64_t i = 0; i < V; i++) {
        double s = 0;
        for (int64_t d = 0; d < D; d++) s += (double)x[i * D + d] * x[i * D + d];
        /* in double: 1 / norm of a subnormal row overflows a float */
        const double norm = sqrt(s);
        for (int64_t d = 0; d < D; d++) u[i * D + d] = s > 0 ? (float)(x[i * D + d] / norm) : 0.0f;
    }
    return u;
}

int w2v_nearest(const float *unit, int64_t V, int64_t D, const float *query,
                const int64_t *exclude, int n_exclude, int k, int64_t *best, float *sims)
{
    double qn = 0;
    for (int64_t d = 0; d < D; d++) qn += (double)query[d] * query[d];
    const double qinv = qn > 0 ? 1 / sqrt(qn) : 0.0; /* double: no overflow to inf */
    int n = 0;
    float top[64];
    if (k > 64) k = 64;
    if (k <= 0) return 0;
    for (int64_t i = 0; i < V; i++) {
        bool skip = false;
        for (int e = 0; e < n_exclude; e++) skip |= exclude[e] == i;
        if (skip) continue;
        const float *r = unit + i * D;
        float s = 0;
        for (int64_t d = 0; d < D; d++) s += r[d] * query[d];
        s = (float)(s * qinv);
        if (n == k && s <= top[n - 1]) continue;
        int j = n < k ? n++ : n - 1;
        while (j > 0 && top[j - 1] < s) {
            top[j] = top[j - 1];
            best[j] = best[j - 1];
            j--;
        }
        top[j] = s;
        best[j] = i;
    }
    if (sims) memcpy(sims, top, (size_t)n * sizeof *sims);
    return n;
}

/* ---- the analogy benchmark */

typedef struct {
    int64_t a, b, c, d; /* each word's first row among the R, case folded */
    int64_t section;    /* -1: before any section line */
} question;

/* ASCII letters to upper case, as word2vec.c's compute-accuracy (toupper, C locale) */
static int fold(unsigned char c) { return c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c; }

static int fold_cmp(const char *x, const char *y)
{
    for (;; x++, y++) {
        const int a = fold((unsigned char)*x), b = fold((unsigned char)*y);
        if (a != b || !a) return a - b;
    }
}

/* The first R rows sorted by folded word, ties by row: each run of case variants starts
 * with its first row (gensim's and word2vec.c's choice for a question word). */
typedef struct {
    const char *word;
    int64_t row;
} folded_entry;
typedef struct {
    folded_entry *order; /* R rows, sorted */
    int64_t *canon;      /* row -> first row of its variants */
    int64_t R, max_variants;
} folded_vocab;

static int by_folded_word(const void *x, const void *y)
{
    const folded_entry *i = x, *j = y;
    const int c = fold_cmp(i->word, j->word);
    return c ? c : (i->row > j->row) - (i->row < j->row);
}

static int folded_vocab_build(folded_vocab *fv, const char *(*word)(const void *, int64_t), const void *words,
                              int64_t R)
{
    fv->R = R;
    fv->max_variants = 1;
    fv->order = malloc((size_t)(R ? R : 1) * sizeof *fv->order);
    fv->canon = malloc((size_t)(R ? R : 1) * sizeof *fv->canon);
    if (!fv->order || !fv->canon) return -1;
    for (int64_t i = 0; i < R; i++) fv->order[i] = (folded_entry){word(words, i), i};
    qsort(fv->order, (size_t)R, sizeof *fv->order, by_folded_word);
    for (int64_t i = 0, run = 0; i < R; i++) {
        const bool same = i > 0 && !fold_cmp(fv->order[i].word, fv->order[i - 1].word);
        run = same ? run + 1 : 1;
        if (run > fv->max_variants) fv->max_variants = run;
        fv->canon[fv->order[i].row] = same ? fv->canon[fv->order[i - 1].row] : fv->order[i].row;
    }
    return 0;
}

/* Position in order of the first variant of word, or -1 */
static int64_t folded_vocab_find(const folded_vocab *fv, const char *word)
{
    int64_t lo = 0, hi = fv->R; /* the first position whose word folds >= word */
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (fold_cmp(fv->order[mid].word, word) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < fv->R && !fold_cmp(fv->order[lo].word, word) ? lo : -1;
}

/* Appends the rows of canonical row q's case variants to ex; returns the new count. */
static int add_variants(const folded_vocab *fv, int64_t q, const char *qword, int64_t *ex, int n)
{
    int64_t p = folded_vocab_find(fv, qword);
    for (; p < fv->R && fv->canon[fv->order[p].row] == q; p++) ex[n++] = fv->order[p].row;
    return n;
}

/* Splits line at ASCII white space into at most 5 words; returns how many (5: more). */
static int split_words(char *line, char *w[5])
{
    int n = 0;
    for (char *save = NULL, *t = strtok_r(line, " \t\r\n\v\f", &save); t && n < 5;
         t = strtok_r(NULL, " \t\r\n\v\f", &save))
        w[n++] = t;
    return n;
}

/* The questions read so far, and the sections. */
typedef struct {
    question *qs;
    int64_t nq, capq;
    sg_w2v_eval *ev;
    int64_t capsec;
} question_list;

/* A section line ": name". false: out of memory. */
static bool add_section(question_list *l, const char *line)
{
    sg_w2v_eval *ev = l->ev;
    if (ev->n_sections == l->capsec) {
        sg_w2v_eval_section *g = realloc(ev->sections, (size_t)(l->capsec = l->capsec ? 2 * l->capsec : 16) * sizeof *g);
        if (!g) return false;
        ev->sections = g;
    }
    const char *name = line + 1;
    while (*name == ' ') name++;
    const size_t len = strcspn(name, "\r\n");
    char *copy = malloc(len + 1);
    if (copy) memcpy(copy, name, len), copy[len] = '\0';
    ev->sections[ev->n_sections++] = (sg_w2v_eval_section){.name = copy};
    return copy != NULL;
}

/* A question line: counted, and kept when its 4 words are among the R rows. false: out of memory. */
static bool add_question(question_list *l, const folded_vocab *fv, char *line, int64_t line_no)
{
    sg_w2v_eval *ev = l->ev;
    char *w[5];
    const int n = split_words(line, w);
    if (n == 0) return true; /* a blank line */
    if (n != 4) {            /* gensim skips such a line too (logging it) */
        if (!ev->skipped++) ev->first_skipped = line_no;
        return true;
    }
    ev->questions++;
    if (ev->n_sections > 0) ev->sections[ev->n_sections - 1].total++;
    int64_t id[4];
    for (int i = 0; i < 4; i++) {
        const int64_t p = folded_vocab_find(fv, w[i]);
        if (p < 0) return true;
        id[i] = fv->order[p].row;
    }
    if (l->nq == l->capq) {
        question *g = realloc(l->qs, (size_t)(l->capq = l->capq ? 2 * l->capq : 1024) * sizeof *g);
        if (!g) return false;
        l->qs = g;
    }
    l->qs[l->nq++] = (question){id[0], id[1], id[2], id[3], ev->n_sections - 1};
    return true;
}

/* Reads the questions of f. 0, -1 out of memory, -2 a read error. */
static int read_questions(FILE *f, const folded_vocab *fv, question_list *l)
{
    char *line = NULL;
    size_t line_cap = 0;
    int64_t line_no = 0;
    bool ok = true;
    while (ok && getline(&line, &line_cap, f) >= 0) {
        line_no++;
        ok = line[0] == ':' ? add_section(l, line) : add_question(l, fv, line, line_no);
    }
    free(line);
    return !ok ? -1 : ferror(f) ? -2 : 0;
}

/* Each question answered by 3CosAdd over the R unit rows: hit[i] whether its best row is
 * its answer's (up to case). 0, or -1 when a thread got no buffer. */
static int answer(const float *unit, int64_t D, const folded_vocab *fv, const char *(*word)(const void *, int64_t),
                  const void *words, const question_list *l, char *hit)
{
    int no_buffers = 0; /* some thread got no query buffer */
#ifdef _OPENMP
#pragma omp parallel
#endif
    {
        float *q = malloc((size_t)(D > 0 ? D : 1) * sizeof *q); /* this thread's query */
        int64_t *ex = malloc((size_t)(3 * fv->max_variants) * sizeof *ex);
        if (!q || !ex) {
#ifdef _OPENMP
#pragma omp atomic write
#endif
            no_buffers = 1;
        }
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 16)
#endif
        for (int64_t i = 0; i < l->nq; i++) {
            if (!q || !ex) continue;
            const question *x = &l->qs[i];
            for (int64_t d = 0; d < D; d++) q[d] = unit[x->b * D + d] - unit[x->a * D + d] + unit[x->c * D + d];
            /* no case variant of a question word is an answer (gensim's rule) */
            int n_ex = add_variants(fv, x->a, word(words, x->a), ex, 0);
            n_ex = add_variants(fv, x->b, word(words, x->b), ex, n_ex);
            n_ex = add_variants(fv, x->c, word(words, x->c), ex, n_ex);
            int64_t best = -1;
            if (w2v_nearest(unit, fv->R, D, q, ex, n_ex, 1, &best, NULL) == 1) hit[i] = fv->canon[best] == x->d;
        }
        free(q);
        free(ex);
    }
    return no_buffers ? -1 : 0;
}

int w2v_evaluate(const float *unit, int64_t R, int64_t D, const char *(*word)(const void *, int64_t),
                 const void *words, const char *qpath, sg_w2v_eval *ev, sg_model_error *e)
{
    memset(ev, 0, sizeof *ev);
    ev->rows = R;
    FILE *f = fopen(qpath, "r");
    if (!f) return tc_fail(e, SG_ERR_IO, "cannot open %s: %s", qpath, strerror(errno));
    folded_vocab fv = {0};
    question_list l = {.ev = ev};
    int rc = folded_vocab_build(&fv, word, words, R) ? -1 : read_questions(f, &fv, &l);
    const int read_errno = errno;
    fclose(f);
    char *hit = rc ? NULL : calloc((size_t)(l.nq ? l.nq : 1), 1);
    if (!rc && (!hit || answer(unit, D, &fv, word, words, &l, hit))) rc = -1;
    for (int64_t i = 0; !rc && i < l.nq; i++) {
        ev->covered++;
        ev->correct += hit[i];
        if (l.qs[i].section < 0) continue;
        ev->sections[l.qs[i].section].covered++;
        ev->sections[l.qs[i].section].correct += hit[i];
    }
    free(hit);
    free(l.qs);
    free(fv.order);
    free(fv.canon);
    if (rc == -2) return tc_fail(e, SG_ERR_IO, "cannot read %s: %s", qpath, strerror(read_errno));
    return rc ? tc_fail(e, SG_ERR_NOMEM, "out of memory") : 0;
}
