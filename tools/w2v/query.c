/* Queries on a word-vectors file (read with sg_wordvec_read): nearest neighbours by
 * cosine, one analogy, and the analogy benchmark (questions-words format).
 *
 * Invariants: every query works on unit-length copies of the rows (zero rows stay zero
 * and never win); the query words themselves are excluded from the answers; ties go to
 * the lower (more frequent) row, so answers do not depend on thread count.
 */
#include "w2v.h"

#include <ctype.h>
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
        float inv = s > 0 ? (float)(1 / sqrt(s)) : 0.0f;
        for (int64_t d = 0; d < D; d++) u[i * D + d] = x[i * D + d] * inv;
    }
    return u;
}

int w2v_nearest(const float *unit, int64_t V, int64_t D, const float *query,
                const int64_t *exclude, int n_exclude, int k, int64_t *best, float *sims)
{
    double qn = 0;
    for (int64_t d = 0; d < D; d++) qn += (double)query[d] * query[d];
    const float qinv = qn > 0 ? (float)(1 / sqrt(qn)) : 0.0f;
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
        s *= qinv;
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

static sg_wordvec *load(sg_ctx *ctx, const char *path)
{
    sg_wordvec *wv = sg_wordvec_read(ctx, path, -1);
    if (!wv) fprintf(stderr, "sgrad-w2v: %s\n", sg_ctx_message(ctx));
    return wv;
}

int w2v_cmd_neighbors(sg_ctx *ctx, const char *path, const char *words, int k, FILE *out)
{
    sg_wordvec *wv = load(ctx, path);
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

int w2v_cmd_analogy(sg_ctx *ctx, const char *path, const char *a, const char *b,
                    const char *c, FILE *out)
{
    sg_wordvec *wv = load(ctx, path);
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
    int64_t a, b, c, d;
    int section;
} question;

static void lower(char *s)
{
    for (; *s; s++) *s = (char)tolower((unsigned char)*s);
}

int w2v_cmd_evaluate(sg_ctx *ctx, const char *path, const char *qpath, int64_t restrict_,
                     FILE *out, w2v_eval *res)
{
    memset(res, 0, sizeof *res);
    FILE *f = fopen(qpath, "r");
    if (!f) {
        fprintf(stderr, "sgrad-w2v: cannot open %s\n", qpath);
        return -1;
    }
    sg_wordvec *wv = load(ctx, path);
    if (!wv) {
        fclose(f);
        return -1;
    }
    const int64_t D = sg_wordvec_dim(wv);
    int64_t R = sg_wordvec_count(wv);
    if (restrict_ > 0 && restrict_ < R) R = restrict_;
    float *unit = w2v_unit_rows(sg_wordvec_vectors(wv));
    int64_t nq = 0, capq = 1024, nsec = 0;
    question *qs = malloc((size_t)capq * sizeof *qs);
    char (*secname)[64] = malloc(64 * sizeof *secname);
    int64_t *sec_total = calloc(64, sizeof *sec_total);
    int rc = (!unit || !qs || !secname || !sec_total) ? -1 : 0;
    char line[1024];
    while (!rc && fgets(line, sizeof line, f)) {
        if (line[0] == ':') {
            if (nsec < 64) {
                char *name = line + 1;
                while (*name == ' ') name++;
                name[strcspn(name, "\r\n")] = '\0';
                snprintf(secname[nsec++], 64, "%.63s", name);
            }
            continue;
        }
        char w[4][256];
        if (sscanf(line, "%255s %255s %255s %255s", w[0], w[1], w[2], w[3]) != 4) continue;
        res->questions++;
        if (nsec > 0) sec_total[nsec - 1]++;
        int64_t id[4];
        bool ok = true;
        for (int i = 0; i < 4; i++) {
            lower(w[i]);
            id[i] = sg_wordvec_find(wv, w[i]);
            ok &= id[i] >= 0 && id[i] < R;
        }
        if (!ok) continue;
        if (nq == capq) {
            question *g = realloc(qs, (size_t)(capq *= 2) * sizeof *qs);
            if (!g) {
                rc = -1;
                break;
            }
            qs = g;
        }
        qs[nq++] = (question){id[0], id[1], id[2], id[3], nsec > 0 ? (int)nsec - 1 : 0};
    }
    fclose(f);
    char *hit = rc ? NULL : calloc((size_t)(nq ? nq : 1), 1);
    if (!rc && !hit) rc = -1;
    if (!rc) {
        int no_query = 0; /* some thread got no query buffer */
#ifdef _OPENMP
#pragma omp parallel
#endif
        {
            float *q = malloc((size_t)(D > 0 ? D : 1) * sizeof *q); /* this thread's query */
            if (!q) {
#ifdef _OPENMP
#pragma omp atomic write
#endif
                no_query = 1;
            }
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 16)
#endif
            for (int64_t i = 0; i < nq; i++) {
                if (!q) continue;
                const question *x = &qs[i];
                for (int64_t d = 0; d < D; d++)
                    q[d] = unit[x->b * D + d] - unit[x->a * D + d] + unit[x->c * D + d];
                int64_t ex[3] = {x->a, x->b, x->c}, best = -1;
                if (w2v_nearest(unit, R, D, q, ex, 3, 1, &best, NULL) == 1) hit[i] = best == x->d;
            }
            free(q);
        }
        if (no_query) rc = -1;
    }
    if (!rc) {
        int64_t *sec_cov = calloc((size_t)(nsec ? nsec : 1), sizeof *sec_cov);
        int64_t *sec_ok = calloc((size_t)(nsec ? nsec : 1), sizeof *sec_ok);
        for (int64_t i = 0; i < nq; i++) {
            res->covered++;
            res->correct += hit[i];
            if (sec_cov && sec_ok && nsec) {
                sec_cov[qs[i].section]++;
                sec_ok[qs[i].section] += hit[i];
            }
        }
        if (out && sec_cov && sec_ok)
            for (int64_t s = 0; s < nsec; s++)
                fprintf(out, "  %-28s %5lld / %5lld covered, accuracy %5.1f%%\n", secname[s],
                        (long long)sec_cov[s], (long long)sec_total[s],
                        sec_cov[s] ? 100.0 * (double)sec_ok[s] / (double)sec_cov[s] : 0.0);
        if (out)
            fprintf(out, "analogy accuracy %.2f%% (%lld of %lld covered questions; %lld "
                         "questions in all; 3CosAdd over the %lld most frequent words)\n",
                    res->covered ? 100.0 * (double)res->correct / (double)res->covered : 0.0,
                    (long long)res->correct, (long long)res->covered, (long long)res->questions,
                    (long long)R);
        free(sec_cov);
        free(sec_ok);
    }
    if (rc) fprintf(stderr, "sgrad-w2v: out of memory\n");
    free(hit);
    free(qs);
    free(secname);
    free(sec_total);
    free(unit);
    sg_wordvec_free(wv);
    return rc;
}
