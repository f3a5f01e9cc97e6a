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
int ft_vec_fill_batch(vec_trainer *t)
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
double ft_vec_step(vec_trainer *t, sg_optim *opt)
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
    if (rc) tc_fail_ctx(t->err, ctx, "training step failed: ");
    sg_tape_reset(ctx);
    return l;
}

/* Every vocabulary word's rows, and the sampling tables. */
int ft_vec_tables(vec_trainer *t)
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

void ft_vec_trainer_free(vec_trainer *t)
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

/* The model's tables on a new context (word rows U(-1/dim, 1/dim), the vocabulary's
 * n-gram rows too, output rows zero), the optimizer and the row-hit caps. */
static int vec_setup(vec_trainer *t)
{
    ft_model *m = t->m;
    const ft_config *cfg = t->cfg;
    const int64_t W = m->dict.words.size, D = cfg->dim;
    sg_ctx_opts co = {.threads = cfg->threads, .seed = cfg->seed ? cfg->seed : 42};
    if (!(m->ctx = sg_ctx_new(&co)) || ft_vec_tables(t)) return tc_fail(t->err, SG_ERR_NOMEM, "out of memory");
    m->input = sg_tensor_new(m->ctx, SG_F32, 2, (int64_t[]){W + m->dict.bucket, D});
    m->output = sg_tensor_new(m->ctx, SG_F32, 2, (int64_t[]){W, D});
    sg_tensor *words = sg_tensor_new(m->ctx, SG_F32, 2, (int64_t[]){W, D});
    sg_sgd_opts so = SG_SGD_OPTS_DEFAULT;
    so.lr = cfg->lr;
    t->opt = sg_optim_sgd(m->ctx, &so);
    if (!m->input || !m->output || !words || sg_tensor_fill_uniform(words, -1.0 / (double)D, 1.0 / (double)D) ||
        !t->opt || !sg_tensor_requires_grad(m->input, 1) || !sg_tensor_requires_grad(m->output, 1) ||
        sg_optim_add_param(t->opt, m->input) || sg_optim_add_param(t->opt, m->output) ||
        sg_optim_set_check_finite(t->opt, 1)) {
        sg_tensor_free(words);
        return tc_fail_ctx(t->err, m->ctx, "cannot make the model: ");
    }
    memcpy(sg_tensor_data(m->input), sg_tensor_data(words), (size_t)(W * D) * sizeof(float));
    sg_tensor_free(words);
    init_ngram_rows(t);
    t->in_cap = tc_row_hit_cap(cfg->kind == FT_CBOW ? TC_CBOW_INPUT_STEP_BOUND : TC_ROW_STEP_BOUND, cfg->lr);
    t->out_cap = tc_row_hit_cap(TC_ROW_STEP_BOUND, cfg->lr);
    t->total = m->dict.ntokens * cfg->epoch;
    return 0;
}

/* One step: the learning rate by the tokens read before the batch, the step, its event. */
static int vec_batch_step(vec_trainer *t, int ep, int64_t tokens_before, ft_train_result *res)
{
    const ft_config *cfg = t->cfg;
    double lr = cfg->lr * (1 - (double)tokens_before / (double)t->total);
    lr = lr > 0 ? lr : 0;
    const double l = sg_optim_set_lr(t->opt, lr) ? NAN : ft_vec_step(t, t->opt);
    if (!isfinite(l)) return isnan(l) ? -1 : tc_fail(t->err, SG_ERR_VALUE, "the loss diverged (lower -lr)");
    t->epoch_loss += l;
    t->epoch_n += t->n;
    res->steps++;
    const sg_event e = {.kind = SG_EVENT_STEP, .epoch = ep + 1, .epochs = cfg->epoch, .words = t->tokens,
                        .words_done = t->tokens, .total_words = t->total, .steps = res->steps, .examples = t->n,
                        .loss = l, .lr = lr, .elapsed_s = tc_now() - t->t0, .threads = sg_ctx_threads(t->m->ctx)};
    t->stop = tc_emit(&cfg->ev, &e) != 0;
    return 0;
}

/* One epoch over the file, batch by batch. */
static int vec_epoch(vec_trainer *t, int ep, ft_train_result *res)
{
    if (tc_reader_open(&t->rd, t->cfg->input))
        return tc_fail(t->err, SG_ERR_IO, "cannot read -input %s: %s", t->cfg->input, strerror(errno));
    t->epoch_done = false;
    t->len = t->pos = 0;
    t->epoch_loss = 0;
    t->epoch_n = 0;
    int rc = 0;
    while (!rc && !t->stop) {
        const int64_t tokens_before = t->tokens;
        if (ft_vec_fill_batch(t)) rc = tc_fail(t->err, SG_ERR_NOMEM, "out of memory");
        else if (t->n == 0) break;
        else rc = vec_batch_step(t, ep, tokens_before, res);
    }
    tc_reader_close(&t->rd);
    res->examples = t->epoch_n;
    return rc;
}

int ft_train_vectors(const ft_config *cfg, ft_model *m, ft_train_result *res, sg_model_error *err)
{
    memset(m, 0, sizeof *m);
    memset(res, 0, sizeof *res);
    m->cfg = *cfg;
    vec_trainer t = {.cfg = &m->cfg, .m = m, .rng = {cfg->seed}, .err = err};
    int rc = ft_config_check(cfg, err) || ft_dict_build(&m->dict, cfg, err) ? -1 : 0;
    if (!rc) {
        tc_info(&cfg->ev, 1, "Read %lld words, %lld in the vocabulary", (long long)m->dict.ntokens,
                (long long)m->dict.words.size);
        rc = vec_setup(&t);
    }
    t.t0 = tc_now();
    for (int ep = 0; !rc && !t.stop && ep < cfg->epoch; ep++) rc = vec_epoch(&t, ep, res);
    if (!rc && res->steps == 0)
        rc = tc_fail(err, SG_ERR_VALUE, "-input %s gave no training example (no line of two vocabulary words)",
                     cfg->input);
    if (!rc) {
        res->seconds = tc_now() - t.t0;
        res->final_loss = t.epoch_n ? t.epoch_loss / (double)t.epoch_n : NAN;
        const sg_event e = {.kind = SG_EVENT_END, .epoch = cfg->epoch, .epochs = cfg->epoch, .words_done = t.total,
                            .total_words = t.total, .steps = res->steps, .loss = res->final_loss,
                            .elapsed_s = res->seconds, .threads = sg_ctx_threads(m->ctx)};
        tc_emit(&cfg->ev, &e);
        rc = t.stop ? SG_STOPPED : 0;
    }
    sg_optim_free(t.opt);
    ft_vec_trainer_free(&t);
    if (rc && rc != SG_STOPPED) ft_model_free(m);
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

int ft_write_vec(const ft_model *m, const char *path, sg_model_error *err)
{
    sg_tensor *t = vocab_vectors(m);
    int rc = t ? sg_wordvec_write(path, t, (const char *const *)m->dict.words.words, 0) : -1;
    if (!t) tc_fail(err, SG_ERR_NOMEM, "cannot write %s: out of memory", path);
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
