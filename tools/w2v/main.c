/* sgrad-w2v command line: word2vec.c's flags and defaults for training, query modes
 * (-neighbors, -analogy, -evaluate) and -export; a flag parser and printer over
 * libsgrad_models (sgrad_models.h). Everything it prints besides query answers goes to
 * stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include "w2v_tool.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f,
            "sgrad-w2v: word2vec (skip-gram / CBOW, negative sampling and/or hierarchical\n"
            "softmax) on sgrad\n"
            "\n"
            "Training:\n"
            "  sgrad-w2v -train FILE -output FILE [options]\n"
            "    (refused before training: no -output, an output whose directory is missing\n"
            "    or not writable, an output that is a directory, a corpus that is not a\n"
            "    regular file such as a pipe or stdin)\n"
            "    -size N        vector dimension (100)\n"
            "    -window N      max skip length between words (5)\n"
            "    -negative N    negative examples per true one (5; 0: none, needs -hs 1)\n"
            "    -hs 0|1        1: hierarchical softmax over the Huffman tree of the word\n"
            "                   counts, added to negative sampling unless -negative 0 (0)\n"
            "    -sample X      subsampling threshold for frequent words (1e-3; 0 = off)\n"
            "    -min-count N   drop words seen fewer than N times (5)\n"
            "    -iter N        epochs (5)\n"
            "    -alpha X       starting learning rate (0.025 skip-gram, 0.05 CBOW)\n"
            "    -threads N     threads (all cores)\n"
            "    -cbow 0|1      1: CBOW, 0: skip-gram (1, as word2vec.c)\n"
            "    -binary 0|1    write the binary format (0: text)\n"
            "    -seed N        random seed (1)\n"
            "    -batch N       most examples per sgrad step (8192; a step also ends once a\n"
            "                   word occurs 6.4/alpha times in it, a CBOW context word\n"
            "                   3.2/alpha times, at most 256; -batch x 2*-window for CBOW\n"
            "                   and -batch x (-negative + 1) at most 2^26)\n"
            "    -hogwild 0|1   0: bitwise identical vectors for any -threads (default);\n"
            "                   1: Hogwild-style racy row updates, not reproducible\n"
            "    -replicas R    train R copies of the model, one thread each, on R shares\n"
            "                   of the corpus, merged every -sync-every steps (1: one\n"
            "                   model); the vectors depend on R, not on -threads\n"
            "    -engine fused|graph  fused: sg_sgns_loss (default); graph: the same loss\n"
            "                   from sg_index_select, sg_embedding, sg_rowdot, sg_log_sigmoid\n"
            "    -save-context FILE  also write the output (context) vectors, as -output\n"
            "    -checkpoint FILE    save the whole run state to FILE (atomically) every\n"
            "                   -save-every steps and at the end\n"
            "    -save-every N  sgrad steps between checkpoints (0: at each epoch's end)\n"
            "    -sync-every N  under mpirun or -replicas: steps between the full merges\n"
            "                   of the tables (64; from 3 ranks or replicas on, the most\n"
            "                   changed rows more often: docs/word2vec.md \"Under mpirun\")\n"
            "    -dist-timeout S  under mpirun: seconds a rank waits for the others in an\n"
            "                   exchange before it reports a dead rank and the job ends\n"
            "                   (default SGRAD_DIST_TIMEOUT, else 300)\n"
            "    -resume FILE   continue from a checkpoint; needs the first run's training\n"
            "                   flags and corpus (-threads, -binary and outputs may change)\n"
            "    -log FILE      training progress as JSON lines (up to 200 and the end)\n"
            "    -save-vocab FILE  write the vocabulary as `word count` lines (word2vec.c's\n"
            "                   format), most frequent first, before training\n"
            "    -read-vocab FILE  take the vocabulary from such a file (then -min-count);\n"
            "                   the corpus is still read once, for its token count and hash\n"
            "    -classes K     write K word classes (word2vec.c's k-means, 10 iterations)\n"
            "                   to -output as `word class` lines instead of the vectors (0)\n"
            "    -debug N       0: errors only; 1: vocabulary, progress, summary (default);\n"
            "                   2: also settings, each epoch's loss, the tree, k-means\n"
            "Export (no corpus needed):\n"
            "  sgrad-w2v -export MODEL -output FILE [-binary 0|1] [-save-context FILE]\n"
            "                   the vectors of a -checkpoint file (or a model file) as -output\n"
            "Queries (one mode a run; VECTORS in either format, or -binary 0|1 to say which,\n"
            "as a pipe needs):\n"
            "  sgrad-w2v -neighbors VECTORS -words w1,w2,... [-k N]   N (10) nearest by cosine\n"
            "  sgrad-w2v -analogy VECTORS a b c               best d for a:b :: c:d\n"
            "  sgrad-w2v -evaluate VECTORS -questions FILE [-restrict N]\n"
            "                   analogy accuracy (3CosAdd) over the N most frequent words\n"
            "                   (30000), ASCII case ignored (a word's first row stands for\n"
            "                   all its case variants); lines not of 4 words are skipped\n");
}

/* OpenMP's default wait policy spins for a long time at each barrier; a training step has
 * several short parallel regions, and when other processes share the cores a spinning
 * thread keeps the core from the thread it waits for (measured on 2 busy cores: 2 threads
 * 2.5x slower than with a short spin). Unless the user chose a policy, the program
 * restarts itself once with a short spin count; if that fails it goes on as it is. */
