/* libsgrad_models's Huffman tree (models/common/huffman.c) (hierarchical softmax) against a tree worked out by hand
 * with fastText's construction, and against a naive Huffman coding (repeatedly merge the
 * two lightest by a full scan): the same optimal weighted path length, prefix-free codes,
 * every path ending at the root. */
#include "testutil.h"

#include "common/common.h"

TEST(a_tree_worked_out_by_hand)
{
    /* counts 5 4 3 2 1: merges {4,3}=3 -> inner 0, {inner 0, leaf 2}=6 -> 1 (the leaf loses
     * the tie), {1,0}=9 -> 2, {inner 1, inner 2} -> 3, the root */
    const int64_t counts[5] = {5, 4, 3, 2, 1};
    const int64_t offsets[6] = {0, 2, 4, 6, 9, 12};
    const int64_t nodes[12] = {2, 3, 2, 3, 1, 3, 0, 1, 3, 0, 1, 3};
    const int64_t codes[12] = {1, 1, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0};
    tc_huffman t;
    CHECK(tc_huffman_build(&t, counts, 5) == 0);
    for (int i = 0; i < 6; i++) CHECK(t.offsets[i] == offsets[i]);
    for (int e = 0; e < 12; e++) CHECK(t.nodes[e] == nodes[e] && t.codes[e] == codes[e]);
    tc_huffman_free(&t);
}

TEST(optimal_and_prefix_free_against_a_naive_huffman)
{
    enum { N = 60 };
    int64_t counts[N];
    for (int i = 0; i < N; i++) counts[i] = (int64_t)(tu_rand() % 1000) + 1;
    for (int i = 0; i < N; i++) /* non-increasing */
        for (int j = i + 1; j < N; j++)
            if (counts[j] > counts[i]) {
                int64_t c = counts[i];
                counts[i] = counts[j];
                counts[j] = c;
            }
    tc_huffman t;
    CHECK(tc_huffman_build(&t, counts, N) == 0);
    int64_t cost = 0;
    for (int c = 0; c < N; c++) {
        int64_t len = t.offsets[c + 1] - t.offsets[c];
        cost += len * counts[c];
        CHECK(len >= 1 && t.nodes[t.offsets[c + 1] - 1] == N - 2); /* ends at the root */
        for (int d = 0; d < c; d++) { /* codes read root to leaf: neither a prefix of the other */
            int64_t ld = t.offsets[d + 1] - t.offsets[d], m = len < ld ? len : ld, k = 0;
            while (k < m && t.codes[t.offsets[c + 1] - 1 - k] == t.codes[t.offsets[d + 1] - 1 - k]) k++;
            CHECK(k < m);
        }
    }
    /* naive: the sum of all merge weights is the weighted path length */
    int64_t w[N], naive = 0;
    int alive = N;
    for (int i = 0; i < N; i++) w[i] = counts[i];
    while (alive > 1) {
        int a = 0, b = 1;
        if (w[b] < w[a]) a = 1, b = 0;
        for (int i = 2; i < alive; i++) {
            if (w[i] < w[a]) b = a, a = i;
            else if (w[i] < w[b]) b = i;
        }
        w[a] += w[b];
        naive += w[a];
        w[b] = w[--alive];
    }
    CHECK(cost == naive);
    tc_huffman_free(&t);
}

TEST(edge_cases_and_refusals)
{
    tc_huffman t;
    const int64_t one[1] = {7}, rising[3] = {1, 2, 3}, negative[2] = {3, -1};
    CHECK(tc_huffman_build(&t, one, 1) == 0 && t.offsets[0] == 0 && t.offsets[1] == 0);
    tc_huffman_free(&t);
    CHECK(tc_huffman_build(&t, one, 0) == -1);
    CHECK(tc_huffman_build(&t, rising, 3) == -1);
    CHECK(tc_huffman_build(&t, negative, 2) == -1);
    CHECK(t.nodes == NULL && t.n == 0);
}

TEST_MAIN()
