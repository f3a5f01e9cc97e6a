/* sgrad-fasttext command line: fastText's verbs supervised, test, predict, predict-prob,
 * skipgram, cbow, print-word-vectors, nn and analogies with its flags, defaults and output
 * formats; a flag parser and printer over libsgrad_models (sgrad_models.h). Everything but answers (and the query prompts, which fastText prints to stdout
 * too) goes to stderr; an answer that cannot be written makes the verb fail.
 */
#define _POSIX_C_SOURCE 200809L
#include "tools.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f)
{
    fprintf(f,
            "sgrad-fasttext: fastText's supervised text classifier and subword word vectors on sgrad\n"
            "\n"
            "  sgrad-fasttext supervised -input FILE -output MODEL [options]  (writes MODEL.bin)\n"
            "    -dim N            size of the document vector (100)\n"
            "    -lr X             learning rate, falling linearly to 0 (0.1)\n"
            "    -epoch N          epochs (5)\n"
            "    -wordNgrams N     word n-grams up to length N (1)\n"
            "    -bucket N         rows of the hashed n-gram table (2000000)\n"
            "    -minCount N       drop words seen fewer than N times (1)\n"
            "    -minCountLabel N  drop labels seen fewer than N times (0)\n"
            "    -minn N, -maxn N  character n-gram lengths (0, 0: none)\n"
            "    -loss L           softmax, ns, hs or ova (one-vs-all) (softmax)\n"
            "    -neg N            negatives per example with -loss ns (5)\n"
            "    -thread N         threads of sgrad's kernels; results do not depend on it (12)\n"
            "    -label P          label prefix (__label__)\n"
            "    -seed N           random seed (0)\n"
            "    -batch N          examples per sgrad step (1, as fastText's per-example SGD)\n"
            "    -verbose N        0: quiet (2)\n"
            "  sgrad-fasttext test MODEL.bin FILE [k] [th]           N, P@k, R@k (k = 1)\n"
            "  sgrad-fasttext predict MODEL.bin FILE|- [k] [th]      the k most likely labels per line\n"
            "  sgrad-fasttext predict-prob MODEL.bin FILE|- [k] [th] the same with probabilities\n"
            "    k = -1: all labels; th: only labels of probability >= th (0)\n"
            "\n"
            "  sgrad-fasttext skipgram|cbow -input FILE -output MODEL [options]  (MODEL.bin, MODEL.vec)\n"
            "    the options above, with the defaults -minCount 5 -minn 3 -maxn 6 -lr 0.05\n"
            "    -loss ns (the only loss here) -batch 8192, and\n"
            "    -ws N             context window (5)\n"
            "    -t X              subsampling threshold (1e-4)\n"
            "    -lrUpdateRate N   accepted; the learning rate falls at every step (100)\n"
            "  sgrad-fasttext print-word-vectors MODEL.bin < words  a vector per word read\n"
            "  sgrad-fasttext nn MODEL.bin [k]          nearest neighbours of each word read (10)\n"
            "  sgrad-fasttext analogies MODEL.bin [k]   A - B + C for each three words read (10)\n");
}

static int out_errno; /* the error of the first write to stdout that failed */

/* Whether stdout still takes answers; keeps the error of a failed write. */
static bool out_ok(void)
{
    if (!ferror(stdout)) return true;
    if (!out_errno) out_errno = errno ? errno : EIO;
    return false;
}

/* The end of a verb's answers: 0, or 1 with a message when some could not be written. */
static int out_finish(void)
{
    if (fflush(stdout) && !out_errno) out_errno = errno;
    if (!out_errno && !ferror(stdout)) return 0;
    fprintf(stderr, "sgrad-fasttext: error writing the output: %s\n", strerror(out_errno ? out_errno : EIO));
    return 1;
}

/* Training flags into c; 0, 2 with a message, or -1 after printing the usage (-help). */
static int parse_flags(int argc, char **argv, sg_ft_opts *c, const char **input, const char **output)
{
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "-help") || !strcmp(f, "--help")) {
            usage(stdout);
            return -1;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "sgrad-fasttext: %s needs a value\n", f);
            return 2;
        }
        const char *a = argv[++i];
        int64_t n = 0;
        bool ok = true;