static void limit_spin_wait(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("GOMP_SPINCOUNT", "20000", 1)) return;
    execv("/proc/self/exe", argv);
}

/* Under a launcher (mpirun): the number of processes it started, from the variables Open
 * MPI and MPICH set (0: launched, count not given); -1 when not under one. */
static long launched_processes(void)
{
    const char *n = getenv("OMPI_COMM_WORLD_SIZE");
    if (!n) n = getenv("PMI_SIZE");
    if (n) return strtol(n, NULL, 10);
    return getenv("PMIX_RANK") ? 0 : -1;
}

#ifdef W2V_WITH_MPI
/* Under mpirun: the ranks' trainer (NULL with one process) and whether a failure was one
 * every rank agreed on (then each returns; otherwise a lone failure ends the job). */
static sg_w2v_merger *par;
static bool failed_together;
/* Every rank's ok and hash agree (w2v_dist_agree), or every rank fails here. */
static bool ranks_agree(bool ok, uint64_t hash, const char *what)
{
    if (!par) return ok;
    if (w2v_dist_agree(par, ok, hash, what) == 0) return true;
    failed_together = true;
    return false;
}
#else
static bool ranks_agree(bool ok, uint64_t hash, const char *what)
{
    (void)hash;
    (void)what;
    return ok;
}
#endif


/* The command line beyond the library's options: the query modes' arguments. */
typedef struct {
    w2v_flags f;
    const char *neighbors, *words, *analogy, *evaluate, *questions;
    const char *abc[3];
    int64_t restrict_, k;
    bool save_every_given, binary_given;
} w2v_cmdline;

