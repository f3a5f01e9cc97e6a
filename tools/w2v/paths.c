/* The inputs and outputs of a training run, checked before any work (w2v_tool.h). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "w2v_tool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int w2v_check_paths(const w2v_flags *cfg, FILE *err)
{
    struct stat st;
    if (stat(cfg->train, &st) != 0) {
        fprintf(err, "sgrad-w2v: cannot read %s: %s\n", cfg->train, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(err, "sgrad-w2v: -train %s is not a regular file; the corpus is read once per "
                     "epoch, which a pipe or stdin cannot be: save it to a file first\n", cfg->train);
        return -1;
    }
    if (!cfg->output || !*cfg->output) {
        fprintf(err, "sgrad-w2v: -output FILE is required for training (see -help)\n");
        return -1;
    }
    /* the inputs first: an output naming one of them would destroy it */
    const char *flags[8] = {"-train", "-read-vocab", "-resume", "-output", "-save-context", "-checkpoint",
                            "-log", "-save-vocab"};
    const char *paths[8] = {cfg->train, cfg->read_vocab, cfg->o.resume, cfg->output, cfg->save_context,
                            cfg->o.checkpoint, cfg->log, cfg->save_vocab};
    enum { FIRST_OUTPUT = 3, RESUME = 2, CHECKPOINT = 5, LOG = 6 };
    tc_path_id ids[8] = {{0}};
    int rc = 0;
    for (int i = 0; i < 8 && !rc; i++) {
        if (!paths[i]) continue;
        rc = -1;
        if (i > 0 && i < FIRST_OUTPUT) { /* -read-vocab, -resume (-train is checked above) */
            const char *why = stat(paths[i], &st) != 0  ? strerror(errno)
                              : !S_ISREG(st.st_mode)    ? "not a regular file"
                              : access(paths[i], R_OK)  ? strerror(errno)
                                                        : NULL;
            if (why) {
                fprintf(err, "sgrad-w2v: cannot read %s %s: %s\n", flags[i], paths[i], why);
                break;
            }
        } else if (i >= FIRST_OUTPUT) {
            if (!*paths[i]) {
                fprintf(err, "sgrad-w2v: %s needs a file name\n", flags[i]);
                break;
            }
            /* the log is appended to in place; the others are replaced by rename */
            if (tc_check_output("sgrad-w2v", flags[i], paths[i], i == LOG ? TC_OUT_DIRECT : TC_OUT_ATOMIC, err))
                break;
        }
        if (tc_path_identify(paths[i], &ids[i])) {
            fprintf(err, "sgrad-w2v: cannot read the directory of %s %s: %s\n", flags[i], paths[i],
                    strerror(errno));
            break;
        }
        rc = 0;
        /* -checkpoint may be the -resume file: a resumed run keeps saving to it */
        for (int k = 0; k < i && i >= FIRST_OUTPUT && !rc; k++)
            if (paths[k] && !(k == RESUME && i == CHECKPOINT) && tc_path_same(&ids[k], &ids[i])) {
                fprintf(err, "sgrad-w2v: %s %s and %s %s are the same file\n", flags[k], paths[k], flags[i],
                        paths[i]);
                rc = -1;
            }
    }
    for (int i = 0; i < 8; i++) free(ids[i].target);
    return rc;
}
