/* sgrad-w2v's hierarchical softmax (-hs 1): the Huffman tree's paths form one consistent
 * binary tree (each inner node's two child slots filled once, by a leaf's path or by the
 * inner node below it); the trainer's batch carries each example's path of its true
 * target exactly as the tree has it, and sg_hs_loss on that batch equals a plain loop
 * over word2vec's formula; training on a corpus with planted topics lowers the loss well
 * below its start (a zero table scores every node log 2), recovers the topics, and gives
 * bitwise identical vectors for 1 and 2 threads, with -negative 0 and with both losses. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <unistd.h>

#include "w2v/w2v.h"

enum { TOPICS = 8, PER_TOPIC = 5, SENTENCES = 1200, LEN = 10 };

static char corpus_path[256];

static void remove_corpus(void) { remove(corpus_path); }

/* Sentences of one topic each; word j of a topic is drawn with weight j + 1, so the
 * counts differ and the tree is not balanced. */
static void make_corpus(void)
{
    if (corpus_path[0]) return;
    atexit(remove_corpus);
    snprintf(corpus_path, sizeof corpus_path, "/tmp/sgrad_test_w2v_hs_%d.txt", (int)getpid());
    FILE *f = fopen(corpus_path, "w");
    tc_rng r = {77};
    for (int s = 0; s < SENTENCES; s++) {
        int topic = (int)tc_rng_below(&r, TOPICS);
        for (int i = 0; i < LEN; i++) {
            int u = (int)tc_rng_below(&r, PER_TOPIC * (PER_TOPIC + 1) / 2), w = 0;
            while (u >= w + 1) u -= ++w;
            fprintf(f, "%st%dw%d", i ? " " : "", topic, w);
        }
        fputc('\n', f);
    }
    fclose(f);
}

static void count_vocab(tc_vocab *v)
{
    make_corpus();
    tc_vocab_init(v);
    CHECK(tc_vocab_count_file(v, corpus_path) == 0);
    CHECK(tc_vocab_finalize(v, 1) == 0);
    CHECK(v->size == TOPICS * PER_TOPIC);
}

TEST(huffman_paths_form_one_binary_tree)
{
    tc_vocab v;
    count_vocab(&v);
    const int64_t V = v.size;
    tc_huffman tree;
    CHECK(tc_huffman_build(&tree, v.counts, V) == 0);
    /* child[2k + code] of inner node k: a leaf c or V + inner node; -1 unset */
    int64_t child[2 * TOPICS * PER_TOPIC], weight[2 * TOPICS * PER_TOPIC];
    for (int64_t i = 0; i < 2 * V; i++) child[i] = -1;
    for (int64_t c = 0; c < V; c++) {
        CHECK(tree.offsets[c + 1] > tree.offsets[c]);
        CHECK(tree.nodes[tree.offsets[c + 1] - 1] == V - 2); /* every path ends at the root */
        for (int64_t e = tree.offsets[c]; e < tree.offsets[c + 1]; e++) {
            CHECK(tree.nodes[e] >= 0 && tree.nodes[e] < V - 1 && (tree.codes[e] == 0 || tree.codes[e] == 1));
            const int64_t below = e == tree.offsets[c] ? c : V + tree.nodes[e - 1];
            int64_t *slot = &child[2 * tree.nodes[e] + tree.codes[e]];
            CHECK(*slot == -1 || *slot == below); /* one child per slot */
            *slot = below;
        }
    }
    /* every slot filled; an inner node weighs its children's sum, and (two-queue
     * construction) the k-th merge is never lighter than the one before */
    for (int64_t c = 0; c < V; c++) weight[c] = v.counts[c];
    for (int64_t k = 0; k < V - 1; k++) {
        CHECK(child[2 * k] >= 0 && child[2 * k + 1] >= 0);
        if (child[2 * k] < 0 || child[2 * k + 1] < 0) break;
        CHECK(child[2 * k] < V + k && child[2 * k + 1] < V + k); /* children made before */
        weight[V + k] = weight[child[2 * k]] + weight[child[2 * k + 1]];
        if (k) CHECK(weight[V + k] >= weight[V + k - 1]);
    }
    CHECK(weight[2 * V - 2] == v.train_words);
    tc_huffman_free(&tree);
    tc_vocab_free(&v);
}

/* One batch drawn by the trainer: its paths are the tree's, and sg_hs_loss over them is
 * sum_e log(1 + exp(-+s_e)) computed by a loop (code 1: -log sigmoid(s)). */
