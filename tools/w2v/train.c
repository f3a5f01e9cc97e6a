/* Training loop of sgrad-w2v: the corpus is streamed in the first epoch (and in every
 * epoch when its token ids are not kept: next_token), cut into batches of examples, and
 * each batch is one sgrad step (ops on the tape, backward, optimizer).
 *
 * Losses: negative sampling (sg_sgns_loss, -negative > 0), hierarchical softmax
 * (sg_hs_loss over the centre word's path in the Huffman tree of the counts, -hs 1), or
 * the sum of both, as word2vec.c adds both updates when both are on. The tree is
 * word2vec.c's (tc_huffman), codes included; sg_hs_loss scores a node of code 1 as
 * fastText does, -log sigmoid(s), where word2vec.c takes -log sigmoid(-s). With the
 * inner-node table starting at zero (word2vec.c's syn1) that only negates the table, in
 * exact arithmetic at every step, and leaves the word vectors as they are.
 *
 * An example is (input, targets): skip-gram takes one context word as input and the
 * centre word as the true target, as word2vec.c does; CBOW takes the mean of the context
 * words' vectors and, as word2vec.c, gives each context row the undivided error of the
 * mean (SG_BAG_GRAD_WORD2VEC), not the gradient of the mean. Each example carries `negative` noise words drawn from unigram^0.75
 * (redrawn when equal to the true target). Subsampled words are dropped before windows
 * are formed, and each centre word's window is shrunk to a uniform 1..window.
 *
 * Determinism: one random stream (seeded by -seed) drives subsampling, window shrinking
 * and negatives in corpus order, and the batches do not depend on the thread count, so
 * with a deterministic context the vectors are bitwise identical for any -threads. With
 * -hogwild 1 the context is nondeterministic and the fused update runs Hogwild-style.
 *
 * Initial vectors: input rows uniform in [-1/D, 1/D) as fastText and gensim 4 draw them
 * (word2vec.c draws in [-0.5/D, 0.5/D); on the Brown corpus the wider start scores about
 * 0.5 points higher on the analogy test at the same learning rate), output rows zero.
 *
 * One SGD optimizer updates both tables: the output table inside sg_sgns_loss's backward
 * (fused), the input table from its sparse gradient at sg_optim_step (the graph engine:
 * both from gradients). Its learning rate is word2vec.c's linear decay by words read, as
 * a callback schedule: before each step the trainer records the words read before that
 * step's batch was drawn, and the callback maps them to alpha * (1 - words / (total + 1)),
 * at least alpha * 1e-4.
 *
 * Index tensors: the batch is drawn straight into int64 tensors (what the ops' backwards
 * use as COO indices without a copy). There are two sets, used in turn, since the next
 * batch is drawn while the current step's backward still reads its indices.
 *
 * Several processes (cfg->par, under mpirun; w2v.h's w2v_parallel): each rank reads only
 * its share of the corpus lines in every epoch, the learning rate and progress count its
 * words times the rank count (the shares are about equal in bytes), and every
 * cfg->sync_every steps, then at each epoch's end until every rank's share is done, the
 * ranks merge their tables through cfg->par->sync, and with 3+ ranks their hot rows in
 * between (plan_hot_merges, merge_due). -replicas runs the same with its replicas as
 * the ranks (replicas.c). Without cfg->par none of this runs.
 *
 * Memory: the two (V,D) tables, the vocabulary, the sampling tables (O(V)) and two
 * batches' examples and one tape: O(batch * (negative + 1) * D) floats.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "w2v.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void w2v_config_default(w2v_config *c)
{
    memset(c, 0, sizeof *c);
    c->size = 100;
    c->window = 5;
    c->negative = 5;
    c->iter = 5;
    c->threads = 0; /* all available cores */
    c->cbow = 1;     /* word2vec.c's default */
    c->min_count = 5;
    c->sample = 1e-3;
    c->alpha = -1; /* 0.025 for skip-gram, 0.05 for CBOW */
    c->batch = 8192;
    c->seed = 1;
    c->debug = 1;
    c->engine = W2V_ENGINE_FUSED;
    c->sync_every = 64; /* measured on Brown: tools/w2v/README.md "Under mpirun" */
    c->token_cache = W2V_TOKEN_CACHE_MAX;
    c->replicas = 1;
    c->prefetch_min = TC_NOISE_PREFETCH_MIN;
}

bool w2v_replays_corpus(const w2v_config *cfg)
{
    /* mpirun's ranks (par without replicas) record their own share's first epoch: the
     * whole corpus's record would take every rank's memory */
    return (!cfg->par || cfg->replicas > 1) && !cfg->checkpoint && !cfg->resume && !cfg->read_vocab;
}

void w2v_model_free(w2v_model *m)
{
    if (!m) return;
    sg_ctx_free(m->ctx);
    memset(m, 0, sizeof *m);
}

typedef struct {
    const w2v_config *cfg;
    const tc_vocab *v;
    uint64_t *keep;
    tc_noise noise;
    /* The noise table is past cfg->prefetch_min bytes: the drawing's lookups by word
     * (noise columns, row hit counts, subsampling thresholds) leave the caches, and are
     * prefetched ahead of their use */
    bool prefetch_draws;
    tc_rng rng;
    tc_reader rd;
    int64_t share_end; /* with cfg->par, the epoch ends at this offset (its share's end) */
    bool epoch_done;
    int64_t tokens; /* corpus tokens read, all epochs */
    /* The share as token codes (tc_codes: a word's id, TC_CODE_OOV or TC_CODE_EOL) that
     * the epochs replay instead of reading the corpus: the same tokens in the same order,
     * so the same draws. Either the vocabulary pass's record of the share (cfg->corpus_codes,
     * every epoch), or `rec`, this trainer's record of its first
     * epoch, for the later ones. rec.code NULL: not kept (checkpoints need the reader's
     * byte offsets, or the share had more than cfg->token_cache tokens). */
    tc_codes rec;
    const tc_codes *replay; /* NULL: read the corpus */
    int64_t at_tok;
    /* the current sentence (kept words only) */
    int32_t sen[W2V_MAX_SENTENCE];
    int len, pos;
    /* one batch, drawn into index set `set` (persistent int64 tensors of capacity cap) */
    int64_t cap;     /* examples */
    int64_t n;       /* examples in the batch */
    int set;
    sg_tensor *input_t[2], *offset_t[2], *target_t[2];
    int64_t *input;  /* skip-gram: (n); CBOW: the bags' words, flat */
    int64_t n_input;
    int64_t *offset; /* CBOW: start of each bag in input (n) */
    int64_t *target; /* (n, 1 + negative) */
    /* -hs: each example's path to the root (the centre word's in tree) */
    tc_huffman tree;
    sg_tensor *node_t[2], *code_t[2], *path_t[2];
    int64_t *node;   /* inner nodes of all paths, flat (n_node) */
    int32_t *code;   /* their codes (n_node) */
    int64_t *path;   /* start of each example's path in node (n) */
    int64_t n_node;
    /* times each row of the input / output / inner-node table occurs in the batch (0
     * between batches); 16 bits hold it (a batch ends within one centre word's examples of
     * a row reaching its cap, at most TC_MAX_ROW_HITS) and halve what a large vocabulary's
     * counts take in cache */
    uint16_t *hits_in, *hits_out, *hits_node;
    int32_t row_cap;    /* tc_row_hit_cap of the starting learning rate */
    int32_t in_row_cap; /* the same for the input table (CBOW's context rows: lower) */
    int32_t node_cap;   /* the same for the inner nodes (bounds the batch: the root) */
    uint8_t *dirty[3];  /* cfg->par's (w2v_parallel), or NULL */
} w2v_trainer;

/* The learning-rate schedule's record: the words read before step `step`'s batch. */
typedef struct {
    int64_t step, words, total;
} w2v_lr_record;

/* word2vec.c's linear decay: alpha (1 - words / (total + 1)), at least alpha * 1e-4. */
static double w2v_lr_decay(double alpha, int64_t words, int64_t total)
{
    double lr = alpha * (1 - (double)words / (double)(total + 1));
    return lr < alpha * 1e-4 ? alpha * 1e-4 : lr;
}

/* The callback schedule: the decay at the recorded words for the recorded step (the
 * optimizer only asks for its coming step); NaN, which the optimizer refuses, for any
 * other step. */