/* an integer flag in [lo, hi] into dst */
#define INT_FLAG(name, lo, hi, dst)                  \
    else if (!strcmp(f, name))                       \
    {                                                \
        if ((ok = tc_parse_int(a, lo, hi, &n))) dst = n; \
    }
        char *end;
        if (!strcmp(f, "-input")) *input = a;
        else if (!strcmp(f, "-output")) *output = a;
        else if (!strcmp(f, "-label")) c->label = a;
        else if (!strcmp(f, "-loss")) ok = !sg_ft_loss_parse(a, &c->loss);
        else if (!strcmp(f, "-lr")) {
            c->lr = strtod(a, &end);
            ok = *a && !*end && c->lr > 0 && c->lr < 1e3;
        } else if (!strcmp(f, "-t")) {
            c->sample = strtod(a, &end);
            ok = *a && !*end && c->sample >= 0 && c->sample <= 1;
        }
        INT_FLAG("-dim", 1, 1 << 16, c->dim)
        INT_FLAG("-epoch", 1, 1 << 20, c->epoch)
        INT_FLAG("-wordNgrams", 1, 100, c->word_ngrams)
        INT_FLAG("-bucket", 0, INT32_MAX, c->bucket)
        INT_FLAG("-minCount", 0, INT64_MAX, c->min_count)
        INT_FLAG("-minCountLabel", 0, INT64_MAX, c->min_count_label)
        INT_FLAG("-minn", 0, SG_MAX_WORD, c->minn)
        INT_FLAG("-maxn", 0, SG_MAX_WORD, c->maxn)
        INT_FLAG("-neg", 1, 1 << 16, c->neg)
        INT_FLAG("-thread", 1, 1 << 16, c->threads)
        INT_FLAG("-seed", 0, INT64_MAX, c->seed)
        INT_FLAG("-batch", 1, 1 << 20, c->batch)
        INT_FLAG("-verbose", 0, 10, c->verbose)
        INT_FLAG("-ws", 1, 1 << 16, c->ws)
        INT_FLAG("-lrUpdateRate", 1, INT32_MAX, c->lr_update_rate)
        else {
            fprintf(stderr, "sgrad-fasttext: unknown flag %s (see -help)\n", f);
            return 2;
        }
#undef INT_FLAG
        if (!ok) {
            fprintf(stderr, "sgrad-fasttext: bad value for %s: %s\n", f, a);
            return 2;
        }
    }
    return 0;
}

/* Writes paths[0] (the model) and, with n 2, paths[1] (the .vec) so that all are replaced
 * or none (tc_staged: short of a rename failing after the first). 0, or -1 with a
 * message. */
static int save_outputs(const sg_ft *m, const char *const *paths, int n)
{
    tc_staged s;
    int rc = 0;
    if (tc_staged_open(&s, paths, n)) {
        fprintf(stderr, "sgrad-fasttext: cannot write %s: %s\n", paths[s.failed], tc_out_strerror(errno));
        rc = -1;
    } else {
        sg_model_error err;
        rc = sg_ft_save(m, s.staged[0], &err) ? -1 : 0;
        if (!rc && n > 1) rc = sg_ft_write_vectors(m, s.staged[1], &err) ? -1 : 0;
        if (rc) fprintf(stderr, "sgrad-fasttext: %s\n", err.message);
        if (rc) {
            tc_staged_abort(&s);
        } else if (tc_staged_commit(&s)) {
            fprintf(stderr, "sgrad-fasttext: cannot put %s in place: %s\n", paths[s.failed], strerror(errno));
            if (s.renamed > 0) { /* the first is in place: say so rather than claim nothing changed */
                fprintf(stderr, "sgrad-fasttext: %s was replaced, %s was not\n", paths[0], paths[1]);
                return -1;
            }
            rc = -1;
        }
    }
    if (rc) fprintf(stderr, "sgrad-fasttext: %s%s%s left as %s\n", paths[0], n > 1 ? " and " : "",
                    n > 1 ? paths[1] : "", n > 1 ? "they were" : "it was");
    return rc;
}

