/* One training step: the loss of a batch through sgrad ops (forward), the backward with
 * the optimizer step, the learning rate; and the picker that runs a step on one thread
 * when that is faster.
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
 * mean (SG_BAG_GRAD_WORD2VEC), not the gradient of the mean.
 *
 * One SGD optimizer updates both tables: the output table inside sg_sgns_loss's backward
 * (fused), the input table from its sparse gradient at sg_optim_step (the graph engine:
 * both from gradients). Its learning rate is word2vec.c's linear decay by words read, as
 * a callback schedule: before each step the trainer records the words read before that
 * step's batch was drawn, and the callback maps them to alpha * (1 - words / (total + 1)),
 * at least alpha * 1e-4.
 */
#include "w2v.h"

#include <math.h>

/* word2vec.c's linear decay: alpha (1 - words / (total + 1)), at least alpha * 1e-4. */
double w2v_lr_decay(double alpha, int64_t words, int64_t total)
{
    double lr = alpha * (1 - (double)words / (double)(total + 1));
    return lr < alpha * 1e-4 ? alpha * 1e-4 : lr;
}

/* The callback schedule: the decay at the recorded words for the recorded step (the
 * optimizer only asks for its coming step); NaN, which the optimizer refuses, for any
 * other step. */
double w2v_lr_schedule(void *ud, int64_t step, double base_lr)
{
    const w2v_lr_record *r = ud;
    return step == r->step ? w2v_lr_decay(base_lr, r->words, r->total) : NAN;
}

/* Marks the rows this step changes, for the next merge (sg_w2v_merger's dirty). */
static void mark_dirty(const w2v_trainer *t)
{
    const int64_t n = t->n, T = t->cfg->negative + 1;
    for (int64_t i = 0; t->dirty[0] && i < t->n_input; i++) t->dirty[0][t->input[i]] = 1;
    for (int64_t e = 0; t->dirty[1] && T > 1 && e < n * T; e++) t->dirty[1][t->target[e]] = 1;
    for (int64_t e = 0; t->dirty[2] && e < t->n_node; e++) t->dirty[2][t->node[e]] = 1;
}

/* The graph engine's negative-sampling loss from general ops: rows of h repeated per
 * target, dot products with the targets' output rows, signs (+ for the true target),
 * log-sigmoid. The same loss as sg_sgns_loss, its update from gradients. */
static sg_tensor *graph_sgns_loss(const w2v_trainer *t, w2v_model *m, sg_tensor *h, sg_tensor *target)
{
    const int64_t n = t->n, T = t->cfg->negative + 1;
    int64_t s_flat[1] = {n * T};
    sg_tensor *rep = sg_tensor_new_tmp(m->ctx, SG_I64, 1, s_flat);
    sg_tensor *sign = sg_tensor_new_tmp(m->ctx, SG_F32, 1, s_flat);
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
    return sg_scale(sg_sum(sg_log_sigmoid(score)), -1.0);
}

sg_tensor *w2v_step_forward(w2v_trainer *t, w2v_model *m, sg_optim *opt)
{
    const int64_t n = t->n, T = t->cfg->negative + 1;
    mark_dirty(t);
    sg_tape_reset(m->ctx);
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
    sg_tensor *loss = NULL; /* -negative 0: hierarchical softmax only (below) */
    if (T > 1 && t->cfg->engine == SG_W2V_FUSED) {
        sg_sgns_opts so = {.fused = opt};
        loss = sg_sgns_loss(h, m->out, target, &so);
    } else if (T > 1) {
        loss = graph_sgns_loss(t, m, h, target);
    }
    if (t->cfg->hs) { /* both engines: there is one hierarchical softmax op */
        sg_tensor *hs = sg_hs_loss(h, m->hs, sg_slice(t->node_t[t->set], 0, t->n_node),
                                   sg_slice(t->code_t[t->set], 0, t->n_node), sg_slice(t->path_t[t->set], 0, n));
        loss = T == 1 ? hs : sg_add(loss, hs);
    }
    return loss;
}

/* The backward half: gradients, the fused update of the output table and the optimizer
 * step. Returns the context's status (SG_OK). It reads the current index set, never the
 * other one, so the next batch may be drawn meanwhile. */
int w2v_step_backward(sg_ctx *ctx, sg_tensor *loss, sg_optim *opt)
{
    int rc = sg_backward(loss);
    if (!rc) rc = sg_optim_step(opt);
    return rc ? rc : sg_ctx_status(ctx);
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
 * period on one thread, so timing them would favour all threads even where one thread is
 * faster. A run shorter than W2V_PICK_TRIAL steps runs on the threads asked for. The
 * constants are in w2v.h. */

/* Whether the coming step runs on one thread. In a trial's first half, from its step
 * W2V_PICK_CUT_AFTER on, the timed all-thread steps so far decide (after a cut they no
 * longer change, so the cut holds to the half's end; with none timed there is no cut). */
bool w2v_pick_one(const w2v_pick *p)
{
    const int64_t k = p->step % W2V_PICK_PERIOD;
    if (k >= 2 * W2V_PICK_TRIAL) return p->one;
    if (k >= W2V_PICK_TRIAL) return true;
    return k >= W2V_PICK_CUT_AFTER && p->one_rate > 0 &&
           p->secs[0] > W2V_PICK_CUT * p->one_rate * (double)p->examples[0];
}

/* Records a step that ran on one thread (one) or all, and decides at the trial's end. */
void w2v_pick_record(w2v_pick *p, bool one, double secs, int64_t examples)
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