static double w2v_lr_schedule(void *ud, int64_t step, double base_lr)
{
    const w2v_lr_record *r = ud;
    return step == r->step ? w2v_lr_decay(base_lr, r->words, r->total) : NAN;
}

/* Tokens ahead at which a replay prefetches the subsampling threshold it will read. */
#define W2V_KEEP_AHEAD 16

/* The next token of the share: its code (an id, TC_CODE_OOV or TC_CODE_EOL), or false at
 * the share's end. Replays a record when there is one; else reads and looks up the
 * corpus, recording while a record is kept. */
static bool next_token(w2v_trainer *t, int32_t *code)
{
    if (t->replay) {
        if (t->at_tok == t->replay->n) return false;
        if (t->prefetch_draws && t->at_tok + W2V_KEEP_AHEAD < t->replay->n) {
            const int32_t ahead = t->replay->code[t->at_tok + W2V_KEEP_AHEAD];
            if (ahead >= 0) tc_prefetch(&t->keep[ahead]);
        }
        *code = t->replay->code[t->at_tok++];
        return true;
    }
    char word[TC_MAX_WORD];
    tc_tok k = t->cfg->par && tc_reader_offset(&t->rd) >= t->share_end ? TC_TOK_EOF
                                                                             : tc_reader_next(&t->rd, word);
    if (k == TC_TOK_EOF) {
        if (t->rec.code) t->replay = &t->rec;
        return false;
    }
    *code = k == TC_TOK_EOL ? TC_CODE_EOL : (int32_t)tc_vocab_find(t->v, word); /* -1: OOV */
    tc_codes_push(&t->rec, *code);
    return true;
}

/* Reads the next sentence: kept in-vocabulary words, at most W2V_MAX_SENTENCE. */
static void next_sentence(w2v_trainer *t)
{
    t->len = t->pos = 0;
    int32_t id;
    while (!t->epoch_done) {
        if (!next_token(t, &id)) {
            t->epoch_done = true;
            break;
        }
        if (id == TC_CODE_EOL) {
            if (t->len > 0) break;
            continue;
        }
        t->tokens++;
        if (id < 0) continue;
        if ((tc_rng_next(&t->rng) & 0xffffffffu) >= t->keep[id]) continue;
        t->sen[t->len++] = id;
        if (t->len == W2V_MAX_SENTENCE) break;
    }
}

/* The trainer's part of a position: where the next batch will be drawn from. */
static void take_position(const w2v_trainer *t, int epoch, w2v_position *p)
{
    p->epoch = epoch;
    p->offset = tc_reader_offset(&t->rd);
    p->epoch_done = t->epoch_done;
    p->rng = t->rng.s;
    p->tokens = t->tokens;
    p->len = t->len;
    p->pos = t->pos;
    memcpy(p->sentence, t->sen, (size_t)t->len * sizeof *t->sen);
}

/* The position at the start of epoch `epoch` (the end of the one before). */
static void epoch_start_position(const w2v_trainer *t, int epoch, w2v_position *p)
{
    p->epoch = epoch;
    p->offset = 0;
    p->epoch_done = false;
    p->rng = t->rng.s;
    p->tokens = t->tokens;
    p->len = p->pos = 0;
}

/* The counters of a position, taken when its checkpoint is saved (after the step). */
static void set_position_counters(w2v_position *p, const w2v_result *res, double start_loss,
                                  double epoch_loss, int64_t epoch_examples)
{
    p->steps = res->steps;
    p->examples = res->examples;
    p->start_loss = start_loss;
    p->epoch_loss = epoch_loss;
    p->epoch_examples = epoch_examples;
}

/* The window of centre p, given its width draw b: sentence positions lo..hi. */
static inline void window_bounds(const w2v_trainer *t, int p, int b, int *lo, int *hi)
{
    const int W = t->cfg->window;
    *lo = p - W + b < 0 ? 0 : p - W + b;
    *hi = p + W - b >= t->len ? t->len - 1 : p + W - b;
}

/* The negatives a centre with window lo..hi draws, not counting redraws of the centre:
 * one set per context (skip-gram) or one for the bag (CBOW); none without a context. */
static inline int centre_draws(const w2v_trainer *t, int lo, int hi)
{
    const int K = t->cfg->negative;
    return hi == lo ? 0 : t->cfg->cbow ? K : (hi - lo) * K;
}

/* Prefetches the noise-table columns that centre p's negatives will read, given the
 * stream r positioned at p's window draw (a copy: nothing is drawn). One column more than
 * its draws, for a redraw of the centre. Prefetches change no result. */
static void prefetch_centre(const w2v_trainer *t, tc_rng r, int p)
{
    const int b = (int)tc_rng_below(&r, (uint32_t)t->cfg->window);
    int lo, hi;
    window_bounds(t, p, b, &lo, &hi);
    tc_noise_prefetch(&t->noise, &r, centre_draws(t, lo, hi) + 1);
}

static void draw_negatives(w2v_trainer *t, int64_t *row, int64_t positive)
{
    for (int k = 1; k <= t->cfg->negative; k++) {
        int32_t w = tc_noise_draw(&t->noise, &t->rng);
        for (int tries = 0; w == positive && tries < 8; tries++)
            w = tc_noise_draw(&t->noise, &t->rng);
        row[k] = w;
        if (t->prefetch_draws) tc_prefetch_w(&t->hits_out[w]); /* add_example counts it */
    }
}

/* Path entries over the corpus: sum of count x path length (for -debug 2). */
static int64_t tree_entries(const tc_huffman *tree, const int64_t *counts)
{
    int64_t sum = 0;
    for (int64_t w = 0; w < tree->n; w++) sum += counts[w] * (tree->offsets[w + 1] - tree->offsets[w]);
    return sum;
}

/* A row's count stays below 2^16: the cap, then at most one centre word's examples (2
 * window) with all their targets (1 + negative) on that row. */
_Static_assert(TC_MAX_ROW_HITS + 2 * W2V_MAX_WINDOW * (1 + W2V_MAX_NEGATIVE) < UINT16_MAX,
               "row hit counts need more than 16 bits");

/* Counts one more occurrence of each row in rows[0..n); true once one reaches cap. */
static bool hit(uint16_t *hits, const int64_t *rows, int64_t n, int32_t cap)
{
    bool full = false;
    for (int64_t i = 0; i < n; i++) full |= ++hits[rows[i]] >= cap;
    return full;
}

/* The rows and true target of example e (the next one to be added, in order) in either
 * table: input rows[0..n_rows), targets in t->target's row e; with -hs the target's path
 * is appended. True once a row reaches its table's hit cap. */
static bool add_example(w2v_trainer *t, int64_t e, const int64_t *rows, int64_t n_rows)
{
    const int T = t->cfg->negative + 1;
    const int64_t *target = t->target + e * T;
    bool full = hit(t->hits_in, rows, n_rows, t->in_row_cap);
    if (T > 1) full |= hit(t->hits_out, target, T, t->row_cap);
    if (t->cfg->hs) {
        const int64_t lo = t->tree.offsets[target[0]], hi = t->tree.offsets[target[0] + 1];
        t->path[e] = t->n_node;
        for (int64_t k = lo; k < hi; k++) {
            t->node[t->n_node] = t->tree.nodes[k];
            t->code[t->n_node++] = (int32_t)t->tree.codes[k];
        }
        full |= hit(t->hits_node, t->tree.nodes + lo, hi - lo, t->node_cap);
    }
    return full;
}

/* Fills the batch from the corpus; n == 0 means the epoch is over. A batch ends when it
 * holds `cap` examples or when, after a centre word's examples, some row of any table
 * reaches its hit cap (row_cap, in_row_cap, node_cap): a step sums every update of a row
 * computed at the same point, and without the cap a very frequent word (a common noise
 * word above all; with -hs the root, on every path) takes one large step where word2vec.c
 * takes many small self-correcting ones, which diverged with 8192-example batches on the
 * demo corpus. The batch goes into the index set
 * not used by the previous batch, whose step may still be running. */
