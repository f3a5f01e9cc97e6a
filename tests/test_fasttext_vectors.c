/* sgrad-fasttext's subword vectors against values obtained another way: a word's rows
 * (word row and character n-gram buckets) against n-grams written out by hand (ASCII,
 * UTF-8, words shorter than -minn, the end-of-line word, unknown words), the subword bag's
 * mean and both its backward rules against a naive loop and finite differences, a
 * training step (skipgram and cbow) that moves exactly the batch's rows of the bucket
 * table, and training that gives the same model for 1 and 2 threads. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <unistd.h>

#include "fasttext/ft.h"

#define BUCKET 1000003

static ft_dict dict_of(const char *const *words, int n, int minn, int maxn)
{
    ft_dict d = {.label_prefix = "__label__", .bucket = BUCKET, .word_ngrams = 1, .minn = minn,
                 .maxn = maxn};
    tc_vocab_init(&d.words);
    tc_vocab_init(&d.labels);
    for (int i = 0; i < n; i++) tc_vocab_add(&d.words, words[i], n - i);
    tc_vocab_finalize(&d.words, 1);
    return d;
}

/* rows of `word` == [id (if >= 0), then W + hash(g) % BUCKET for each g of grams] */
static bool rows_are(const ft_dict *d, const char *word, int64_t id, const char *const *grams, int n)
{
    ft_ids rows = {0};
    bool ok = ft_dict_word_rows(d, word, &rows) == 0;
    int64_t want[32], k = 0;
    if (id >= 0) want[k++] = id;
    for (int i = 0; i < n; i++) want[k++] = d->words.size + (int64_t)(ft_hash(grams[i]) % BUCKET);
    ok = ok && rows.n == k;
    for (int64_t i = 0; ok && i < k; i++) ok = rows.v[i] == want[i];
    if (!ok) {
        fprintf(stderr, "  rows of %s:", word);
        for (int64_t i = 0; i < rows.n; i++) fprintf(stderr, " %lld", (long long)rows.v[i]);
        fprintf(stderr, "\n");
    }
    ft_ids_free(&rows);
    return ok;
}

TEST(a_words_rows_are_its_row_and_its_ngrams)
{
    const char *const words[] = {"cat", "a", "\xc3\xa9t\xc3\xa9" /* été */, FT_EOS, "x"};
    ft_dict d = dict_of(words, 5, 3, 4); /* ids in count order: cat 0, a 1, été 2, </s> 3, x 4 */
    CHECK(rows_are(&d, "cat", 0, (const char *const[]){"<ca", "<cat", "cat", "cat>", "at>"}, 5));
    /* shorter than -minn: "<a>" is the one n-gram of 3 characters */
    CHECK(rows_are(&d, "a", 1, (const char *const[]){"<a>"}, 1));
    /* UTF-8: lengths count characters, never split one */
    CHECK(rows_are(&d, "\xc3\xa9t\xc3\xa9", 2,
                   (const char *const[]){"<\xc3\xa9t", "<\xc3\xa9t\xc3\xa9", "\xc3\xa9t\xc3\xa9",
                                         "\xc3\xa9t\xc3\xa9>", "t\xc3\xa9>"}, 5));
    CHECK(rows_are(&d, FT_EOS, 3, NULL, 0)); /* the end-of-line word has no n-gram */
    /* a word never seen: its n-grams only */
    CHECK(rows_are(&d, "dog", -1, (const char *const[]){"<do", "<dog", "dog", "dog>", "og>"}, 5));
    ft_dict_free(&d);
    /* -minn 1: single characters, but not the boundary marks alone */
    ft_dict d1 = dict_of(words, 5, 1, 2);
    CHECK(rows_are(&d1, "x", 4, (const char *const[]){"<x", "x", "x>"}, 3));
    CHECK(rows_are(&d1, "\xc3\xa9t\xc3\xa9", 2,
                   (const char *const[]){"<\xc3\xa9", "\xc3\xa9", "\xc3\xa9t", "t", "t\xc3\xa9",
                                         "\xc3\xa9", "\xc3\xa9>"}, 7));
    ft_dict_free(&d1);
    /* -maxn 0: the word row alone */
    ft_dict d0 = dict_of(words, 5, 0, 0);
    CHECK(rows_are(&d0, "cat", 0, NULL, 0) && rows_are(&d0, "dog", -1, NULL, 0));
    ft_dict_free(&d0);
}

