/* Queries on a word-vectors file (read with sg_wordvec_read): nearest neighbours by
 * cosine, one analogy, and the analogy benchmark (questions-words format).
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

/* binary: -1 tells the formats apart (not on a pipe), 0 text, 1 binary */
static sg_wordvec *load(sg_ctx *ctx, const char *path, int binary)
{
    sg_wordvec *wv = sg_wordvec_read(ctx, path, binary);
    if (!wv && binary < 0 && sg_ctx_status(ctx) == SG_ERR_ARG)
        fprintf(stderr, "sgrad-w2v: %s (here: give -binary 0 or -binary 1)\n", sg_ctx_message(ctx));
    else if (!wv)
        fprintf(stderr, "sgrad-w2v: %s\n", sg_ctx_message(ctx));
    return wv;
}

int w2v_cmd_neighbors(sg_ctx *ctx, const char *path, int binary, const char *words, int k,
                      FILE *out)
{
    sg_wordvec *wv = load(ctx, path, binary);
    if (!wv) return -1;
    const int64_t V = sg_wordvec_count(wv), D = sg_wordvec_dim(wv);
    float *unit = w2v_unit_rows(sg_wordvec_vectors(wv));
    char *list = malloc(strlen(words) + 1);
    if (!unit || !list) {
        fprintf(stderr, "sgrad-w2v: out of memory\n");
        free(unit);
        free(list);
        sg_wordvec_free(wv);
        return -1;
    }
    strcpy(list, words);
    int missing = 0;
    for (char *w = strtok(list, ","); w; w = strtok(NULL, ",")) {
        int64_t q = sg_wordvec_find(wv, w);
        if (q < 0) {
            fprintf(out, "%s: not in the vocabulary\n", w);
            missing++;
            continue;
        }
        int64_t best[64];
        float sims[64];
        int n = w2v_nearest(unit, V, D, unit + q * D, &q, 1, k, best, sims);
        fprintf(out, "%s:", w);
        for (int i = 0; i < n; i++)
            fprintf(out, " %s (%.3f)%s", sg_wordvec_word(wv, best[i]), (double)sims[i],
                    i + 1 < n ? "," : "");
        fprintf(out, "\n");
    }
    free(list);
    free(unit);
    sg_wordvec_free(wv);
    return missing ? 1 : 0;
}

int w2v_cmd_analogy(sg_ctx *ctx, const char *path, int binary, const char *a, const char *b,
                    const char *c, FILE *out)
{
    sg_wordvec *wv = load(ctx, path, binary);
    if (!wv) return -1;
    const int64_t V = sg_wordvec_count(wv), D = sg_wordvec_dim(wv);
    int64_t ex[3] = {sg_wordvec_find(wv, a), sg_wordvec_find(wv, b), sg_wordvec_find(wv, c)};
    const char *names[3] = {a, b, c};
    int rc = 0;
    for (int i = 0; i < 3; i++)
        if (ex[i] < 0) {
            fprintf(out, "%s: not in the vocabulary\n", names[i]);
            rc = 1;
        }
    float *unit = rc ? NULL : w2v_unit_rows(sg_wordvec_vectors(wv));
    float *q = rc ? NULL : malloc((size_t)D * sizeof *q);
    if (!rc && (!unit || !q)) rc = -1;
    if (!rc) {
        for (int64_t d = 0; d < D; d++)
            q[d] = unit[ex[1] * D + d] - unit[ex[0] * D + d] + unit[ex[2] * D + d];
        int64_t best[5];
        float sims[5];
        int n = w2v_nearest(unit, V, D, q, ex, 3, 5, best, sims);
        if (n > 0) {
            fprintf(out, "%s : %s :: %s : %s\n", a, b, c, sg_wordvec_word(wv, best[0]));
            fprintf(out, "candidates:");
            for (int i = 0; i < n; i++)
                fprintf(out, " %s (%.3f)%s", sg_wordvec_word(wv, best[i]), (double)sims[i],
                        i + 1 < n ? "," : "\n");
        }
    }
    free(q);
    free(unit);
    sg_wordvec_free(wv);
    return rc;
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
    const sg_wordvec *wv;
    int64_t *order; /* R rows, sorted */
    int64_t *canon; /* row -> first row of its variants */
    int64_t R, max_variants;
} folded_vocab;