static void fill_batch(w2v_trainer *t)
{
    const int W = t->cfg->window, T = t->cfg->negative + 1;
    const int64_t per_pos = t->cfg->cbow ? 1 : 2 * W;
    for (int64_t i = 0; i < t->n_input; i++) t->hits_in[t->input[i]] = 0;
    for (int64_t e = 0; T > 1 && e < t->n * T; e++) t->hits_out[t->target[e]] = 0;
    for (int64_t e = 0; e < t->n_node; e++) t->hits_node[t->node[e]] = 0;
    t->set ^= 1;
    t->input = sg_tensor_data(t->input_t[t->set]);
    t->offset = sg_tensor_data(t->offset_t[t->set]);
    t->target = sg_tensor_data(t->target_t[t->set]);
    if (t->cfg->hs) {
        t->node = sg_tensor_data(t->node_t[t->set]);
        t->code = sg_tensor_data(t->code_t[t->set]);
        t->path = sg_tensor_data(t->path_t[t->set]);
    }
    t->n = t->n_input = t->n_node = 0;
    bool full = false;
    while (!full && t->n + per_pos <= t->cap) {
        if (t->pos >= t->len) {
            next_sentence(t);
            if (t->len == 0) return;
        }
        const int p = t->pos++;
        /* a sentence's first centre: its own columns (later ones' come one centre ahead) */
        if (t->prefetch_draws && p == 0) prefetch_centre(t, t->rng, p);
        const int64_t centre = t->sen[p];
        const int b = (int)tc_rng_below(&t->rng, (uint32_t)W);
        int lo, hi;
        window_bounds(t, p, b, &lo, &hi);
        if (t->prefetch_draws && p + 1 < t->len) {
            /* one centre ahead: the next centre's window draw and negatives follow this
             * centre's draws in the stream (unless a draw of the centre is drawn again),
             * so their columns arrive while this centre's examples are made */
            tc_rng next = t->rng;
            tc_rng_skip(&next, (uint64_t)centre_draws(t, lo, hi));
            prefetch_centre(t, next, p + 1);
        }
        if (t->cfg->cbow) {
            int64_t start = t->n_input;
            for (int c = lo; c <= hi; c++)
                if (c != p) t->input[t->n_input++] = t->sen[c];
            if (t->n_input == start) continue;
            t->offset[t->n] = start;
            int64_t *row = t->target + t->n * T;
            row[0] = centre;
            draw_negatives(t, row, centre);
            full |= add_example(t, t->n, t->input + start, t->n_input - start);
            t->n++;
        } else {
            /* every context's draws, then their counts: the counts' lines, prefetched
             * as the draws come, arrive meanwhile (the batch ends after a centre, so the
             * order of its counts changes nothing) */
            const int64_t first = t->n;
            for (int c = lo; c <= hi; c++) {
                if (c == p) continue;
                t->input[t->n] = t->sen[c];
                int64_t *row = t->target + t->n * T;
                row[0] = centre;
                draw_negatives(t, row, centre);
                t->n++;
            }
            for (int64_t e = first; e < t->n; e++) full |= add_example(t, e, t->input + e, 1);
            t->n_input = t->n;
        }
    }
}

/* The forward half of a step on the current batch: the loss tensor (on the tape), or NULL
 * with a message printed. The ops take the batch's index tensors as views (no copy). */
static sg_tensor *step_forward(w2v_trainer *t, w2v_model *m, sg_optim *opt)
{
    sg_ctx *ctx = m->ctx;
    const int64_t n = t->n, T = t->cfg->negative + 1;
    /* the rows this step changes, for the next merge (w2v_parallel's dirty) */
    for (int64_t i = 0; t->dirty[0] && i < t->n_input; i++) t->dirty[0][t->input[i]] = 1;
    for (int64_t e = 0; t->dirty[1] && T > 1 && e < n * T; e++) t->dirty[1][t->target[e]] = 1;
    for (int64_t e = 0; t->dirty[2] && e < t->n_node; e++) t->dirty[2][t->node[e]] = 1;
    sg_tape_reset(ctx);
    sg_tensor *input = sg_slice(t->input_t[t->set], 0, t->n_input);
    sg_tensor *target = sg_slice(t->target_t[t->set], 0, n);
    sg_tensor *h;
    if (t->cfg->cbow) {
        sg_embedding_bag_opts bo = SG_EMBEDDING_BAG_OPTS_DEFAULT;
        bo.mode = SG_BAG_MEAN;
        bo.grad = SG_BAG_GRAD_WORD2VEC; /* each context row gets the undivided error */
        h = sg_embedding_bag(m->in, input, sg_slice(t->offset_t[t->set], 0, n), &bo);
    } else {
        h = sg_embedding(m->in, input, NULL);
    }
    sg_tensor *loss = NULL;
    if (T == 1) {
        /* -negative 0: hierarchical softmax only (below) */
    } else if (t->cfg->engine == W2V_ENGINE_FUSED) {
        sg_sgns_opts so = {.fused = opt};
        loss = sg_sgns_loss(h, m->out, target, &so);
    } else {
        /* the same loss from general ops: rows of h repeated per target, dot products
         * with the targets' output rows, signs (+ for the true target), log-sigmoid */
        int64_t s_flat[1] = {n * T};
        sg_tensor *rep = sg_tensor_new_tmp(ctx, SG_I64, 1, s_flat);
        sg_tensor *sign = sg_tensor_new_tmp(ctx, SG_F32, 1, s_flat);
        if (rep && sign) {
            int64_t *r = sg_tensor_data(rep);
            float *sg = sg_tensor_f32(sign);
            for (int64_t e = 0; e < n * T; e++) {
                r[e] = e / T;
                sg[e] = e % T == 0 ? 1.0f : -1.0f;
            }
        }
        sg_tensor *hrep = sg_index_select(h, 0, rep);
        sg_tensor *u = sg_embedding(m->out, sg_reshape(target, 1, s_flat), NULL);
        sg_tensor *score = sg_mul(sg_rowdot(hrep, u), sign);
        loss = sg_scale(sg_sum(sg_log_sigmoid(score)), -1.0);
    }
    if (t->cfg->hs) { /* both engines: there is one hierarchical softmax op */
        sg_tensor *hs = sg_hs_loss(h, m->hs, sg_slice(t->node_t[t->set], 0, t->n_node),
                                   sg_slice(t->code_t[t->set], 0, t->n_node),
                                   sg_slice(t->path_t[t->set], 0, n));
        loss = T == 1 ? hs : sg_add(loss, hs);
    }
    if (!loss)
        fprintf(stderr, "sgrad-w2v: training step failed: %s (%s)\n",
                sg_status_string(sg_ctx_status(ctx)), sg_ctx_message(ctx));
    return loss;
}

/* The backward half: gradients, the fused update of the output table and the optimizer
 * step. Returns the context's status (SG_OK). It reads the current index set, never the
 * other one, so the next batch may be drawn meanwhile. */
static int step_backward(sg_ctx *ctx, sg_tensor *loss, sg_optim *opt)
{
    int rc = sg_backward(loss);
    if (!rc) rc = sg_optim_step(opt);
    return rc ? rc : sg_ctx_status(ctx);
}

int w2v_config_check(const w2v_config *cfg, FILE *err)
{
    const int64_t cap = cfg->batch > 2 * (int64_t)cfg->window ? cfg->batch : 2 * (int64_t)cfg->window;
    const int64_t slots = cfg->cbow ? cfg->batch * 2 * cfg->window : 0;
    const int64_t targets = cap * (cfg->negative + 1);
    if (cfg->batch < 1) {
        fprintf(err, "sgrad-w2v: -batch must be at least 1\n");
        return -1;
    }
    if (cfg->replicas > 1 && (cfg->hogwild || cfg->checkpoint || cfg->resume)) {
        fprintf(err, "sgrad-w2v: -replicas %d does not go with %s\n", cfg->replicas,
                cfg->hogwild ? "-hogwild 1" : "-checkpoint or -resume (train with -replicas 1 to checkpoint)");
        return -1;
    }
    if (cfg->window < 1 || cfg->window > W2V_MAX_WINDOW || cfg->negative < 0 ||
        cfg->negative > W2V_MAX_NEGATIVE) {
        fprintf(err, "sgrad-w2v: -window must be 1..%d and -negative 0..%d\n", W2V_MAX_WINDOW,
                W2V_MAX_NEGATIVE);
        return -1;
    }
    if (cfg->negative == 0 && !cfg->hs) {
        fprintf(err, "sgrad-w2v: -negative 0 without -hs 1 trains nothing: give -negative N "
                     "or -hs 1\n");
        return -1;
    }
    if (cfg->negative == 0 && cfg->save_context) {
        fprintf(err, "sgrad-w2v: -save-context writes negative sampling's output vectors, "
                     "which -negative 0 does not have\n");
        return -1;
    }
    if (slots > W2V_MAX_STEP_SLOTS) {
        fprintf(err, "sgrad-w2v: -batch %lld with -window %d gives %lld CBOW context slots "
                     "per step, more than %lld: lower -batch or -window\n",
                (long long)cfg->batch, cfg->window, (long long)slots, (long long)W2V_MAX_STEP_SLOTS);
        return -1;
    }
    if (targets > W2V_MAX_STEP_SLOTS) {
        fprintf(err, "sgrad-w2v: -batch %lld with -negative %d gives %lld targets per step, "
                     "more than %lld: lower -batch or -negative\n",
                (long long)cfg->batch, cfg->negative, (long long)targets,
                (long long)W2V_MAX_STEP_SLOTS);
        return -1;
    }
    return 0;
}