/* One flag with a value (f, a) into c; 0, or 2 with a message. */
static int parse_value_flag(w2v_cmdline *c, const char *f, const char *a)
{
    sg_w2v_opts *o = &c->f.o;
    int64_t n = 0;
    double x = 0;
    bool ok = true;
    if (!strcmp(f, "-train")) c->f.train = a;
    else if (!strcmp(f, "-output")) c->f.output = a;
    else if (!strcmp(f, "-save-context")) c->f.save_context = a;
    else if (!strcmp(f, "-checkpoint")) o->checkpoint = a;
    else if (!strcmp(f, "-resume")) o->resume = a;
    else if (!strcmp(f, "-log")) c->f.log = a;
    else if (!strcmp(f, "-save-vocab")) c->f.save_vocab = a;
    else if (!strcmp(f, "-read-vocab")) c->f.read_vocab = a;
    else if (!strcmp(f, "-export")) c->f.export_model = a;
    else if (!strcmp(f, "-classes")) ok = tc_parse_int(a, 0, INT32_MAX, &n), c->f.classes = (int)n;
    else if (!strcmp(f, "-debug")) ok = tc_parse_int(a, 0, 2, &n), c->f.debug = (int)n;
    else if (!strcmp(f, "-sync-every")) ok = tc_parse_int(a, 1, INT64_MAX, &o->sync_every);
    else if (!strcmp(f, "-save-every")) ok = tc_parse_int(a, 0, INT64_MAX, &o->save_every), c->save_every_given = true;
    else if (!strcmp(f, "-neighbors")) c->neighbors = a;
    else if (!strcmp(f, "-words")) c->words = a;
    else if (!strcmp(f, "-evaluate")) c->evaluate = a;
    else if (!strcmp(f, "-questions")) c->questions = a;
    else if (!strcmp(f, "-engine")) {
        if (!strcmp(a, "fused")) o->engine = SG_W2V_FUSED;
        else if (!strcmp(a, "graph")) o->engine = SG_W2V_GRAPH;
        else ok = false;
    } else if (!strcmp(f, "-size")) ok = tc_parse_int(a, 1, 4096, &n), o->size = (int)n;
    else if (!strcmp(f, "-window")) ok = tc_parse_int(a, 1, SG_W2V_MAX_WINDOW, &n), o->window = (int)n;
    else if (!strcmp(f, "-negative")) ok = tc_parse_int(a, 0, SG_W2V_MAX_NEGATIVE, &n), o->negative = (int)n;
    else if (!strcmp(f, "-iter")) ok = tc_parse_int(a, 1, 100000, &n), o->iter = (int)n;
    else if (!strcmp(f, "-threads")) ok = tc_parse_int(a, 1, 1024, &n), o->threads = (int)n;
    else if (!strcmp(f, "-cbow")) ok = tc_parse_int(a, 0, 1, &n), o->cbow = (int)n;
    else if (!strcmp(f, "-binary")) ok = tc_parse_int(a, 0, 1, &n), c->f.binary = (int)n, c->binary_given = true;
    else if (!strcmp(f, "-hogwild")) ok = tc_parse_int(a, 0, 1, &n), o->hogwild = (int)n;
    else if (!strcmp(f, "-replicas")) ok = tc_parse_int(a, 1, 1024, &n), o->replicas = (int)n;
    else if (!strcmp(f, "-hs")) ok = tc_parse_int(a, 0, 1, &n), o->hs = (int)n;
    else if (!strcmp(f, "-min-count")) ok = tc_parse_int(a, 1, INT64_MAX, &o->min_count);
    else if (!strcmp(f, "-batch")) ok = tc_parse_int(a, 1, 1 << 24, &o->batch);
    else if (!strcmp(f, "-restrict")) ok = tc_parse_int(a, 1, INT64_MAX, &c->restrict_);
    else if (!strcmp(f, "-k")) ok = tc_parse_int(a, 1, 64, &c->k);
    else if (!strcmp(f, "-seed")) ok = tc_parse_int(a, 0, INT64_MAX, &n), o->seed = (uint64_t)n;
    else if (!strcmp(f, "-sample")) ok = tc_parse_real(a, 0, 1, &o->sample);
    else if (!strcmp(f, "-alpha")) ok = tc_parse_real(a, 1e-12, 10, &x), o->alpha = x;
    else if (!strcmp(f, "-dist-timeout")) ok = tc_parse_real(a, 1e-3, 1e9, &c->f.dist_timeout);
    else {
        fprintf(stderr, "sgrad-w2v: unknown flag %s (see -help)\n", f);
        return 2;
    }
    if (ok) return 0;
    fprintf(stderr, "sgrad-w2v: bad value for %s: %s\n", f, a);
    return 2;
}

/* The whole command line into c: 0, 2 with a message, or -1 after -help (exit 0). */
static int parse_flags(int argc, char **argv, w2v_cmdline *c)
{
    c->f.o = sg_w2v_opts_default();
    c->f.debug = 1;
    c->restrict_ = 30000;
    c->k = 10;
    if (argc == 1) {
        usage(stderr);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "-help") || !strcmp(f, "--help")) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(f, "-analogy")) {
            if (i + 4 >= argc) {
                fprintf(stderr, "sgrad-w2v: -analogy needs VECTORS a b c\n");
                return 2;
            }
            c->analogy = argv[++i];
            for (int j = 0; j < 3; j++) c->abc[j] = argv[++i];
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "sgrad-w2v: %s needs a value (see -help)\n", f);
            return 2;
        }
        const int bad = parse_value_flag(c, f, argv[++i]);
        if (bad) return bad;
    }
    return 0;
}

/* ---- queries on a vectors file */

/* The vectors file of a query mode; NULL with a message. */
static sg_w2v *load_vectors(const char *path, int binary)
{
    sg_model_error err;
    sg_w2v *m = sg_w2v_load_vectors(path, binary, &err);
    if (!m && binary < 0 && err.status == SG_ERR_ARG)
        fprintf(stderr, "sgrad-w2v: %s (here: give -binary 0 or -binary 1)\n", err.message);
    else if (!m)
        fprintf(stderr, "sgrad-w2v: %s\n", err.message);
    return m;
}