static const sg_wordvec *sort_wv;
static int by_folded_word(const void *x, const void *y)
{
    const int64_t i = *(const int64_t *)x, j = *(const int64_t *)y;
    const int c = fold_cmp(sg_wordvec_word(sort_wv, i), sg_wordvec_word(sort_wv, j));
    return c ? c : (i > j) - (i < j);
}

static int folded_vocab_build(folded_vocab *fv, const sg_wordvec *wv, int64_t R)
{
    fv->wv = wv;
    fv->R = R;
    fv->max_variants = 1;
    fv->order = malloc((size_t)(R ? R : 1) * sizeof *fv->order);
    fv->canon = malloc((size_t)(R ? R : 1) * sizeof *fv->canon);
    if (!fv->order || !fv->canon) return -1;
    for (int64_t i = 0; i < R; i++) fv->order[i] = i;
    sort_wv = wv; /* qsort has no context argument; the benchmark runs once per process */
    qsort(fv->order, (size_t)R, sizeof *fv->order, by_folded_word);
    for (int64_t i = 0, run = 0; i < R; i++) {
        const bool same = i > 0 && !fold_cmp(sg_wordvec_word(wv, fv->order[i]),
                                             sg_wordvec_word(wv, fv->order[i - 1]));
        run = same ? run + 1 : 1;
        if (run > fv->max_variants) fv->max_variants = run;
        fv->canon[fv->order[i]] = same ? fv->canon[fv->order[i - 1]] : fv->order[i];
    }
    return 0;
}

