/* sgrad-w2v command line: word2vec.c's flags and defaults for training, plus query modes
 * (-neighbors, -analogy, -evaluate). Everything it prints besides query answers goes to
 * stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include "w2v.h"

#include <errno.h>
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
            "                   changed rows more often: tools/w2v/README.md \"Under mpirun\")\n"
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
static w2v_parallel *par;
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

static int w2v_main(int argc, char **argv)
{
    limit_spin_wait(argv);
    w2v_config cfg;
    w2v_config_default(&cfg);
    const char *neighbors = NULL, *words = NULL, *analogy = NULL, *evaluate = NULL,
               *questions = NULL;
    const char *abc[3] = {NULL, NULL, NULL};
    int64_t restrict_ = 30000, k = 10;
    bool save_every_given = false, binary_given = false;
    if (argc == 1) {
        usage(stderr);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "-help") || !strcmp(f, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(f, "-analogy")) {
            if (i + 4 >= argc) {
                fprintf(stderr, "sgrad-w2v: -analogy needs VECTORS a b c\n");
                return 2;
            }
            analogy = argv[++i];
            for (int j = 0; j < 3; j++) abc[j] = argv[++i];
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "sgrad-w2v: %s needs a value (see -help)\n", f);
            return 2;
        }
        const char *a = argv[++i];
        int64_t n = 0;
        double x = 0;
        bool ok = true;
        if (!strcmp(f, "-train")) cfg.train = a;
        else if (!strcmp(f, "-output")) cfg.output = a;
        else if (!strcmp(f, "-save-context")) cfg.save_context = a;
        else if (!strcmp(f, "-checkpoint")) cfg.checkpoint = a;
        else if (!strcmp(f, "-resume")) cfg.resume = a;
        else if (!strcmp(f, "-log")) cfg.log = a;
        else if (!strcmp(f, "-save-vocab")) cfg.save_vocab = a;
        else if (!strcmp(f, "-read-vocab")) cfg.read_vocab = a;
        else if (!strcmp(f, "-classes")) ok = tc_parse_int(a, 0, INT32_MAX, &n), cfg.classes = (int)n;
        else if (!strcmp(f, "-debug")) ok = tc_parse_int(a, 0, 2, &n), cfg.debug = (int)n;
        else if (!strcmp(f, "-sync-every")) ok = tc_parse_int(a, 1, INT64_MAX, &cfg.sync_every);
        else if (!strcmp(f, "-save-every")) ok = tc_parse_int(a, 0, INT64_MAX, &cfg.save_every), save_every_given = true;
        else if (!strcmp(f, "-neighbors")) neighbors = a;
        else if (!strcmp(f, "-words")) words = a;
        else if (!strcmp(f, "-evaluate")) evaluate = a;
        else if (!strcmp(f, "-questions")) questions = a;
        else if (!strcmp(f, "-engine")) {
            if (!strcmp(a, "fused")) cfg.engine = W2V_ENGINE_FUSED;
            else if (!strcmp(a, "graph")) cfg.engine = W2V_ENGINE_GRAPH;
            else ok = false;
        } else if (!strcmp(f, "-size")) ok = tc_parse_int(a, 1, 4096, &n), cfg.size = (int)n;
        else if (!strcmp(f, "-window")) ok = tc_parse_int(a, 1, W2V_MAX_WINDOW, &n), cfg.window = (int)n;
        else if (!strcmp(f, "-negative")) ok = tc_parse_int(a, 0, W2V_MAX_NEGATIVE, &n), cfg.negative = (int)n;
        else if (!strcmp(f, "-iter")) ok = tc_parse_int(a, 1, 100000, &n), cfg.iter = (int)n;
        else if (!strcmp(f, "-threads")) ok = tc_parse_int(a, 1, 1024, &n), cfg.threads = (int)n;
        else if (!strcmp(f, "-cbow")) ok = tc_parse_int(a, 0, 1, &n), cfg.cbow = (int)n;
        else if (!strcmp(f, "-binary")) ok = tc_parse_int(a, 0, 1, &n), cfg.binary = (int)n, binary_given = true;
        else if (!strcmp(f, "-hogwild")) ok = tc_parse_int(a, 0, 1, &n), cfg.hogwild = (int)n;
        else if (!strcmp(f, "-replicas")) ok = tc_parse_int(a, 1, 1024, &n), cfg.replicas = (int)n;
        else if (!strcmp(f, "-hs")) ok = tc_parse_int(a, 0, 1, &n), cfg.hs = (int)n;
        else if (!strcmp(f, "-min-count")) ok = tc_parse_int(a, 1, INT64_MAX, &cfg.min_count);
        else if (!strcmp(f, "-batch")) ok = tc_parse_int(a, 1, 1 << 24, &cfg.batch);
        else if (!strcmp(f, "-restrict")) ok = tc_parse_int(a, 1, INT64_MAX, &restrict_);
        else if (!strcmp(f, "-k")) ok = tc_parse_int(a, 1, 64, &k);
        else if (!strcmp(f, "-seed")) ok = tc_parse_int(a, 0, INT64_MAX, &n), cfg.seed = (uint64_t)n;
        else if (!strcmp(f, "-sample")) ok = tc_parse_real(a, 0, 1, &cfg.sample);
        else if (!strcmp(f, "-alpha")) ok = tc_parse_real(a, 1e-12, 10, &x), cfg.alpha = x;
        else if (!strcmp(f, "-dist-timeout")) ok = tc_parse_real(a, 1e-3, 1e9, &cfg.dist_timeout);
        else {
            fprintf(stderr, "sgrad-w2v: unknown flag %s (see -help)\n", f);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "sgrad-w2v: bad value for %s: %s\n", f, a);
            return 2;
        }
    }

    /* one mode a run: a second one would be ignored */
    if ((cfg.train != NULL) + (neighbors != NULL) + (analogy != NULL) + (evaluate != NULL) > 1) {
        fprintf(stderr, "sgrad-w2v: -train, -neighbors, -analogy and -evaluate are separate "
                        "modes: give one\n");
        return 2;
    }
    if ((words && !neighbors) || (questions && !evaluate)) {
        fprintf(stderr, "sgrad-w2v: %s belongs to %s\n", words && !neighbors ? "-words" : "-questions",
                words && !neighbors ? "-neighbors" : "-evaluate");
        return 2;
    }
    if (neighbors || analogy || evaluate) {
        if (neighbors && !words) {
            fprintf(stderr, "sgrad-w2v: -neighbors needs -words w1,w2,...\n");
            return 2;
        }
        if (evaluate && !questions) {
            fprintf(stderr, "sgrad-w2v: -evaluate needs -questions FILE\n");
            return 2;
        }
        sg_ctx *ctx = sg_ctx_new(NULL);
        if (!ctx) return 1;
        const int binary = binary_given ? cfg.binary : -1; /* -1: told apart */
        int rc;
        if (neighbors) {
            rc = w2v_cmd_neighbors(ctx, neighbors, binary, words, (int)k, stdout);
        } else if (analogy) {
            rc = w2v_cmd_analogy(ctx, analogy, binary, abc[0], abc[1], abc[2], stdout);
        } else {
            w2v_eval ev;
            rc = w2v_cmd_evaluate(ctx, evaluate, binary, questions, restrict_, stdout, &ev);
        }
        sg_ctx_free(ctx);
        return rc < 0 ? 1 : rc;
    }

    if (!cfg.train) {
        fprintf(stderr, "sgrad-w2v: -train FILE is required (see -help)\n");
        return 2;
    }
    if (save_every_given && !cfg.checkpoint) {
        fprintf(stderr, "sgrad-w2v: -save-every needs -checkpoint FILE\n");
        return 2;
    }