int w2v_vocab_check(const tc_vocab *v, FILE *err)
{
    if (v->size >= 2) return 0;
    fprintf(err, "sgrad-w2v: vocabulary has %lld words (raise the corpus or lower -min-count)\n",
            (long long)v->size);
    return -1;
}

int w2v_check_paths(const w2v_config *cfg, FILE *err)
{
    struct stat st;
    if (stat(cfg->train, &st) != 0) {
        fprintf(err, "sgrad-w2v: cannot read %s: %s\n", cfg->train, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(err, "sgrad-w2v: -train %s is not a regular file; the corpus is read once per "
                     "epoch, which a pipe or stdin cannot be: save it to a file first\n", cfg->train);
        return -1;
    }
    if (!cfg->output || !*cfg->output) {
        fprintf(err, "sgrad-w2v: -output FILE is required for training (see -help)\n");
        return -1;
    }
    /* the inputs first: an output naming one of them would destroy it */
    const char *flags[8] = {"-train", "-read-vocab", "-resume", "-output", "-save-context", "-checkpoint",
                            "-log", "-save-vocab"};
    const char *paths[8] = {cfg->train, cfg->read_vocab, cfg->resume, cfg->output, cfg->save_context,
                            cfg->checkpoint, cfg->log, cfg->save_vocab};
    enum { FIRST_OUTPUT = 3, RESUME = 2, CHECKPOINT = 5, LOG = 6 };
    tc_path_id ids[8] = {{0}};
    int rc = 0;
    for (int i = 0; i < 8 && !rc; i++) {
        if (!paths[i]) continue;
        rc = -1;
        if (i > 0 && i < FIRST_OUTPUT) { /* -read-vocab, -resume (-train is checked above) */
            const char *why = stat(paths[i], &st) != 0  ? strerror(errno)
                              : !S_ISREG(st.st_mode)    ? "not a regular file"
                              : access(paths[i], R_OK)  ? strerror(errno)
                                                        : NULL;
            if (why) {
                fprintf(err, "sgrad-w2v: cannot read %s %s: %s\n", flags[i], paths[i], why);
                break;
            }
        } else if (i >= FIRST_OUTPUT) {
            if (!*paths[i]) {
                fprintf(err, "sgrad-w2v: %s needs a file name\n", flags[i]);
                break;
            }
            /* the log is appended to in place; the others are replaced by rename */
            if (tc_check_output("sgrad-w2v", flags[i], paths[i], i == LOG ? TC_OUT_DIRECT : TC_OUT_ATOMIC, err))
                break;
        }
        if (tc_path_identify(paths[i], &ids[i])) {
            fprintf(err, "sgrad-w2v: cannot read the directory of %s %s: %s\n", flags[i], paths[i],
                    strerror(errno));
            break;
        }
        rc = 0;
        /* -checkpoint may be the -resume file: a resumed run keeps saving to it */
        for (int k = 0; k < i && i >= FIRST_OUTPUT && !rc; k++)
            if (paths[k] && !(k == RESUME && i == CHECKPOINT) && tc_path_same(&ids[k], &ids[i])) {
                fprintf(err, "sgrad-w2v: %s %s and %s %s are the same file\n", flags[k], paths[k], flags[i],
                        paths[i]);
                rc = -1;
            }
    }
    for (int i = 0; i < 8; i++) free(ids[i].target);
    return rc;
}

/* The offset of the first line starting at or after byte `at` of f (size bytes). */
static int64_t line_start(FILE *f, int64_t at, int64_t size)
{
    if (at <= 0) return 0;
    if (at >= size || fseeko(f, (off_t)(at - 1), SEEK_SET)) return size;
    int c;
    while ((c = getc(f)) != EOF && c != '\n') at++;
    return c == EOF ? size : at;
}

/* One thread or all, step by step. In deterministic mode a step gives the same bits on
 * any thread count, so with 2+ threads the trainer runs a step on one thread whenever
 * that is faster: with another busy process on the cores, every step's barriers wait
 * for a descheduled thread (Brown, 2 threads beside one busy process: 2.4x the time of
 * 1 thread). Every W2V_PICK_PERIOD steps it times W2V_PICK_TRIAL steps on all threads and
 * then as many on one (whole steps, drawing included, per example) and runs the rest of
 * the period on the faster. The all-thread half stops early, from its step
 * W2V_PICK_CUT_AFTER on (counting from 0), as soon as its timed steps so far took more than
 * W2V_PICK_CUT times the last one-thread half's time per example: beside a busy process
 * such a step takes several times a one-thread step, and the trial's all-thread steps were
 * most of what a 2-thread run lost there. The first W2V_PICK_SETTLE steps after a change
 * of mode are run but not timed: such a step first moves the tables' rows between the
 * cores' caches (on Brown's 11 MB about as much as the 8 steps of a half), and the
 * one-thread half always pays for a switch while the all-thread half pays only after a
 * period on one thread, so timing them favoured all threads, which then stayed chosen
 * (2026-12-04: 2 threads in most periods while 0.94x the speed of one). A run shorter
 * than W2V_PICK_TRIAL steps runs on the threads asked for. (Trials ever further apart
 * while the choice holds measured no better.) */
#define W2V_PICK_PERIOD 512
#define W2V_PICK_TRIAL 8
#define W2V_PICK_SETTLE 2
#define W2V_PICK_CUT_AFTER (W2V_PICK_SETTLE + 1)
#define W2V_PICK_CUT 1.5

typedef struct {
    int64_t step;        /* steps recorded */
    double secs[2];      /* this period's trial: [0] all threads, [1] one */
    int64_t examples[2];
    bool one;            /* the rest of the period on one thread */
    double one_rate;     /* seconds per example of the last one-thread half; 0: none yet */
    bool last_one;       /* the mode of the last step recorded (a run starts on all) */
    int settled;         /* steps run in that mode since the last change, at most
                            W2V_PICK_SETTLE: the next step is timed when it is that */
} w2v_pick;

/* Whether the coming step runs on one thread. In a trial's first half, from its step
 * W2V_PICK_CUT_AFTER on, the timed all-thread steps so far decide (after a cut they no
 * longer change, so the cut holds to the half's end; with none timed there is no cut). */
static bool pick_one(const w2v_pick *p)
{
    const int64_t k = p->step % W2V_PICK_PERIOD;
    if (k >= 2 * W2V_PICK_TRIAL) return p->one;
    if (k >= W2V_PICK_TRIAL) return true;
    return k >= W2V_PICK_CUT_AFTER && p->one_rate > 0 &&
           p->secs[0] > W2V_PICK_CUT * p->one_rate * (double)p->examples[0];
}

/* Records a step that ran on one thread (one) or all, and decides at the trial's end. */
static void pick_record(w2v_pick *p, bool one, double secs, int64_t examples)
{
    const int64_t k = p->step++ % W2V_PICK_PERIOD;
    if (one != p->last_one) {
        p->last_one = one;
        p->settled = 0;
    }
    const bool timed = p->settled >= W2V_PICK_SETTLE;
    if (!timed) p->settled++;
    if (k >= 2 * W2V_PICK_TRIAL) return;
    if (timed) {
        p->secs[one] += secs;
        p->examples[one] += examples;
    }
    if (k == 2 * W2V_PICK_TRIAL - 1) {
        p->one = p->secs[1] * (double)p->examples[0] < p->secs[0] * (double)p->examples[1];
        p->one_rate = p->examples[1] ? p->secs[1] / (double)p->examples[1] : 0;
        p->secs[0] = p->secs[1] = 0;
        p->examples[0] = p->examples[1] = 0;
    }
}

/* Rank `rank` of `ranks`'s share of the corpus: bytes [*begin, *end), whole lines (see
 * w2v_parallel). 0, or -1 (errno set). */
static int corpus_share(const char *path, int rank, int ranks, int64_t *begin, int64_t *end)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    struct stat st;
    if (fstat(fileno(f), &st)) {
        fclose(f);
        return -1;
    }
    const int64_t size = (int64_t)st.st_size;
    *begin = line_start(f, (int64_t)((double)size * rank / ranks), size);
    *end = line_start(f, (int64_t)((double)size * (rank + 1) / ranks), size);
    fclose(f);
    return 0;
}

