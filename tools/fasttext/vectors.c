/* Subword word vectors: fastText's skipgram and cbow through sgrad ops, the vectors of
 * words (seen or not), the .vec file and nearest-neighbour queries.
 *
 * A word's input is the mean of its rows (ft_dict_word_rows: its word row and its
 * character n-gram buckets), as fastText's computeHidden averages them. skipgram: each
 * context word within a window of 1..-ws (uniform per centre word) is the true target of
 * the centre word's bag; cbow: the centre word is the target of one bag holding every
 * context word's rows (fastText's bag of all context subwords). Each example has -neg
 * negatives from unigram^0.5 (redrawn while equal to the target). A line is its first
 * FT_MAX_LINE in-vocabulary tokens (FT_EOS at each newline), subsampled with fastText's
 * keep probability sqrt(t/f) + t/f, f = count / tokens.
 *
 * A step is a batch of examples: h = sg_embedding_bag(input, bags, mean,
 * SG_BAG_GRAD_WORD2VEC) (fastText adds each example's undivided error to every row of the
 * bag), for skipgram repeated per example with sg_index_select, then sg_sgns_loss fused
 * into the SGD optimizer for the output table, and the optimizer's step for the input
 * table's COO gradient (the batch's rows only). Batches end at -batch examples or at the
 * row-hit caps (ft.h), never depend on the thread count, and one random stream drives
 * everything in corpus order: the model is the same for any -thread. The learning rate
 * falls linearly with the tokens read, lr (1 - tokens / (epoch x corpus tokens)), set
 * before each step from the tokens read before its batch.
 *
 * Initialisation: word rows U(-1/dim, 1/dim) and output rows zero, as fastText's; of the
 * n-gram rows only those of the vocabulary's n-grams (the only ones training reads or
 * moves) start U(-1/dim, 1/dim) (drawn in bucket order from the seed), the others zero
 * (fastText: every bucket row U(-1/dim, 1/dim)). So a bucket no vocabulary word uses
 * stays zero, and the model file leaves it out (the classifier's rule: only nonzero rows
 * are stored). Starting the used n-gram rows at zero instead scored about half on the
 * analogy test (Brown, 1 epoch: 1.1% against 2.4%).
 */
#include "ft.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const ft_config *cfg;
    ft_model *m;
    ft_ids sub_off, sub_rows; /* word w's rows: sub_rows[sub_off[w] .. sub_off[w + 1]) */
    uint64_t *keep;           /* keep word w when a 32-bit draw is below keep[w] */
    tc_noise noise;
    tc_rng rng;
    tc_reader rd;
    bool epoch_done;
    int64_t tokens; /* in-vocabulary tokens read, all epochs (fastText's tokenCount) */
    int32_t sen[FT_MAX_LINE];
    int len, pos;
    /* the batch: bags (rows, offsets), skipgram's bag of each example, targets (n, T) */
    ft_ids bag_rows, bag_off, rep, targets;
    int64_t n;
    int32_t *hits_in, *hits_out;
    int32_t in_cap, out_cap;
} vec_trainer;

/* fastText's getLine: in-vocabulary tokens up to a newline (FT_EOS, kept as a word) or
 * FT_MAX_LINE of them, each counted, subsampled ones dropped. */
static void next_line(vec_trainer *t)
{
    char word[TC_MAX_WORD];
    const tc_vocab *v = &t->m->dict.words;
    const int64_t eos = tc_vocab_find(v, FT_EOS);
    t->len = t->pos = 0;
    for (int n = 0; !t->epoch_done && n < FT_MAX_LINE;) {
        tc_tok k = tc_reader_next(&t->rd, word);
        if (k == TC_TOK_EOF) {
            t->epoch_done = true;
            break;
        }
        const int64_t id = k == TC_TOK_EOL ? eos : tc_vocab_find(v, word);
        if (id >= 0) {
            n++;
            t->tokens++;
            if ((tc_rng_next(&t->rng) & 0xffffffffu) < t->keep[id]) t->sen[t->len++] = (int32_t)id;
        }
        if (k == TC_TOK_EOL) break;
    }
}