/* -neighbors: each word's k nearest, or "not in the vocabulary" (then status 1). */
static int cmd_neighbors(sg_w2v *m, const char *words, int k)
{
    char *list = strdup(words);
    if (!list) {
        fprintf(stderr, "sgrad-w2v: out of memory\n");
        return -1;
    }
    int missing = 0;
    for (char *w = strtok(list, ","); w; w = strtok(NULL, ",")) {
        int64_t best[64];
        float sims[64];
        int n = 0;
        sg_model_error err;
        const int rc = sg_w2v_neighbors(m, w, k, best, sims, &n, &err);
        if (rc == SG_ERR_INDEX) {
            printf("%s: not in the vocabulary\n", w);
            missing++;
            continue;
        }
        if (rc) {
            fprintf(stderr, "sgrad-w2v: %s\n", err.message);
            free(list);
            return -1;
        }
        printf("%s:", w);
        for (int i = 0; i < n; i++)
            printf(" %s (%.3f)%s", sg_w2v_word(m, best[i]), (double)sims[i], i + 1 < n ? "," : "");
        printf("\n");
    }
    free(list);
    return missing ? 1 : 0;
}

/* -analogy a b c: the best d and 5 candidates. */
static int cmd_analogy(sg_w2v *m, const char *const *abc)
{
    int rc = 0;
    for (int i = 0; i < 3; i++)
        if (sg_w2v_find(m, abc[i]) < 0) {
            printf("%s: not in the vocabulary\n", abc[i]);
            rc = 1;
        }
    if (rc) return rc;
    int64_t best[5];
    float sims[5];
    int n = 0;
    sg_model_error err;
    if (sg_w2v_analogy(m, abc[0], abc[1], abc[2], 5, best, sims, &n, &err)) {
        fprintf(stderr, "sgrad-w2v: %s\n", err.message);
        return -1;
    }
    if (n == 0) return 0;
    printf("%s : %s :: %s : %s\n", abc[0], abc[1], abc[2], sg_w2v_word(m, best[0]));
    printf("candidates:");
    for (int i = 0; i < n; i++) printf(" %s (%.3f)%s", sg_w2v_word(m, best[i]), (double)sims[i], i + 1 < n ? "," : "\n");
    return 0;
}

/* -evaluate: per-section and total accuracy. */
static int cmd_evaluate(sg_w2v *m, const char *questions, int64_t restrict_)
{
    sg_w2v_eval ev;
    sg_model_error err;
    if (sg_w2v_evaluate(m, questions, restrict_, &ev, &err)) {
        fprintf(stderr, "sgrad-w2v: %s\n", err.message);
        return -1;
    }
    if (ev.skipped)
        fprintf(stderr, "sgrad-w2v: %s: skipped %lld line%s that are not 4 words (the first: line %lld)\n",
                questions, (long long)ev.skipped, ev.skipped > 1 ? "s" : "", (long long)ev.first_skipped);
    for (int64_t s = 0; s < ev.n_sections; s++) {
        const sg_w2v_eval_section *x = &ev.sections[s];
        printf("  %-28s %5lld / %5lld covered, accuracy %5.1f%%\n", x->name, (long long)x->covered,
               (long long)x->total, x->covered ? 100.0 * (double)x->correct / (double)x->covered : 0.0);
    }
    printf("analogy accuracy %.2f%% (%lld of %lld covered questions; %lld questions in all; 3CosAdd over the "
           "%lld most frequent words)\n", ev.covered ? 100.0 * (double)ev.correct / (double)ev.covered : 0.0,
           (long long)ev.correct, (long long)ev.covered, (long long)ev.questions, (long long)ev.rows);
    sg_w2v_eval_free(&ev);
    return 0;
}

/* The query modes: one a run, with its own flags. */
static int run_query(const w2v_cmdline *c)
{
    if (c->neighbors && !c->words) {
        fprintf(stderr, "sgrad-w2v: -neighbors needs -words w1,w2,...\n");
        return 2;
    }
    if (c->evaluate && !c->questions) {
        fprintf(stderr, "sgrad-w2v: -evaluate needs -questions FILE\n");
        return 2;
    }
    const int binary = c->binary_given ? c->f.binary : -1; /* -1: told apart */
    sg_w2v *m = load_vectors(c->neighbors ? c->neighbors : c->analogy ? c->analogy : c->evaluate, binary);
    if (!m) return 1;
    const int rc = c->neighbors ? cmd_neighbors(m, c->words, (int)c->k)
                   : c->analogy ? cmd_analogy(m, c->abc)
                                : cmd_evaluate(m, c->questions, c->restrict_);
    sg_w2v_free(m);
    return rc < 0 ? 1 : rc;
}

/* ---- writing vectors */

