/* sgrad-w2v's vocabulary and sampling tables against values computed by hand or by an
 * independent loop: counts, min-count, frequency order, the subsampling formula, and the
 * unigram^0.75 noise distribution (alias table vs the exact probabilities, and draws). */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <unistd.h>

#include "common/common.h"

static const char *write_tmp(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof path, "/tmp/sgrad_test_w2v_vocab_%s_%d.txt", name, (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    fputs(text, f);
    fclose(f);
    return path;
}

TEST(reader_tokens_and_lines)
{
    /* CR, tabs and runs of blanks separate words; a newline is its own token */
    const char *p = write_tmp("reader", "a  bb\tc\r\n\nd\n  e");
    tc_reader r;
    CHECK(p && tc_reader_open(&r, p) == 0);
    char w[TC_MAX_WORD];
    const char *want[] = {"a", "bb", "c", "\n", "\n", "d", "\n", "e"};
    for (int i = 0; i < 8; i++) {
        tc_tok t = tc_reader_next(&r, w);
        if (want[i][0] == '\n') CHECK(t == TC_TOK_EOL);
        else CHECK(t == TC_TOK_WORD && strcmp(w, want[i]) == 0);
    }
    CHECK(tc_reader_next(&r, w) == TC_TOK_EOF);
    tc_reader_close(&r);
    remove(p);
}

TEST(long_words_are_cut)
{
    char text[300];
    memset(text, 'x', 250);
    strcpy(text + 250, " y\n");
    const char *p = write_tmp("long", text);
    tc_reader r;
    CHECK(p && tc_reader_open(&r, p) == 0);
    char w[TC_MAX_WORD];
    CHECK(tc_reader_next(&r, w) == TC_TOK_WORD);
    CHECK(strlen(w) == TC_MAX_WORD - 1);
    CHECK(tc_reader_next(&r, w) == TC_TOK_WORD && strcmp(w, "y") == 0);
    tc_reader_close(&r);
    remove(p);
}

TEST(long_words_are_cut_between_utf8_characters)
{
    /* 99 bytes would end inside a character: "a" + 60 x "é" (2 bytes) keeps "a" and 49 é
     * (99 bytes, whole); 60 x "é" keeps 49 é (98 bytes, not 99); 40 x "€" (3 bytes) keeps
     * 33 (99 bytes), "ab" + 40 x "€" keeps 32 (98 bytes); 30 x U+1F600 (4 bytes) keeps 24
     * (96 bytes). Bytes that are not UTF-8 (0xff, a lone 0x80 run) are cut at 99. */
    static const struct {
        const char *head, *unit;
        int reps;
        size_t want;
    } cases[] = {{"a", "\xc3\xa9", 60, 99}, {"", "\xc3\xa9", 60, 98},
                 {"", "\xe2\x82\xac", 40, 99}, {"ab", "\xe2\x82\xac", 40, 98},
                 {"", "\xf0\x9f\x98\x80", 30, 96}, {"", "\xff", 150, 99},
                 {"", "\x80", 150, 99}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char text[1024];
        strcpy(text, cases[k].head);
        for (int i = 0; i < cases[k].reps; i++) strcat(text, cases[k].unit);
        strcat(text, " y\n");
        const char *p = write_tmp("utf8", text);
        tc_reader r;
        CHECK(p && tc_reader_open(&r, p) == 0);
        char w[TC_MAX_WORD];
        CHECK(tc_reader_next(&r, w) == TC_TOK_WORD);
        CHECK(strlen(w) == cases[k].want);
        CHECK(strncmp(w, text, cases[k].want) == 0);
        CHECK(tc_reader_next(&r, w) == TC_TOK_WORD && strcmp(w, "y") == 0);
        tc_reader_close(&r);
        remove(p);
    }
}

TEST(counts_min_count_and_order)
{
    /* planted counts: the 7, cat 5, dog 5, ant 5, rare 1, once 1 (3 lines, 24 tokens) */
    const char *p = write_tmp("counts", "the cat the dog rare the\n"
                                        "dog the cat ant ant the once dog\n"
                                        "ant cat dog the ant cat dog the ant cat");
    tc_vocab v;
    tc_vocab_init(&v);
    CHECK(p && tc_vocab_count_file(&v, p) == 0);
    CHECK(v.total_tokens == 24);
    CHECK(v.lines == 3);
    CHECK(v.size == 6);
    CHECK(tc_vocab_finalize(&v, 2) == 0);
    /* count descending, ties in byte order; words below min-count gone */
    const char *order[] = {"the", "ant", "cat", "dog"};
    const int64_t count[] = {7, 5, 5, 5};
    CHECK(v.size == 4);
    for (int i = 0; i < 4 && i < v.size; i++) {
        CHECK(strcmp(v.words[i], order[i]) == 0);
        CHECK(v.counts[i] == count[i]);
        CHECK(tc_vocab_find(&v, order[i]) == i);
    }
    CHECK(tc_vocab_find(&v, "rare") == -1);
    CHECK(tc_vocab_find(&v, "once") == -1);
    CHECK(v.train_words == 22);
    CHECK(v.total_tokens == 24); /* tokens of dropped words still count as corpus words */
    tc_vocab_free(&v);
    remove(p);
}

/* The counting pass's record of the corpus against a second reading of it: every token
 * (newlines too) looked up in the finished vocabulary, in order; over 2^16 tokens, so the
 * record grows; dropped past its max, and kept at exactly its max. */
TEST(counting_pass_records_the_corpus_as_final_ids)
{
    static char text[400000];
    size_t at = 0;
    tc_rng g = {7};
    for (int i = 0; i < 70000; i++) { /* ~1500 words, skewed counts, many below 40 */
        const uint32_t k = tc_rng_below(&g, 2000);
        at += (size_t)snprintf(text + at, sizeof text - at, "w%u%c", k * k / 2000,
                               i % 13 == 12 ? '\n' : ' ');
    }
    const char *p = write_tmp("codes", text);
    CHECK(p != NULL);
    int64_t tokens = 0, words = 0; /* read independently: words and newlines, words */
    for (int pass = 0; pass < 2; pass++) { /* a roomy record, then one of exactly the corpus */
        tc_vocab v;
        tc_vocab_init(&v);
        tc_codes codes;
        tc_codes_start(&codes, pass == 0 ? (int64_t)1 << 20 : tokens);
        CHECK(tc_vocab_count_file_codes(&v, p, &codes) == 0);
        CHECK(tc_vocab_finalize_codes(&v, 40, &codes) == 0);
        CHECK(v.size > 100 && v.train_words < v.total_tokens); /* some words dropped */
        CHECK(codes.code != NULL);
        tc_reader r;
        CHECK(tc_reader_open(&r, p) == 0);
        char w[TC_MAX_WORD];
        tc_tok t;
        int64_t n = 0, mismatches = 0;
        int64_t *tally = calloc((size_t)v.size, sizeof *tally); /* the second reading's counts */
        CHECK(tally != NULL);
        words = 0;
        while (tally && (t = tc_reader_next(&r, w)) != TC_TOK_EOF) {
            const int64_t want = t == TC_TOK_EOL ? TC_CODE_EOL : tc_vocab_find(&v, w);
            if (n >= codes.n || codes.code[n] != want) mismatches++;
            if (want >= 0) tally[want]++;
            n++;
            words += t == TC_TOK_WORD;
        }
        tc_reader_close(&r);
        CHECK(n > ((int64_t)1 << 16) && codes.n == n && mismatches == 0);
        for (int64_t i = 0; tally && i < v.size; i++) mismatches += tally[i] != v.counts[i];
        CHECK(mismatches == 0);
        free(tally);
        tokens = n;
        tc_codes_free(&codes);
        tc_vocab_free(&v);
    }
    /* one code short of the corpus: dropped, and the counts are still right */
    tc_vocab v;
    tc_vocab_init(&v);
    tc_codes codes;
    tc_codes_start(&codes, tokens - 1);
    CHECK(tc_vocab_count_file_codes(&v, p, &codes) == 0);
    CHECK(codes.code == NULL && codes.n == 0);
    CHECK(tc_vocab_finalize_codes(&v, 40, &codes) == 0);
    CHECK(v.total_tokens == words);
    tc_vocab_free(&v);
    remove(p);
}

static int cmp_bytes(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Words of one count come out in strcmp's order, also where they share their first 8
 * bytes, where one begins another, and for bytes past 0x7f (unsigned in strcmp). */
TEST(equal_counts_sort_by_bytes)
{
    const char *words[] = {"abcdefghij", "abcdefghi", "abcdefgh", "abcdefgi", "abcdefg",
                           "ab", "a", "a\xc3\xa9", "b", "\xff", "\x7e", "abcdefghia", "zz"};
    enum { N = sizeof words / sizeof *words };
    tc_vocab v;
    tc_vocab_init(&v);
    for (int i = 0; i < N; i++) CHECK(tc_vocab_add(&v, words[i], 3) >= 0);
    CHECK(tc_vocab_add(&v, "common", 4) >= 0);
    CHECK(tc_vocab_finalize(&v, 1) == 0);
    const char *want[N];
    memcpy(want, words, sizeof want);
    qsort(want, N, sizeof *want, cmp_bytes);
    CHECK(v.size == N + 1 && strcmp(v.words[0], "common") == 0);
    for (int i = 0; i < N && i + 1 < v.size; i++) CHECK(strcmp(v.words[i + 1], want[i]) == 0);
    tc_vocab_free(&v);
}

TEST(many_words_grow_the_hash)
{
    /* 5000 distinct words, word i added i % 7 + 1 times, against a direct count */
    tc_vocab v;
    tc_vocab_init(&v);
    char w[32];
    for (int rep = 0; rep < 7; rep++)
        for (int i = 0; i < 5000; i++)
            if (rep < i % 7 + 1) {
                snprintf(w, sizeof w, "w%d", i);
                CHECK(tc_vocab_add(&v, w, 1) >= 0);
            }
    CHECK(tc_vocab_finalize(&v, 3) == 0);
    int64_t expect_size = 0, expect_words = 0;
    for (int i = 0; i < 5000; i++)
        if (i % 7 + 1 >= 3) {
            expect_size++;
            expect_words += i % 7 + 1;
        }
    CHECK(v.size == expect_size);
    CHECK(v.train_words == expect_words);
    for (int64_t i = 1; i < v.size; i++)
        CHECK(v.counts[i - 1] > v.counts[i] ||
              (v.counts[i - 1] == v.counts[i] && strcmp(v.words[i - 1], v.words[i]) < 0));
    snprintf(w, sizeof w, "w%d", 4999); /* 4999 % 7 + 1 = 2 < 3: dropped */
    CHECK(tc_vocab_find(&v, w) == -1);
    snprintf(w, sizeof w, "w%d", 4997); /* 4997 % 7 + 1 = 7 occurrences */
    int64_t r = tc_vocab_find(&v, w);
    CHECK(r >= 0 && r < v.size && v.counts[r] == 7);
    tc_vocab_free(&v);
}

TEST(subsampling_probability)
{
    /* word2vec.c's rule worked by hand: sample 1e-3, N = 100000, so t = sample * N = 100.
     * count 1000: (sqrt(1000/100) + 1) * 100/1000 = (3.16227766 + 1) * 0.1 = 0.416227766
     * count 10000: (sqrt(100) + 1) * 0.01 = 0.11
     * count 100: (1 + 1) * 1 = 2 -> capped at 1 */
    CHECK_NEAR(tc_keep_prob(1000, 1e-3, 100000), 0.416227766, 1e-9);
    CHECK_NEAR(tc_keep_prob(10000, 1e-3, 100000), 0.11, 1e-12);
    CHECK_NEAR(tc_keep_prob(100, 1e-3, 100000), 1.0, 0);
    CHECK_NEAR(tc_keep_prob(10000, 0, 100000), 1.0, 0); /* sample 0: off */
    /* the table's thresholds, drawn against the generator, keep that fraction */
    tc_vocab v;
    tc_vocab_init(&v);
    tc_vocab_add(&v, "frequent", 10000);
    tc_vocab_add(&v, "medium", 1000);
    tc_vocab_add(&v, "rare", 100);
    tc_vocab_add(&v, "filler", 88900);
    CHECK(tc_vocab_finalize(&v, 1) == 0);
    CHECK(v.train_words == 100000);
    uint64_t *keep = tc_keep_table(&v, 1e-3);
    CHECK(keep != NULL);
    tc_rng rng = {7};
    const int draws = 200000;
    for (int64_t i = 0; keep && i < v.size; i++) {
        int kept = 0;
        for (int d = 0; d < draws; d++) kept += (tc_rng_next(&rng) & 0xffffffffu) < keep[i];
        double p = tc_keep_prob(v.counts[i], 1e-3, v.train_words);
        double sd = sqrt(p * (1 - p) / draws);
        CHECK_NEAR((double)kept / draws, p, 5 * sd + 1e-9);
    }
    free(keep);
    tc_vocab_free(&v);
}

/* Skipping k outputs leaves the generator where k draws would (the drawing's prefetch
 * of the next centre word's noise columns relies on it). */
TEST(skipping_the_generator_equals_drawing)
{
    const uint64_t ks[] = {0, 1, 2, 5, 49, 1000};
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) {
        tc_rng drawn = {0xfeedull + i}, skipped = drawn;
        for (uint64_t d = 0; d < ks[i]; d++) (void)tc_rng_next(&drawn);
        tc_rng_skip(&skipped, ks[i]);
        CHECK(tc_rng_next(&drawn) == tc_rng_next(&skipped));
    }
}

TEST(noise_distribution_exact)
{
    /* counts with a heavy head and a long tail, as in text */
    enum { N = 1000 };
    int64_t counts[N];
    for (int i = 0; i < N; i++) counts[i] = 100000 / (i + 1) + 1;
    tc_noise t;
    CHECK(tc_noise_init(&t, counts, N, 0.75) == 0);
    double z = 0;
    for (int i = 0; i < N; i++) z += pow((double)counts[i], 0.75);
    double worst = 0, total = 0;
    for (int i = 0; i < N; i++) {
        double p = tc_noise_prob(&t, i), exact = pow((double)counts[i], 0.75) / z;
        total += p;
        if (fabs(p - exact) > worst) worst = fabs(p - exact);
    }
    CHECK_NEAR(total, 1.0, 1e-9);
    CHECK(worst < 1e-9); /* per-entry rounding is below 2^-32 / N per share */
    tc_noise_free(&t);
}

TEST(noise_draws_follow_the_distribution)
{
    /* chi-square of 1,000,000 draws over 20 words against counts^0.75 */
    enum { N = 20, DRAWS = 1000000 };
    int64_t counts[N];
    for (int i = 0; i < N; i++) counts[i] = (i + 1) * (i + 1) * 3;
    tc_noise t;
    CHECK(tc_noise_init(&t, counts, N, 0.75) == 0);
    int64_t seen[N] = {0};
    tc_rng rng = {12345};
    for (int d = 0; d < DRAWS; d++) {
        int32_t w = tc_noise_draw(&t, &rng);
        CHECK(w >= 0 && w < N);
        if (w >= 0 && w < N) seen[w]++;
    }
    double z = 0, chi2 = 0;
    for (int i = 0; i < N; i++) z += pow((double)counts[i], 0.75);
    for (int i = 0; i < N; i++) {
        double e = DRAWS * pow((double)counts[i], 0.75) / z;
        chi2 += (seen[i] - e) * (seen[i] - e) / e;
    }
    CHECK(chi2 < 45.3); /* 19 degrees of freedom: P(chi2 > 45.3) < 0.001 */
    /* power 0 is uniform, power 1 the unigram distribution itself */
    tc_noise_free(&t);
    CHECK(tc_noise_init(&t, counts, N, 1.0) == 0);
    int64_t sum = 0;
    for (int i = 0; i < N; i++) sum += counts[i];
    for (int i = 0; i < N; i++) CHECK_NEAR(tc_noise_prob(&t, i), (double)counts[i] / sum, 1e-9);
    tc_noise_free(&t);
}

TEST_MAIN()
