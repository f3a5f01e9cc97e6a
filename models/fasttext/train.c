/* Supervised training of the classifier through sgrad ops.
 *
 * A step takes a batch of consecutive examples (file order, as fastText reads them):
 * h = sg_embedding_bag(input, rows, offsets, mean) (B,dim), then
 *   softmax: sg_cross_entropy(h @ output^T, one label per example) x B
 *   ova:     sg_bce_with_logits(h @ output^T, all labels 0/1) x B x labels
 *   ns:      sg_sgns_loss(h, output, [label, -neg negatives drawn by count^0.5])
 *   hs:      sg_hs_loss(h, output, the label's Huffman path)
 * (sums over the batch, so the learning rate means what it means in fastText's
 * one-example steps), then plain SGD on both tables from their gradients: the input
 * table's is COO on the batch's rows only. The learning rate falls linearly from -lr to
 * 0 over all steps (fastText: over all tokens). Initialisation as fastText's except the
 * n-gram buckets: word rows U(-1/dim, 1/dim), output zeros, bucket rows zeros, so that a
 * bucket row no example touched stays zero and the model file can leave it out.
 */
#include "ft.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ft_examples_free(ft_examples *e)
{
    ft_ids_free(&e->rows);
    ft_ids_free(&e->row_off);
    ft_ids_free(&e->labels);
    ft_ids_free(&e->lab_off);
    ft_ids_free(&e->n_words);
}

void ft_model_free(ft_model *m)
{
    ft_dict_free(&m->dict);
    tc_huffman_free(&m->tree);
    free(m->bucket_map);
    free(m->bucket_rows);
    free(m->label_copy);
    free(m->unit);
    sg_ctx_free(m->ctx); /* frees the tables */
    memset(m, 0, sizeof *m);
}

int ft_read_examples(const ft_model *m, ft_examples *ex, ft_train_result *res)
{
    tc_lines l;
    if (tc_lines_open(&l, m->cfg.input)) return -1;
    int rc;
    if (ft_ids_push(&ex->row_off, 0) || ft_ids_push(&ex->lab_off, 0)) return -1;
    while ((rc = tc_lines_next(&l)) > 0) {
        const int64_t r0 = ex->rows.n, l0 = ex->labels.n;
        int64_t n_words;
        if (ft_dict_line(&m->dict, l.tok, l.n, l.eol, &ex->rows, &ex->labels, &n_words)) {
            rc = -1;
            break;
        }
        if (ex->labels.n == l0 || n_words == 0) { /* not an example: undo */
            if (ex->labels.n == l0) res->no_label++;
            else res->no_word++;
            ex->rows.n = r0;
            ex->labels.n = l0;
            continue;
        }
        ex->words += n_words;
        if (ft_ids_push(&ex->row_off, ex->rows.n) || ft_ids_push(&ex->lab_off, ex->labels.n) ||
            ft_ids_push(&ex->n_words, n_words)) {
            rc = -1;
            break;
        }
    }
    tc_lines_close(&l);
    return rc < 0 ? -1 : 0;
}

/* The per-step index tensors: tape tensors, filled from the batch. */
static sg_tensor *ids_tensor(sg_ctx *ctx, int ndim, const int64_t *shape, const int64_t *v)
{
    sg_tensor *t = sg_tensor_new_tmp(ctx, SG_I64, ndim, shape);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    if (t && n) memcpy(sg_tensor_data(t), v, (size_t)n * sizeof *v);
    return t;
}