/* -output (word vectors, unless -classes) and -save-context; 0 or 1 with messages. */
static int write_vectors(sg_w2v *m, const w2v_flags *f, FILE *log)
{
    const char *paths[2] = {f->classes ? NULL : f->output, f->save_context};
    int rc = 0;
    for (int i = 0; i < 2; i++) {
        if (!paths[i]) continue;
        sg_model_error err;
        if (sg_w2v_write_vectors(m, paths[i], i, f->binary, &err)) {
            fprintf(stderr, "sgrad-w2v: %s (any previous %s is unchanged)\n", err.message, paths[i]);
            rc = 1;
        } else if (log) {
            fprintf(log, "sgrad-w2v: wrote %lld x %lld %s vectors to %s (%s)\n", (long long)sg_w2v_size(m),
                    (long long)sg_w2v_dim(m), i ? "context" : "word", paths[i], f->binary ? "binary" : "text");
        }
    }
    return rc;
}

/* -export MODEL: a model file's or a -checkpoint's vectors, without the corpus. */
static int run_export(const w2v_flags *f)
{
    if (!f->output && !f->save_context) {
        fprintf(stderr, "sgrad-w2v: -export needs -output FILE (and/or -save-context FILE)\n");
        return 2;
    }
    if ((f->output && tc_check_output("sgrad-w2v", "-output", f->output, TC_OUT_ATOMIC, stderr)) ||
        (f->save_context && tc_check_output("sgrad-w2v", "-save-context", f->save_context, TC_OUT_ATOMIC, stderr)))
        return 2;
    sg_model_error err;
    sg_w2v *m = sg_w2v_load(f->export_model, 0, &err);
    if (!m) {
        fprintf(stderr, "sgrad-w2v: %s\n", err.message);
        return 1;
    }
    if (f->save_context && !sg_w2v_table(m, 1)) {
        fprintf(stderr, "sgrad-w2v: %s has no context vectors (trained with -negative 0)\n", f->export_model);
        sg_w2v_free(m);
        return 2;
    }
    const int rc = write_vectors(m, f, f->debug > 0 ? stderr : NULL);
    sg_w2v_free(m);
    return rc;
}

/* ---- training: progress, -log and -debug lines from the library's events */

typedef struct {
    const w2v_flags *f;
    FILE *log; /* stderr, or NULL: quiet */
    tc_progress pr;
    tc_log jl;
    FILE *jlog;
    bool failed; /* -log could not be written: the run stops */
    double interval_loss;
    int64_t interval_n;
} w2v_printer;

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
 * run keeps the leading records its checkpoint covers (at_steps steps or fewer) and cuts
 * the rest, a killed run's records past the checkpoint and its half-written line, then
 * appends, with elapsed_s going on from the last kept record: the file reads as one run.
 * 0, or -1 with a message. */
static int log_start(w2v_printer *p, int64_t at_steps)
{
    const w2v_flags *f = p->f;
    FILE *fl = f->o.resume ? fopen(f->log, "r+") : NULL;
    if (!fl) fl = fopen(f->log, "w");
    if (!fl) {
        fprintf(stderr, "sgrad-w2v: cannot write -log %s: %s\n", f->log, strerror(errno));
        return -1;
    }
    double elapsed = 0, e;
    char *line = NULL;
    size_t cap = 0;
    off_t keep = 0;
    while (f->o.resume && getline(&line, &cap, fl) > 0 && log_record_within(line, at_steps, &e)) {
        keep = ftello(fl);
        elapsed = e;
    }
    free(line);
    if (f->o.resume && (ferror(fl) || fflush(fl) || ftruncate(fileno(fl), keep) || fseeko(fl, keep, SEEK_SET))) {
        fprintf(stderr, "sgrad-w2v: cannot write -log %s: %s\n", f->log, strerror(errno));
        fclose(fl);
        return -1;
    }
    p->jlog = p->jl.f = fl;
    p->jl.start -= elapsed;
    return 0;
}

/* A step: the -log record when due, the progress line when due. */
static void on_step(w2v_printer *p, const sg_event *e)
{
    p->interval_loss += e->loss;
    p->interval_n += e->examples;
    if (p->f->log && !p->jlog && log_start(p, e->steps - 1)) {
        p->failed = true;
        return;
    }
    tc_log_update(&p->jl, e->epoch, e->words, e->total_words, e->steps, e->lr, e->loss, e->examples, false);
    if (!p->log || !tc_progress_due(&p->pr)) return;
    tc_progress_update(&p->pr, e->words_done, e->total_words, e->lr, p->interval_loss / (double)p->interval_n, false);
    p->interval_loss = 0;
    p->interval_n = 0;
}