static bool hit(int32_t *hits, const int64_t *rows, int64_t n, int32_t cap)
{
    bool full = false;
    for (int64_t i = 0; i < n; i++) full |= ++hits[rows[i]] >= cap;
    return full;
}

/* One example with true target `target` on the last bag: its targets and negatives. */
static int push_example(vec_trainer *t, int64_t target, bool *full)
{
    const int64_t T = t->cfg->neg + 1, W = t->m->dict.words.size, first = t->targets.n;
    if (ft_ids_push(&t->targets, target)) return -1;
    for (int64_t j = 1; j < T; j++) {
        int64_t neg;
        do neg = tc_noise_draw(&t->noise, &t->rng);
        while (neg == target && W > 1);
        if (ft_ids_push(&t->targets, neg)) return -1;
    }
    *full |= hit(t->hits_out, t->targets.v + first, T, t->out_cap);
    t->n++;
    return 0;
}

/* The next batch; t->n == 0 at the end of the epoch. 0 or -1 (out of memory). */
static int fill_batch(vec_trainer *t)
{
    for (int64_t i = 0; i < t->bag_rows.n; i++) t->hits_in[t->bag_rows.v[i]] = 0;
    for (int64_t i = 0; i < t->targets.n; i++) t->hits_out[t->targets.v[i]] = 0;
    t->bag_rows.n = t->bag_off.n = t->rep.n = t->targets.n = 0;
    t->n = 0;
    const bool cbow = t->cfg->kind == FT_CBOW;
    const int ws = t->cfg->ws;
    const int64_t *so = t->sub_off.v, *sr = t->sub_rows.v;
    bool full = false;
    const int64_t cap = t->cfg->batch > 2 * ws ? t->cfg->batch : 2 * ws;
    while (!full && t->n + 2 * ws <= cap) {
        if (t->pos >= t->len) {
            if (t->epoch_done) return 0;
            next_line(t);
            continue;
        }
        const int p = t->pos++;
        const int b = 1 + (int)tc_rng_below(&t->rng, (uint32_t)ws);
        const int lo = p - b < 0 ? 0 : p - b, hi = p + b >= t->len ? t->len - 1 : p + b;
        if (hi == lo) continue; /* no context word */
        const int64_t start = t->bag_rows.n;
        if (ft_ids_push(&t->bag_off, start)) return -1;
        if (cbow) {
            for (int c = lo; c <= hi; c++)
                for (int64_t r = so[t->sen[c]]; c != p && r < so[t->sen[c] + 1]; r++)
                    if (ft_ids_push(&t->bag_rows, sr[r])) return -1;
            full |= hit(t->hits_in, t->bag_rows.v + start, t->bag_rows.n - start, t->in_cap);
            if (push_example(t, t->sen[p], &full)) return -1;
            continue;
        }
        const int64_t w = t->sen[p], bag = t->bag_off.n - 1;
        for (int64_t r = so[w]; r < so[w + 1]; r++)
            if (ft_ids_push(&t->bag_rows, sr[r])) return -1;
        for (int c = lo; c <= hi; c++) {
            if (c == p) continue;
            if (ft_ids_push(&t->rep, bag) || push_example(t, t->sen[c], &full)) return -1;
            full |= hit(t->hits_in, t->bag_rows.v + start, t->bag_rows.n - start, t->in_cap);
        }
    }
    return 0;
}

static sg_tensor *ids_of(sg_ctx *ctx, const ft_ids *a, int ndim, int64_t cols)
{
    const int64_t shape[2] = {ndim == 1 ? a->n : a->n / cols, cols};
    sg_tensor *t = sg_tensor_new_tmp(ctx, SG_I64, ndim, shape);
    if (t && a->n) memcpy(sg_tensor_data(t), a->v, (size_t)a->n * sizeof *a->v);
    return t;
}