/* Position in order of the first variant of word, or -1 */
static int64_t folded_vocab_find(const folded_vocab *fv, const char *word)
{
    int64_t lo = 0, hi = fv->R; /* the first position whose word folds >= word */
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (fold_cmp(sg_wordvec_word(fv->wv, fv->order[mid]), word) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < fv->R && !fold_cmp(sg_wordvec_word(fv->wv, fv->order[lo]), word) ? lo : -1;
}

/* Appends the rows of canonical row q's case variants to ex; returns the new count. */
static int add_variants(const folded_vocab *fv, int64_t q, int64_t *ex, int n)
{
    int64_t p = folded_vocab_find(fv, sg_wordvec_word(fv->wv, q));
    for (; p < fv->R && fv->canon[fv->order[p]] == q; p++) ex[n++] = fv->order[p];
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

typedef struct {
    char *name;
    int64_t total, covered, correct;
} section;

int w2v_cmd_evaluate(sg_ctx *ctx, const char *path, int binary, const char *qpath,
                     int64_t restrict_, FILE *out, w2v_eval *res)
{
    memset(res, 0, sizeof *res);
    FILE *f = fopen(qpath, "r");
    if (!f) {
        fprintf(stderr, "sgrad-w2v: cannot open %s: %s\n", qpath, strerror(errno));
        return -1;
    }
    sg_wordvec *wv = load(ctx, path, binary);
    if (!wv) {
        fclose(f);
        return -1;
    }
    const int64_t D = sg_wordvec_dim(wv);
    int64_t R = sg_wordvec_count(wv);
    if (restrict_ > 0 && restrict_ < R) R = restrict_;
    float *unit = w2v_unit_rows(sg_wordvec_vectors(wv));
    folded_vocab fv = {0};
    int64_t nq = 0, capq = 1024, nsec = 0, capsec = 16, skipped = 0, first_skipped = 0;
    question *qs = malloc((size_t)capq * sizeof *qs);
    section *secs = malloc((size_t)capsec * sizeof *secs);
    bool oom = !unit || !qs || !secs || folded_vocab_build(&fv, wv, R);
    char *line = NULL;
    size_t line_cap = 0;
    int64_t line_no = 0;
    while (!oom && getline(&line, &line_cap, f) >= 0) {
        line_no++;
        if (line[0] == ':') {
            if (nsec == capsec) {
                section *g = realloc(secs, (size_t)(capsec *= 2) * sizeof *secs);
                if (!g) {
                    oom = true;
                    break;
                }
                secs = g;
            }
            char *name = line + 1;
            while (*name == ' ') name++;
            name[strcspn(name, "\r\n")] = '\0';
            secs[nsec] = (section){.name = strdup(name)};
            if (!secs[nsec++].name) oom = true;
            continue;
        }
        char *w[5];
        const int n = split_words(line, w);
        if (n == 0) continue; /* a blank line */
        if (n != 4) {         /* gensim skips such a line too (logging it) */
            if (!skipped++) first_skipped = line_no;
            continue;
        }
        res->questions++;
        if (nsec > 0) secs[nsec - 1].total++;
        int64_t id[4];
        bool known = true;
        for (int i = 0; i < 4; i++) {
            const int64_t p = folded_vocab_find(&fv, w[i]);
            id[i] = p < 0 ? -1 : fv.order[p];
            known &= p >= 0;
        }
        if (!known) continue;
        if (nq == capq) {
            question *g = realloc(qs, (size_t)(capq *= 2) * sizeof *qs);
            if (!g) {
                oom = true;
                break;
            }
            qs = g;
        }
        qs[nq++] = (question){id[0], id[1], id[2], id[3], nsec - 1};
    }
    const bool read_error = !oom && ferror(f);
    const int read_errno = errno;
    free(line);
    fclose(f);
    char *hit = oom || read_error ? NULL : calloc((size_t)(nq ? nq : 1), 1);
    if (!oom && !read_error && !hit) oom = true;
    if (!oom && !read_error) {
        int no_buffers = 0; /* some thread got no query buffer */
#ifdef _OPENMP
#pragma omp parallel
#endif
        {
            float *q = malloc((size_t)(D > 0 ? D : 1) * sizeof *q); /* this thread's query */
            int64_t *ex = malloc((size_t)(3 * fv.max_variants) * sizeof *ex);
            if (!q || !ex) {
#ifdef _OPENMP
#pragma omp atomic write
#endif
                no_buffers = 1;
            }
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 16)
#endif
            for (int64_t i = 0; i < nq; i++) {
                if (!q || !ex) continue;
                const question *x = &qs[i];
                for (int64_t d = 0; d < D; d++)
                    q[d] = unit[x->b * D + d] - unit[x->a * D + d] + unit[x->c * D + d];
                /* no case variant of a question word is an answer (gensim's rule) */
                int n_ex = add_variants(&fv, x->a, ex, 0);
                n_ex = add_variants(&fv, x->b, ex, n_ex);
                n_ex = add_variants(&fv, x->c, ex, n_ex);
                int64_t best = -1;
                if (w2v_nearest(unit, R, D, q, ex, n_ex, 1, &best, NULL) == 1)
                    hit[i] = fv.canon[best] == x->d;
            }
            free(q);
            free(ex);
        }
        if (no_buffers) oom = true;
    }
    if (!oom && !read_error) {
        for (int64_t i = 0; i < nq; i++) {
            res->covered++;
            res->correct += hit[i];
            if (qs[i].section >= 0) {
                secs[qs[i].section].covered++;
                secs[qs[i].section].correct += hit[i];
            }
        }
        if (skipped)
            fprintf(stderr, "sgrad-w2v: %s: skipped %lld line%s that are not 4 words (the first: "
                            "line %lld)\n", qpath, (long long)skipped, skipped > 1 ? "s" : "",
                    (long long)first_skipped);
        for (int64_t s = 0; out && s < nsec; s++)
            fprintf(out, "  %-28s %5lld / %5lld covered, accuracy %5.1f%%\n", secs[s].name,
                    (long long)secs[s].covered, (long long)secs[s].total,
                    secs[s].covered ? 100.0 * (double)secs[s].correct / (double)secs[s].covered : 0.0);
        if (out)
            fprintf(out, "analogy accuracy %.2f%% (%lld of %lld covered questions; %lld "
                         "questions in all; 3CosAdd over the %lld most frequent words)\n",
                    res->covered ? 100.0 * (double)res->correct / (double)res->covered : 0.0,
                    (long long)res->correct, (long long)res->covered, (long long)res->questions,
                    (long long)R);
    }
    if (read_error) fprintf(stderr, "sgrad-w2v: cannot read %s: %s\n", qpath, strerror(read_errno));
    else if (oom) fprintf(stderr, "sgrad-w2v: out of memory\n");
    for (int64_t s = 0; secs && s < nsec; s++) free(secs[s].name);
    free(secs);
    free(hit);
    free(qs);
    free(fv.order);
    free(fv.canon);
    free(unit);
    sg_wordvec_free(wv);
    return oom || read_error ? -1 : 0;
}
