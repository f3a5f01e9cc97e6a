/* sgrad-kge command line: `train` parses its flags into sg_kge_opts (the model's defaults
 * first, from -model), checks its files before any work, trains, writes the model and with
 * -test prints the test metrics; `eval`, `predict` and `export` are query.c's. A flag
 * parser and printer over sgrad_kge.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "kge_tool.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f,
            "sgrad-kge: knowledge-graph embeddings (TransE, DistMult, ComplEx, RotatE) on sgrad\n"
            "\n"
            "  sgrad-kge train -train F [-valid F] [-test F] -output MODEL [options]\n"
            "    -model M       transe_l1|transe_l2|distmult|complex|rotate (complex); the\n"
            "                   other defaults follow the model (sgrad_kge.h)\n"
            "    -dim N         reals per entity (400; even for complex and rotate)\n"
            "    -epochs N      -batch N (edges per step)  -chunk N (edges sharing negatives)\n"
            "    -negs N        uniform negatives per chunk  -chunk-negs 0|1 (the chunk's own\n"
            "                   true entities as negatives too)\n"
            "    -loss L        softmax|logistic|margin|selfadv  -margin X  -adv-temp X\n"
            "    -reciprocal 0|1  inverse relations, tail queries only\n"
            "    -reg n3|none   -reg-coef X   N3 on the batch's rows\n"
            "    -optim O       adagrad|rowwise-adagrad|sgd|lazy-adam   -lr X\n"
            "    -init-scale X  start rows uniform in [-X, X] (0: the model's default)\n"
            "    -threads N     (all cores; the model is the same for any N)  -seed N (1)\n"
            "    -eval-every N  validation MRR every N epochs, on the first -max-eval N\n"
            "                   triples of -valid (1000; 0: all)\n"
            "    -checkpoint F  the whole run state, every -save-every N steps (0: at each\n"
            "                   epoch's end) and at the end; -resume F continues one (same\n"
            "                   options and files)\n"
            "    -log F         JSON lines: one per epoch, the test metrics last\n"
            "    -progress 0|1  the progress line on stderr (1)\n"
            "    -stop-after N  stop once the run has made N steps, as an interrupted run (the\n"
            "                   last -save-every checkpoint stays; no model is written)\n"
            "    under mpirun -np P: the entity table sharded over the ranks (each holds\n"
            "                   about 1/P of its rows), every batch split over them; rank 0\n"
            "                   writes -output and -log; -checkpoint F is F (rank 0) plus one\n"
            "                   F.<rank>-of-<P> per rank, resumed by the same P only\n"
            "  sgrad-kge eval MODEL -test F [-filter F,F,...] [-threads N]\n"
            "                   filtered ranking, one JSON line: mrr, hits@1, hits@3, hits@10,\n"
            "                   mr, count, unseen, unknown (the five means null when count is 0)\n"
            "  sgrad-kge predict MODEL -head H -relation R [-k 10]   the best tails\n"
            "  sgrad-kge predict MODEL -relation R -tail T [-k 10]   the best heads\n"
            "  sgrad-kge export MODEL -output DIR   entities.tsv, relations.tsv, entities.npy,\n"
            "                   relations.npy, entity_names.txt, relation_names.txt\n");
}

typedef struct {
    sg_kge_opts o;
    const char *train, *valid, *test, *output, *log;
    int progress;
    int64_t stop_after; /* -stop-after: stop once the run's steps reach it (0: never) */
} kge_flags;

/* An enum flag's value through parse. */
#define PARSE_ENUM(fn, a, field) (fn(a, &(field)) == 0)