/* One SGD step on the batch: the loss summed over its examples, or NaN with a message. */
static double vec_step(vec_trainer *t, sg_optim *opt)
{
    sg_ctx *ctx = t->m->ctx;
    sg_embedding_bag_opts bo = SG_EMBEDDING_BAG_OPTS_DEFAULT;
    bo.mode = SG_BAG_MEAN;
    bo.grad = SG_BAG_GRAD_WORD2VEC; /* every row of a bag gets its undivided error */
    sg_tensor *h = sg_embedding_bag(t->m->input, ids_of(ctx, &t->bag_rows, 1, 1),
                                    ids_of(ctx, &t->bag_off, 1, 1), &bo);
    if (t->cfg->kind == FT_SKIPGRAM) h = sg_index_select(h, 0, ids_of(ctx, &t->rep, 1, 1));
    sg_sgns_opts so = {.fused = opt};
    sg_tensor *loss = sg_sgns_loss(h, t->m->output, ids_of(ctx, &t->targets, 2, t->cfg->neg + 1), &so);
    int rc = loss ? sg_backward(loss) : sg_ctx_status(ctx);
    if (!rc) rc = sg_optim_step(opt);
    double l = rc ? NAN : sg_tensor_get(loss, 0);
    if (rc) fprintf(stderr, "sgrad-fasttext: training step failed: %s\n", sg_ctx_message(ctx));
    sg_tape_reset(ctx);
    return l;
}

/* Every vocabulary word's rows, and the sampling tables. */
static int trainer_tables(vec_trainer *t)
{
    const ft_dict *d = &t->m->dict;
    const int64_t W = d->words.size, R = W + d->bucket;
    if (W < 1 || R < W || ft_ids_push(&t->sub_off, 0)) return -1;
    for (int64_t w = 0; w < W; w++)
        if (ft_dict_word_rows(d, d->words.words[w], &t->sub_rows) || ft_ids_push(&t->sub_off, t->sub_rows.n))
            return -1;
    t->keep = malloc((size_t)W * sizeof *t->keep);
    t->hits_in = calloc((size_t)R, sizeof *t->hits_in);
    t->hits_out = calloc((size_t)W, sizeof *t->hits_out);
    if (!t->keep || !t->hits_in || !t->hits_out) return -1;
    for (int64_t w = 0; w < W; w++)
        t->keep[w] = (uint64_t)(tc_keep_prob(d->words.counts[w], t->cfg->sample, d->ntokens) * 4294967296.0);
    return tc_noise_init(&t->noise, d->words.counts, W, 0.5);
}

/* The vocabulary's n-gram rows U(-1/dim, 1/dim), in bucket order from the seed; the
 * other bucket rows stay zero. Uses hits_in (zero before and after) as the marks. */
static void init_ngram_rows(vec_trainer *t)
{
    const int64_t W = t->m->dict.words.size, R = W + t->m->dict.bucket, D = t->cfg->dim;
    float *in = sg_tensor_f32(t->m->input);
    tc_rng rng = {t->cfg->seed ^ 0x6e6772616d73ull}; /* a stream apart from the trainer's */
    for (int64_t i = 0; i < t->sub_rows.n; i++) t->hits_in[t->sub_rows.v[i]] = 1;
    for (int64_t r = W; r < R; r++) {
        if (!t->hits_in[r]) continue;
        t->hits_in[r] = 0;
        for (int64_t d = 0; d < D; d++)
            in[r * D + d] = (float)(((double)(tc_rng_next(&rng) >> 11) * 0x1p-53 * 2 - 1) / (double)D);
    }
    for (int64_t i = 0; i < W; i++) t->hits_in[i] = 0;
}

static void trainer_free(vec_trainer *t)
{
    ft_ids_free(&t->sub_off);
    ft_ids_free(&t->sub_rows);
    ft_ids_free(&t->bag_rows);
    ft_ids_free(&t->bag_off);
    ft_ids_free(&t->rep);
    ft_ids_free(&t->targets);
    free(t->keep);
    free(t->hits_in);
    free(t->hits_out);
    tc_noise_free(&t->noise);
}

