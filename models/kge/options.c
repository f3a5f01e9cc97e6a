/* The options of a knowledge-graph-embedding run: names as the flags spell them, the
 * defaults of each model, and the checks that name the flag at fault.
 *
 * Defaults are starting points from the literature, adapted to sgrad's optimizers:
 * ComplEx and DistMult as kbc's ComplEx-N3 (Lacroix et al. 2018: softmax cross-entropy,
 * reciprocal relations, N3 0.05, Adagrad lr 0.1, batch 1000, init 1e-3), with 1000
 * shared uniform negatives per chunk instead of the full softmax; RotatE and TransE as
 * RotatE's code runs them (Sun et al. 2019: self-adversarial loss, margin 6, temperature
 * 0.5, Adam, batch 512, 256 negatives), with LazyAdam at a larger learning rate for the
 * far fewer steps of a short run.
 */
#include "engine.h"

#include <math.h>
#include <string.h>

static const char *const model_names[] = {"transe_l1", "transe_l2", "distmult", "complex", "rotate"};
static const char *const loss_names[] = {"softmax", "logistic", "margin", "selfadv"};
static const char *const optim_names[] = {"adagrad", "rowwise-adagrad", "sgd", "lazy-adam"};
static const char *const reg_names[] = {"none", "n3"};
#define COUNT(a) ((int)(sizeof(a) / sizeof *(a)))

static const char *name_of(const char *const *names, int n, int v) { return v >= 0 && v < n ? names[v] : NULL; }

static int parse_of(const char *const *names, int n, const char *s, int *v)
{
    for (int i = 0; s && i < n; i++)
        if (!strcmp(s, names[i])) return *v = i, 0;
    return -1;
}

const char *sg_kge_model_name(sg_kge_model m) { return name_of(model_names, COUNT(model_names), (int)m); }
const char *sg_kge_loss_name(sg_kge_loss l) { return name_of(loss_names, COUNT(loss_names), (int)l); }
const char *sg_kge_optim_name(sg_kge_optim o) { return name_of(optim_names, COUNT(optim_names), (int)o); }
const char *sg_kge_reg_name(sg_kge_reg r) { return name_of(reg_names, COUNT(reg_names), (int)r); }

int sg_kge_model_parse(const char *name, sg_kge_model *out)
{
    int v;
    if (parse_of(model_names, COUNT(model_names), name, &v)) return -1;
    *out = (sg_kge_model)v;
    return 0;
}

int sg_kge_loss_parse(const char *name, sg_kge_loss *out)
{
    int v;
    if (parse_of(loss_names, COUNT(loss_names), name, &v)) return -1;
    *out = (sg_kge_loss)v;
    return 0;
}

int sg_kge_optim_parse(const char *name, sg_kge_optim *out)
{
    int v;
    if (parse_of(optim_names, COUNT(optim_names), name, &v)) return -1;
    *out = (sg_kge_optim)v;
    return 0;
}

int sg_kge_reg_parse(const char *name, sg_kge_reg *out)
{
    int v;
    if (parse_of(reg_names, COUNT(reg_names), name, &v)) return -1;
    *out = (sg_kge_reg)v;
    return 0;
}

bool kge_is_distance(sg_kge_model m) { return m == SG_KGE_TRANSE_L1 || m == SG_KGE_TRANSE_L2 || m == SG_KGE_ROTATE; }
bool kge_is_complex(sg_kge_model m) { return m == SG_KGE_COMPLEX || m == SG_KGE_ROTATE; }

double kge_init_scale(const sg_kge_opts *o)
{
    if (o->init_scale > 0) return o->init_scale;
    if (!kge_is_distance(o->model)) return 1e-3; /* kbc's */
    /* RotatE's embedding range: (gamma + 2) / hidden size, a hidden unit a complex number */
    const double m = o->margin > 0 ? o->margin : 6;
    return (m + 2) / (o->model == SG_KGE_ROTATE ? o->dim / 2 : o->dim);
}

sg_kge_opts sg_kge_opts_default(sg_kge_model model)
{
    /* Chosen on the bundled WordNet graph's validation split within a 15-minute budget on
     * 2 cores (docs/kge.md "Defaults"): the chunk's own entities as extra negatives cost
     * about twice the time of a step for no gain there, so they are off. */
    sg_kge_opts o;
    memset(&o, 0, sizeof o);
    o.model = model;
    o.dim = 400;
    o.seed = 1;
    o.max_eval = 1000;
    o.verbose = 1;
    if (!kge_is_distance(model)) { /* kbc's ComplEx-N3, with PBG's shared negatives */
        o.epochs = 30;
        o.batch = o.chunk = o.negs = 1000;
        o.loss = SG_KGE_SOFTMAX;
        o.reciprocal = 1;
        o.reg = SG_KGE_REG_N3;
        o.reg_coef = 0.05;
        o.optim = SG_KGE_ADAGRAD;
        o.lr = 0.1;
        return o;
    }
    o.epochs = 25; /* RotatE's loss, margin and temperature; a rate for tens of epochs */
    o.batch = o.chunk = o.negs = 512;
    o.loss = SG_KGE_SELFADV;
    /* RotatE's gamma 6; the L2 distance of rows in that initial range is far below it,
     * which leaves no gradient (validation MRR 0.005 after 5 epochs), margin 1 learns */
    o.margin = model == SG_KGE_TRANSE_L2 ? 1 : 6;
    o.adv_temp = 0.5;
    o.optim = SG_KGE_LAZY_ADAM;
    o.lr = 0.01;
    return o;
}