int w2v_share_records(const char *path, const tc_vocab *v, const tc_codes *all, int ranks, tc_codes *share)
{
    const int64_t bytes = v->corpus_bytes;
    enum { CHUNK = 1 << 16 };
    int64_t *begin = malloc((size_t)(ranks + 1) * sizeof *begin), *at = malloc((size_t)(ranks + 1) * sizeof *at);
    char *buf = malloc(CHUNK);
    int rc = -1;
    FILE *f = NULL;
    if (!begin || !at || !buf) {
        errno = ENOMEM;
        goto out;
    }
    for (int r = 0; r < ranks; r++)
        if (corpus_share(path, r, ranks, &begin[r], &begin[r + 1])) goto out;
    /* newlines before each share's start, in one pass (the starts ascend), and the
     * bytes' hash, which the counting pass took of the file it recorded */
    if (!(f = fopen(path, "rb"))) goto out;
    int64_t offset = 0, lines = 0;
    uint64_t hash = TC_FNV_OFFSET;
    int r = 0;
    for (;;) {
        const size_t n = fread(buf, 1, CHUNK, f);
        for (size_t i = 0; i <= n; i++) {
            while (r <= ranks && begin[r] == offset + (int64_t)i) at[r++] = lines;
            if (i < n && buf[i] == '\n') lines++;
        }
        hash = tc_fnv1a(hash, buf, n);
        offset += (int64_t)n;
        if (n < CHUNK) break;
    }
    if (ferror(f)) {
        errno = EIO;
        goto out;
    }
    /* a file that changed since the record was made */
    int64_t eols = 0;
    for (int64_t i = 0; i < all->n; i++) eols += all->code[i] == TC_CODE_EOL;
    if (offset != bytes || hash != v->corpus_hash || begin[ranks] != bytes || r != ranks + 1 || eols != lines) {
        errno = ESTALE;
        goto out;
    }
    /* share r's codes start after the at[r]-th newline mark (a share starts a line) */
    int64_t i = 0, seen = 0;
    for (r = 0; r <= ranks; r++) {
        while (seen < at[r]) seen += all->code[i++] == TC_CODE_EOL;
        at[r] = begin[r] == bytes ? all->n : i; /* the last line may have no newline */
    }
    for (r = 0; r < ranks; r++) share[r] = (tc_codes){.code = all->code + at[r], .n = at[r + 1] - at[r]};
    rc = 0;
out:
    if (f) fclose(f);
    free(begin);
    free(at);
    free(buf);
    return rc;
}

/* The coarsest hot level (0: none) whose period keeps a row changed `per_step` times a
 * step below `bound` changes between merges; at most `finest`. */
static int hot_level(const w2v_parallel *par, int finest, double per_step, double bound)
{
    int l = 0;
    while (l < finest && (double)(l ? par->hot_period[l] : par->sync_steps) * per_step > bound) l++;
    return l;
}

/* With 3+ ranks or replicas: plans the hot rows' merges (w2v.h's w2v_parallel) from the
 * counts. A row's expected changes per step on one rank are B r: r its rate per example
 * (input: its share of the kept words, times the context's mean size W + 1 for CBOW;
 * output: that share, as the positive target, plus -negative times its noise share; an
 * inner node: the share of the centre words whose path holds it), B the examples per step
 * (the batch, or fewer: a step ends once a row reaches its hit cap). A row changed more
 * than U = W2V_HOT_STEP_BOUND / (alpha (P - 2)) times between two merges gets the coarsest
 * level l whose period keeps it below U, or the finest (a period of 1 step). The periods
 * halve from sync_steps / 2; when that takes more than W2V_MAX_HOT_LEVELS halvings to
 * reach 1 step (sync_steps >= 2^17) they are 2^15, ..., 2, 1 whatever sync_steps, so the
 * finest is still every step (halving from sync_steps, at -sync-every 10^6 the finest was
 * 15 steps, and 3 ranks diverged on the bundled corpus) and any -sync-every above a run's
 * steps gives the same file. Periods need not divide each other: a level's rows are
 * merged with a coarser level's whenever its period divides the step (merge_due). 0, or
 * -1 out of memory. */
static int plan_hot_merges(const w2v_trainer *t, w2v_parallel *par, double alpha, FILE *log)
{
    const w2v_config *cfg = t->cfg;
    const int64_t V = t->v->size;
    par->hot_levels = 0;
    memset(par->hot_in, 0, sizeof par->hot_in);
    memset(par->hot_out, 0, sizeof par->hot_out);
    memset(par->hot_node, 0, sizeof par->hot_node);
    memset(par->hot_period, 0, sizeof par->hot_period);
    if (par->ranks < 3) return 0;
    int halvings = 0; /* to a period of 1 step */
    while (par->sync_steps >> (halvings + 1) >= 1) halvings++;
    const int finest = halvings < W2V_MAX_HOT_LEVELS ? halvings : W2V_MAX_HOT_LEVELS;
    if (finest == 0) return 0;
    for (int l = 1; l <= finest; l++)
        par->hot_period[l] = halvings == finest ? par->sync_steps >> l : (int64_t)1 << (finest - l);
    /* per example: in[w], out[w] (with the noise share first), node[k] */
    double *in = malloc((size_t)V * sizeof *in), *out = malloc((size_t)V * sizeof *out);
    double *node = cfg->hs ? calloc((size_t)V, sizeof *node) : NULL;
    if (!in || !out || (cfg->hs && !node)) {
        free(in);
        free(out);
        free(node);
        return -1;
    }
    double kept = 0, noise = 0;
    for (int64_t w = 0; w < V; w++) {
        in[w] = (double)t->v->counts[w] * tc_keep_prob(t->v->counts[w], cfg->sample, t->v->train_words);
        out[w] = pow((double)t->v->counts[w], 0.75);
        kept += in[w];
        noise += out[w];
    }
    double in_max = 0, out_max = 0, node_max = 0;
    for (int64_t w = 0; w < V; w++) {
        const double share = in[w] / kept;
        for (int64_t e = cfg->hs ? t->tree.offsets[w] : 0; cfg->hs && e < t->tree.offsets[w + 1]; e++)
            node[t->tree.nodes[e]] += share;
        in[w] = (cfg->cbow ? cfg->window + 1 : 1) * share;
        out[w] = cfg->negative > 0 ? share + cfg->negative * out[w] / noise : 0;
        if (in[w] > in_max) in_max = in[w];
        if (out[w] > out_max) out_max = out[w];
    }
    for (int64_t k = 0; cfg->hs && k < V - 1; k++)
        if (node[k] > node_max) node_max = node[k];
    double B = (double)t->cap;
    if (in_max * B > t->in_row_cap) B = t->in_row_cap / in_max;
    if (out_max * B > t->row_cap) B = t->row_cap / out_max;
    if (node_max * B > t->node_cap) B = t->node_cap / node_max;
    const double bound = W2V_HOT_STEP_BOUND / (alpha * (par->ranks - 2));
    for (int64_t w = 0; w < V; w++) {
        const int li = hot_level(par, finest, B * in[w], bound);
        const int lo = hot_level(par, finest, B * out[w], bound);
        for (int l = 1; l <= li; l++) par->hot_in[l] = w + 1;
        for (int l = 1; l <= lo; l++) par->hot_out[l] = w + 1;
        if (li > par->hot_levels) par->hot_levels = li;
        if (lo > par->hot_levels) par->hot_levels = lo;
    }
    for (int64_t k = 0; cfg->hs && k < V - 1; k++) {
        const int ln = hot_level(par, finest, B * node[k], bound);
        for (int l = 1; l <= ln; l++)
            if (par->hot_node[l] < V - 1 - k) par->hot_node[l] = V - 1 - k;
        if (ln > par->hot_levels) par->hot_levels = ln;
    }
    free(in);
    free(out);
    free(node);
    for (int l = 1; log && l <= par->hot_levels; l++)
        fprintf(log, "sgrad-w2v: hot rows merged every %lld steps: %lld input, %lld output, %lld inner "
                     "nodes\n", (long long)par->hot_period[l], (long long)par->hot_in[l],
                (long long)par->hot_out[l], (long long)par->hot_node[l]);
    return 0;
}