int ft_train_vectors(const ft_config *cfg, FILE *log, ft_model *m, ft_train_result *res)
{
    memset(m, 0, sizeof *m);
    memset(res, 0, sizeof *res);
    m->cfg = *cfg;
    vec_trainer t = {.cfg = &m->cfg, .m = m, .rng = {cfg->seed}};
    sg_optim *opt = NULL;
    sg_tensor *words = NULL;
    int rc = -1;
    if (ft_config_check(cfg, stderr) || ft_dict_build(&m->dict, cfg, stderr)) goto done;
    const int64_t W = m->dict.words.size, D = cfg->dim;
    if (cfg->verbose > 0)
        fprintf(stderr, "Read %lld words, %lld in the vocabulary\n", (long long)m->dict.ntokens,
                (long long)W);
    sg_ctx_opts co = {.threads = cfg->threads, .seed = cfg->seed ? cfg->seed : 42};
    if (!(m->ctx = sg_ctx_new(&co)) || trainer_tables(&t)) {
        fprintf(stderr, "sgrad-fasttext: out of memory\n");
        goto done;
    }
    m->input = sg_tensor_new(m->ctx, SG_F32, 2, (int64_t[]){W + m->dict.bucket, D});
    m->output = sg_tensor_new(m->ctx, SG_F32, 2, (int64_t[]){W, D});
    words = sg_tensor_new(m->ctx, SG_F32, 2, (int64_t[]){W, D});
    sg_sgd_opts so = SG_SGD_OPTS_DEFAULT;
    so.lr = cfg->lr;
    opt = sg_optim_sgd(m->ctx, &so);
    if (!m->input || !m->output || !words ||
        sg_tensor_fill_uniform(words, -1.0 / (double)D, 1.0 / (double)D) || !opt || !sg_tensor_requires_grad(m->input, 1) || !sg_tensor_requires_grad(m->output, 1) ||
        sg_optim_add_param(opt, m->input) || sg_optim_add_param(opt, m->output) ||
        sg_optim_set_check_finite(opt, 1)) {
        fprintf(stderr, "sgrad-fasttext: cannot make the model: %s\n", sg_ctx_message(m->ctx));
        goto done;
    }
    memcpy(sg_tensor_data(m->input), sg_tensor_data(words), (size_t)(W * D) * sizeof(float));
    sg_tensor_free(words);
    words = NULL;
    init_ngram_rows(&t);
    t.in_cap = tc_row_hit_cap(cfg->kind == FT_CBOW ? TC_CBOW_INPUT_STEP_BOUND : TC_ROW_STEP_BOUND, cfg->lr);
    t.out_cap = tc_row_hit_cap(TC_ROW_STEP_BOUND, cfg->lr);
    const int64_t total = m->dict.ntokens * cfg->epoch;
    tc_progress pr;
    tc_progress_init(&pr, log, sg_ctx_threads(m->ctx));
    const double t0 = tc_now();
    double epoch_loss = 0, interval_loss = 0;
    int64_t epoch_n = 0, interval_n = 0;
    for (int ep = 0; ep < cfg->epoch; ep++) {
        if (tc_reader_open(&t.rd, cfg->input)) {
            fprintf(stderr, "sgrad-fasttext: cannot read -input %s: %s\n", cfg->input, strerror(errno));
            goto done;
        }
        t.epoch_done = false;
        t.len = t.pos = 0;
        epoch_loss = 0;
        epoch_n = 0;
        for (;;) {
            const int64_t tokens_before = t.tokens;
            if (fill_batch(&t)) {
                fprintf(stderr, "sgrad-fasttext: out of memory\n");
                tc_reader_close(&t.rd);
                goto done;
            }
            if (t.n == 0) break;
            double lr = cfg->lr * (1 - (double)tokens_before / (double)total);
            lr = lr > 0 ? lr : 0;
            const double l = sg_optim_set_lr(opt, lr) ? NAN : vec_step(&t, opt);
            if (!isfinite(l)) {
                if (!isnan(l)) fprintf(stderr, "sgrad-fasttext: the loss diverged (lower -lr)\n");
                tc_reader_close(&t.rd);
                goto done;
            }
            epoch_loss += l;
            epoch_n += t.n;
            interval_loss += l;
            interval_n += t.n;
            res->steps++;
            if (log && tc_now() - pr.last_print >= (pr.tty ? 0.2 : 5.0)) {
                tc_progress_update(&pr, t.tokens, total, lr, interval_loss / (double)interval_n, false);
                interval_loss = 0;
                interval_n = 0;
            }
        }
        tc_reader_close(&t.rd);
        res->examples = epoch_n;
    }
    if (res->steps == 0) {
        fprintf(stderr, "sgrad-fasttext: -input %s gave no training example (no line of two "
                        "vocabulary words)\n", cfg->input);
        goto done;
    }
    res->seconds = tc_now() - t0;
    res->final_loss = epoch_n ? epoch_loss / (double)epoch_n : NAN;
    tc_progress_update(&pr, total, total, 0, res->final_loss, true);
    rc = 0;
done:
    sg_tensor_free(words);
    sg_optim_free(opt);
    trainer_free(&t);
    if (rc) ft_model_free(m);
    return rc;
}