#ifdef W2V_WITH_MPI
    if (launched_processes() >= 0 && w2v_dist_start(&argc, &argv, &cfg, &par)) {
        failed_together = true;
        return 2;
    }
    if (par && cfg.replicas > 1) { /* every rank has the same flags: all stop here */
        fprintf(stderr, "sgrad-w2v: -replicas is for one process; under mpirun each rank is one replica\n");
        failed_together = true;
        return 2;
    }
#else
    const long processes = launched_processes();
    if (processes > 1) { /* P copies would train P models and write one file */
        fprintf(stderr, "sgrad-w2v: started as one of %ld processes (mpirun), but this build has no MPI: "
                        "rebuild after installing MPI (Debian: libopenmpi-dev openmpi-bin)\n",
                processes);
        return 2;
    }
#endif
    /* before the corpus is read: a run that cannot save its result does not start */
    if (!ranks_agree(!w2v_config_check(&cfg, stderr) && !w2v_check_paths(&cfg, stderr), 0,
                     "the flag and path checks"))
        return 2;
    const bool writer = !cfg.par || cfg.par->rank == 0; /* prints and writes files */
    if (!writer) cfg.output = cfg.save_context = cfg.log = cfg.save_vocab = NULL;
    FILE *log = cfg.debug > 0 && writer ? stderr : NULL;
    tc_vocab v;
    tc_vocab_init(&v);
    if (cfg.read_vocab) {
        char why[160];
        if (tc_vocab_read(&v, cfg.read_vocab, why, sizeof why)) {
            fprintf(stderr, "sgrad-w2v: cannot read -read-vocab %s: %s\n", cfg.read_vocab, why);
            tc_vocab_free(&v);
            return 2;
        }
    }
    /* the counting pass's record of the corpus, which the epochs replay instead of
     * reading and looking it up again */
    tc_codes codes = {0};
    if (w2v_replays_corpus(&cfg)) tc_codes_start(&codes, cfg.token_cache);
    double t_vocab = tc_now(); /* -debug 2's times outside the steps */
    bool counted = !(cfg.read_vocab ? tc_vocab_scan_file(&v, cfg.train)
                                    : tc_vocab_count_file_codes(&v, cfg.train, &codes)) &&
                   !tc_vocab_finalize_codes(&v, cfg.min_count, &codes);
    t_vocab = tc_now() - t_vocab;
    if (codes.code) cfg.corpus_codes = &codes;
    else if (codes.dropped && cfg.replicas <= 1) cfg.token_cache = 0; /* the corpus outgrew
        it (or no memory): the first epoch's own record would too; a replica's share may fit */
    if (!counted) fprintf(stderr, "sgrad-w2v: cannot read %s: %s\n", cfg.train, strerror(errno));
    /* the corpus (its bytes' hash), then the vocabulary (which -read-vocab may change) */
    if (!ranks_agree(counted, v.corpus_hash, "the corpus's content") ||
        !ranks_agree(true, (uint64_t)v.size, "the vocabulary's size") ||
        !ranks_agree(true, (uint64_t)v.train_words, "the vocabulary's words kept")) {
        tc_codes_free(&codes);
        tc_vocab_free(&v);
        return 1;
    }
    if (log)
        fprintf(log, "sgrad-w2v: %s: %lld words in %lld lines, vocabulary %lld words "
                     "(min-count %lld%s%s)\n", cfg.train, (long long)v.total_tokens,
                (long long)v.lines, (long long)v.size, (long long)cfg.min_count,
                cfg.read_vocab ? ", read from " : "", cfg.read_vocab ? cfg.read_vocab : "");
    if (cfg.classes > v.size) {
        fprintf(stderr, "sgrad-w2v: -classes %d is more than the vocabulary's %lld words\n",
                cfg.classes, (long long)v.size);
        tc_codes_free(&codes);
        tc_vocab_free(&v);
        return 2;
    }
    /* a checkpoint from other flags or another corpus is refused before training */
    if (cfg.resume && w2v_checkpoint_check(cfg.resume, &cfg, &v, stderr)) {
        tc_codes_free(&codes);
        tc_vocab_free(&v);
        return 2;
    }
    if (w2v_vocab_check(&v, stderr)) { /* before -save-vocab replaces a previous file */
        tc_codes_free(&codes);
        tc_vocab_free(&v);
        return 1;
    }
    if (cfg.save_vocab) {
        if (tc_vocab_save(&v, cfg.save_vocab)) {
            fprintf(stderr, "sgrad-w2v: cannot write -save-vocab %s: %s (any previous file is "
                            "unchanged)\n", cfg.save_vocab, tc_out_strerror(errno));
            tc_codes_free(&codes);
            tc_vocab_free(&v);
            return 1;
        }
        if (log) fprintf(log, "sgrad-w2v: wrote %lld words to %s\n", (long long)v.size, cfg.save_vocab);
    }
    w2v_result res;
    w2v_model m;
    int threads = 0; /* -replicas: the most replicas computing at once */
    if (cfg.replicas > 1) {
        sg_ctx_opts co = {.threads = cfg.threads};
        sg_ctx *c = sg_ctx_new(&co); /* the library's reading of -threads (0: every core) */
        threads = c ? sg_ctx_threads(c) : 1;
        sg_ctx_free(c);
    }
    double t_train = tc_now();
    const int trained = cfg.replicas > 1 ? w2v_replicas_train(&cfg, &v, log, threads, &res, &m)
                                         : w2v_train(&cfg, &v, log, &res, &m);
    t_train = tc_now() - t_train;
    tc_codes_free(&codes);
    if (trained) {
        tc_vocab_free(&v);
        return trained == 2 ? 2 : 1;
    }
    if (!writer) { /* the tables are rank 0's too */
        w2v_model_free(&m);
        tc_vocab_free(&v);
        return 0;
    }
    char replicas[32] = "";
    if (cfg.replicas > 1) snprintf(replicas, sizeof replicas, ", %d replicas", cfg.replicas);
    if (cfg.replicas > 1) { /* res's rate counts the threads the replicas ran on */
        if (threads > cfg.replicas) threads = cfg.replicas;
    } else {
        threads = sg_ctx_threads(m.ctx);
    }
    if (log) fprintf(log,
            "sgrad-w2v: %s, %d epochs, %d threads (%s%s): %.1f s, %.1fk words/sec/thread, "
            "final loss %.4f; %lld steps of %.0f examples on average%s\n",
            cfg.cbow ? "cbow" : "skip-gram", cfg.iter, threads,
            cfg.hogwild ? "hogwild, not reproducible" : "deterministic", replicas, res.seconds,
            res.words_per_sec_thread / 1e3, res.final_loss, (long long)res.steps,
            res.steps ? (double)res.examples / (double)res.steps : 0.0, cfg.replicas > 1 ? " (replica 0's)" : "");
    if (log && cfg.debug > 1) {
        const bool side = threads > 1 && !cfg.hogwild && cfg.replicas == 1; /* drawing beside the backward */
        const double steps = res.t_forward + res.t_sync + (side ? res.t_overlapped : res.t_backward + res.t_draw);
        fprintf(log, "sgrad-w2v: time in the steps: forward %.2f s, backward and optimizer %.2f s, "
                     "drawing batches %.2f s", res.t_forward, res.t_backward, res.t_draw);
        if (side)
            fprintf(log, " (beside the backward: the two together took %.2f s; %lld steps of %lld on one "
                         "thread, timed as faster)", res.t_overlapped, (long long)res.steps_one_thread,
                    (long long)res.steps);
        fprintf(log, ", merges %.2f s (%lld), the rest %.2f s; %d of %d epochs replayed the corpus as "
                     "token ids\n", res.t_sync, (long long)res.merges, res.seconds - steps, res.epochs_replayed,
                cfg.iter);
    }
    int rc = 0;
    double t_write = tc_now();
    sg_tensor *tables[2] = {m.in, m.out};
    const char *paths[2] = {cfg.classes ? NULL : cfg.output, cfg.save_context};
    if (cfg.classes) {
        int32_t *cl = malloc((size_t)v.size * sizeof *cl);
        if (!cl || w2v_kmeans(sg_tensor_f32(m.in), v.size, cfg.size, cfg.classes, W2V_KMEANS_ITERS,
                              threads, cl, cfg.debug > 1 ? stderr : NULL)) {
            fprintf(stderr, "sgrad-w2v: out of memory for -classes\n");
            rc = 1;
        } else if (w2v_classes_write(cfg.output, (char *const *)v.words, cl, v.size)) {
            fprintf(stderr, "sgrad-w2v: cannot write %s: %s (any previous %s is unchanged)\n",
                    cfg.output, tc_out_strerror(errno), cfg.output);
            rc = 1;
        } else if (log) {
            fprintf(log, "sgrad-w2v: wrote %d classes of %lld words to %s\n", cfg.classes,
                    (long long)v.size, cfg.output);
        }
        free(cl);
    }
    for (int i = 0; i < 2; i++) {
        if (!paths[i]) continue;
        if (sg_wordvec_write(paths[i], tables[i], (const char *const *)v.words, cfg.binary)) {
            fprintf(stderr, "sgrad-w2v: %s (any previous %s is unchanged)\n", sg_ctx_message(m.ctx),
                    paths[i]);
            rc = 1;
        } else if (log) {
            fprintf(log, "sgrad-w2v: wrote %lld x %d %s vectors to %s (%s)\n", (long long)v.size,
                    cfg.size, i ? "context" : "word", paths[i], cfg.binary ? "binary" : "text");
        }
    }
    if (log && cfg.debug > 1) { /* with -replicas, the trainers set up side by side: not shown */
        fprintf(log, "sgrad-w2v: time outside the steps: vocabulary pass %.2f s", t_vocab);
        if (cfg.replicas == 1) fprintf(log, ", the trainer's setup and teardown %.2f s", t_train - res.seconds);
        fprintf(log, ", %s %.2f s\n", cfg.classes ? "k-means and writing" : "writing", tc_now() - t_write);
    }
    w2v_model_free(&m);
    tc_vocab_free(&v);
    return rc;
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
