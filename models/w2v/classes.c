/* -classes K: word2vec.c's k-means over the trained word vectors, and the classes file.
 *
 * The algorithm is word2vec.c's: word c starts in class c % K; each of the iterations
 * sums the vectors of every class, divides by (members + 1), scales the centroid to unit
 * length and moves each word to the class whose unit centroid has the largest dot
 * product with the (unnormalised) word vector, the first such class on a tie. Sums and
 * dot products run in double (word2vec.c: float), and a class whose centroid is zero
 * (no member) is never chosen, which is what word2vec.c's NaN centroid amounts to; the
 * best score starts below every real one (word2vec.c: -10). Deterministic: each word's
 * choice depends only on the centroids, so the threads split the words freely.
 */
#include "w2v.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int w2v_kmeans(const float *vec, int64_t V, int64_t D, int K, int iters, int threads, int32_t *cl,
               const tc_events *ev)
{
    double *cent = malloc((size_t)K * (size_t)D * sizeof *cent);
    int64_t *members = malloc((size_t)K * sizeof *members);
    unsigned char *usable = malloc((size_t)K);
    if (!cent || !members || !usable) {
        free(cent);
        free(members);
        free(usable);
        return -1;
    }
    for (int64_t c = 0; c < V; c++) cl[c] = (int32_t)(c % K);
    for (int it = 0; it < iters; it++) {
        memset(cent, 0, (size_t)K * (size_t)D * sizeof *cent);
        for (int b = 0; b < K; b++) members[b] = 1;
        for (int64_t c = 0; c < V; c++) {
            double *z = cent + (int64_t)cl[c] * D;
            for (int64_t d = 0; d < D; d++) z[d] += vec[c * D + d];
            members[cl[c]]++;
        }
        for (int b = 0; b < K; b++) {
            double *z = cent + (int64_t)b * D, norm = 0;
            for (int64_t d = 0; d < D; d++) {
                z[d] /= (double)members[b];
                norm += z[d] * z[d];
            }
            norm = sqrt(norm);
            usable[b] = norm > 0;
            for (int64_t d = 0; usable[b] && d < D; d++) z[d] /= norm;
        }
        int64_t moved = 0;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads) reduction(+ : moved)
#endif
        for (int64_t c = 0; c < V; c++) {
            double best = -INFINITY;
            int32_t id = cl[c];
            for (int b = 0; b < K; b++) {
                if (!usable[b]) continue;
                const double *z = cent + (int64_t)b * D;
                double x = 0;
                for (int64_t d = 0; d < D; d++) x += z[d] * vec[c * D + d];
                if (x > best) best = x, id = b;
            }
            moved += id != cl[c];
            cl[c] = id;
        }
        tc_info(ev, 2, "k-means iteration %d of %d: %lld words changed class", it + 1, iters, (long long)moved);
    }
    (void)threads;
    free(cent);
    free(members);
    free(usable);
    return 0;
}

int w2v_classes_write(const char *path, char *const *words, const int32_t *cl, int64_t V)
{
    tc_outfile o;
    if (tc_outfile_open(&o, path)) return -1;
    for (int64_t c = 0; c < V; c++)
        if (fprintf(o.f, "%s %d\n", words[c], (int)cl[c]) < 0) {
            tc_outfile_abort(&o);
            return -1;
        }
    return tc_outfile_commit(&o);
}
