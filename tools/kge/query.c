/* sgrad-kge eval, predict and export: a model file (or checkpoint) loaded, one answer
 * printed on stdout. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "kge_tool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The most files eval's -filter takes. */
#define KGE_MAX_FILTERS 64

void kge_print_metrics(FILE *f, const sg_kge_metrics *m)
{
    /* no triple ranked: the means are undefined, and JSON has no nan */
    if (m->count == 0) {
        fprintf(f, "{\"mrr\":null,\"hits@1\":null,\"hits@3\":null,\"hits@10\":null,\"mr\":null,\"count\":0,"
                   "\"unseen\":%lld,\"unknown\":%lld}",
                (long long)m->unseen, (long long)m->unknown);
        return;
    }
    fprintf(f, "{\"mrr\":%.6f,\"hits@1\":%.6f,\"hits@3\":%.6f,\"hits@10\":%.6f,\"mr\":%.4f,\"count\":%lld,"
               "\"unseen\":%lld,\"unknown\":%lld}",
            m->mrr, m->hits1, m->hits3, m->hits10, m->mr, (long long)m->count, (long long)m->unseen,
            (long long)m->unknown);
}

bool kge_check_input(const char *flag, const char *path)
{
    struct stat st;
    FILE *f = fopen(path, "rb");
    const int err = f ? (fstat(fileno(f), &st) ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0) : errno;
    if (f) fclose(f);
    if (!err) return true;
    fprintf(stderr, KGE_PROG ": cannot read %s %s: %s\n", flag, path, strerror(err));
    return false;
}

/* The flags after MODEL as (name, value) pairs: each name one of `known` (NULL-ended),
 * its value into vals[i]. 0, or 2 with a message. */
static int parse_pairs(int argc, char **argv, const char *const *known, const char **vals)
{
    for (int i = 2; i < argc; i += 2) {
        int k = 0;
        while (known[k] && strcmp(known[k], argv[i])) k++;
        if (!known[k]) {
            fprintf(stderr, KGE_PROG " %s: unknown flag %s (see -help)\n", argv[0], argv[i]);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, KGE_PROG " %s: %s needs a value\n", argv[0], argv[i]);
            return 2;
        }
        vals[k] = argv[i + 1];
    }
    return 0;
}

/* MODEL loaded on `threads` threads; NULL with a message. */
static sg_kge *load(int argc, char **argv, int threads)
{
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, KGE_PROG " %s: give the model file first: " KGE_PROG " %s MODEL ...\n", argv[0], argv[0]);
        return NULL;
    }
    sg_model_error err;
    sg_kge *m = sg_kge_load(argv[1], threads, &err);
    if (!m) fprintf(stderr, KGE_PROG ": %s\n", err.message);
    return m;
}

/* "-threads N" (NULL or 0: every core); -1 with a message when bad. */
static int threads_of(const char *s)
{
    int64_t n = 0;
    if (s && !tc_parse_int(s, 0, 4096, &n)) {
        fprintf(stderr, KGE_PROG ": bad value for -threads: %s\n", s);
        return -1;
    }
    return (int)n;
}