/* Whether writing b would destroy a, said on stderr: b, links followed, is a's directory
 * entry (its rename replaces a), or with by_inode a's file by another name. Two outputs
 * are compared by entry only: hard links are two entries, each replaced by its own
 * rename; an input is also kept from being an output under another name. */
static bool clash(const char *flag_a, const char *a, const char *b, bool by_inode)
{
    tc_path_id ia = {0}, ib = {0};
    const bool known = !tc_path_identify(a, &ia) && !tc_path_identify(b, &ib);
    const bool same = known && (by_inode ? tc_path_same(&ia, &ib) : tc_path_same_entry(&ia, &ib));
    if (!known) fprintf(stderr, "sgrad-fasttext: cannot examine %s and %s: %s\n", a, b, strerror(errno));
    else if (same) fprintf(stderr, "sgrad-fasttext: %s %s and -output's %s are the same file\n", flag_a, a, b);
    free(ia.target);
    free(ib.target);
    return !known || same;
}

/* Progress lines from the library's events (-verbose 2) and its INFO lines (-verbose 1). */
typedef struct {
    tc_progress pr;
    bool progress, supervised;
    double interval_loss;
    int64_t interval_n;
} ft_printer;

static int on_event(void *ud, const sg_event *e)
{
    ft_printer *p = ud;
    if (e->kind == SG_EVENT_INFO) {
        /* fastText's own lines as fastText prints them, the program's with its name */
        fprintf(stderr, "%s%s\n", strncmp(e->message, "Read ", 5) ? "sgrad-fasttext: " : "", e->message);
        return 0;
    }
    if (!p->progress || (e->kind != SG_EVENT_STEP && e->kind != SG_EVENT_END)) return 0;
    p->pr.threads = e->threads > 0 ? e->threads : 1;
    if (e->kind == SG_EVENT_END) {
        tc_progress_update(&p->pr, e->total_words, e->total_words, 0, e->loss, true);
        return 0;
    }
    p->interval_loss += e->loss;
    p->interval_n += e->examples;
    if (!p->supervised && !tc_progress_due(&p->pr)) return 0;
    /* the classifier: each step's loss (the line prints when due); vectors: since the last line */
    tc_progress_update(&p->pr, e->words_done, e->total_words, e->lr,
                       p->supervised ? e->loss / (double)e->examples : p->interval_loss / (double)p->interval_n, false);
    p->interval_loss = 0;
    p->interval_n = 0;
    return 0;
}

/* MODEL.bin and MODEL.vec checked before training: writable, and neither the input nor
 * each other. 0 or -1 with a message. */
static int check_outputs(sg_ft_kind kind, const char *input, const char *path, const char *vec)
{
    /* both files are checked before training: a run that cannot save does not start */
    int rc = tc_check_output("sgrad-fasttext", "-output", path, TC_OUT_STAGED, stderr);
    if (!rc && kind != SG_FT_SUPERVISED) rc = tc_check_output("sgrad-fasttext", "-output", vec, TC_OUT_STAGED, stderr);
    if (!rc && clash("-input", input, path, true)) rc = -1;
    if (!rc && kind != SG_FT_SUPERVISED && (clash("-input", input, vec, true) || clash("-output's", path, vec, false)))
        rc = -1;
    return rc;
}