/* The end: the last progress line and -log record. */
static void on_end(w2v_printer *p, const sg_event *e)
{
    if (p->log && e->words > 0)
        tc_progress_update(&p->pr, e->words_done, e->total_words, e->lr,
                           p->interval_n ? p->interval_loss / (double)p->interval_n : e->loss, true);
    if (p->f->log && !p->jlog && log_start(p, e->steps)) {
        p->failed = true;
        return;
    }
    tc_log_update(&p->jl, e->epoch, e->words_done, e->total_words, e->steps, e->lr, 0, 0, true);
}

static int on_event(void *ud, const sg_event *e)
{
    w2v_printer *p = ud;
    p->pr.threads = p->jl.threads = e->threads > 0 ? e->threads : p->pr.threads;
    if (e->kind == SG_EVENT_STEP) on_step(p, e);
    else if (e->kind == SG_EVENT_END) on_end(p, e);
    else if (e->kind == SG_EVENT_SAVE && p->jlog) fflush(p->jlog); /* the log covers the checkpoint */
    else if (e->kind == SG_EVENT_INFO && p->log) fprintf(p->log, "sgrad-w2v: %s\n", e->message);
    else if (e->kind == SG_EVENT_EPOCH && p->log && p->f->debug > 1)
        fprintf(p->log, "%ssgrad-w2v: epoch %d of %d: loss per example %.4f, %lld steps so far, %.1f s\n",
                p->pr.tty ? "\n" : "", e->epoch, e->epochs, e->loss, (long long)e->steps, e->elapsed_s);
    return p->failed;
}

/* ---- training */

/* The summary lines after training (-debug 1 and 2). */
static void print_summary(const w2v_flags *f, const sg_w2v_result *res, FILE *log)
{
    const sg_w2v_opts *o = &f->o;
    char replicas[32] = "";
    if (o->replicas > 1) snprintf(replicas, sizeof replicas, ", %d replicas", o->replicas);
    fprintf(log, "sgrad-w2v: %s, %d epochs, %d threads (%s%s): %.1f s, %.1fk words/sec/thread, final loss %.4f; "
                 "%lld steps of %.0f examples on average%s\n", o->cbow ? "cbow" : "skip-gram", o->iter, res->threads,
            o->hogwild ? "hogwild, not reproducible" : "deterministic", replicas, res->seconds,
            res->words_per_sec_thread / 1e3, res->final_loss, (long long)res->steps,
            res->steps ? (double)res->examples / (double)res->steps : 0.0, o->replicas > 1 ? " (replica 0's)" : "");
    if (f->debug < 2) return;
    const bool side = res->threads > 1 && !o->hogwild && o->replicas == 1; /* drawing beside the backward */
    const double steps = res->t_forward + res->t_sync + (side ? res->t_overlapped : res->t_backward + res->t_draw);
    fprintf(log, "sgrad-w2v: time in the steps: forward %.2f s, backward and optimizer %.2f s, drawing batches "
                 "%.2f s", res->t_forward, res->t_backward, res->t_draw);
    if (side)
        fprintf(log, " (beside the backward: the two together took %.2f s; %lld steps of %lld on one thread, timed "
                     "as faster)", res->t_overlapped, (long long)res->steps_one_thread, (long long)res->steps);
    fprintf(log, ", merges %.2f s (%lld), the rest %.2f s; %d of %d epochs replayed the corpus as token ids\n",
            res->t_sync, (long long)res->merges, res->seconds - steps, res->epochs_replayed, o->iter);
}

/* The vocabulary: -read-vocab's words, or counted from the corpus (or a -resume
 * checkpoint's); the ranks agree on it. 0, or the exit status. */
