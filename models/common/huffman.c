/* The Huffman tree of hierarchical softmax, built as word2vec.c and fastText build it (two
 * queues: the leaves lightest first, and the inner nodes in the order they were made,
 * which is non-decreasing in weight), so that a model's tree is fastText's for the same
 * label counts.
 *
 * Invariants: 2n - 1 tree nodes; ids 0..n-1 are the leaves, n + k is inner node k; each
 * inner node's weight is its children's sum; paths are stored leaf to root.
 */
#include "common.h"

#include <stdlib.h>

void tc_huffman_free(tc_huffman *t)
{
    free(t->offsets);
    free(t->nodes);
    free(t->codes);
    t->offsets = t->nodes = t->codes = NULL;
    t->n = 0;
}

int tc_huffman_build(tc_huffman *t, const int64_t *counts, int64_t n)
{
    t->n = 0;
    t->offsets = t->nodes = t->codes = NULL;
    if (n < 1) return -1;
    /* the root weighs the sum of all counts: it must fit in an int64 */
    for (int64_t i = 0, sum = 0; i < n; sum += counts[i], i++)
        if (counts[i] < 0 || (i && counts[i] > counts[i - 1]) || counts[i] > INT64_MAX - sum) return -1;
    const int64_t total = 2 * n - 1;
    int64_t *weight = malloc((size_t)total * sizeof *weight);
    int64_t *parent = malloc((size_t)total * sizeof *parent);
    unsigned char *second = calloc((size_t)total, 1);
    t->offsets = malloc((size_t)(n + 1) * sizeof *t->offsets);
    if (!weight || !parent || !second || !t->offsets) goto fail;
    for (int64_t i = 0; i < total; i++) parent[i] = -1;
    for (int64_t i = 0; i < n; i++) weight[i] = counts[i];
    int64_t leaf = n - 1, inner = n; /* next unmerged lightest leaf, oldest unmerged inner */
    for (int64_t made = n; made < total; made++) {
        int64_t pick[2];
        for (int k = 0; k < 2; k++) {
            if (leaf >= 0 && (inner == made || weight[leaf] < weight[inner])) pick[k] = leaf--;
            else pick[k] = inner++;
        }
        weight[made] = weight[pick[0]] + weight[pick[1]];
        parent[pick[0]] = parent[pick[1]] = made;
        second[pick[1]] = 1;
    }
    int64_t entries = 0;
    for (int64_t c = 0; c < n; c++) {
        t->offsets[c] = entries;
        for (int64_t j = c; parent[j] >= 0; j = parent[j]) entries++;
    }
    t->offsets[n] = entries;
    t->nodes = malloc((size_t)(entries ? entries : 1) * sizeof *t->nodes);
    t->codes = malloc((size_t)(entries ? entries : 1) * sizeof *t->codes);
    if (!t->nodes || !t->codes) goto fail;
    for (int64_t c = 0, e = 0; c < n; c++)
        for (int64_t j = c; parent[j] >= 0; j = parent[j], e++) {
            t->nodes[e] = parent[j] - n;
            t->codes[e] = second[j];
        }
    t->n = n;
    free(weight);
    free(parent);
    free(second);
    return 0;
fail:
    free(weight);
    free(parent);
    free(second);
    tc_huffman_free(t);
    return -1;
}
