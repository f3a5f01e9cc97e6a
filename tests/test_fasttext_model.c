/* sgrad-fasttext's model against values obtained another way: fastText's FNV-1a hash
 * (published test vectors, and its sign extension of bytes >= 0x80 written out), the
 * word and character n-gram buckets of a line listed by hand, a training step whose
 * input-table update touches exactly the batch's rows, a model file whose load gives
 * back the in-memory model's predictions for every loss, and again when the loaded model
 * finds its bucket rows by binary search instead of a per-bucket map; the Huffman tree
 * refuses counts whose sum passes INT64_MAX and takes a sum of exactly INT64_MAX; a query
 * token is cut to the word the corpus reader makes of it. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <unistd.h>

#include "fasttext/ft.h"

TEST(hash_is_fasttexts_fnv1a)
{
    CHECK(ft_hash("") == 2166136261u);
    CHECK(ft_hash("a") == 0xe40c292cu);      /* FNV-1a 32 test vectors */
    CHECK(ft_hash("foobar") == 0xbf9cf968u);
    /* a byte >= 0x80 enters as a sign-extended int8, as fastText's hash does */
    uint32_t want = 2166136261u;
    want = (want ^ 0xFFFFFFC3u) * 16777619u;
    want = (want ^ 0xFFFFFFA9u) * 16777619u;
    CHECK(ft_hash("\xc3\xa9") == want);
}

static ft_dict dict_of(const char *const *words, int n, int64_t bucket, int ngrams, int minn, int maxn)
{
    ft_dict d = {.label_prefix = "__label__", .bucket = bucket, .word_ngrams = ngrams,
                 .minn = minn, .maxn = maxn};
    tc_vocab_init(&d.words);
    tc_vocab_init(&d.labels);
    for (int i = 0; i < n; i++) tc_vocab_add(&d.words, words[i], n - i);
    tc_vocab_add(&d.labels, "__label__x", 1);
    tc_vocab_finalize(&d.words, 1);
    tc_vocab_finalize(&d.labels, 1);
    return d;
}

TEST(word_ngram_buckets_as_fasttext_hashes_them)
{
    const char *const words[] = {"a", "b", FT_EOS}; /* rows 0, 1, 2; "zz" is unknown */
    const int64_t bucket = 1000003;
    ft_dict d = dict_of(words, 3, bucket, 3, 0, 0);
    char *line[] = {"a", "__label__x", "zz", "b", "__label__y"};
    ft_ids rows = {0}, labels = {0};
    int64_t n_words;
    CHECK(ft_dict_line(&d, line, 5, true, &rows, &labels, &n_words) == 0);
    CHECK(n_words == 3 && labels.n == 1 && labels.v[0] == 0); /* __label__y is unknown */
    /* words a, zz, b, </s>: hashes sign-extended to 64 bits, then h * 116049371 + next */
    const char *seq[4] = {"a", "zz", "b", FT_EOS};
    uint64_t hs[4];
    for (int i = 0; i < 4; i++) hs[i] = (uint64_t)(int64_t)(int32_t)ft_hash(seq[i]);
    int64_t want[16], n = 0;
    want[n++] = 0; /* a */
    want[n++] = 1; /* b */
    want[n++] = 2; /* </s> */
    for (int i = 0; i < 4; i++) {
        uint64_t h = hs[i];
        for (int j = i + 1; j < 4 && j < i + 3; j++) {
            h = h * 116049371u + hs[j];
            want[n++] = 3 + (int64_t)(h % (uint64_t)bucket);
        }
    }
    CHECK(rows.n == n);
    for (int64_t i = 0; i < n && i < rows.n; i++) CHECK(rows.v[i] == want[i]);
    ft_ids_free(&rows);
    ft_ids_free(&labels);
    ft_dict_free(&d);
}