/* ---- the subword bag: sg_embedding_bag over words' rows */

typedef struct {
    sg_tensor *idx, *off;
} bag_case;

static sg_tensor *bag_fn(sg_ctx *ctx, sg_tensor *const *in, void *ud)
{
    (void)ctx;
    const bag_case *c = ud;
    return sg_embedding_bag(in[0], c->idx, c->off, NULL); /* mean, the true gradient */
}

/* rows of words "cat", "cats", "at" in a table of 3 words + 7 buckets (small, collisions
 * on purpose: a row named twice in a bag) */
static void bag_rows(ft_ids *rows, ft_ids *offs, ft_dict *d)
{
    const char *const words[] = {"cat", "cats", "at"};
    for (int w = 0; w < 3; w++) {
        ft_ids_push(offs, rows->n);
        ft_dict_word_rows(d, words[w], rows);
    }
}

TEST(the_subword_bag_is_the_mean_of_the_words_rows_and_its_gradients_check)
{
    sg_ctx *ctx = sg_ctx_new(NULL);
    const char *const words[] = {"cat", "cats", "at"};
    ft_dict d = dict_of(words, 3, 2, 3);
    d.bucket = 7;
    ft_ids rows = {0}, offs = {0};
    bag_rows(&rows, &offs, &d);
    const int64_t V = 3 + 7, D = 4, B = 3;
    sg_tensor *W = sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){V, D});
    sg_tensor_fill_uniform(W, -1, 1);
    sg_tensor_requires_grad(W, 1);
    bag_case c = {sg_tensor_from_data(ctx, SG_I64, 1, (int64_t[]){rows.n}, rows.v),
                  sg_tensor_from_data(ctx, SG_I64, 1, (int64_t[]){B}, offs.v)};
    /* forward: the mean by a naive loop */
    sg_tensor *h = bag_fn(ctx, (sg_tensor *[]){W}, &c);
    const double *w = sg_tensor_data(W);
    for (int64_t b = 0; b < B; b++) {
        const int64_t lo = offs.v[b], hi = b + 1 < B ? offs.v[b + 1] : rows.n;
        for (int64_t k = 0; k < D; k++) {
            long double s = 0;
            for (int64_t e = lo; e < hi; e++) s += w[rows.v[e] * D + k];
            CHECK_NEAR(sg_tensor_get(h, b * D + k), (double)(s / (hi - lo)), 1e-12);
        }
    }
    sg_tape_reset(ctx);
    /* the true gradient: finite differences */
    sg_gradcheck_result r;
    CHECK_STATUS(ctx, sg_gradcheck(ctx, bag_fn, &c, 1, (sg_tensor *[]){W}, NULL, &r), SG_OK);
    /* fastText's rule (SG_BAG_GRAD_WORD2VEC), what training uses: each entry of a bag gets
     * the bag's whole gradient row; loss sum(h * G) has gradient G */
    sg_tensor *G = sg_tensor_new(ctx, SG_F64, 2, (int64_t[]){B, D});
    sg_tensor_fill_uniform(G, -1, 1);
    sg_embedding_bag_opts bo = SG_EMBEDDING_BAG_OPTS_DEFAULT;
    bo.grad = SG_BAG_GRAD_WORD2VEC;
    sg_tensor *loss = sg_sum(sg_mul(sg_embedding_bag(W, c.idx, c.off, &bo), G));
    CHECK_STATUS(ctx, sg_backward(loss), SG_OK);
    sg_tensor *g = sg_to_dense(sg_tensor_grad(W));
    const double *gv = sg_tensor_data(G);
    for (int64_t v = 0; v < V; v++)
        for (int64_t k = 0; k < D; k++) {
            double want = 0;
            for (int64_t b = 0; b < B; b++) {
                const int64_t lo = offs.v[b], hi = b + 1 < B ? offs.v[b + 1] : rows.n;
                for (int64_t e = lo; e < hi; e++) want += rows.v[e] == v ? gv[b * D + k] : 0;
            }
            CHECK_NEAR(sg_tensor_get(g, v * D + k), want, 1e-12);
        }
    ft_ids_free(&rows);
    ft_ids_free(&offs);
    ft_dict_free(&d);
    sg_ctx_free(ctx);
}

/* ---- training */