/* Merge `due` (merge_due's: 0 full, else a hot level), counted in res; 0 or -1. */
static int run_merge(w2v_parallel *par, const w2v_model *m, int due, bool active, bool *any_active,
                     w2v_result *res)
{
    res->merges++;
    return due == 0 ? par->sync(par, m, active, any_active) : par->merge_hot(par, m, due, active, any_active);
}

/* The merge due after the t-th step since the last full one (1 <= t <= sync_steps): 0 the
 * full merge, l >= 1 hot level l's rows (with every finer level's), -1 none. */
static int merge_due(const w2v_parallel *par, int64_t t)
{
    if (t == par->sync_steps) return 0;
    for (int l = 1; l <= par->hot_levels; l++)
        if (t % par->hot_period[l] == 0) return l;
    return -1;
}

/* Whether line (a whole line of -log, its newline included) is a record of at most `steps`
 * steps; its elapsed_s in *elapsed. */
static bool log_record_within(const char *line, int64_t steps, double *elapsed)
{
    const size_t n = strlen(line);
    const char *s = strstr(line, "\"steps\":"), *e = strstr(line, "\"elapsed_s\":");
    if (n < 3 || line[0] != '{' || strcmp(line + n - 2, "}\n") || !s || !e) return false;
    char *end;
    errno = 0;
    const long long got = strtoll(s + 8, &end, 10);
    if (errno || end == s + 8 || got > steps) return false;
    *elapsed = strtod(e + 12, &end);
    return true;
}

/* Opens -log at the run's first record (after its first step), so a run refused or failed
 * before that leaves a previous file as it was. A fresh run truncates the file. A resumed
 * run keeps the leading records its checkpoint covers (at->steps steps or fewer) and cuts
 * the rest, a killed run's records past the checkpoint and its half-written line, then
 * appends, with elapsed_s going on from the last kept record: the file reads as one run.
 * 0, or -1 with a message. */
static int log_start(const w2v_config *cfg, const w2v_position *at, tc_log *jl, FILE **jlog)
{
    FILE *f = cfg->resume ? fopen(cfg->log, "r+") : NULL;
    if (!f) f = fopen(cfg->log, "w");
    if (!f) {
        fprintf(stderr, "sgrad-w2v: cannot write -log %s: %s\n", cfg->log, strerror(errno));
        return -1;
    }
    double elapsed = 0, e;
    char *line = NULL;
    size_t cap = 0;
    off_t keep = 0;
    while (cfg->resume && getline(&line, &cap, f) > 0 && log_record_within(line, at->steps, &e)) {
        keep = ftello(f);
        elapsed = e;
    }
    free(line);
    if (cfg->resume && (ferror(f) || fflush(f) || ftruncate(fileno(f), keep) || fseeko(f, keep, SEEK_SET))) {
        fprintf(stderr, "sgrad-w2v: cannot write -log %s: %s\n", cfg->log, strerror(errno));
        fclose(f);
        return -1;
    }
    *jlog = jl->f = f;
    jl->start -= elapsed;
    return 0;
}

/* The first t' > t (0 <= t < sync_steps) at which merge_due gives a merge: a rank whose
 * share is done jumps there instead of stepping through every step between (with a large
 * -sync-every, up to 2^63 of them). */
static int64_t next_merge(const w2v_parallel *par, int64_t t)
{
    int64_t next = par->sync_steps;
    for (int l = 1; l <= par->hot_levels; l++) {
        const int64_t period = par->hot_period[l], last = t - t % period;
        if (next - last > period) next = last + period; /* no overflow near INT64_MAX */
    }
    return next;
}