TEST(character_ngrams_of_a_word)
{
    const char *const words[] = {"ab"};
    const int64_t bucket = 997;
    ft_dict d = dict_of(words, 1, bucket, 1, 1, 3);
    char *line[] = {"ab"};
    ft_ids rows = {0}, labels = {0};
    int64_t n_words;
    CHECK(ft_dict_line(&d, line, 1, false, &rows, &labels, &n_words) == 0);
    /* "<ab>", lengths 1..3, the lone "<" and ">" left out */
    const char *grams[] = {"<a", "<ab", "a", "ab", "ab>", "b", "b>"};
    CHECK(rows.n == 8 && rows.v[0] == 0);
    for (int i = 0; i < 7 && i + 1 < rows.n; i++)
        CHECK(rows.v[i + 1] == 1 + (int64_t)(ft_hash(grams[i]) % (uint32_t)bucket));
    ft_ids_free(&rows);
    ft_ids_free(&labels);
    ft_dict_free(&d);
}

static const char *write_corpus(void)
{
    static char path[256];
    snprintf(path, sizeof path, "/tmp/sgrad_test_fasttext_%d.txt", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    static const char *topic[3][4] = {{"apple", "pear", "plum", "fig"},
                                      {"dog", "cat", "cow", "hen"},
                                      {"red", "blue", "green", "grey"}};
    uint64_t s = 7;
    for (int i = 0; i < 240; i++) {
        int t = i % 3;
        fprintf(f, "__label__%c", 'a' + t);
        if (i % 7 == 0) fprintf(f, " __label__%c", 'a' + (t + 1) % 3); /* two labels */
        for (int w = 0; w < 6; w++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            fprintf(f, " %s", (s >> 60) & 1 ? "the" : topic[t][(s >> 40) % 4]);
        }
        fputc('\n', f);
    }
    fclose(f);
    return path;
}

static ft_config small_config(const char *input, ft_loss loss)
{
    ft_config c;
    ft_config_default(&c);
    c.input = input;
    c.dim = 8;
    c.epoch = 2;
    c.word_ngrams = 2;
    c.bucket = 5000;
    c.loss = loss;
    c.verbose = 0;
    c.threads = 1;
    return c;
}

TEST(a_step_updates_only_the_batch_rows)
{
    const char *path = write_corpus();
    CHECK(path != NULL);
    ft_config c = small_config(path, FT_LOSS_SOFTMAX);
    ft_model m;
    ft_train_result r;
    CHECK(ft_train(&c, &m, &r, NULL) == 0);
    ft_examples ex = {0};
    ft_train_result r2 = {0};
    CHECK(ft_read_examples(&m, &ex, &r2) == 0 && ex.row_off.n == 241);
    const int64_t rows = sg_tensor_dim(m.input, 0), D = c.dim;
    float *before = malloc((size_t)(rows * D) * sizeof *before);
    memcpy(before, sg_tensor_data(m.input), (size_t)(rows * D) * sizeof *before);
    bool *in_batch = calloc((size_t)rows, 1);
    const int64_t first = 10, n = 3;
    for (int64_t e = ex.row_off.v[first]; e < ex.row_off.v[first + n]; e++) in_batch[ex.rows.v[e]] = true;
    sg_optim *opt = sg_optim_sgd(m.ctx, &(sg_sgd_opts){.lr = 0.5});
    CHECK(sg_optim_add_param(opt, m.input) == SG_OK && sg_optim_add_param(opt, m.output) == SG_OK);
    tc_rng rng = {1};
    CHECK(isfinite(ft_step(&m, opt, &ex, first, n, &rng, NULL, NULL)));
    const float *after = sg_tensor_f32(m.input);
    int64_t moved = 0, batch_rows = 0;
    for (int64_t i = 0; i < rows; i++) {
        bool changed = memcmp(before + i * D, after + i * D, (size_t)D * sizeof *after) != 0;
        batch_rows += in_batch[i];
        moved += changed;
        if (changed != in_batch[i]) {
            CHECK(changed == in_batch[i]);
            break;
        }
    }
    CHECK(batch_rows > 3 && moved == batch_rows);
    free(before);
    free(in_batch);
    ft_examples_free(&ex);
    ft_model_free(&m);
    remove(path);
}

TEST(the_model_file_gives_back_the_models_predictions)
{
    const char *path = write_corpus();
    char model[256];
    snprintf(model, sizeof model, "/tmp/sgrad_test_fasttext_%d.bin", (int)getpid());
    for (int loss = FT_LOSS_SOFTMAX; loss <= FT_LOSS_OVA; loss++) {
        ft_config c = small_config(path, (ft_loss)loss);
        c.maxn = 3;
        c.minn = 2;
        c.epoch = 10;
        c.lr = 0.5;
        ft_model m, l;
        ft_train_result r;
        CHECK(ft_train(&c, &m, &r, NULL) == 0);
        CHECK(ft_model_save(&m, model, NULL) == 0);
        CHECK(ft_model_load(&l, model, 1, false, NULL) == 0);
        CHECK(l.dict.words.size == m.dict.words.size && l.dict.labels.size == 3);
        ft_examples ex = {0};
        CHECK(ft_read_examples(&m, &ex, &r) == 0);
        /* buckets kept: exactly those some example uses (all moved in training) */
        bool *used = calloc((size_t)m.dict.bucket, 1);
        int64_t n_used = 0;
        for (int64_t e = 0; e < ex.rows.n; e++)
            if (ex.rows.v[e] >= m.dict.words.size && !used[ex.rows.v[e] - m.dict.words.size]) {
                used[ex.rows.v[e] - m.dict.words.size] = true;
                n_used++;
            }
        CHECK(sg_tensor_dim(l.input, 0) == l.dict.words.size + n_used);
        double sm[3], sl[3];
        for (int64_t i = 0; i < 240; i += 17) {
            ft_ids rows = {ex.rows.v + ex.row_off.v[i], ex.row_off.v[i + 1] - ex.row_off.v[i], 0};
            CHECK(ft_predict_scores(&m, &rows, sm) == 0 && ft_predict_scores(&l, &rows, sl) == 0);
            for (int k = 0; k < 3; k++) CHECK(sm[k] == sl[k]);
        }
        /* and the model learnt: the true label scores best on most training lines */
        int64_t right = 0;
        for (int64_t i = 0; i < 240; i++) {
            ft_ids rows = {ex.rows.v + ex.row_off.v[i], ex.row_off.v[i + 1] - ex.row_off.v[i], 0};
            ft_predict_scores(&l, &rows, sl);
            int best = 0;
            for (int k = 1; k < 3; k++) best = sl[k] > sl[best] ? k : best;
            right += l.dict.labels.words[best][9] == 'a' + i % 3;
        }
        CHECK(right > 200); /* of 240, 3 labels */
        free(used);
        ft_examples_free(&ex);
        ft_model_free(&m);
        ft_model_free(&l);
    }
    remove(model);
    remove(path);
}

TEST(a_loaded_model_searches_its_bucket_rows_as_its_map_finds_them)
{
    const char *path = write_corpus();
    char model[256];
    snprintf(model, sizeof model, "/tmp/sgrad_test_fasttext_search_%d.bin", (int)getpid());
    ft_config c = small_config(path, FT_LOSS_SOFTMAX);
    c.bucket = 1000000; /* a 4 MB map against a file of a few kB */
    c.maxn = 3;
    c.minn = 2;
    c.lr = 0.5;
    ft_model m, mapped, searched;
    ft_train_result r;
    CHECK(ft_train(&c, &m, &r, NULL) == 0);
    CHECK(ft_model_save(&m, model, NULL) == 0);
    CHECK(ft_model_load(&mapped, model, 1, false, NULL) == 0);
    const int64_t floor_was = ft_bucket_map_floor;
    ft_bucket_map_floor = 0; /* now only the file's size allows a map: too small for it */
    CHECK(ft_model_load(&searched, model, 1, false, NULL) == 0);
    ft_bucket_map_floor = floor_was;
    CHECK(mapped.bucket_map != NULL && searched.bucket_map == NULL);
    CHECK(searched.n_bucket_rows > 100); /* the search has rows to find */
    ft_examples ex = {0};
    CHECK(ft_read_examples(&m, &ex, &r) == 0 && ex.row_off.n == 241);
    int64_t same = 0;
    for (int64_t i = 0; i < 240; i++) {
        ft_ids rows = {ex.rows.v + ex.row_off.v[i], ex.row_off.v[i + 1] - ex.row_off.v[i], 0};
        double sm[3], sa[3], sb[3];
        CHECK(ft_predict_scores(&m, &rows, sm) == 0 && ft_predict_scores(&mapped, &rows, sa) == 0 &&
              ft_predict_scores(&searched, &rows, sb) == 0);
        same += sm[0] == sa[0] && sm[1] == sa[1] && sm[2] == sa[2] && sm[0] == sb[0] &&
                sm[1] == sb[1] && sm[2] == sb[2];
    }
    CHECK(same == 240); /* the trained model's scores, bit for bit, both ways */
    ft_examples_free(&ex);
    ft_model_free(&m);
    ft_model_free(&mapped);
    ft_model_free(&searched);
    remove(model);
    remove(path);
}

TEST(a_query_token_is_cut_as_the_corpus_reader_cuts_it)
{
    char tokens[6][400];
    memset(tokens[0], 'a', 150); /* ASCII past the cut */
    tokens[0][150] = '\0';
    strcpy(tokens[1], "short");
    tokens[2][0] = '\0'; /* a 2-byte character across the cut, and one ending at it */
    for (int i = 0; i < 60; i++) strcat(tokens[2], "\xc3\xa9");
    strcpy(tokens[3], "a");
    strcat(tokens[3], tokens[2]);
    memset(tokens[4], 'b', 97); /* a 4-byte character across the cut */
    strcpy(tokens[4] + 97, "\xf0\x9f\x98\x80tail");
    memset(tokens[5], '\x80', 120); /* continuation bytes only: cut where they are */
    tokens[5][120] = '\0';
    char path[256];
    snprintf(path, sizeof path, "/tmp/sgrad_test_fasttext_cut_%d.txt", (int)getpid());
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    for (int i = 0; f && i < 6; i++) fprintf(f, "%s\n", tokens[i]);
    if (f) fclose(f);
    tc_reader r;
    CHECK(tc_reader_open(&r, path) == 0);
    for (int i = 0; i < 6; i++) {
        char read[TC_MAX_WORD], cut[TC_MAX_WORD];
        CHECK(tc_reader_next(&r, read) == TC_TOK_WORD && tc_reader_next(&r, cut) == TC_TOK_EOL);
        sg_word_as_read(tokens[i], cut);
        if (strcmp(read, cut)) fprintf(stderr, "token %d: the reader keeps %zu bytes, the cut %zu\n", i, strlen(read), strlen(cut));
        CHECK(strcmp(read, cut) == 0);
    }
    tc_reader_close(&r);
    remove(path);
}

TEST(the_huffman_tree_refuses_counts_summing_past_int64)
{
    tc_huffman t;
    const int64_t big[3] = {(int64_t)1 << 62, (int64_t)1 << 62, 1}; /* 2^63 + 1 */
    CHECK(tc_huffman_build(&t, big, 3) == -1);
    const int64_t edge[2] = {(int64_t)1 << 62, ((int64_t)1 << 62) - 1}; /* INT64_MAX */
    CHECK(tc_huffman_build(&t, edge, 2) == 0);
    CHECK(t.n == 2 && t.offsets[1] == 1 && t.offsets[2] == 2); /* each leaf under the root */
    tc_huffman_free(&t);
}

TEST_MAIN()