/* supervised, skipgram, cbow: trains and writes MODEL.bin (and MODEL.vec for vectors). */
static int cmd_train(sg_ft_kind kind, int argc, char **argv)
{
    sg_ft_opts c = sg_ft_opts_default(kind);
    c.threads = 12;
    const char *input = NULL, *output = NULL;
    const int bad = parse_flags(argc, argv, &c, &input, &output);
    if (bad) return bad < 0 ? out_finish() : bad;
    if (!input || !output) {
        fprintf(stderr, "sgrad-fasttext: %s needs -input and -output\n", sg_ft_kind_name(kind));
        return 2;
    }
    struct stat st;
    const int missing = stat(input, &st) ? errno : 0;
    if (missing || !S_ISREG(st.st_mode)) {
        fprintf(stderr, "sgrad-fasttext: -input %s: %s\n", input,
                missing ? strerror(missing) : "not a regular file (it is read twice)");
        return 1;
    }
    sg_model_error err;
    if (sg_ft_opts_check(&c, &err)) {
        fprintf(stderr, "sgrad-fasttext: %s\n", err.message);
        return 1;
    }
    size_t len = strlen(output);
    char *path = malloc(len + 5), *vec = malloc(len + 5);
    int rc = path && vec ? 0 : -1;
    if (!rc) {
        snprintf(path, len + 5, "%s.bin", output);
        snprintf(vec, len + 5, "%s.vec", output);
        rc = check_outputs(kind, input, path, vec);
    }
    ft_printer p = {.progress = c.verbose > 1, .supervised = kind == SG_FT_SUPERVISED};
    tc_progress_init(&p.pr, stderr, 1);
    c.on_event = on_event;
    c.event_ud = &p;
    sg_ft_result r;
    sg_ft *m = rc ? NULL : sg_ft_train_file(input, &c, &r, &err);
    if (!rc && !m) fprintf(stderr, "sgrad-fasttext: %s\n", err.message);
    if (m) {
        rc = save_outputs(m, (const char *[]){path, vec}, kind == SG_FT_SUPERVISED ? 1 : 2);
        if (!rc && c.verbose > 0)
            fprintf(stderr, "sgrad-fasttext: %lld examples x %d epochs in %.2f s, final loss %.4f; "
                            "wrote %s%s%s\n", (long long)r.examples, c.epoch, r.seconds, r.final_loss,
                    path, kind != SG_FT_SUPERVISED ? " and " : "", kind != SG_FT_SUPERVISED ? vec : "");
        sg_ft_free(m);
    }
    free(path);
    free(vec);
    return rc || !m ? 1 : 0;
}

/* Labels of the k best scores, best first (ties: the lower label index first). */
static int64_t best_k(const double *score, int64_t C, int64_t k, int64_t *best)
{
    int64_t n = 0;
    for (int64_t c = 0; c < C; c++) {
        int64_t p = n < k ? n++ : k;
        if (p == k && !(score[c] > score[best[k - 1]])) continue;
        if (p == k) p = k - 1;
        while (p > 0 && score[c] > score[best[p - 1]]) {
            best[p] = best[p - 1];
            p--;
        }
        best[p] = c;
    }
    return n;
}

/* test / predict / predict-prob over the lines of path, with fastText 0.9.2's [k] [th]. */
static int cmd_eval(const char *verb, int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "sgrad-fasttext: %s needs MODEL.bin FILE [k] [th]\n", verb);
        return 2;
    }
    int64_t k = 1;
    double th = 0;
    if (argc >= 3 && (!tc_parse_int(argv[2], -1, INT32_MAX, &k) || k == 0)) {
        fprintf(stderr, "sgrad-fasttext: bad k: %s (1 or more, or -1 for all labels)\n", argv[2]);
        return 2;
    }
    if (argc == 4 && !tc_parse_real(argv[3], -DBL_MAX, DBL_MAX, &th)) {
        fprintf(stderr, "sgrad-fasttext: bad threshold: %s\n", argv[3]);
        return 2;
    }
    const bool test = !strcmp(verb, "test"), probs = !strcmp(verb, "predict-prob");
    sg_model_error err;
    sg_ft *m = sg_ft_load(argv[0], SG_FT_SUPERVISED, &err);
    if (!m) {
        fprintf(stderr, "sgrad-fasttext: %s\n", err.message);
        return 1;
    }
    sg_lines *l = sg_lines_open(argv[1], &err);
    if (!l) {
        fprintf(stderr, "sgrad-fasttext: %s\n", err.message);
        sg_ft_free(m);
        return 1;
    }
    const int64_t C = sg_ft_labels(m), kk = k < 0 || k > C ? C : k;
    /* fastText keeps a label when its probability p >= th; a score is log(p + 1e-5) */
    const double min_score = th > 0 ? log(th + 1e-5) : -INFINITY;
    double *score = malloc((size_t)C * sizeof *score);
    int64_t *best = malloc((size_t)kk * sizeof *best), *labels = malloc((size_t)C * sizeof *labels);
    int64_t n_ex = 0, hits = 0, predicted = 0, gold = 0;
    int rc = score && best && labels ? 0 : -1, more = 0;
    char **tok;
    int64_t n_tok, inputs, n_labels;
    bool eol;
    while (!rc && (more = sg_lines_next(l, &tok, &n_tok, &eol)) > 0) {
        if (sg_ft_predict(m, tok, n_tok, eol, score, &inputs, labels, C, &n_labels, &err)) {
            rc = -1;
            break;
        }
        int64_t n = inputs ? best_k(score, C, kk, best) : 0;
        while (n > 0 && score[best[n - 1]] < min_score) n--;
        if (test) {
            if (!n_labels || !inputs) continue;
            n_ex++;
            predicted += n;
            gold += n_labels;
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < n_labels; j++)
                    if (labels[j] == best[i]) {
                        hits++;
                        break;
                    }
            continue;
        }
        for (int64_t i = 0; i < n; i++) {
            printf("%s%s", i ? " " : "", sg_ft_label(m, best[i]));
            if (probs) printf(" %g", exp(score[best[i]]));
        }
        putchar('\n');
        if (!out_ok()) break;
    }
    if (more == -SG_ERR_IO) fprintf(stderr, "sgrad-fasttext: error reading %s\n", argv[1]);
    else if (more < 0 || rc) fprintf(stderr, "sgrad-fasttext: out of memory\n");
    if (!rc && more >= 0 && test) {
        printf("N\t%lld\n", (long long)n_ex);
        printf("P@%lld\t%.3g\n", (long long)k, predicted ? (double)hits / (double)predicted : 0.0);
        printf("R@%lld\t%.3g\n", (long long)k, gold ? (double)hits / (double)gold : 0.0);
    }
    free(score);
    free(best);
    free(labels);
    sg_lines_close(l);
    sg_ft_free(m);
    return rc || more < 0 ? 1 : out_finish();
}

