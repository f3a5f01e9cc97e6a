/* Sampling tables of the sgrad programs: frequent-word subsampling thresholds and the noise
 * distribution for negative sampling.
 *
 * Invariants: keep thresholds are in [0, 2^32] (2^32 = always keep). The alias table
 * satisfies, for every i, P(i) = (col[i].threshold + sum over j with col[j].alias == i of
 * (2^32 - col[j].threshold)) / (n * 2^32), equal to counts[i]^power / sum up to the rounding
 * of each threshold to an integer (|error| <= 1 / (n * 2^32) per share moved).
 */
#include "common.h"

#include <math.h>
#include <stdlib.h>

double tc_keep_prob(int64_t count, double sample, int64_t train_words)
{
    if (sample <= 0 || count <= 0) return 1.0;
    double t = sample * (double)train_words, c = (double)count;
    double p = (sqrt(c / t) + 1) * t / c;
    return p < 1 ? p : 1.0;
}

uint64_t *tc_keep_table(const tc_vocab *v, double sample)
{
    uint64_t *k = malloc((size_t)(v->size ? v->size : 1) * sizeof *k);
    if (!k) return NULL;
    for (int64_t i = 0; i < v->size; i++) {
        double p = tc_keep_prob(v->counts[i], sample, v->train_words);
        k[i] = p >= 1 ? (uint64_t)1 << 32 : (uint64_t)(p * 4294967296.0);
    }
    return k;
}

void tc_noise_free(tc_noise *t)
{
    free(t->col);
    t->col = NULL;
    t->n = 0;
}

int tc_noise_init(tc_noise *t, const int64_t *counts, int64_t n, double power)
{
    t->n = n;
    t->col = malloc((size_t)(n ? n : 1) * sizeof *t->col);
    double *q = malloc((size_t)(n ? n : 1) * sizeof *q);
    int32_t *small = malloc((size_t)(n ? n : 1) * sizeof *small);
    int32_t *large = malloc((size_t)(n ? n : 1) * sizeof *large);
    if (!t->col || !q || !small || !large || n <= 0 || n > INT32_MAX) {
        free(q);
        free(small);
        free(large);
        tc_noise_free(t);
        return -1;
    }
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += pow((double)counts[i], power);
    /* Vose: q[i] = n * P(i); columns below 1 take the rest of their share from a large one */
    int64_t ns = 0, nl = 0;
    for (int64_t i = 0; i < n; i++) {
        q[i] = pow((double)counts[i], power) * (double)n / sum;
        t->col[i].alias = (int32_t)i;
        if (q[i] < 1) small[ns++] = (int32_t)i;
        else large[nl++] = (int32_t)i;
    }
    while (ns && nl) {
        int32_t s = small[--ns], l = large[nl - 1];
        t->col[s].threshold = (uint32_t)(q[s] * 4294967296.0);
        t->col[s].alias = l;
        q[l] -= 1 - q[s];
        if (q[l] < 1) {
            nl--;
            small[ns++] = l;
        }
    }
    /* leftovers are 1 up to rounding: always themselves */
    while (nl) t->col[large[--nl]].threshold = UINT32_MAX;
    while (ns) t->col[small[--ns]].threshold = UINT32_MAX;
    free(q);
    free(small);
    free(large);
    return 0;
}

double tc_noise_prob(const tc_noise *t, int64_t i)
{
    const double scale = 4294967296.0 * (double)t->n;
    double p = (double)t->col[i].threshold;
    for (int64_t j = 0; j < t->n; j++)
        if (t->col[j].alias == i && j != i) p += 4294967296.0 - (double)t->col[j].threshold;
    if (t->col[i].threshold == UINT32_MAX) p += 1; /* "always itself" */
    return p / scale;
}

int tc_row_hit_cap(double bound, double lr)
{
    const double cap = bound / lr;
    return cap >= TC_MAX_ROW_HITS ? TC_MAX_ROW_HITS : cap < 1 ? 1 : (int)cap;
}
