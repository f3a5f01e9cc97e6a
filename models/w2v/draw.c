/* The corpus into batches: tokens (read, replayed from a record, or handed in as ids),
 * sentences of kept words, each centre word's shrunk window, its examples and negatives,
 * and the row-hit caps that end a batch early.
 *
 * Determinism: one random stream (seeded by -seed) drives subsampling, window shrinking
 * and negatives in corpus order, and the batches do not depend on the thread count.
 * Subsampled words are dropped before windows are formed, and each centre word's window
 * is shrunk to a uniform 1..window. Each example carries `negative` noise words drawn
 * from unigram^0.75 (redrawn when equal to the true target).
 *
 * Index tensors: the batch is drawn straight into int64 tensors (what the ops' backwards
 * use as COO indices without a copy). There are two sets, used in turn, since the next
 * batch is drawn while the current step's backward still reads its indices.
 */
#include "w2v.h"

#include <string.h>

/* Tokens ahead at which a replay prefetches the subsampling threshold it will read. */
#define W2V_KEEP_AHEAD 16

/* The next code of a chunk source, false at its end (or on its failure, src_failed). */
static bool next_source_code(w2v_trainer *t, int32_t *code)
{
    if (t->src_at == t->src_n) {
        t->src_at = 0;
        t->src_n = t->cfg->source->read(t->cfg->source->ud, t->src_buf, W2V_SOURCE_CHUNK);
        if (t->src_n > W2V_SOURCE_CHUNK) t->src_n = -1;
        if (t->src_n <= 0) {
            t->src_failed |= t->src_n < 0;
            t->src_n = 0;
            return false;
        }
    }
    *code = t->src_buf[t->src_at++];
    if (*code >= TC_CODE_EOL && *code < t->v->size) return true;
    t->src_failed = true;
    return false;
}

/* The next token of the share: its code (an id, TC_CODE_OOV or TC_CODE_EOL), or false at
 * the share's end. Replays a record when there is one; else reads and looks up the
 * corpus (or takes the source's ids), recording while a record is kept. */
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
    bool more;
    if (t->cfg->source) {
        more = next_source_code(t, code);
    } else {
        char word[TC_MAX_WORD];
        const tc_tok k = t->cfg->par && tc_reader_offset(&t->rd) >= t->share_end ? TC_TOK_EOF
                                                                                : tc_reader_next(&t->rd, word);
        more = k != TC_TOK_EOF;
        if (more) *code = k == TC_TOK_EOL ? TC_CODE_EOL : (int32_t)tc_vocab_find(t->v, word); /* -1: OOV */
    }
    if (!more) {
        if (t->rec.code && !t->src_failed) t->replay = &t->rec;
        return false;
    }
    tc_codes_push(&t->rec, *code);
    return true;
}

/* Reads the next sentence: kept in-vocabulary words, at most W2V_MAX_SENTENCE. */
void w2v_next_sentence(w2v_trainer *t)
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
void w2v_take_position(const w2v_trainer *t, int epoch, w2v_position *p)
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
void w2v_epoch_start_position(const w2v_trainer *t, int epoch, w2v_position *p)
{
    p->epoch = epoch;
    p->offset = 0;
    p->epoch_done = false;
    p->rng = t->rng.s;
    p->tokens = t->tokens;
    p->len = p->pos = 0;
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

/* Empties the batch (its rows' hit counts back to 0) and moves it to the other index set. */
static void start_batch(w2v_trainer *t)
{
    const int T = t->cfg->negative + 1;
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
}

/* CBOW: centre p's bag of context words lo..hi as one example; true once a row is full. */
static bool add_bag(w2v_trainer *t, int p, int lo, int hi)
{
    const int T = t->cfg->negative + 1;
    const int64_t centre = t->sen[p], start = t->n_input;
    for (int c = lo; c <= hi; c++)
        if (c != p) t->input[t->n_input++] = t->sen[c];
    if (t->n_input == start) return false;
    t->offset[t->n] = start;
    int64_t *row = t->target + t->n * T;
    row[0] = centre;
    draw_negatives(t, row, centre);
    const bool full = add_example(t, t->n, t->input + start, t->n_input - start);
    t->n++;
    return full;
}

/* Skip-gram: one example per context word of centre p; true once a row is full. Every
 * context's draws, then their counts: the counts' lines, prefetched as the draws come,
 * arrive meanwhile (the batch ends after a centre, so the order of its counts changes
 * nothing). */
static bool add_pairs(w2v_trainer *t, int p, int lo, int hi)
{
    const int T = t->cfg->negative + 1;
    const int64_t centre = t->sen[p], first = t->n;
    bool full = false;
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
    return full;
}

/* Fills the batch from the corpus; n == 0 means the epoch is over. A batch ends when it
 * holds `cap` examples or when, after a centre word's examples, some row of any table
 * reaches its hit cap (row_cap, in_row_cap, node_cap): a step sums every update of a row
 * computed at the same point, and without the cap a very frequent word (a common noise
 * word above all; with -hs the root, on every path) takes one large step where word2vec.c
 * takes many small self-correcting ones, which diverged with 8192-example batches on the
 * demo corpus. The batch goes into the index set not used by the previous batch, whose
 * step may still be running. */
void w2v_fill_batch(w2v_trainer *t)
{
    const int W = t->cfg->window;
    const int64_t per_pos = t->cfg->cbow ? 1 : 2 * W;
    start_batch(t);
    bool full = false;
    while (!full && t->n + per_pos <= t->cap) {
        if (t->pos >= t->len) {
            w2v_next_sentence(t);
            if (t->len == 0) return;
        }
        const int p = t->pos++;
        /* a sentence's first centre: its own columns (later ones' come one centre ahead) */
        if (t->prefetch_draws && p == 0) prefetch_centre(t, t->rng, p);
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
        full |= t->cfg->cbow ? add_bag(t, p, lo, hi) : add_pairs(t, p, lo, hi);
    }
}
