/* The filter index of known triples (kge.h's kg_filter): what the filtered ranking leaves
 * out of each ranking.
 *
 * Invariants: each side is a CSR over its key entity (the head for the tails side, the
 * tail for the heads side); within a key's run the (relation, entity) pairs are sorted and
 * distinct, so one relation's entities are a sorted, duplicate-free subrun that two binary
 * searches find. Both sides hold the same m triples.
 */
#include "kge.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t rel, ent;
} kg_pair;

static int kg_pair_cmp(const void *a, const void *b)
{
    const kg_pair *x = a, *y = b;
    if (x->rel != y->rel) return x->rel < y->rel ? -1 : 1;
    return (x->ent > y->ent) - (x->ent < y->ent);
}

/* Column 0 (heads), 1 (relations) or 2 (tails) of x. */
static const int64_t *kg_col(const kg_triples *x, int c)
{
    return c == 0 ? x->h : c == 1 ? x->r : x->t;
}

/* One side: off (n_ent + 1), rel and ent (m each) of the pairs (relation, column other)
 * keyed by column key, sorted and distinct per key. 0 or SG_ERR_NOMEM. */
static int kg_side_build(const kg_triples *const *sets, int nsets, int64_t n_ent, int64_t total, int key,
                         int other, int64_t **off_out, int64_t **rel_out, int64_t **ent_out, int64_t *m_out)
{
    int64_t *off = calloc((size_t)n_ent + 1, sizeof *off);
    int64_t *cur = malloc(((size_t)n_ent + 1) * sizeof *cur);
    kg_pair *pairs = malloc(((size_t)total + 1) * sizeof *pairs);
    int64_t *rel = malloc(((size_t)total + 1) * sizeof *rel);
    int64_t *ent = malloc(((size_t)total + 1) * sizeof *ent);
    if (!off || !cur || !pairs || !rel || !ent) {
        free(off), free(cur), free(pairs), free(rel), free(ent);
        return SG_ERR_NOMEM;
    }
    for (int s = 0; s < nsets; s++)
        if (sets[s])
            for (int64_t i = 0; i < sets[s]->n; i++) off[kg_col(sets[s], key)[i] + 1]++;
    for (int64_t k = 0; k < n_ent; k++) off[k + 1] += off[k];
    memcpy(cur, off, (size_t)n_ent * sizeof *cur);
    for (int s = 0; s < nsets; s++) {
        if (!sets[s]) continue;
        const int64_t *kc = kg_col(sets[s], key), *rc = kg_col(sets[s], 1), *oc = kg_col(sets[s], other);
        for (int64_t i = 0; i < sets[s]->n; i++) pairs[cur[kc[i]]++] = (kg_pair){rc[i], oc[i]};
    }
    /* sort each key's run, then compact it past its duplicates; cur[k] becomes the new start */
    int64_t m = 0;
    for (int64_t k = 0; k < n_ent; k++) {
        const int64_t lo = off[k], hi = off[k + 1];
        qsort(pairs + lo, (size_t)(hi - lo), sizeof *pairs, kg_pair_cmp);
        cur[k] = m;
        for (int64_t j = lo; j < hi; j++) {
            if (j > lo && pairs[j].rel == pairs[j - 1].rel && pairs[j].ent == pairs[j - 1].ent) continue;
            rel[m] = pairs[j].rel;
            ent[m] = pairs[j].ent;
            m++;
        }
    }
    memcpy(off, cur, (size_t)n_ent * sizeof *off);
    off[n_ent] = m;
    free(cur);
    free(pairs);
    int64_t *p = realloc(rel, ((size_t)m + 1) * sizeof *rel); /* shrinking: kept as is on failure */
    if (p) rel = p;
    p = realloc(ent, ((size_t)m + 1) * sizeof *ent);
    if (p) ent = p;
    *off_out = off;
    *rel_out = rel;
    *ent_out = ent;
    *m_out = m;
    return 0;
}

int kg_filter_build(kg_filter *f, const kg_triples *const *sets, int nsets, int64_t n_ent, int64_t n_rel)
{
    memset(f, 0, sizeof *f);
    if (n_ent < 0 || n_rel < 0 || nsets < 0 || (nsets > 0 && !sets)) return SG_ERR_ARG;
    int64_t total = 0;
    for (int s = 0; s < nsets; s++) {
        const kg_triples *x = sets[s];
        if (!x) continue;
        for (int64_t i = 0; i < x->n; i++)
            if (x->h[i] < 0 || x->h[i] >= n_ent || x->t[i] < 0 || x->t[i] >= n_ent || x->r[i] < 0 ||
                x->r[i] >= n_rel)
                return SG_ERR_INDEX;
        total += x->n;
    }
    f->n_ent = n_ent;
    f->n_rel = n_rel;
    int64_t m2 = 0;
    int rc = kg_side_build(sets, nsets, n_ent, total, 0, 2, &f->by_head_off, &f->by_head_rel, &f->by_head_tail,
                           &f->m);
    if (rc == 0)
        rc = kg_side_build(sets, nsets, n_ent, total, 2, 0, &f->by_tail_off, &f->by_tail_rel, &f->by_tail_head,
                           &m2);
    if (rc != 0) kg_filter_free(f);
    return rc;
}

void kg_filter_free(kg_filter *f)
{
    if (!f) return;
    free(f->by_head_off), free(f->by_head_rel), free(f->by_head_tail);
    free(f->by_tail_off), free(f->by_tail_rel), free(f->by_tail_head);
    memset(f, 0, sizeof *f);
}

/* The entities paired with relation r in key's run of one side: ent[*lo, *hi). */
static void kg_side_find(const kg_filter *f, const int64_t *off, const int64_t *rel, int64_t key, int64_t r,
                         int64_t *lo, int64_t *hi)
{
    *lo = *hi = 0;
    if (!off || key < 0 || key >= f->n_ent || r < 0 || r >= f->n_rel) return;
    int64_t a = off[key], b = off[key + 1];
    while (a < b) { /* first pair with relation >= r */
        const int64_t mid = a + (b - a) / 2;
        if (rel[mid] < r) a = mid + 1;
        else b = mid;
    }
    int64_t e = a;
    b = off[key + 1];
    while (e < b) { /* first pair with relation > r */
        const int64_t mid = e + (b - e) / 2;
        if (rel[mid] <= r) e = mid + 1;
        else b = mid;
    }
    *lo = a;
    *hi = e;
}

void kg_filter_tails(const kg_filter *f, int64_t h, int64_t r, const int64_t **tails, int64_t *n)
{
    int64_t lo, hi;
    kg_side_find(f, f->by_head_off, f->by_head_rel, h, r, &lo, &hi);
    *tails = f->by_head_tail ? f->by_head_tail + lo : NULL;
    *n = hi - lo;
}

void kg_filter_heads(const kg_filter *f, int64_t r, int64_t t, const int64_t **heads, int64_t *n)
{
    int64_t lo, hi;
    kg_side_find(f, f->by_tail_off, f->by_tail_rel, t, r, &lo, &hi);
    *heads = f->by_tail_head ? f->by_tail_head + lo : NULL;
    *n = hi - lo;
}

bool kg_filter_known(const kg_filter *f, int64_t h, int64_t r, int64_t t)
{
    const int64_t *tails;
    int64_t n;
    kg_filter_tails(f, h, r, &tails, &n);
    int64_t a = 0, b = n;
    while (a < b) {
        const int64_t mid = a + (b - a) / 2;
        if (tails[mid] < t) a = mid + 1;
        else b = mid;
    }
    return a < n && tails[a] == t;
}
