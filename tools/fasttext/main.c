/* sgrad-fasttext command line: fastText's verbs supervised, test, predict and predict-prob
 * with its flags, defaults and output formats. Everything but answers goes to stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f,
            "sgrad-fasttext: fastText's supervised text classifier on sgrad\n"
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
            "  sgrad-fasttext test MODEL.bin FILE [k]          N, P@k, R@k (k = 1)\n"
            "  sgrad-fasttext predict MODEL.bin FILE|- [k]     the k most likely labels per line\n"
            "  sgrad-fasttext predict-prob MODEL.bin FILE|- [k] the same with probabilities\n");
}

static bool parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* The output's directory must exist and be writable before training starts. */
static int check_output(const char *out)
{
    char *dir = strdup(out);
    if (!dir) return -1;
    char *slash = strrchr(dir, '/');
    const char *d = slash ? (slash == dir ? "/" : (*slash = '\0', dir)) : ".";
    int rc = 0;
    if (access(d, W_OK)) {
        fprintf(stderr, "sgrad-fasttext: cannot write -output %s: directory %s: %s\n", out, d,
                strerror(errno));
        rc = -1;
    }
    free(dir);
    return rc;
}

static int cmd_supervised(int argc, char **argv)
{
    ft_config c;
    ft_config_default(&c);
    c.threads = 12;
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i];
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
        if ((ok = parse_int(a, lo, hi, &n))) dst = n; \
    }
        if (!strcmp(f, "-input")) c.input = a;
        else if (!strcmp(f, "-output")) c.output = a;
        else if (!strcmp(f, "-label")) c.label = a;
        else if (!strcmp(f, "-loss")) ok = ft_loss_parse(a, &c.loss);
        else if (!strcmp(f, "-lr")) {
            char *end;
            c.lr = strtod(a, &end);
            ok = *a && !*end && c.lr > 0 && c.lr < 1e3;
        }
        INT_FLAG("-dim", 1, 1 << 16, c.dim)
        INT_FLAG("-epoch", 1, 1 << 20, c.epoch)
        INT_FLAG("-wordNgrams", 1, 100, c.word_ngrams)
        INT_FLAG("-bucket", 0, INT32_MAX, c.bucket)
        INT_FLAG("-minCount", 0, INT64_MAX, c.min_count)
        INT_FLAG("-minCountLabel", 0, INT64_MAX, c.min_count_label)
        INT_FLAG("-minn", 0, TC_MAX_WORD, c.minn)
        INT_FLAG("-maxn", 0, TC_MAX_WORD, c.maxn)
        INT_FLAG("-neg", 1, 1 << 16, c.neg)
        INT_FLAG("-thread", 1, 1 << 16, c.threads)
        INT_FLAG("-seed", 0, INT64_MAX, c.seed)
        INT_FLAG("-batch", 1, 1 << 20, c.batch)
        INT_FLAG("-verbose", 0, 10, c.verbose)
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
    if (!c.input || !c.output) {
        fprintf(stderr, "sgrad-fasttext: supervised needs -input and -output\n");
        return 2;
    }
    struct stat st;
    const int missing = stat(c.input, &st) ? errno : 0;
    if (missing || !S_ISREG(st.st_mode)) {
        fprintf(stderr, "sgrad-fasttext: -input %s: %s\n", c.input,
                missing ? strerror(missing) : "not a regular file (it is read twice)");
        return 1;
    }
    if (ft_config_check(&c, stderr)) return 1;
    size_t len = strlen(c.output);
    char *path = malloc(len + 5);
    if (!path) return 1;
    memcpy(path, c.output, len);
    memcpy(path + len, ".bin", 5);
    if (check_output(path)) {
        free(path);
        return 1;
    }
    ft_model m;
    ft_train_result r;
    int rc = ft_train(&c, c.verbose > 1 ? stderr : NULL, &m, &r);
    if (!rc) {
        rc = ft_model_save(&m, path, stderr);
        if (!rc && c.verbose > 0)
            fprintf(stderr, "sgrad-fasttext: %lld examples x %d epochs in %.2f s, final loss %.4f; "
                            "wrote %s\n", (long long)r.examples, c.epoch, r.seconds, r.final_loss, path);
        ft_model_free(&m);
    }
    free(path);
    return rc ? 1 : 0;
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