static int build_vocab(sg_w2v *m, const w2v_flags *f, FILE *log, double *t_vocab)
{
    sg_model_error err;
    sg_vocab *given = NULL;
    if (f->read_vocab && (!(given = sg_vocab_new()) || sg_vocab_read(given, f->read_vocab, &err))) {
        const char *why = given && !strncmp(err.message, "cannot read ", 12) ? err.message + 12 : "out of memory";
        fprintf(stderr, "sgrad-w2v: cannot read -read-vocab %s\n", why);
        sg_vocab_free(given);
        return 2;
    }
    *t_vocab = tc_now();
    const bool counted = sg_w2v_build_vocab(m, f->train, given, &err) == SG_OK;
    *t_vocab = tc_now() - *t_vocab;
    sg_vocab_free(given);
    if (!counted) fprintf(stderr, "sgrad-w2v: %s\n", err.message);
    const sg_vocab *v = sg_w2v_vocab(m); /* NULL (all zeros) when not counted */
    /* the corpus (its bytes' hash), then the vocabulary (which -read-vocab may change) */
    if (!ranks_agree(counted, sg_vocab_corpus_hash(v), "the corpus's content") ||
        !ranks_agree(true, (uint64_t)sg_vocab_size(v), "the vocabulary's size") ||
        !ranks_agree(true, (uint64_t)sg_vocab_kept_tokens(v), "the vocabulary's words kept"))
        return 1;
    if (log)
        fprintf(log, "sgrad-w2v: %s: %lld words in %lld lines, vocabulary %lld words (min-count %lld%s%s)\n", f->train,
                (long long)sg_vocab_tokens(v), (long long)sg_vocab_lines(v), (long long)sg_vocab_size(v),
                (long long)f->o.min_count, f->read_vocab ? ", read from " : "", f->read_vocab ? f->read_vocab : "");
    return 0;
}

/* The checks between the vocabulary and training: -classes, -resume, the vocabulary's
 * size, then -save-vocab written. 0, or the exit status. */
static int before_training(sg_w2v *m, const w2v_flags *f, FILE *log)
{
    const sg_vocab *v = sg_w2v_vocab(m);
    sg_model_error err;
    if (f->classes > sg_vocab_size(v)) {
        fprintf(stderr, "sgrad-w2v: -classes %d is more than the vocabulary's %lld words\n", f->classes,
                (long long)sg_vocab_size(v));
        return 2;
    }
    /* a checkpoint from other flags or another corpus is refused before training */
    if (sg_w2v_check_resume(m, &err)) {
        fprintf(stderr, "sgrad-w2v: %s\n", err.message);
        return 2;
    }
    if (sg_vocab_size(v) < 2) { /* before -save-vocab replaces a previous file */
        fprintf(stderr, "sgrad-w2v: vocabulary has %lld words (raise the corpus or lower -min-count)\n",
                (long long)sg_vocab_size(v));
        return 1;
    }
    if (!f->save_vocab) return 0;
    if (sg_vocab_save(v, f->save_vocab, &err)) {
        fprintf(stderr, "sgrad-w2v: cannot write -save-vocab %s: %s (any previous file is unchanged)\n",
                f->save_vocab, err.message + (strncmp(err.message, "cannot write ", 13) ? 0 : 13 + strlen(f->save_vocab) + 2));
        return 1;
    }
    if (log) fprintf(log, "sgrad-w2v: wrote %lld words to %s\n", (long long)sg_vocab_size(v), f->save_vocab);
    return 0;
}

/* Trains, then writes the outputs (rank 0 alone under mpirun). 0, or the exit status. */
static int train_and_write(sg_w2v *m, const w2v_flags *f, w2v_printer *p, bool writer, double t_vocab)
{
    FILE *log = p->log;
    tc_progress_init(&p->pr, log, 1);
    tc_log_init(&p->jl, NULL, 1);
    sg_w2v_result res;
    sg_model_error err;
    double t_train = tc_now();
    const int trained = sg_w2v_train_file(m, f->train, &res, &err);
    t_train = tc_now() - t_train;
    int rc = 0;
    if (trained && !p->failed) fprintf(stderr, "%ssgrad-w2v: %s\n", err.status == SG_ERR_VALUE ? "\n" : "", err.message);
    if (trained || p->failed) rc = res.refused ? 2 : 1;
    else if (p->jlog && (fflush(p->jlog) || ferror(p->jlog)))
        fprintf(stderr, "sgrad-w2v: cannot write -log %s: %s\n", f->log, strerror(errno)), rc = 1;
    if (p->jlog) fclose(p->jlog);
    if (rc || !writer) return rc; /* the tables are rank 0's too */
    if (log) print_summary(f, &res, log);
    double t_write = tc_now();
    if (f->classes && sg_w2v_write_classes(m, f->output, f->classes, &err)) {
        if (err.status == SG_ERR_IO) fprintf(stderr, "sgrad-w2v: %s (any previous %s is unchanged)\n", err.message, f->output);
        else fprintf(stderr, "sgrad-w2v: %s\n", err.message);
        rc = 1;
    } else if (f->classes && log) {
        fprintf(log, "sgrad-w2v: wrote %d classes of %lld words to %s\n", f->classes, (long long)sg_w2v_size(m), f->output);
    }
    rc |= write_vectors(m, f, log);
    if (log && f->debug > 1) { /* with -replicas, the trainers set up side by side: not shown */
        fprintf(log, "sgrad-w2v: time outside the steps: vocabulary pass %.2f s", t_vocab);
        if (f->o.replicas == 1) fprintf(log, ", the trainer's setup and teardown %.2f s", t_train - res.seconds);
        fprintf(log, ", %s %.2f s\n", f->classes ? "k-means and writing" : "writing", tc_now() - t_write);
    }
    return rc;
}