int w2v_train(const w2v_config *cfg, const tc_vocab *v, FILE *log, w2v_result *res,
              w2v_model *mout)
{
    memset(res, 0, sizeof *res);
    res->vocab_size = v->size;
    if (w2v_config_check(cfg, stderr)) return -1;
    if (w2v_vocab_check(v, stderr)) return -1;
    const int64_t V = v->size, D = cfg->size, T = cfg->negative + 1;
    const double alpha = cfg->alpha > 0 ? cfg->alpha : (cfg->cbow ? 0.05 : 0.025);
    w2v_trainer t;
    memset(&t, 0, sizeof t);
    t.cfg = cfg;
    t.v = v;
    t.rng.s = cfg->seed;
    t.cap = cfg->batch;
    int64_t share_begin = 0;
    w2v_parallel *par = cfg->par;
    const int ranks = par ? par->ranks : 1; /* the words read by all ranks: about ranks x this one's */
    if (par && corpus_share(cfg->train, par->rank, par->ranks, &share_begin, &t.share_end)) {
        fprintf(stderr, "sgrad-w2v: cannot read %s: %s\n", cfg->train, strerror(errno));
        return -1;
    }
    t.row_cap = tc_row_hit_cap(TC_ROW_STEP_BOUND, alpha);
    t.in_row_cap = cfg->cbow ? tc_row_hit_cap(TC_CBOW_INPUT_STEP_BOUND, alpha) : t.row_cap;
    t.node_cap = tc_row_hit_cap(W2V_HS_NODE_STEP_BOUND, alpha);
    if (!cfg->cbow && t.cap < 2 * cfg->window) t.cap = 2 * cfg->window;
    t.keep = tc_keep_table(v, cfg->sample);
    t.hits_in = calloc((size_t)V, sizeof *t.hits_in);
    t.hits_out = calloc((size_t)V, sizeof *t.hits_out);
    t.hits_node = cfg->hs ? calloc((size_t)V, sizeof *t.hits_node) : NULL;
    w2v_model m = {0};
    sg_ctx_opts co = {.threads = cfg->threads, .nondeterministic = cfg->hogwild,
                      .seed = cfg->seed ? cfg->seed : 42};
    m.ctx = sg_ctx_new(&co);
    int rc = -1;
    sg_optim *opt = NULL;
    FILE *jlog = NULL;
    if (!t.keep || !t.hits_in || !t.hits_out || (cfg->hs && !t.hits_node) || !m.ctx ||
        tc_noise_init(&t.noise, v->counts, V, 0.75) ||
        (cfg->hs && tc_huffman_build(&t.tree, v->counts, V))) {
        fprintf(stderr, "sgrad-w2v: out of memory\n");
        goto done;
    }
    t.prefetch_draws = cfg->negative > 0 && V * (int64_t)sizeof *t.noise.col > cfg->prefetch_min;
    int64_t longest_path = 0; /* path entries per example, at most */
    for (int64_t w = 0; cfg->hs && w < V; w++)
        if (t.tree.offsets[w + 1] - t.tree.offsets[w] > longest_path)
            longest_path = t.tree.offsets[w + 1] - t.tree.offsets[w];
    if (longest_path > W2V_MAX_STEP_SLOTS / t.cap) {
        fprintf(stderr, "sgrad-w2v: -batch %lld with Huffman paths of up to %lld nodes gives more "
                        "than %lld path entries per step: lower -batch\n",
                (long long)t.cap, (long long)longest_path, (long long)W2V_MAX_STEP_SLOTS);
        goto done;
    }
    const int64_t s_input[1] = {t.cap * (cfg->cbow ? 2 * cfg->window : 1)}, s_offset[1] = {t.cap},
                  s_target[2] = {t.cap, T};
    for (int k = 0; k < 2; k++) {
        t.input_t[k] = sg_tensor_new(m.ctx, SG_I64, 1, s_input);
        t.offset_t[k] = sg_tensor_new(m.ctx, SG_I64, 1, s_offset);
        t.target_t[k] = sg_tensor_new(m.ctx, SG_I64, 2, s_target);
        if (cfg->hs) {
            const int64_t s_node[1] = {t.cap * longest_path};
            t.node_t[k] = sg_tensor_new(m.ctx, SG_I64, 1, s_node);
            t.code_t[k] = sg_tensor_new(m.ctx, SG_I32, 1, s_node);
            t.path_t[k] = sg_tensor_new(m.ctx, SG_I64, 1, s_offset);
        }
        if (!t.input_t[k] || !t.offset_t[k] || !t.target_t[k] ||
            (cfg->hs && (!t.node_t[k] || !t.code_t[k] || !t.path_t[k]))) {
            fprintf(stderr, "sgrad-w2v: %s\n", sg_ctx_message(m.ctx));
            goto done;
        }
    }
    if (cfg->hs) {
        t.node = sg_tensor_data(t.node_t[0]);
        t.code = sg_tensor_data(t.code_t[0]);
        t.path = sg_tensor_data(t.path_t[0]);
    }
    t.input = sg_tensor_data(t.input_t[0]);
    t.offset = sg_tensor_data(t.offset_t[0]);
    t.target = sg_tensor_data(t.target_t[0]);
    int64_t shape[2] = {V, D}, s_hs[2] = {V - 1, D};
    m.in = sg_tensor_requires_grad(sg_tensor_new(m.ctx, SG_F32, 2, shape), 1);
    if (T > 1) m.out = sg_tensor_requires_grad(sg_tensor_new(m.ctx, SG_F32, 2, shape), 1);
    if (cfg->hs) m.hs = sg_tensor_requires_grad(sg_tensor_new(m.ctx, SG_F32, 2, s_hs), 1);
    sg_sgd_opts so = SG_SGD_OPTS_DEFAULT;
    so.lr = alpha;
    opt = sg_optim_sgd(m.ctx, &so);
    const int64_t total = (int64_t)cfg->iter * v->total_tokens;
    w2v_lr_record lr_rec = {1, 0, total};
    const sg_lr_schedule decay = {.kind = SG_LR_CALLBACK, .fn = w2v_lr_schedule, .ud = &lr_rec};
    if (!m.in || (T > 1 && !m.out) || (cfg->hs && !m.hs) || !opt ||
        sg_tensor_fill_uniform(m.in, -1.0 / (double)D, 1.0 / (double)D) ||
        sg_optim_add_param(opt, m.in) || (m.out && sg_optim_add_param(opt, m.out)) ||
        (m.hs && sg_optim_add_param(opt, m.hs)) ||
        sg_optim_set_schedule(opt, &decay) ||
        sg_optim_set_check_finite(opt, 1)) { /* a non-finite gradient stops the run, tables intact */
        fprintf(stderr, "sgrad-w2v: %s\n", sg_ctx_message(m.ctx));
        goto done;
    }

    /* where to start: the beginning, or the position of a checkpoint (whose tables,
     * optimizer state and generator state the load restores) */
    w2v_position at;
    memset(&at, 0, sizeof at);
    at.rng = cfg->seed;
    if (cfg->resume && w2v_checkpoint_load(cfg->resume, cfg, v, &m, opt, &at, stderr)) {
        rc = 2; /* refused before training, as the identity checks refuse */
        goto done;
    }
    const bool mid_epoch = at.offset > 0; /* an epoch's start has read nothing of it */
    /* records to replay (checkpoints record the reader's byte offset, which a replay has
     * not got): the vocabulary pass's, of this trainer's share (the whole corpus, or a
     * replica's part of it); else the first epoch's tokens, for the later ones */
    if (cfg->corpus_codes && cfg->corpus_codes->code && w2v_replays_corpus(cfg))
        t.replay = cfg->corpus_codes;
    else if (!cfg->checkpoint && !cfg->resume && cfg->token_cache > 0 && cfg->iter > 1)
        tc_codes_start(&t.rec, cfg->token_cache); /* without memory, none: read */
    if (cfg->debug > 1 && log) {
        fprintf(log, "sgrad-w2v: %s, %s%s%s, alpha %g, batch %lld examples, row hit caps: input %d, "
                     "output %d, inner nodes %d\n", cfg->cbow ? "cbow" : "skip-gram",
                T > 1 ? "negative sampling" : "", T > 1 && cfg->hs ? " + " : "",
                cfg->hs ? "hierarchical softmax" : "", alpha, (long long)t.cap, t.in_row_cap, t.row_cap,
                t.node_cap);
        if (cfg->hs)
            fprintf(log, "sgrad-w2v: Huffman tree: %lld inner nodes, paths %.2f nodes on average "
                         "(by count), %lld at most\n", (long long)(V - 1),
                    (double)tree_entries(&t.tree, v->counts) / (double)v->train_words, (long long)longest_path);
    }
    if (cfg->resume && log)
        fprintf(log, "sgrad-w2v: resuming from %s: epoch %d of %d, step %lld, %.1f%% of the words\n",
                cfg->resume, at.epoch < cfg->iter ? at.epoch + 1 : cfg->iter, cfg->iter, (long long)at.steps,
                100.0 * (double)at.tokens / (double)((int64_t)cfg->iter * v->total_tokens));
    t.rng.s = at.rng;
    t.tokens = at.tokens;
    res->steps = at.steps;
    res->examples = at.examples;

    const int threads = sg_ctx_threads(m.ctx);
    /* the progress counts every rank's words: per thread of them all */
    const int all_threads = !par ? threads : par->threads > 0 ? par->threads : ranks * threads;
    tc_progress pr;
    tc_progress_init(&pr, log, all_threads);
    tc_log jl;
    tc_log_init(&jl, jlog, all_threads);
    const double t0 = tc_now();
    const int64_t tokens0 = t.tokens; /* read before this process: not in its speed */
    /* start: the first step's loss per example */
    double interval_loss = 0, epoch_loss = at.epoch_loss, start_loss = at.start_loss;
    int64_t interval_n = 0, epoch_n = at.epoch_examples;
    w2v_position saved; /* the position of the coming checkpoint, taken before its fill */
    memset(&saved, 0, sizeof saved);
    bool any_active = true;
    const bool pick = threads > 1 && !cfg->hogwild; /* w2v_pick */
    w2v_pick pk = {0};
    for (int k = 0; par && k < 3; k++) t.dirty[k] = par->dirty[k];
    if (par && plan_hot_merges(&t, par, alpha, cfg->debug > 1 ? log : NULL)) {
        fprintf(stderr, "sgrad-w2v: out of memory\n");
        goto done;
    }
    if (par && run_merge(par, &m, 0, true, &any_active, res)) goto done; /* the common start */
    for (int ep = at.epoch; ep < cfg->iter; ep++) {
        /* an epoch that replays a record does not read the file (a closed reader) */
        if (!t.replay && tc_reader_open(&t.rd, cfg->train)) {
            fprintf(stderr, "sgrad-w2v: cannot read %s: %s\n", cfg->train, strerror(errno));
            goto done;
        }
        if (ep == at.epoch && mid_epoch) {
            if (tc_reader_seek(&t.rd, at.offset)) {
                fprintf(stderr, "sgrad-w2v: cannot read %s: %s\n", cfg->train, strerror(errno));
                tc_reader_close(&t.rd);
                goto done;
            }
            t.epoch_done = at.epoch_done;
            t.len = at.len;
            t.pos = at.pos;
            memcpy(t.sen, at.sentence, (size_t)at.len * sizeof *t.sen);
        } else {
            if (!t.replay && share_begin > 0 && tc_reader_seek(&t.rd, share_begin)) {
                fprintf(stderr, "sgrad-w2v: cannot read %s: %s\n", cfg->train, strerror(errno));
                tc_reader_close(&t.rd);
                goto done;
            }
            t.epoch_done = false;
            t.len = t.pos = 0;
            t.at_tok = 0;
            res->epochs_replayed += t.replay != NULL;
            epoch_loss = 0;
            epoch_n = 0;
        }
        /* With 2+ threads the next batch is drawn on one thread while the other runs the
         * backward half; the forward half uses every thread. Called inside this region,
         * the library runs the backward's loops as tasks, which the drawing thread takes
         * up once its batch is drawn (at the region's end). Drawing depends only on the
         * corpus and the random stream, so results are the same.
         * Hogwild mode instead runs the backward's racy update on every thread. */
        int64_t lr_tokens = t.tokens;
        int64_t since_sync = 0;
        any_active = true;
        double tp = tc_now();
        fill_batch(&t);
        res->t_draw += tc_now() - tp;
        while (t.n > 0) {
            lr_rec = (w2v_lr_record){sg_optim_steps(opt) + 1, lr_tokens * ranks, total};
            const double lr = w2v_lr_decay(alpha, lr_tokens * ranks, total);
            const int64_t n = t.n;
            const bool one = pick && pick_one(&pk);
            if (pick) sg_ctx_set_threads(m.ctx, one ? 1 : threads);
            const double t_step = tp = tc_now();
            sg_tensor *loss = step_forward(&t, &m, opt);
            res->t_forward += tc_now() - tp;
            int st = loss ? SG_OK : -1;
            const double l = loss ? sg_tensor_get(loss, 0) : 0;
            lr_tokens = t.tokens;
            /* a checkpoint after this step resumes by drawing the batch drawn next */
            const bool save_now = cfg->checkpoint && cfg->save_every > 0 &&
                                  (sg_optim_steps(opt) + 1) % cfg->save_every == 0;
            if (save_now) take_position(&t, ep, &saved);
            tp = tc_now();
            if (loss && pick && !one) {
                double t_bwd = 0, t_fill = 0;
#ifdef _OPENMP
#pragma omp parallel sections num_threads(2)
#endif
                {
#ifdef _OPENMP
#pragma omp section
#endif
                    {
                        const double t_in = tc_now();
                        st = step_backward(m.ctx, loss, opt);
                        t_bwd = tc_now() - t_in;
                    }
#ifdef _OPENMP
#pragma omp section
#endif
                    {
                        const double t_in = tc_now();
                        fill_batch(&t);
                        t_fill = tc_now() - t_in;
                    }
                }
                res->t_backward += t_bwd;
                res->t_draw += t_fill;
                res->t_overlapped += tc_now() - tp;
            } else if (loss) {
                st = step_backward(m.ctx, loss, opt);
                const double t_mid = tc_now();
                res->t_backward += t_mid - tp;
                fill_batch(&t);
                res->t_draw += tc_now() - t_mid;
                if (pick) res->t_overlapped += tc_now() - tp; /* the two, in turn */
            }
            if (pick) {
                pick_record(&pk, one, tc_now() - t_step, n);
                res->steps_one_thread += one;
            }
            if (st) {
                if (loss)
                    fprintf(stderr, "sgrad-w2v: training step failed: %s (%s)\n",
                            sg_status_string(st), sg_ctx_message(m.ctx));
                tc_reader_close(&t.rd);
                goto done;
            }
            if (!isfinite(l)) {
                fprintf(stderr, "\nsgrad-w2v: training diverged (loss %g) at %.1f%%; try a "
                                "lower -alpha or -batch\n", l, 100.0 * (double)t.tokens / (double)total);
                tc_reader_close(&t.rd);
                goto done;
            }
            if (start_loss == 0) start_loss = l / (double)n;
            if (l / (double)n > W2V_DIVERGED_FACTOR * start_loss) {
                fprintf(stderr, "\nsgrad-w2v: training diverged (loss per example %g, %g at the "
                                "start) at %.1f%%; try a lower -alpha or -batch\n", l / (double)n,
                        start_loss, 100.0 * (double)t.tokens / (double)total);
                tc_reader_close(&t.rd);
                goto done;
            }
            interval_loss += l;
            interval_n += n;
            epoch_loss += l;
            epoch_n += n;
            res->examples += n;
            res->steps++;
            if (cfg->log && !jlog && log_start(cfg, &at, &jl, &jlog)) {
                tc_reader_close(&t.rd);
                goto done;
            }
            tc_log_update(&jl, ep + 1, lr_tokens * ranks, total, res->steps, lr, l, n, false);
            const int due = par ? merge_due(par, ++since_sync) : -1;
            if (due >= 0) {
                if (due == 0) since_sync = 0;
                tp = tc_now();
                const int sync_rc = run_merge(par, &m, due, true, &any_active, res);
                res->t_sync += tc_now() - tp;
                if (sync_rc) {
                    tc_reader_close(&t.rd);
                    goto done;
                }
            }
            if (log && tc_now() - pr.last_print >= (pr.tty ? 0.2 : 5.0)) {
                tc_progress_update(&pr, t.tokens * ranks, total, lr, interval_loss / (double)interval_n,
                                    false);
                interval_loss = 0;
                interval_n = 0;
            }
            if (save_now) {
                if (jlog) fflush(jlog); /* the log covers the checkpoint: a resume continues it */
                set_position_counters(&saved, res, start_loss, epoch_loss, epoch_n);
                if (w2v_checkpoint_save(cfg->checkpoint, cfg, v, &m, opt, &saved, stderr)) {
                    tc_reader_close(&t.rd);
                    goto done;
                }
            }
        }
        tc_reader_close(&t.rd);
        if (pick) sg_ctx_set_threads(m.ctx, threads);
        /* this rank's share is done: it joins the others' syncs until every rank's is */
        tp = tc_now();
        while (par && any_active) { /* the merges the active ranks' steps make */
            since_sync = next_merge(par, since_sync);
            int due = merge_due(par, since_sync);
            if (due > 0) {
                if (run_merge(par, &m, due, false, &any_active, res)) goto done;
                if (!any_active) due = 0; /* every share is done: on to the full merge */
            }
            if (due == 0) {
                since_sync = 0;
                if (run_merge(par, &m, 0, false, &any_active, res)) goto done;
            }
        }
        res->t_sync += tc_now() - tp;
        if (cfg->debug > 1 && log)
            fprintf(log, "%ssgrad-w2v: epoch %d of %d: loss per example %.4f, %lld steps so far, "
                         "%.1f s\n", pr.tty ? "\n" : "", ep + 1, cfg->iter,
                    epoch_n ? epoch_loss / (double)epoch_n : NAN, (long long)res->steps, tc_now() - t0);
        /* -save-every 0: a checkpoint at each epoch's end (the last one's is below) */
        if (cfg->checkpoint && cfg->save_every == 0 && ep + 1 < cfg->iter) {
            if (jlog) fflush(jlog);
            epoch_start_position(&t, ep + 1, &saved);
            set_position_counters(&saved, res, start_loss, epoch_loss, epoch_n);
            if (w2v_checkpoint_save(cfg->checkpoint, cfg, v, &m, opt, &saved, stderr)) goto done;
        }
    }
    if (res->steps == 0) {
        if (par)
            fprintf(stderr, "sgrad-w2v: share %d of %d of %s gave no training examples (no sentence "
                            "of two vocabulary words; fewer ranks or replicas)\n", par->rank + 1, ranks, cfg->train);
        else
            fprintf(stderr, "sgrad-w2v: %s gave no training examples (no sentence of two "
                            "vocabulary words)\n", cfg->train);
        goto done;
    }
    sg_tape_reset(m.ctx);
    res->seconds = tc_now() - t0;
    res->final_loss = epoch_n ? epoch_loss / (double)epoch_n : NAN;
    /* With ranks or replicas, every rank's words: the shares split each epoch's corpus, so
     * all of them read `total` together (they never resume). This rank's own count times
     * the ranks is off by as much as the shares' words differ (1% on Brown's 2 shares). */
    res->tokens = t.tokens - tokens0;
    const int64_t trained = par ? total : res->tokens;
    res->words_per_sec_thread =
        (double)trained / (res->seconds > 0 ? res->seconds : 1e-9) / (par ? all_threads : threads);
    if (log && t.tokens > tokens0)
        tc_progress_update(&pr, t.tokens * ranks, total, alpha * 1e-4,
                            interval_n ? interval_loss / (double)interval_n : res->final_loss, true);
    if (cfg->log && !jlog && log_start(cfg, &at, &jl, &jlog)) goto done;
    tc_log_update(&jl, cfg->iter, t.tokens * ranks, total, res->steps, alpha * 1e-4, 0, 0, true);
    if (cfg->checkpoint) { /* the end: resuming from it trains no more */
        epoch_start_position(&t, cfg->iter, &saved);
        set_position_counters(&saved, res, start_loss, epoch_loss, epoch_n);
        if (w2v_checkpoint_save(cfg->checkpoint, cfg, v, &m, opt, &saved, stderr)) goto done;
    }
    if (jlog && (fflush(jlog) || ferror(jlog))) {
        fprintf(stderr, "sgrad-w2v: cannot write -log %s: %s\n", cfg->log, strerror(errno));
        goto done;
    }
    rc = 0;

done:
    if (jlog) fclose(jlog);
    sg_optim_free(opt);
    tc_noise_free(&t.noise);
    free(t.keep);
    tc_codes_free(&t.rec);
    free(t.hits_in);
    free(t.hits_out);
    free(t.hits_node);
    tc_huffman_free(&t.tree);
    if (rc == 0 && mout) *mout = m;
    else w2v_model_free(&m);
    return rc;
}