static const char *write_corpus(void)
{
    static char path[256];
    snprintf(path, sizeof path, "/tmp/sgrad_test_ftvec_%d.txt", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    static const char *vocab[] = {"walk", "walks", "walked", "talk", "talks", "talked", "the",
                                  "a", "dog", "dogs", "cat", "cats", "r\xc3\xa9sum\xc3\xa9"};
    uint64_t s = 11;
    for (int i = 0; i < 300; i++) {
        for (int w = 0; w < 8; w++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            fprintf(f, "%s%s", w ? " " : "", vocab[(s >> 33) % 13]);
        }
        fputc('\n', f);
    }
    fclose(f);
    return path;
}

static ft_config small_config(const char *input, ft_kind kind, int threads)
{
    ft_config c;
    ft_config_default_vectors(&c, kind);
    c.input = input;
    c.dim = 8;
    c.epoch = 1;
    c.bucket = 5000;
    c.min_count = 1;
    c.batch = 64;
    c.verbose = 0;
    c.threads = threads;
    return c;
}

TEST(a_step_moves_exactly_the_batch_rows_of_the_tables)
{
    const char *path = write_corpus();
    CHECK(path != NULL);
    for (ft_kind kind = FT_SKIPGRAM; kind <= FT_CBOW; kind++) {
        ft_config c = small_config(path, kind, 1);
        ft_model m;
        ft_train_result r;
        CHECK(ft_train_vectors(&c, &m, &r, NULL) == 0);
        vec_trainer t = {.cfg = &m.cfg, .m = &m, .rng = {5}};
        CHECK(ft_vec_tables(&t) == 0 && tc_reader_open(&t.rd, path) == 0);
        CHECK(ft_vec_fill_batch(&t) == 0 && t.n > 0);
        const int64_t R = sg_tensor_dim(m.input, 0), D = c.dim;
        bool *in_batch = calloc((size_t)R, 1);
        for (int64_t i = 0; i < t.bag_rows.n; i++) in_batch[t.bag_rows.v[i]] = true;
        float *before = malloc((size_t)(R * D) * sizeof *before);
        memcpy(before, sg_tensor_data(m.input), (size_t)(R * D) * sizeof *before);
        sg_optim *opt = sg_optim_sgd(m.ctx, &(sg_sgd_opts){.lr = 0.5});
        CHECK(sg_optim_add_param(opt, m.input) == SG_OK && sg_optim_add_param(opt, m.output) == SG_OK);
        CHECK(isfinite(ft_vec_step(&t, opt)));
        const float *after = sg_tensor_f32(m.input);
        int64_t moved = 0, batch_rows = 0, buckets = 0;
        for (int64_t i = 0; i < R; i++) {
            const bool changed = memcmp(before + i * D, after + i * D, (size_t)D * sizeof *after) != 0;
            batch_rows += in_batch[i];
            buckets += in_batch[i] && i >= m.dict.words.size;
            moved += changed;
            if (changed != in_batch[i]) {
                fprintf(stderr, "  %s: row %lld\n", ft_kind_name(kind), (long long)i);
                CHECK(changed == in_batch[i]);
                break;
            }
        }
        CHECK(buckets > 5 && moved == batch_rows);
        tc_reader_close(&t.rd);
        ft_vec_trainer_free(&t);
        sg_optim_free(opt);
        free(before);
        free(in_batch);
        ft_model_free(&m);
    }
    remove(path);
}

TEST(training_gives_the_same_model_for_1_and_2_threads)
{
    const char *path = write_corpus();
    CHECK(path != NULL);
    for (ft_kind kind = FT_SKIPGRAM; kind <= FT_CBOW; kind++) {
        ft_model m[2];
        ft_train_result r;
        for (int k = 0; k < 2; k++) {
            ft_config c = small_config(path, kind, k + 1);
            c.epoch = 2;
            CHECK(ft_train_vectors(&c, &m[k], &r, NULL) == 0);
        }
        const size_t bytes = (size_t)(sg_tensor_dim(m[0].input, 0) * 8) * sizeof(float);
        CHECK(!memcmp(sg_tensor_data(m[0].input), sg_tensor_data(m[1].input), bytes));
        CHECK(!memcmp(sg_tensor_data(m[0].output), sg_tensor_data(m[1].output),
                      (size_t)(m[0].dict.words.size * 8) * sizeof(float)));
        /* and it learnt: the loss per example fell below the untrained log(2) * (1 + neg) */
        CHECK(r.final_loss < 6 * log(2.0));
        ft_model_free(&m[0]);
        ft_model_free(&m[1]);
    }
    remove(path);
}

TEST_MAIN()