/* The loss of the batch's hidden vectors h (B,dim); NULL on error (recorded on ctx). */
static sg_tensor *loss_of(ft_model *m, sg_tensor *h, const ft_examples *ex, int64_t first,
                          int64_t B, tc_rng *rng, const tc_noise *noise)
{
    sg_ctx *ctx = m->ctx;
    const int64_t C = m->dict.labels.size;
    const int64_t *lab = ex->labels.v, *lo = ex->lab_off.v;
    /* one label of each example, uniformly among its labels (fastText's rule) */
    sg_tensor *picked = sg_tensor_new_tmp(ctx, SG_I64, 1, (int64_t[]){B});
    if (!picked) return NULL;
    int64_t *pick = sg_tensor_data(picked);
    for (int64_t i = 0; i < B; i++) {
        const int64_t a = lo[first + i], n = lo[first + i + 1] - a;
        pick[i] = lab[a + (n > 1 ? (int64_t)tc_rng_below(rng, (uint32_t)n) : 0)];
    }
    switch (m->cfg.loss) {
    case FT_LOSS_SOFTMAX: {
        sg_tensor *logits = sg_matmul(h, sg_transpose(m->output, 0, 1));
        return sg_scale(sg_cross_entropy(logits, picked), (double)B);
    }
    case FT_LOSS_OVA: {
        sg_tensor *logits = sg_matmul(h, sg_transpose(m->output, 0, 1));
        sg_tensor *t = sg_tensor_new_tmp(ctx, SG_F32, 2, (int64_t[]){B, C});
        if (!t) return NULL;
        float *y = sg_tensor_f32(t);
        for (int64_t i = 0; i < B; i++)
            for (int64_t k = lo[first + i]; k < lo[first + i + 1]; k++) y[i * C + lab[k]] = 1;
        return sg_scale(sg_bce_with_logits(logits, t), (double)(B * C));
    }
    case FT_LOSS_NS: {
        const int64_t T = m->cfg.neg + 1;
        sg_tensor *t = sg_tensor_new_tmp(ctx, SG_I64, 2, (int64_t[]){B, T});
        if (!t) return NULL;
        int64_t *tv = sg_tensor_data(t);
        for (int64_t i = 0; i < B; i++) {
            tv[i * T] = pick[i];
            for (int64_t j = 1; j < T; j++) {
                int64_t neg;
                do neg = tc_noise_draw(noise, rng);
                while (neg == pick[i] && C > 1);
                tv[i * T + j] = neg;
            }
        }
        return sg_sgns_loss(h, m->output, t, NULL);
    }
    case FT_LOSS_HS: {
        int64_t P = 0;
        for (int64_t i = 0; i < B; i++) P += m->tree.offsets[pick[i] + 1] - m->tree.offsets[pick[i]];
        sg_tensor *nodes = sg_tensor_new_tmp(ctx, SG_I64, 1, (int64_t[]){P});
        sg_tensor *codes = sg_tensor_new_tmp(ctx, SG_I64, 1, (int64_t[]){P});
        sg_tensor *offs = sg_tensor_new_tmp(ctx, SG_I64, 1, (int64_t[]){B});
        if (!nodes || !codes || !offs) return NULL;
        int64_t *nv = sg_tensor_data(nodes), *cv = sg_tensor_data(codes), *ov = sg_tensor_data(offs);
        for (int64_t i = 0, e = 0; i < B; i++) {
            ov[i] = e;
            for (int64_t k = m->tree.offsets[pick[i]]; k < m->tree.offsets[pick[i] + 1]; k++, e++) {
                nv[e] = m->tree.nodes[k];
                cv[e] = m->tree.codes[k];
            }
        }
        return sg_hs_loss(h, m->output, nodes, codes, offs);
    }
    }
    return NULL;
}