/* Training: the checks before any work, the vocabulary, training, the outputs. */
static int run_train(w2v_cmdline *c, int argc, char **argv)
{
    w2v_flags *f = &c->f;
    if (!f->train) {
        fprintf(stderr, "sgrad-w2v: -train FILE is required (see -help)\n");
        return 2;
    }
    if (c->save_every_given && !f->o.checkpoint) {
        fprintf(stderr, "sgrad-w2v: -save-every needs -checkpoint FILE\n");
        return 2;
    }
#ifdef W2V_WITH_MPI
    if (launched_processes() >= 0 && w2v_dist_start(&argc, &argv, f, &par)) {
        failed_together = true;
        return 2;
    }
    if (par && f->o.replicas > 1) { /* every rank has the same flags: all stop here */
        fprintf(stderr, "sgrad-w2v: -replicas is for one process; under mpirun each rank is one replica\n");
        failed_together = true;
        return 2;
    }
#else
    (void)argc;
    (void)argv;
    const long processes = launched_processes();
    if (processes > 1) { /* P copies would train P models and write one file */
        fprintf(stderr, "sgrad-w2v: started as one of %ld processes (mpirun), but this build has no MPI: "
                        "rebuild after installing MPI (Debian: libopenmpi-dev openmpi-bin)\n", processes);
        return 2;
    }
#endif
    const bool writer = !f->o.merger || f->o.merger->rank == 0; /* prints and writes files */
    w2v_printer p = {.f = f, .log = f->debug > 0 && writer ? stderr : NULL};
    f->o.on_event = writer ? on_event : NULL;
    f->o.event_ud = &p;
    f->o.verbose = writer ? f->debug : 0;
    /* before the corpus is read: a run that cannot save its result does not start */
    sg_model_error err;
    sg_w2v *m = sg_w2v_new(&f->o, &err);
    if (!m) fprintf(stderr, "sgrad-w2v: %s\n", err.message);
    bool ok = m != NULL;
    if (ok && f->o.negative == 0 && f->save_context) {
        fprintf(stderr, "sgrad-w2v: -save-context writes negative sampling's output vectors, which -negative 0 "
                        "does not have\n");
        ok = false;
    }
    ok = ranks_agree(ok && !w2v_check_paths(f, stderr), 0, "the flag and path checks");
    if (!writer) f->output = f->save_context = f->log = f->save_vocab = NULL;
    double t_vocab = 0;
    int rc = !ok ? 2 : build_vocab(m, f, p.log, &t_vocab);
    if (!rc) rc = before_training(m, f, p.log);
    if (!rc) rc = train_and_write(m, f, &p, writer, t_vocab);
    sg_w2v_free(m);
    return rc;
}

static int w2v_main(int argc, char **argv)
{
    limit_spin_wait(argv);
    w2v_cmdline c = {0};
    const int bad = parse_flags(argc, argv, &c);
    if (bad) return bad < 0 ? 0 : bad;
    /* one mode a run: a second one would be ignored */
    if ((c.f.train != NULL) + (c.neighbors != NULL) + (c.analogy != NULL) + (c.evaluate != NULL) +
            (c.f.export_model != NULL) > 1) {
        fprintf(stderr, "sgrad-w2v: -train, -neighbors, -analogy, -evaluate and -export are separate modes: give "
                        "one\n");
        return 2;
    }
    if ((c.words && !c.neighbors) || (c.questions && !c.evaluate)) {
        fprintf(stderr, "sgrad-w2v: %s belongs to %s\n", c.words && !c.neighbors ? "-words" : "-questions",
                c.words && !c.neighbors ? "-neighbors" : "-evaluate");
        return 2;
    }
    if (c.neighbors || c.analogy || c.evaluate) return run_query(&c);
    if (c.f.export_model) return run_export(&c.f);
    return run_train(&c, argc, argv);
}

int main(int argc, char **argv)
{
    int rc = w2v_main(argc, argv);
#ifdef W2V_WITH_MPI
    if (rc && par && !failed_together) w2v_dist_abort(par); /* the others may wait in a sync */
    w2v_dist_end(par);
#endif
    return rc;
}