/* One training flag into f; 0, or 2 with a message. */
static int parse_flag(kge_flags *f, const char *k, const char *a)
{
    sg_kge_opts *o = &f->o;
    int64_t n = 0;
    bool ok = true;
    if (!strcmp(k, "-train")) f->train = a;
    else if (!strcmp(k, "-valid")) f->valid = a;
    else if (!strcmp(k, "-test")) f->test = a;
    else if (!strcmp(k, "-output")) f->output = a;
    else if (!strcmp(k, "-log")) f->log = a;
    else if (!strcmp(k, "-checkpoint")) o->checkpoint = a;
    else if (!strcmp(k, "-resume")) o->resume = a;
    else if (!strcmp(k, "-model")) ok = PARSE_ENUM(sg_kge_model_parse, a, o->model);
    else if (!strcmp(k, "-loss")) ok = PARSE_ENUM(sg_kge_loss_parse, a, o->loss);
    else if (!strcmp(k, "-optim")) ok = PARSE_ENUM(sg_kge_optim_parse, a, o->optim);
    else if (!strcmp(k, "-reg")) ok = PARSE_ENUM(sg_kge_reg_parse, a, o->reg);
    else if (!strcmp(k, "-dim")) ok = tc_parse_int(a, 1, 1 << 16, &n), o->dim = (int)n;
    else if (!strcmp(k, "-epochs")) ok = tc_parse_int(a, 1, 1000000, &n), o->epochs = (int)n;
    else if (!strcmp(k, "-batch")) ok = tc_parse_int(a, 1, 1 << 24, &o->batch);
    else if (!strcmp(k, "-chunk")) ok = tc_parse_int(a, 1, 1 << 24, &o->chunk);
    else if (!strcmp(k, "-negs")) ok = tc_parse_int(a, 0, 1 << 20, &o->negs);
    else if (!strcmp(k, "-chunk-negs")) ok = tc_parse_int(a, 0, 1, &n), o->chunk_negs = (int)n;
    else if (!strcmp(k, "-reciprocal")) ok = tc_parse_int(a, 0, 1, &n), o->reciprocal = (int)n;
    else if (!strcmp(k, "-threads")) ok = tc_parse_int(a, 0, 4096, &n), o->threads = (int)n;
    else if (!strcmp(k, "-seed")) ok = tc_parse_int(a, 0, INT64_MAX, &n), o->seed = (uint64_t)n;
    else if (!strcmp(k, "-eval-every")) ok = tc_parse_int(a, 0, 1000000, &n), o->eval_every = (int)n;
    else if (!strcmp(k, "-max-eval")) ok = tc_parse_int(a, 0, INT64_MAX, &o->max_eval);
    else if (!strcmp(k, "-save-every")) ok = tc_parse_int(a, 0, INT64_MAX, &o->save_every);
    else if (!strcmp(k, "-progress")) ok = tc_parse_int(a, 0, 1, &n), f->progress = (int)n;
    else if (!strcmp(k, "-stop-after")) ok = tc_parse_int(a, 0, INT64_MAX, &f->stop_after);
    else if (!strcmp(k, "-margin")) ok = tc_parse_real(a, -1e6, 1e6, &o->margin);
    else if (!strcmp(k, "-adv-temp")) ok = tc_parse_real(a, 0, 1e6, &o->adv_temp);
    else if (!strcmp(k, "-reg-coef")) ok = tc_parse_real(a, 0, 1e6, &o->reg_coef);
    else if (!strcmp(k, "-lr")) ok = tc_parse_real(a, 1e-12, 1e3, &o->lr);
    else if (!strcmp(k, "-init-scale")) ok = tc_parse_real(a, 0, 1e3, &o->init_scale);
    else return fprintf(stderr, KGE_PROG " train: unknown flag %s (see -help)\n", k), 2;
    if (ok) return 0;
    fprintf(stderr, KGE_PROG " train: bad value for %s: %s\n", k, a);
    return 2;
}

/* argv[1..) into f: -model's defaults first, then every flag. 0, or 2 with a message. */
static int parse_train(int argc, char **argv, kge_flags *f)
{
    sg_kge_model model = SG_KGE_COMPLEX;
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "-model") && sg_kge_model_parse(argv[i + 1], &model))
            return fprintf(stderr, KGE_PROG " train: unknown -model %s\n", argv[i + 1]), 2;
    f->o = sg_kge_opts_default(model);
    f->progress = 1;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) return fprintf(stderr, KGE_PROG " train: %s needs a value (see -help)\n", argv[i]), 2;
        const int bad = parse_flag(f, argv[i], argv[i + 1]);
        if (bad) return bad;
    }
    return 0;
}

/* The checks before any work: required flags, options, inputs readable, outputs
 * writable (by the one that writes them: rank 0 under mpirun). 0, or 2 with a message. */
static int check_train(const kge_flags *f, bool writes)
{
    sg_model_error err;
    if (!f->train || !f->output)
        return fprintf(stderr, KGE_PROG " train: -train FILE and -output MODEL are required (see -help)\n"), 2;
    if (sg_kge_opts_check(&f->o, &err)) return fprintf(stderr, KGE_PROG " train: %s\n", err.message), 2;
    if (f->o.eval_every && !f->valid)
        return fprintf(stderr, KGE_PROG " train: -eval-every needs -valid FILE\n"), 2;
    bool ok = kge_check_input("-train", f->train);
    if (f->valid) ok = kge_check_input("-valid", f->valid) && ok;
    if (f->test) ok = kge_check_input("-test", f->test) && ok;
    if (f->o.resume) ok = kge_check_input("-resume", f->o.resume) && ok;
    if (!writes) return ok ? 0 : 2;
    ok = !tc_check_output(KGE_PROG, "-output", f->output, TC_OUT_ATOMIC, stderr) && ok;
    if (f->o.checkpoint) ok = !tc_check_output(KGE_PROG, "-checkpoint", f->o.checkpoint, TC_OUT_ATOMIC, stderr) && ok;
    if (f->log) ok = !tc_check_output(KGE_PROG, "-log", f->log, TC_OUT_DIRECT, stderr) && ok;
    return ok ? 0 : 2;
}