static void batch_paths_and_loss(int cbow)
{
    tc_vocab v;
    count_vocab(&v);
    const int64_t V = v.size, D = 8;
    w2v_config c;
    w2v_config_default(&c);
    c.train = corpus_path;
    c.cbow = cbow;
    c.hs = 1;
    c.negative = 2;
    c.window = 3;
    c.sample = 0;
    const int T = c.negative + 1;
    w2v_trainer t;
    memset(&t, 0, sizeof t);
    t.cfg = &c;
    t.v = &v;
    t.rng.s = 5;
    t.cap = 64;
    t.row_cap = t.in_row_cap = t.node_cap = 1 << 30;
    t.keep = tc_keep_table(&v, 0);
    t.hits_in = calloc((size_t)V, sizeof *t.hits_in);
    t.hits_out = calloc((size_t)V, sizeof *t.hits_out);
    t.hits_node = calloc((size_t)V, sizeof *t.hits_node);
    CHECK(t.keep && t.hits_in && t.hits_out && t.hits_node);
    CHECK(tc_noise_init(&t.noise, v.counts, V, 0.75) == 0);
    CHECK(tc_huffman_build(&t.tree, v.counts, V) == 0);
    sg_ctx *ctx = sg_ctx_new(NULL);
    const int64_t s_in[1] = {t.cap * 2 * c.window}, s_n[1] = {t.cap}, s_t[2] = {t.cap, T},
                  s_node[1] = {t.cap * V};
    for (int k = 0; k < 2; k++) {
        t.input_t[k] = sg_tensor_new(ctx, SG_I64, 1, s_in);
        t.offset_t[k] = sg_tensor_new(ctx, SG_I64, 1, s_n);
        t.target_t[k] = sg_tensor_new(ctx, SG_I64, 2, s_t);
        t.node_t[k] = sg_tensor_new(ctx, SG_I64, 1, s_node);
        t.code_t[k] = sg_tensor_new(ctx, SG_I32, 1, s_node);
        t.path_t[k] = sg_tensor_new(ctx, SG_I64, 1, s_n);
    }
    t.input = sg_tensor_data(t.input_t[0]);
    t.target = sg_tensor_data(t.target_t[0]);
    t.node = sg_tensor_data(t.node_t[0]);
    CHECK(tc_reader_open(&t.rd, corpus_path) == 0);
    w2v_fill_batch(&t);
    CHECK(t.n > 0 && t.n <= t.cap);
    for (int64_t i = 0; i < t.n; i++) {
        const int64_t w = t.target[i * T], lo = t.path[i], hi = i + 1 < t.n ? t.path[i + 1] : t.n_node;
        CHECK(hi - lo == t.tree.offsets[w + 1] - t.tree.offsets[w]);
        for (int64_t e = lo; e < hi && hi - lo == t.tree.offsets[w + 1] - t.tree.offsets[w]; e++) {
            CHECK(t.node[e] == t.tree.nodes[t.tree.offsets[w] + e - lo]);
            CHECK(t.code[e] == t.tree.codes[t.tree.offsets[w] + e - lo]);
        }
    }
    /* the op on the batch's tensors against a loop */
    const int64_t s_h[2] = {t.n, D}, s_w[2] = {V - 1, D};
    sg_tensor *h = sg_tensor_new(ctx, SG_F64, 2, s_h), *W = sg_tensor_new(ctx, SG_F64, 2, s_w);
    double *hv = sg_tensor_data(h), *wv = sg_tensor_data(W);
    for (int64_t i = 0; i < t.n * D; i++) hv[i] = tu_rand_unit();
    for (int64_t i = 0; i < (V - 1) * D; i++) wv[i] = tu_rand_unit();
    sg_tensor *loss = sg_hs_loss(h, W, sg_slice(t.node_t[t.set], 0, t.n_node),
                                 sg_slice(t.code_t[t.set], 0, t.n_node), sg_slice(t.path_t[t.set], 0, t.n));
    CHECK(loss != NULL);
    long double want = 0;
    for (int64_t i = 0; i < t.n; i++) {
        const int64_t w = t.target[i * T];
        for (int64_t e = t.tree.offsets[w]; e < t.tree.offsets[w + 1]; e++) {
            long double s = 0;
            for (int64_t d = 0; d < D; d++) s += (long double)hv[i * D + d] * wv[t.tree.nodes[e] * D + d];
            want += log1pl(expl(t.tree.codes[e] ? -s : s));
        }
    }
    if (loss) CHECK(fabs(sg_tensor_get(loss, 0) - (double)want) < 1e-9 * (1 + fabs((double)want)));
    sg_tape_reset(ctx);
    tc_reader_close(&t.rd);
    sg_ctx_free(ctx);
    tc_noise_free(&t.noise);
    tc_huffman_free(&t.tree);
    free(t.keep);
    free(t.hits_in);
    free(t.hits_out);
    free(t.hits_node);
    tc_vocab_free(&v);
}