/* test / predict / predict-prob over the lines of path. */
static int cmd_eval(const char *verb, int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "sgrad-fasttext: %s needs MODEL.bin FILE [k]\n", verb);
        return 2;
    }
    int64_t k = 1;
    if (argc == 3 && !parse_int(argv[2], 1, INT32_MAX, &k)) {
        fprintf(stderr, "sgrad-fasttext: bad k: %s\n", argv[2]);
        return 2;
    }
    const bool test = !strcmp(verb, "test"), probs = !strcmp(verb, "predict-prob");
    ft_model m;
    if (ft_model_load(&m, argv[0], 1, stderr)) return 1;
    ft_lines l;
    if (ft_lines_open(&l, argv[1])) {
        fprintf(stderr, "sgrad-fasttext: cannot read %s: %s\n", argv[1], strerror(errno));
        ft_model_free(&m);
        return 1;
    }
    const int64_t C = m.dict.labels.size;
    double *score = malloc((size_t)C * sizeof *score);
    int64_t *best = malloc((size_t)(k < C ? k : C) * sizeof *best);
    ft_ids rows = {0}, labels = {0};
    int64_t n_ex = 0, hits = 0, predicted = 0, gold = 0;
    int rc = score && best ? 0 : -1, more = 0;
    while (!rc && (more = ft_lines_next(&l)) > 0) {
        int64_t n_words;
        rows.n = labels.n = 0;
        if (ft_dict_line(&m.dict, l.tok, l.n, l.eol, &rows, &labels, &n_words) ||
            (rows.n && ft_predict_scores(&m, &rows, score))) {
            rc = -1;
            break;
        }
        const int64_t n = rows.n ? best_k(score, C, k < C ? k : C, best) : 0;
        if (test) {
            if (!labels.n || !rows.n) continue;
            n_ex++;
            predicted += n;
            gold += labels.n;
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < labels.n; j++)
                    if (labels.v[j] == best[i]) {
                        hits++;
                        break;
                    }
            continue;
        }
        for (int64_t i = 0; i < n; i++) {
            printf("%s%s", i ? " " : "", m.dict.labels.words[best[i]]);
            if (probs) printf(" %g", exp(score[best[i]]));
        }
        putchar('\n');
    }
    if (more < 0 || rc) fprintf(stderr, "sgrad-fasttext: out of memory\n");
    else if (ferror(l.rd.f)) {
        fprintf(stderr, "sgrad-fasttext: error reading %s\n", argv[1]);
        rc = -1;
    }
    if (!rc && test) {
        printf("N\t%lld\n", (long long)n_ex);
        printf("P@%lld\t%.3g\n", (long long)k, predicted ? (double)hits / (double)predicted : 0.0);
        printf("R@%lld\t%.3g\n", (long long)k, gold ? (double)hits / (double)gold : 0.0);
    }
    free(score);
    free(best);
    ft_ids_free(&rows);
    ft_ids_free(&labels);
    ft_lines_close(&l);
    ft_model_free(&m);
    return rc || more < 0 || fflush(stdout) ? 1 : 0;
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
        return 0;
    }
    if (!strcmp(verb, "supervised")) return cmd_supervised(argc - 2, argv + 2);
    if (!strcmp(verb, "test") || !strcmp(verb, "predict") || !strcmp(verb, "predict-prob"))
        return cmd_eval(verb, argc - 2, argv + 2);
    fprintf(stderr, "sgrad-fasttext: unknown verb %s (supervised, test, predict, predict-prob)\n", verb);
    usage(stderr);
    return 2;
}
