/* What the programs sgrad-w2v and sgrad-fasttext share besides libsgrad_models: command-line
 * numbers (cli.c), output paths checked before the long work (checks.c), the progress
 * line and the -log JSON lines made from the library's events (progress.c). The file
 * helpers and random numbers are the library's (models/common/common.h).
 */
#ifndef SG_TOOLS_H
#define SG_TOOLS_H

#include "common/common.h"

/* ---- command-line numbers (cli.c): the whole of s, within [lo, hi]; false otherwise */
bool tc_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out);
bool tc_parse_real(const char *s, double lo, double hi, double *out);

/* ---- outputs checked before the long work (checks.c): how a program writes a file */
typedef enum {
    TC_OUT_DIRECT, /* opened and written in place (a log) */
    TC_OUT_ATOMIC, /* through a temporary file beside it (tc_outfile, the library's writers) */
    TC_OUT_STAGED  /* through tc_staged, whose staged file a TC_OUT_ATOMIC writer writes */
} tc_out_kind;
/* path's target (symlinks followed, as the writers follow them) is not a directory or
 * other non-regular file, its directory exists and is writable, and the temporary names
 * kind makes beside it fit the directory's NAME_MAX and PATH_MAX (a TC_OUT_DIRECT file,
 * opened through path itself, needs only to be writable once it exists). 0, or -1 with a
 * message "prog: cannot write flag path: why" printed to err. */
int tc_check_output(const char *prog, const char *flag, const char *path, tc_out_kind kind, FILE *err);

/* ---- progress line */
typedef struct {
    FILE *f;
    bool tty;
    double start, last_print;
    int threads;
} tc_progress;
void tc_progress_init(tc_progress *p, FILE *f, int threads);
/* done/total in words; loss: mean per example since the previous call. Prints when due
 * (each 0.2 s on a terminal, redrawn in place; each 5 s otherwise) or when force. */
void tc_progress_update(tc_progress *p, int64_t done, int64_t total, double lr,
                        double loss, bool force);
/* Whether an update now would print (without force). */
bool tc_progress_due(const tc_progress *p);

/* ---- -log: training progress as JSON lines, one record per 1/200 of the words and one
 * at the end: {"epoch", "words", "total_words", "progress", "steps", "lr", "loss" (mean
 * per example since the previous record; null if none), "words_per_sec_thread" (since the
 * previous record), "elapsed_s"} */
typedef struct {
    FILE *f; /* NULL: no log */
    int threads;
    double start, last_time;
    int64_t last_words, next_words;
    double loss;
    int64_t n;
} tc_log;
void tc_log_init(tc_log *l, FILE *f, int threads);
/* Adds a step's loss (the sum over its n examples) at `words` of `total` read; writes a
 * record when due or when force. */
void tc_log_update(tc_log *l, int epoch, int64_t words, int64_t total, int64_t steps, double lr,
                   double loss_sum, int64_t n, bool force);

#endif