TEST(skipgram_batch_paths_and_loss) { batch_paths_and_loss(0); }
TEST(cbow_batch_paths_and_loss) { batch_paths_and_loss(1); }

/* Trains; returns the words whose PER_TOPIC - 1 nearest neighbours (cosine) are their
 * topic mates, the vectors copied to vec. */
static int train(w2v_config *cfg, w2v_result *res, float *vec)
{
    tc_vocab v;
    count_vocab(&v);
    w2v_model m = {0};
    int good = -1;
    CHECK(w2v_train(cfg, &v, res, &m, NULL) == 0);
    if (m.ctx) {
        const int64_t V = v.size, D = cfg->size;
        CHECK(m.hs != NULL && (cfg->negative > 0) == (m.out != NULL));
        const float *x = sg_tensor_f32(m.in);
        memcpy(vec, x, sizeof(float) * (size_t)(V * D));
        good = 0;
        for (int64_t a = 0; a < V; a++) {
            int ta = -1, wa = -1;
            sscanf(v.words[a], "t%dw%d", &ta, &wa);
            double worst_mate = 2, best_other = -2;
            for (int64_t b = 0; b < V; b++) {
                if (b == a) continue;
                double ab = 0, aa = 0, bb = 0;
                for (int64_t d = 0; d < D; d++) {
                    ab += (double)x[a * D + d] * x[b * D + d];
                    aa += (double)x[a * D + d] * x[a * D + d];
                    bb += (double)x[b * D + d] * x[b * D + d];
                }
                int tb = -1, wb = -1;
                sscanf(v.words[b], "t%dw%d", &tb, &wb);
                if (tb == ta) worst_mate = fmin(worst_mate, ab / sqrt(aa * bb));
                else best_other = fmax(best_other, ab / sqrt(aa * bb));
            }
            good += worst_mate > best_other;
        }
    }
    w2v_model_free(&m);
    tc_vocab_free(&v);
    return good;
}

/* The loss per example of the zero inner-node table: log 2 per path node, averaged over
 * the words by count. */
static double start_loss(void)
{
    tc_vocab v;
    count_vocab(&v);
    tc_huffman tree;
    CHECK(tc_huffman_build(&tree, v.counts, v.size) == 0);
    double s = 0;
    for (int64_t w = 0; w < v.size; w++) s += (double)v.counts[w] * (double)(tree.offsets[w + 1] - tree.offsets[w]);
    s = s / (double)v.train_words * log(2.0);
    tc_huffman_free(&tree);
    tc_vocab_free(&v);
    return s;
}

static void trains_deterministically(int cbow, int negative)
{
    make_corpus();
    w2v_config c;
    w2v_config_default(&c);
    c.train = corpus_path;
    c.size = 16;
    c.window = 3;
    c.iter = 3;
    c.min_count = 1;
    c.sample = 1e-2;
    c.batch = 256;
    c.cbow = cbow;
    c.hs = 1;
    c.negative = negative;
    c.alpha = cbow ? 0.05 : 0.025;
    enum { N = TOPICS * PER_TOPIC * 16 };
    static float one[N], two[N];
    w2v_result r1, r2;
    c.threads = 1;
    const int good = train(&c, &r1, one);
    c.threads = 2;
    CHECK(train(&c, &r2, two) == good);
    CHECK(memcmp(one, two, sizeof one) == 0);
    CHECK(r1.steps == r2.steps && r1.final_loss == r2.final_loss);
    CHECK(good == TOPICS * PER_TOPIC);
    const double start = start_loss(); /* hs alone; negative sampling adds (negative + 1) log 2 */
    const double total_start = start + (negative ? (negative + 1) * log(2.0) : 0);
    CHECK(r1.final_loss < 0.75 * total_start);
    if (good != TOPICS * PER_TOPIC || !(r1.final_loss < 0.75 * total_start))
        fprintf(stderr, "  cbow %d negative %d: %d of %d words, loss %.4f from %.4f\n", cbow, negative, good,
                TOPICS * PER_TOPIC, r1.final_loss, total_start);
}

TEST(skipgram_hs_only) { trains_deterministically(0, 0); }
TEST(skipgram_hs_and_negative) { trains_deterministically(0, 5); }
TEST(cbow_hs_only) { trains_deterministically(1, 0); }

TEST(negative_zero_needs_hs)
{
    w2v_config c;
    w2v_config_default(&c);
    c.negative = 0;
    sg_model_error e;
    CHECK(w2v_config_check(&c, &e) == -1 && e.status == SG_ERR_ARG);
    c.hs = 1;
    CHECK(w2v_config_check(&c, NULL) == 0);
}

TEST_MAIN()