/* ---- word vectors and queries */

int ft_word_vector(const ft_model *m, const char *word, float *v)
{
    const int64_t D = m->cfg.dim;
    ft_ids rows = {0};
    double *h = malloc((size_t)D * sizeof *h);
    int rc = !h || ft_dict_word_rows(&m->dict, word, &rows) ? -1 : 0;
    if (!rc) {
        ft_input_mean(m, &rows, h);
        for (int64_t d = 0; d < D; d++) v[d] = (float)h[d];
    }
    free(h);
    ft_ids_free(&rows);
    return rc;
}

/* The vocabulary's vectors (W, dim) into a new tensor on m's context. */
static sg_tensor *vocab_vectors(const ft_model *m)
{
    const int64_t W = m->dict.words.size, D = m->cfg.dim;
    sg_tensor *t = sg_tensor_new(m->ctx, SG_F32, 2, (int64_t[]){W, D});
    for (int64_t w = 0; t && w < W; w++)
        if (ft_word_vector(m, m->dict.words.words[w], sg_tensor_f32(t) + w * D)) {
            sg_tensor_free(t);
            return NULL;
        }
    return t;
}

int ft_write_vec(const ft_model *m, const char *path, FILE *err)
{
    sg_tensor *t = vocab_vectors(m);
    int rc = t ? sg_wordvec_write(path, t, (const char *const *)m->dict.words.words, 0) : -1;
    if (!t) fprintf(err, "sgrad-fasttext: cannot write %s: out of memory\n", path);
    else if (rc) ft_write_error(m->ctx, path, err);
    sg_tensor_free(t);
    return rc ? -1 : 0;
}

int64_t ft_nearest(const ft_model *m, float **table, const float *query, int64_t k,
                   const int64_t *ban, int n_ban, int64_t *best, double *sim)
{
    const int64_t W = m->dict.words.size, D = m->cfg.dim;
    if (!*table) { /* fastText's precomputeWordVectors: each vector at unit length */
        sg_tensor *t = vocab_vectors(m);
        if (!t || !(*table = malloc((size_t)(W * D) * sizeof **table))) {
            sg_tensor_free(t);
            return -1;
        }
        memcpy(*table, sg_tensor_f32(t), (size_t)(W * D) * sizeof **table);
        sg_tensor_free(t);
        for (int64_t w = 0; w < W; w++) {
            double n2 = 0;
            for (int64_t d = 0; d < D; d++) n2 += (double)(*table)[w * D + d] * (*table)[w * D + d];
            for (int64_t d = 0; d < D && n2 > 0; d++) (*table)[w * D + d] = (float)((*table)[w * D + d] / sqrt(n2));
        }
    }
    double qn = 0;
    for (int64_t d = 0; d < D; d++) qn += (double)query[d] * query[d];
    qn = sqrt(qn) < 1e-8 ? 1 : sqrt(qn);
    int64_t n = 0;
    for (int64_t w = 0; w < W; w++) {
        bool banned = false;
        for (int i = 0; i < n_ban; i++) banned |= ban[i] == w;
        if (banned) continue;
        double s = 0;
        for (int64_t d = 0; d < D; d++) s += (double)(*table)[w * D + d] * query[d];
        s /= qn;
        int64_t p = n < k ? n++ : k;
        if (p == k && !(s > sim[k - 1])) continue;
        if (p == k) p = k - 1;
        for (; p > 0 && s > sim[p - 1]; p--) {
            best[p] = best[p - 1];
            sim[p] = sim[p - 1];
        }
        best[p] = w;
        sim[p] = s;
    }
    return n;
}