/* ---- progress and -log from the library's events */

typedef struct {
    const kge_flags *f;
    FILE *log;        /* -log, or NULL */
    bool tty;
    double last_print, epoch_start;
    int64_t epoch_edges;
    double loss_sum;
    int64_t loss_n;
} kge_printer;

static void on_step(kge_printer *p, const sg_event *e)
{
    p->epoch_edges += e->examples;
    p->loss_sum += e->loss;
    p->loss_n += 2 * e->examples;
    if (!p->f->progress || e->elapsed_s - p->last_print < (p->tty ? 0.2 : 5.0)) return;
    p->last_print = e->elapsed_s;
    const double frac = e->total_words ? (double)e->words_done / (double)e->total_words : 1;
    const double dt = e->elapsed_s - p->epoch_start;
    fprintf(stderr, "%sepoch %d/%d  %5.1f%%  loss %.4f  edges/sec %.0f  %.0f s%s", p->tty ? "\r" : "", e->epoch,
            e->epochs, 100 * frac, p->loss_n ? p->loss_sum / (double)p->loss_n : 0.0,
            dt > 0 ? (double)p->epoch_edges / dt : 0.0, e->elapsed_s, p->tty ? "  " : "\n");
}

static void on_epoch(kge_printer *p, const sg_event *e)
{
    const double dt = e->elapsed_s - p->epoch_start, eps = dt > 0 ? (double)p->epoch_edges / dt : 0;
    char mrr[32] = "null";
    if (e->valid_mrr >= 0) snprintf(mrr, sizeof mrr, "%.6f", e->valid_mrr);
    if (p->log)
        fprintf(p->log, "{\"epoch\":%d,\"steps\":%lld,\"loss\":%.6g,\"edges_per_sec\":%.1f,\"valid_mrr\":%s,"
                        "\"elapsed_s\":%.3f}\n", e->epoch, (long long)e->steps, e->loss, eps, mrr, e->elapsed_s);
    if (p->f->progress)
        fprintf(stderr, "%s" KGE_PROG ": epoch %d/%d: loss %.4f, %.0f edges/sec%s%s, %.1f s\n", p->tty ? "\n" : "",
                e->epoch, e->epochs, e->loss, eps, e->valid_mrr >= 0 ? ", valid mrr " : "",
                e->valid_mrr >= 0 ? mrr : "", e->elapsed_s);
    p->epoch_start = e->elapsed_s;
    p->epoch_edges = 0;
    p->loss_sum = 0;
    p->loss_n = 0;
}

static int on_event(void *ud, const sg_event *e)
{
    kge_printer *p = ud;
    if (e->kind == SG_EVENT_STEP && p->f->stop_after && e->steps >= p->f->stop_after) return 1;
    if (e->kind == SG_EVENT_STEP) on_step(p, e);
    else if (e->kind == SG_EVENT_EPOCH) on_epoch(p, e);
    /* an epoch's record is on disk when its epoch ends (runs are long; a reader follows) */
    if ((e->kind == SG_EVENT_EPOCH || e->kind == SG_EVENT_SAVE) && p->log) fflush(p->log);
    if (e->kind == SG_EVENT_INFO && p->f->progress) fprintf(stderr, KGE_PROG ": %s\n", e->message);
    return 0;
}

/* ---- train */

/* After training: the model file, and with -test its metrics (filtered by every file). */
static int finish(sg_kge *m, const kge_flags *f, const sg_kge_result *res, FILE *log)
{
    sg_model_error err;
    if (f->progress)
        fprintf(stderr, KGE_PROG ": %s: %lld entities (%lld in -train), %lld relations, %lld edges; %lld steps, "
                        "%.1f s, %.0f edges/sec\n", sg_kge_model_name(f->o.model),
                (long long)res->entities, (long long)res->entities_train, (long long)res->relations,
                (long long)res->train_edges, (long long)res->steps, res->seconds, res->edges_per_sec);
    if (sg_kge_save(m, f->output, &err)) return fprintf(stderr, KGE_PROG ": %s\n", err.message), 1;
    if (!f->test) return 0;
    const char *filters[3] = {f->train, f->valid ? f->valid : f->test, f->test};
    sg_kge_metrics met;
    if (sg_kge_evaluate(m, f->test, filters, f->valid ? 3 : 2, &met, &err))
        return fprintf(stderr, KGE_PROG ": %s\n", err.message), 1;
    kge_print_metrics(stdout, &met);
    printf("\n");
    if (log) {
        fprintf(log, "{\"split\":\"test\",\"metrics\":");
        kge_print_metrics(log, &met);
        fprintf(log, "}\n");
    }
    return 0;
}

