/* A run's state before its first step: the trainer's sampling tables, hit counts, Huffman
 * tree and two sets of index tensors; the model's tables on a new context (a continued
 * run, cfg->more: the trained tables on theirs); the optimizer with its learning-rate
 * schedule. Plain SGD keeps no state between steps, so a continued run's new optimizer
 * trains on exactly as the earlier run's would have.
 *
 * Initial vectors: input rows uniform in [-1/D, 1/D) as fastText and gensim 4 draw them
 * (word2vec.c draws in [-0.5/D, 0.5/D); on the Brown corpus the wider start scores about
 * 0.5 points higher on the analogy test at the same learning rate), output rows zero.
 *
 * Memory: the two (V,D) tables, the vocabulary, the sampling tables (O(V)) and two
 * batches' examples and one tape: O(batch * (negative + 1) * D) floats.
 */
#include "w2v.h"

#include <stdlib.h>
#include <string.h>

/* The longest Huffman path (0 without -hs): path entries per example, at most. */
static int64_t longest_path(const w2v_trainer *t)
{
    int64_t longest = 0;
    for (int64_t w = 0; t->cfg->hs && w < t->v->size; w++)
        if (t->tree.offsets[w + 1] - t->tree.offsets[w] > longest)
            longest = t->tree.offsets[w + 1] - t->tree.offsets[w];
    return longest;
}

/* The two sets of index tensors a batch is drawn into, on m's context. */
static int index_tensors(w2v_trainer *t, w2v_model *m, sg_model_error *e)
{
    const w2v_config *cfg = t->cfg;
    const int64_t longest = longest_path(t), T = cfg->negative + 1;
    if (longest > W2V_MAX_STEP_SLOTS / t->cap)
        return tc_fail(e, SG_ERR_ARG, "-batch %lld with Huffman paths of up to %lld nodes gives more than %lld "
                                      "path entries per step: lower -batch",
                       (long long)t->cap, (long long)longest, (long long)W2V_MAX_STEP_SLOTS);
    const int64_t s_input[1] = {t->cap * (cfg->cbow ? 2 * cfg->window : 1)}, s_offset[1] = {t->cap},
                  s_target[2] = {t->cap, T}, s_node[1] = {t->cap * longest};
    for (int k = 0; k < 2; k++) {
        t->input_t[k] = sg_tensor_new(m->ctx, SG_I64, 1, s_input);
        t->offset_t[k] = sg_tensor_new(m->ctx, SG_I64, 1, s_offset);
        t->target_t[k] = sg_tensor_new(m->ctx, SG_I64, 2, s_target);
        if (cfg->hs) {
            t->node_t[k] = sg_tensor_new(m->ctx, SG_I64, 1, s_node);
            t->code_t[k] = sg_tensor_new(m->ctx, SG_I32, 1, s_node);
            t->path_t[k] = sg_tensor_new(m->ctx, SG_I64, 1, s_offset);
        }
        if (!t->input_t[k] || !t->offset_t[k] || !t->target_t[k] ||
            (cfg->hs && (!t->node_t[k] || !t->code_t[k] || !t->path_t[k])))
            return tc_fail_ctx(e, m->ctx, "");
    }
    if (cfg->hs) {
        t->node = sg_tensor_data(t->node_t[0]);
        t->code = sg_tensor_data(t->code_t[0]);
        t->path = sg_tensor_data(t->path_t[0]);
    }
    t->input = sg_tensor_data(t->input_t[0]);
    t->offset = sg_tensor_data(t->offset_t[0]);
    t->target = sg_tensor_data(t->target_t[0]);
    return 0;
}

int w2v_trainer_setup(w2v_trainer *t, const w2v_config *cfg, const tc_vocab *v, w2v_model *m, sg_model_error *e)
{
    const int64_t V = v->size;
    const double alpha = w2v_alpha(cfg);
    memset(t, 0, sizeof *t);
    t->cfg = cfg;
    t->v = v;
    t->rng.s = cfg->seed;
    t->cap = cfg->batch;
    t->row_cap = tc_row_hit_cap(TC_ROW_STEP_BOUND, alpha);
    t->in_row_cap = cfg->cbow ? tc_row_hit_cap(TC_CBOW_INPUT_STEP_BOUND, alpha) : t->row_cap;
    t->node_cap = tc_row_hit_cap(W2V_HS_NODE_STEP_BOUND, alpha);
    if (!cfg->cbow && t->cap < 2 * cfg->window) t->cap = 2 * cfg->window;
    t->keep = tc_keep_table(v, cfg->sample);
    t->hits_in = calloc((size_t)V, sizeof *t->hits_in);
    t->hits_out = calloc((size_t)V, sizeof *t->hits_out);
    t->hits_node = cfg->hs ? calloc((size_t)V, sizeof *t->hits_node) : NULL;
    t->src_buf = cfg->source ? malloc(W2V_SOURCE_CHUNK * sizeof *t->src_buf) : NULL;
    sg_ctx_opts co = {.threads = cfg->threads, .nondeterministic = cfg->hogwild, .seed = cfg->seed ? cfg->seed : 42};
    if (cfg->more) sg_ctx_set_threads(m->ctx, cfg->threads); /* the trained tables' context */
    else m->ctx = sg_ctx_new(&co);
    if (!t->keep || !t->hits_in || !t->hits_out || (cfg->hs && !t->hits_node) || (cfg->source && !t->src_buf) ||
        !m->ctx || tc_noise_init(&t->noise, v->counts, V, 0.75) || (cfg->hs && tc_huffman_build(&t->tree, v->counts, V)))
        return tc_fail(e, SG_ERR_NOMEM, "out of memory");
    t->prefetch_draws = cfg->negative > 0 && V * (int64_t)sizeof *t->noise.col > cfg->prefetch_min;
    return index_tensors(t, m, e);
}