int kge_cmd_eval(int argc, char **argv)
{
    static const char *const known[] = {"-test", "-filter", "-threads", NULL};
    const char *v[3] = {NULL, NULL, NULL};
    const int bad = parse_pairs(argc, argv, known, v), threads = bad ? -1 : threads_of(v[2]);
    if (bad || threads < 0) return 2;
    if (!v[0]) return fprintf(stderr, KGE_PROG " eval: -test FILE is required\n"), 2;
    char *list = v[1] ? strdup(v[1]) : NULL;
    const char *filters[KGE_MAX_FILTERS];
    int nf = 0;
    bool ok = true;
    for (char *s = list ? strtok(list, ",") : NULL; s && ok; s = strtok(NULL, ","))
        if (nf < KGE_MAX_FILTERS) filters[nf++] = s;
        else ok = false, fprintf(stderr, KGE_PROG " eval: more than %d -filter files\n", KGE_MAX_FILTERS);
    ok = ok && kge_check_input("-test", v[0]);
    for (int i = 0; i < nf; i++) ok = kge_check_input("-filter", filters[i]) && ok;
    sg_kge *m = ok && (!v[1] || list) ? load(argc, argv, threads) : NULL;
    int rc = m ? 0 : 2;
    sg_kge_metrics met;
    sg_model_error err;
    if (m && sg_kge_evaluate(m, v[0], filters, nf, &met, &err)) {
        fprintf(stderr, KGE_PROG ": %s\n", err.message);
        rc = err.status == SG_ERR_FORMAT || err.status == SG_ERR_IO ? 2 : 1;
    } else if (m) {
        kge_print_metrics(stdout, &met);
        printf("\n");
    }
    sg_kge_free(m);
    free(list);
    return rc;
}

int kge_cmd_predict(int argc, char **argv)
{
    static const char *const known[] = {"-head", "-relation", "-tail", "-k", "-threads", NULL};
    const char *v[5] = {NULL, NULL, NULL, NULL, NULL};
    int64_t k = 10;
    const int bad = parse_pairs(argc, argv, known, v), threads = bad ? -1 : threads_of(v[4]);
    if (bad || threads < 0) return 2;
    if (v[3] && !tc_parse_int(v[3], 1, 100000, &k)) return fprintf(stderr, KGE_PROG ": bad value for -k: %s\n", v[3]), 2;
    if (!v[1] || !v[0] == !v[2])
        return fprintf(stderr, KGE_PROG " predict: give -head H -relation R (tails) or -relation R -tail T (heads)\n"),
               2;
    sg_kge *m = load(argc, argv, threads);
    int64_t *rows = malloc((size_t)k * sizeof *rows);
    float *scores = malloc((size_t)k * sizeof *scores);
    const char **names = malloc((size_t)k * sizeof *names);
    int n = 0, rc = m ? 0 : 2;
    sg_model_error err;
    if (m && (!rows || !scores || !names)) rc = 1, fprintf(stderr, KGE_PROG ": out of memory\n");
    else if (m && (v[0] ? sg_kge_predict_tails(m, v[0], v[1], (int)k, rows, scores, names, &n, &err)
                        : sg_kge_predict_heads(m, v[1], v[2], (int)k, rows, scores, names, &n, &err)))
        rc = err.status == SG_ERR_INDEX ? 2 : 1, fprintf(stderr, KGE_PROG ": %s\n", err.message);
    for (int i = 0; i < n && !rc; i++) printf("%s\t%.9g\n", names[i], (double)scores[i]);
    free(rows);
    free(scores);
    free(names);
    sg_kge_free(m);
    return rc;
}

int kge_cmd_export(int argc, char **argv)
{
    static const char *const known[] = {"-output", NULL};
    const char *v[1] = {NULL};
    if (parse_pairs(argc, argv, known, v)) return 2;
    struct stat st;
    if (!v[0]) return fprintf(stderr, KGE_PROG " export: -output DIR is required\n"), 2;
    /* a missing directory is made by the export (its parent must exist) */
    const int bad = stat(v[0], &st) ? (errno == ENOENT ? 0 : errno)
                  : !S_ISDIR(st.st_mode) ? ENOTDIR : access(v[0], W_OK | X_OK) ? errno : 0;
    if (bad) return fprintf(stderr, KGE_PROG ": cannot write -output %s: %s\n", v[0], strerror(bad)), 2;
    sg_kge *m = load(argc, argv, 0);
    sg_model_error err;
    int rc = m ? 0 : 2;
    if (m && sg_kge_export(m, v[0], &err)) rc = 1, fprintf(stderr, KGE_PROG ": %s\n", err.message);
    sg_kge_free(m);
    return rc;
}