/* The processes of the launch this one is part of, as the environment of Open MPI, MPICH
 * or Slurm says; -1 when not launched by one. */
static long launched_processes(void)
{
    const char *vars[3] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (int i = 0; i < 3; i++) {
        const char *n = getenv(vars[i]);
        if (n && *n) return strtol(n, NULL, 10);
    }
    return -1;
}

/* Under mpirun, this rank's sg_kge_dist into *d (NULL: one process). 0, or 2 with a
 * message. */
static int start_ranks(int *argc, char ***argv, const kge_flags *f, sg_kge_dist **d)
{
    *d = NULL;
    const long n = launched_processes();
#ifdef KGE_WITH_MPI
    if (n >= 0 && kge_dist_start(argc, argv, f->progress, d)) return 2;
#else
    (void)argc, (void)argv, (void)f;
    if (n > 1)
        return fprintf(stderr, KGE_PROG ": started as one of %ld processes (mpirun), but this build has no MPI: "
                                        "rebuild after installing MPI (Debian: libopenmpi-dev openmpi-bin)\n", n), 2;
#endif
    return 0;
}

/* Trains per f (as rank `rank` of a run when d is given); 0 or the exit status. */
static int train(kge_flags *f, sg_kge_dist *d)
{
    const int rank = d ? d->rank : 0;
    kge_printer p = {.f = f, .tty = isatty(fileno(stderr))};
    if (rank == 0) f->o.on_event = on_event, f->o.event_ud = &p;
    f->o.verbose = rank == 0 ? f->progress : 0;
    sg_model_error err;
    int rc = 0;
    sg_kge *m = sg_kge_new(&f->o, &err);
    if (!m) return fprintf(stderr, KGE_PROG " train: %s\n", err.message), 2;
    sg_kge_set_dist(m, d);
    if (rank == 0 && f->log && !(p.log = fopen(f->log, f->o.resume ? "a" : "w")))
        rc = 2, fprintf(stderr, KGE_PROG ": cannot write -log %s: %s\n", f->log, strerror(errno));
    if (d) rc = kge_dist_agree(d, rc);
    sg_kge_result res;
    if (!rc && sg_kge_train_files(m, f->train, f->valid, f->test, &res, &err)) {
        if (rank == 0) fprintf(stderr, "%s" KGE_PROG ": %s\n", p.tty ? "\n" : "", err.message);
        rc = res.refused || err.status == SG_ERR_FORMAT || err.status == SG_ERR_IO ? 2 : 1;
    }
    if (!rc && rank == 0) rc = finish(m, f, &res, p.log);
    if (p.log && fclose(p.log) && !rc) rc = 1, fprintf(stderr, KGE_PROG ": cannot write -log %s\n", f->log);
    sg_kge_free(m);
    return rc;
}

static int cmd_train(int argc, char **argv)
{
    kge_flags f;
    memset(&f, 0, sizeof f);
    sg_kge_dist *d = NULL;
    int rc = parse_train(argc, argv, &f);
    if (!rc) rc = start_ranks(&argc, &argv, &f, &d);
    if (!rc) rc = check_train(&f, !d || d->rank == 0);
    if (d) rc = kge_dist_agree(d, rc);
    if (!rc) rc = train(&f, d);
#ifdef KGE_WITH_MPI
    kge_dist_end(d);
#endif
    return rc;
}

/* OpenMP's default wait policy spins long at each barrier, and a step has many short
 * parallel regions: on shared cores a spinning thread keeps the core from the thread it
 * waits for (sgrad-w2v measured 2.5x on 2 busy cores). Unless the user chose a policy, the
 * program restarts itself once with a short spin count; if that fails it goes on. */
static void limit_spin_wait(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("GOMP_SPINCOUNT", "20000", 1)) return;
    execv("/proc/self/exe", argv);
}

int main(int argc, char **argv)
{
    if (argc < 2) return usage(stderr), 2;
    limit_spin_wait(argv);
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "-help") || !strcmp(cmd, "--help")) return usage(stdout), 0;
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "-help") || !strcmp(argv[i], "--help")) return usage(stdout), 0;
    if (!strcmp(cmd, "train")) return cmd_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "eval")) return kge_cmd_eval(argc - 1, argv + 1);
    if (!strcmp(cmd, "predict")) return kge_cmd_predict(argc - 1, argv + 1);
    if (!strcmp(cmd, "export")) return kge_cmd_export(argc - 1, argv + 1);
    fprintf(stderr, KGE_PROG ": unknown subcommand %s (train, eval, predict, export; see -help)\n", cmd);
    return 2;
}
