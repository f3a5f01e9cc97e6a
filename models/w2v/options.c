/* The options of a word2vec run: word2vec.c's defaults and the checks that keep a run's
 * per-step arrays and row-hit counts within their bounds. */
#include "w2v.h"

#include <string.h>

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
    c->engine = SG_W2V_FUSED;
    c->sync_every = 64; /* measured on Brown: docs/word2vec.md "Under mpirun" */
    c->token_cache = W2V_TOKEN_CACHE_MAX;
    c->replicas = 1;
    c->prefetch_min = TC_NOISE_PREFETCH_MIN;
    c->ev.verbose = 1;
}

double w2v_alpha(const w2v_config *c) { return c->alpha > 0 ? c->alpha : (c->cbow ? 0.05 : 0.025); }

bool w2v_replays_corpus(const w2v_config *cfg)
{
    /* ranks (par without replicas) record their own share's first epoch: the whole
     * corpus's record would take every rank's memory */
    return (!cfg->par || cfg->replicas > 1) && !cfg->checkpoint && !cfg->resume && !cfg->vocab_given;
}

void w2v_model_free(w2v_model *m)
{
    if (!m) return;
    sg_ctx_free(m->ctx);
    memset(m, 0, sizeof *m);
}

/* Ranges and combinations that no run can train with. */
static int check_ranges(const w2v_config *cfg, sg_model_error *e)
{
    if (cfg->size < 1 || cfg->iter < 1 || cfg->threads < 0 || cfg->min_count < 1 || cfg->replicas < 1 ||
        cfg->sync_every < 1 || cfg->save_every < 0 || !(cfg->sample >= 0 && cfg->sample <= 1) ||
        cfg->alpha > 10 || (cfg->engine != SG_W2V_FUSED && cfg->engine != SG_W2V_GRAPH))
        return tc_fail(e, SG_ERR_ARG, "an option out of its range (size, iter, threads, min_count, replicas, "
                                      "sync_every, save_every, sample, alpha or engine)");
    if (cfg->batch < 1) return tc_fail(e, SG_ERR_ARG, "-batch must be at least 1");
    if (cfg->replicas > 1 && (cfg->hogwild || cfg->checkpoint || cfg->resume))
        return tc_fail(e, SG_ERR_ARG, "-replicas %d does not go with %s", cfg->replicas,
                       cfg->hogwild ? "-hogwild 1"
                                    : "-checkpoint or -resume (train with -replicas 1 to checkpoint)");
    if (cfg->window < 1 || cfg->window > W2V_MAX_WINDOW || cfg->negative < 0 || cfg->negative > W2V_MAX_NEGATIVE)
        return tc_fail(e, SG_ERR_ARG, "-window must be 1..%d and -negative 0..%d", W2V_MAX_WINDOW,
                       W2V_MAX_NEGATIVE);
    if (cfg->negative == 0 && !cfg->hs)
        return tc_fail(e, SG_ERR_ARG, "-negative 0 without -hs 1 trains nothing: give -negative N or -hs 1");
    return 0;
}

int w2v_config_check(const w2v_config *cfg, sg_model_error *e)
{
    if (check_ranges(cfg, e)) return -1;
    const int64_t cap = cfg->batch > 2 * (int64_t)cfg->window ? cfg->batch : 2 * (int64_t)cfg->window;
    const int64_t slots = cfg->cbow ? cfg->batch * 2 * cfg->window : 0;
    const int64_t targets = cap * (cfg->negative + 1);
    if (slots > W2V_MAX_STEP_SLOTS)
        return tc_fail(e, SG_ERR_ARG, "-batch %lld with -window %d gives %lld CBOW context slots per step, "
                                      "more than %lld: lower -batch or -window",
                       (long long)cfg->batch, cfg->window, (long long)slots, (long long)W2V_MAX_STEP_SLOTS);
    if (targets > W2V_MAX_STEP_SLOTS)
        return tc_fail(e, SG_ERR_ARG, "-batch %lld with -negative %d gives %lld targets per step, more "
                                      "than %lld: lower -batch or -negative",
                       (long long)cfg->batch, cfg->negative, (long long)targets, (long long)W2V_MAX_STEP_SLOTS);
    return 0;
}

int w2v_vocab_check(const tc_vocab *v, sg_model_error *e)
{
    if (v->size >= 2) return 0;
    return tc_fail(e, SG_ERR_ARG, "vocabulary has %lld words (raise the corpus or lower -min-count)",
                   (long long)v->size);
}