/* The next token of stdin, whole, into *tok (grown as needed), split where the training
 * reader splits (blanks, control bytes, newlines): 1, 0 at the end of stdin, -1 out of
 * memory. */
static int read_token(char **tok, size_t *cap)
{
    int c;
    do c = getchar();
    while (c == '\n' || tc_is_blank(c));
    size_t n = 0;
    for (; c != EOF && c != '\n' && !tc_is_blank(c); c = getchar()) {
        if (n + 1 >= *cap) {
            const size_t grown = *cap ? 2 * *cap : 128;
            char *t = realloc(*tok, grown);
            if (!t) return -1;
            *tok = t;
            *cap = grown;
        }
        (*tok)[n++] = (char)c;
    }
    if (n) (*tok)[n] = '\0';
    return n > 0;
}

/* print-word-vectors: each word read from stdin and its vector (fastText's format). */
static int cmd_print_vectors(int argc, char **argv)
{
    if (argc != 1) {
        fprintf(stderr, "sgrad-fasttext: print-word-vectors needs MODEL.bin (words on stdin)\n");
        return 2;
    }
    sg_model_error err;
    sg_ft *m = sg_ft_load(argv[0], SG_FT_SKIPGRAM, &err);
    if (!m) {
        fprintf(stderr, "sgrad-fasttext: %s\n", err.message);
        return 1;
    }
    const int64_t D = sg_ft_dim(m);
    float *v = malloc((size_t)D * sizeof *v);
    char *tok = NULL;
    size_t cap = 0;
    int rc = v ? 0 : -1, got = 0;
    while (!rc && (got = read_token(&tok, &cap)) > 0) {
        if ((rc = sg_ft_word_vector(m, tok, v, NULL))) break;
        printf("%s ", tok);
        for (int64_t d = 0; d < D; d++) printf("%.5g ", v[d]);
        putchar('\n');
        if (!out_ok()) break;
    }
    if (rc || got < 0) fprintf(stderr, "sgrad-fasttext: out of memory\n");
    free(v);
    free(tok);
    sg_ft_free(m);
    return rc || got < 0 ? 1 : out_finish();
}

/* nn and analogies: queries of 1 (nn) or 3 (analogies: A - B + C) words from stdin, each
 * answered by its k nearest words and their cosines, after fastText's prompt. */