/* New tables for a first run: input rows uniform in [-1/D, 1/D), the others zero. */
static int new_tables(const w2v_trainer *t, w2v_model *m)
{
    const w2v_config *cfg = t->cfg;
    const int64_t V = t->v->size, D = cfg->size;
    int64_t shape[2] = {V, D}, s_hs[2] = {V - 1, D};
    m->in = sg_tensor_new(m->ctx, SG_F32, 2, shape);
    if (cfg->negative > 0) m->out = sg_tensor_new(m->ctx, SG_F32, 2, shape);
    if (cfg->hs) m->hs = sg_tensor_new(m->ctx, SG_F32, 2, s_hs);
    if (!m->in || (cfg->negative > 0 && !m->out) || (cfg->hs && !m->hs)) return -1;
    return sg_tensor_fill_uniform(m->in, -1.0 / (double)D, 1.0 / (double)D) ? -1 : 0;
}

/* Whether m's tables are those cfg and v train (a continued run's, or a loaded model's). */
static bool tables_fit(const w2v_trainer *t, const w2v_model *m)
{
    const w2v_config *cfg = t->cfg;
    const int64_t V = t->v->size, D = cfg->size;
    const int64_t *si = m->in ? sg_tensor_shape(m->in) : NULL, *so = m->out ? sg_tensor_shape(m->out) : NULL,
                  *sh = m->hs ? sg_tensor_shape(m->hs) : NULL;
    return si && si[0] == V && si[1] == D && (cfg->negative > 0) == (so != NULL) && (!so || (so[0] == V && so[1] == D)) &&
           (cfg->hs != 0) == (sh != NULL) && (!sh || (sh[0] == V - 1 && sh[1] == D));
}

int w2v_model_setup(w2v_trainer *t, w2v_model *m, sg_optim **opt, w2v_lr_record *lr, sg_model_error *e)
{
    const w2v_config *cfg = t->cfg;
    if (cfg->more && !tables_fit(t, m))
        return tc_fail(e, SG_ERR_STATE, "the model's tables do not fit its options and vocabulary");
    if (!cfg->more && new_tables(t, m)) return tc_fail_ctx(e, m->ctx, "");
    sg_sgd_opts so = SG_SGD_OPTS_DEFAULT;
    so.lr = w2v_alpha(cfg);
    *opt = sg_optim_sgd(m->ctx, &so);
    const sg_lr_schedule decay = {.kind = SG_LR_CALLBACK, .fn = w2v_lr_schedule, .ud = lr};
    sg_tensor *tables[3];
    w2v_model_tables(m, tables);
    int rc = !*opt;
    for (int k = 0; k < 3 && !rc; k++)
        rc = tables[k] && (!sg_tensor_requires_grad(tables[k], 1) || sg_optim_add_param(*opt, tables[k]));
    /* a non-finite gradient stops the run, tables intact */
    if (rc || sg_optim_set_schedule(*opt, &decay) || sg_optim_set_check_finite(*opt, 1))
        return tc_fail_ctx(e, m->ctx, "");
    return 0;
}

/* The run's index tensors back to the context (the tables stay). */
void w2v_trainer_free_tensors(w2v_trainer *t)
{
    sg_tensor **sets[6] = {t->input_t, t->offset_t, t->target_t, t->node_t, t->code_t, t->path_t};
    for (int s = 0; s < 6; s++)
        for (int k = 0; k < 2; k++) {
            sg_tensor_free(sets[s][k]);
            sets[s][k] = NULL;
        }
}

void w2v_trainer_free(w2v_trainer *t)
{
    tc_reader_close(&t->rd);
    tc_noise_free(&t->noise);
    free(t->keep);
    tc_codes_free(&t->rec);
    free(t->hits_in);
    free(t->hits_out);
    free(t->hits_node);
    free(t->src_buf);
    tc_huffman_free(&t->tree);
}