/* The enums and integer ranges; 0 or -1 with the flag named. */
static int check_ints(const sg_kge_opts *o, sg_model_error *e)
{
    if (!sg_kge_model_name(o->model)) return tc_fail(e, SG_ERR_ARG, "-model: unknown model %d", (int)o->model);
    if (!sg_kge_loss_name(o->loss)) return tc_fail(e, SG_ERR_ARG, "-loss: unknown loss %d", (int)o->loss);
    if (!sg_kge_optim_name(o->optim)) return tc_fail(e, SG_ERR_ARG, "-optim: unknown optimizer %d", (int)o->optim);
    if (!sg_kge_reg_name(o->reg)) return tc_fail(e, SG_ERR_ARG, "-reg: unknown regulariser %d", (int)o->reg);
    if (o->dim < 1 || o->dim > (1 << 16)) return tc_fail(e, SG_ERR_ARG, "-dim must be 1..65536 (got %d)", o->dim);
    if (kge_is_complex(o->model) && o->dim % 2)
        return tc_fail(e, SG_ERR_ARG, "-dim must be even for -model %s (real and imaginary parts; got %d)",
                       sg_kge_model_name(o->model), o->dim);
    if (o->epochs < 1 || o->epochs > 1000000) return tc_fail(e, SG_ERR_ARG, "-epochs must be 1..1000000");
    if (o->batch < 1 || o->batch > (1 << 24)) return tc_fail(e, SG_ERR_ARG, "-batch must be 1..16777216");
    if (o->chunk < 1 || o->chunk > (1 << 24)) return tc_fail(e, SG_ERR_ARG, "-chunk must be 1..16777216");
    if (o->negs < 0 || o->negs > (1 << 20)) return tc_fail(e, SG_ERR_ARG, "-negs must be 0..1048576");
    if (o->chunk_negs != 0 && o->chunk_negs != 1) return tc_fail(e, SG_ERR_ARG, "-chunk-negs must be 0 or 1");
    if (o->negs == 0 && !o->chunk_negs)
        return tc_fail(e, SG_ERR_ARG, "-negs 0 with -chunk-negs 0 leaves no negatives");
    if (o->reciprocal != 0 && o->reciprocal != 1) return tc_fail(e, SG_ERR_ARG, "-reciprocal must be 0 or 1");
    if (o->threads < 0 || o->threads > 4096) return tc_fail(e, SG_ERR_ARG, "-threads must be 0..4096");
    if (o->eval_every < 0 || o->max_eval < 0 || o->save_every < 0)
        return tc_fail(e, SG_ERR_ARG, "-eval-every, -max-eval and -save-every must be >= 0");
    return 0;
}

int kge_opts_check(const sg_kge_opts *o, sg_model_error *e)
{
    if (check_ints(o, e)) return -1;
    if (!isfinite(o->margin)) return tc_fail(e, SG_ERR_ARG, "-margin must be finite");
    if (!(o->adv_temp >= 0 && isfinite(o->adv_temp))) return tc_fail(e, SG_ERR_ARG, "-adv-temp must be >= 0");
    if (!(o->reg_coef >= 0 && isfinite(o->reg_coef))) return tc_fail(e, SG_ERR_ARG, "-reg-coef must be >= 0");
    if (!(o->lr > 0 && o->lr <= 1e3)) return tc_fail(e, SG_ERR_ARG, "-lr must be in (0, 1000]");
    if (!(o->init_scale >= 0 && o->init_scale <= 1e3)) return tc_fail(e, SG_ERR_ARG, "-init-scale must be in [0, 1000]");
    if (o->save_every > 0 && !o->checkpoint) return tc_fail(e, SG_ERR_ARG, "-save-every needs -checkpoint FILE");
    return 0;
}

int sg_kge_opts_check(const sg_kge_opts *opts, sg_model_error *err)
{
    tc_ok(err);
    if (!opts) return tc_fail(err, SG_ERR_NULL, "NULL options"), SG_ERR_NULL;
    return kge_opts_check(opts, err) ? SG_ERR_ARG : SG_OK;
}