static int cmd_query(bool analogies, int argc, char **argv)
{
    const char *verb = analogies ? "analogies" : "nn";
    int64_t k = 10;
    if (argc < 1 || argc > 2 || (argc == 2 && !tc_parse_int(argv[1], 1, INT32_MAX, &k))) {
        fprintf(stderr, "sgrad-fasttext: %s needs MODEL.bin [k > 0] (queries on stdin)\n", verb);
        return 2;
    }
    sg_model_error err;
    sg_ft *m = sg_ft_load(argv[0], SG_FT_SKIPGRAM, &err);
    if (!m) {
        fprintf(stderr, "sgrad-fasttext: %s\n", err.message);
        return 1;
    }
    const int64_t D = sg_ft_dim(m), W = sg_ft_words(m), kk = k < W ? k : W;
    float *q = malloc((size_t)D * sizeof *q), *v = malloc((size_t)D * sizeof *v);
    int64_t *best = malloc((size_t)kk * sizeof *best);
    double *sim = malloc((size_t)kk * sizeof *sim);
    const int n_words = analogies ? 3 : 1;
    char *tok[3] = {NULL, NULL, NULL};
    size_t cap[3] = {0, 0, 0};
    int rc = q && v && best && sim ? 0 : -1;
    while (!rc) {
        printf(analogies ? "Query triplet (A - B + C)? " : "Query word? ");
        fflush(stdout);
        if (!out_ok()) break;
        int got = 0, r = 1;
        while (got < n_words && (r = read_token(&tok[got], &cap[got])) > 0) got++;
        if (r < 0) rc = -1;
        if (got < n_words) break;
        int64_t ban[3];
        for (int64_t d = 0; d < D; d++) q[d] = 0;
        for (int i = 0; i < n_words && !rc; i++) {
            ban[i] = sg_ft_find_word(m, tok[i]);
            if ((rc = sg_ft_word_vector(m, tok[i], v, NULL))) break;
            double n2 = 0;
            for (int64_t d = 0; d < D; d++) n2 += (double)v[d] * v[d];
            /* nn: the vector itself; analogies: unit vectors, as fastText's */
            const double s = !analogies ? 1 : (i == 1 ? -1 : 1) / (sqrt(n2) + 1e-8);
            for (int64_t d = 0; d < D; d++) q[d] = (float)(q[d] + s * v[d]);
        }
        const int64_t n = rc ? -1 : sg_ft_nearest(m, q, kk, ban, n_words, best, sim);
        if (n < 0) {
            rc = -1;
            break;
        }
        for (int64_t i = 0; i < n; i++) printf("%s %g\n", sg_ft_word(m, best[i]), sim[i]);
    }
    if (rc) fprintf(stderr, "sgrad-fasttext: out of memory\n");
    free(q);
    free(v);
    free(best);
    free(sim);
    for (int i = 0; i < 3; i++) free(tok[i]);
    sg_ft_free(m);
    return rc ? 1 : out_finish();
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *verb = argv[1];
    if (!strcmp(verb, "-h") || !strcmp(verb, "-help") || !strcmp(verb, "--help") || !strcmp(verb, "help")) {
        usage(stdout);
        return out_finish();
    }
    if (!strcmp(verb, "supervised")) return cmd_train(SG_FT_SUPERVISED, argc - 2, argv + 2);
    if (!strcmp(verb, "skipgram")) return cmd_train(SG_FT_SKIPGRAM, argc - 2, argv + 2);
    if (!strcmp(verb, "cbow")) return cmd_train(SG_FT_CBOW, argc - 2, argv + 2);
    if (!strcmp(verb, "print-word-vectors")) return cmd_print_vectors(argc - 2, argv + 2);
    if (!strcmp(verb, "nn")) return cmd_query(false, argc - 2, argv + 2);
    if (!strcmp(verb, "analogies")) return cmd_query(true, argc - 2, argv + 2);
    if (!strcmp(verb, "test") || !strcmp(verb, "predict") || !strcmp(verb, "predict-prob"))
        return cmd_eval(verb, argc - 2, argv + 2);
    fprintf(stderr, "sgrad-fasttext: unknown verb %s (supervised, test, predict, predict-prob, "
                    "skipgram, cbow, print-word-vectors, nn, analogies)\n", verb);
    usage(stderr);
    return 2;
}