double ft_step(ft_model *m, sg_optim *opt, const ft_examples *ex, int64_t first, int64_t n, tc_rng *rng,
               const tc_noise *noise, sg_model_error *err)
{
    sg_ctx *ctx = m->ctx;
    const int64_t r0 = ex->row_off.v[first], nr = ex->row_off.v[first + n] - r0;
    sg_tensor *idx = ids_tensor(ctx, 1, (int64_t[]){nr}, ex->rows.v + r0);
    sg_tensor *off = sg_tensor_new_tmp(ctx, SG_I64, 1, (int64_t[]){n});
    for (int64_t i = 0; off && i < n; i++)
        ((int64_t *)sg_tensor_data(off))[i] = ex->row_off.v[first + i] - r0;
    sg_embedding_bag_opts bo = SG_EMBEDDING_BAG_OPTS_DEFAULT; /* mean */
    sg_tensor *h = sg_embedding_bag(m->input, idx, off, &bo);
    sg_tensor *loss = loss_of(m, h, ex, first, n, rng, noise);
    double l = NAN;
    int rc = loss ? sg_backward(loss) : sg_ctx_status(ctx);
    if (!rc) rc = sg_optim_step(opt);
    if (!rc) l = sg_tensor_get(loss, 0);
    else tc_fail_ctx(err, ctx, "training step failed: ");
    sg_tape_reset(ctx);
    return l;
}

/* A new model's context and tables for dictionary m->dict. */
static int model_tables(ft_model *m)
{
    const ft_config *c = &m->cfg;
    const int64_t W = m->dict.words.size, C = m->dict.labels.size, D = c->dim;
    sg_ctx_opts co = {.threads = c->threads, .seed = c->seed ? c->seed : 42};
    m->ctx = sg_ctx_new(&co);
    if (!m->ctx) return -1;
    const int64_t n_out = c->loss == FT_LOSS_HS ? C - 1 : C;
    if (c->loss == FT_LOSS_HS && tc_huffman_build(&m->tree, m->dict.labels.counts, C)) return -1;
    m->input = sg_tensor_new(m->ctx, SG_F32, 2, (int64_t[]){W + m->dict.bucket, D});
    m->output = sg_tensor_new(m->ctx, SG_F32, 2, (int64_t[]){n_out, D});
    if (!m->input || !m->output) return -1;
    sg_tensor *words = sg_tensor_new(m->ctx, SG_F32, 2, (int64_t[]){W, D});
    if (!words || sg_tensor_fill_uniform(words, -1.0 / (double)D, 1.0 / (double)D)) return -1;
    memcpy(sg_tensor_data(m->input), sg_tensor_data(words), (size_t)(W * D) * sizeof(float));
    sg_tensor_free(words);
    return 0;
}

/* The dictionary and the examples of cfg->input; the INFO lines of verbose > 0. */
static int read_input(const ft_config *cfg, ft_model *m, ft_examples *ex, ft_train_result *res, sg_model_error *err)
{
    if (ft_config_check(cfg, err) || ft_dict_build(&m->dict, cfg, err)) return -1;
    if (ft_read_examples(m, ex, res))
        return tc_fail(err, SG_ERR_NOMEM, "out of memory reading -input %s", cfg->input);
    res->examples = ex->row_off.n - 1;
    tc_info(&cfg->ev, 1, "Read %lld words, %lld labels, %lld examples", (long long)m->dict.words.train_words,
            (long long)m->dict.labels.size, (long long)res->examples);
    if (res->no_label || res->no_word)
        tc_info(&cfg->ev, 1, "skipped %lld lines without a known label and %lld with labels only "
                             "(no word)", (long long)res->no_label, (long long)res->no_word);
    if (res->examples == 0)
        return tc_fail(err, SG_ERR_ARG, "-input %s has no line with both a label and a word: nothing to learn",
                       cfg->input);
    return 0;
}

/* The tables, the noise table (ns) and the optimizer with its linear decay. */
static int classifier_setup(ft_model *m, const ft_train_result *res, tc_noise *noise, sg_optim **opt,
                            sg_model_error *err)
{
    const ft_config *cfg = &m->cfg;
    if (model_tables(m))
        return tc_fail(err, SG_ERR_NOMEM, "cannot make the model: %s", m->ctx ? sg_ctx_message(m->ctx) : "out of memory");
    if (cfg->loss == FT_LOSS_NS && tc_noise_init(noise, m->dict.labels.counts, m->dict.labels.size, 0.5))
        return tc_fail(err, SG_ERR_NOMEM, "out of memory");
    sg_sgd_opts so = SG_SGD_OPTS_DEFAULT;
    so.lr = cfg->lr;
    *opt = sg_optim_sgd(m->ctx, &so);
    const int64_t per_epoch = (res->examples + cfg->batch - 1) / cfg->batch;
    const sg_lr_schedule decay = {.kind = SG_LR_LINEAR, .steps = per_epoch * cfg->epoch, .end_factor = 0};
    if (!*opt || sg_tensor_requires_grad(m->input, 1) == NULL || sg_tensor_requires_grad(m->output, 1) == NULL ||
        sg_optim_add_param(*opt, m->input) || sg_optim_add_param(*opt, m->output) ||
        sg_optim_set_schedule(*opt, &decay) || sg_optim_set_check_finite(*opt, 1))
        return tc_fail_ctx(err, m->ctx, "");
    return 0;
}

/* The epochs over the examples, batch by batch in file order. 0, SG_STOPPED, or -1. */
static int classifier_epochs(ft_model *m, sg_optim *opt, const ft_examples *ex, const tc_noise *noise,
                             ft_train_result *res, sg_model_error *err)
{
    const ft_config *cfg = &m->cfg;
    tc_rng rng = {cfg->seed};
    const double t0 = tc_now();
    const int64_t total_words = ex->words * cfg->epoch;
    int64_t done_words = 0;
    double epoch_loss = 0;
    bool stop = false;
    for (int ep = 0; ep < cfg->epoch && !stop; ep++) {
        epoch_loss = 0;
        for (int64_t first = 0; first < res->examples && !stop; first += cfg->batch) {
            const int64_t n = res->examples - first < cfg->batch ? res->examples - first : cfg->batch;
            const double lr = sg_optim_lr(opt);
            const double l = ft_step(m, opt, ex, first, n, &rng, noise, err);
            if (!isfinite(l))
                return isnan(l) ? -1 : tc_fail(err, SG_ERR_VALUE, "the loss diverged (lower -lr)");
            epoch_loss += l;
            res->steps++;
            for (int64_t i = first; i < first + n; i++) done_words += ex->n_words.v[i];
            const sg_event e = {.kind = SG_EVENT_STEP, .epoch = ep + 1, .epochs = cfg->epoch, .words = done_words,
                                .words_done = done_words, .total_words = total_words, .steps = res->steps,
                                .examples = n, .loss = l, .lr = lr, .elapsed_s = tc_now() - t0,
                                .threads = sg_ctx_threads(m->ctx)};
            stop = tc_emit(&cfg->ev, &e) != 0;
        }
    }
    res->seconds = tc_now() - t0;
    res->final_loss = epoch_loss / (double)res->examples;
    const sg_event e = {.kind = SG_EVENT_END, .epoch = cfg->epoch, .epochs = cfg->epoch, .words_done = total_words,
                        .total_words = total_words, .steps = res->steps, .loss = res->final_loss,
                        .elapsed_s = res->seconds, .threads = sg_ctx_threads(m->ctx)};
    tc_emit(&cfg->ev, &e);
    return stop ? SG_STOPPED : 0;
}

int ft_train(const ft_config *cfg, ft_model *m, ft_train_result *res, sg_model_error *err)
{
    memset(m, 0, sizeof *m);
    memset(res, 0, sizeof *res);
    m->cfg = *cfg;
    ft_examples ex = {0};
    tc_noise noise = {0};
    sg_optim *opt = NULL;
    int rc = read_input(cfg, m, &ex, res, err) || classifier_setup(m, res, &noise, &opt, err)
                 ? -1
                 : classifier_epochs(m, opt, &ex, &noise, res, err);
    sg_optim_free(opt);
    tc_noise_free(&noise);
    ft_examples_free(&ex);
    if (rc && rc != SG_STOPPED) ft_model_free(m);
    return rc;
}
