/* sgrad-w2v, the program: word2vec.c's flags parsed into sg_w2v_opts and the program's own
 * (outputs, queries, MPI), printed over libsgrad_models (sgrad_models.h).
 *
 * Modules: main.c (flags, modes, printing), paths.c (inputs and outputs checked before
 * any work), dist.c (under mpirun: the ranks' sg_w2v_merger over MPI; linked only with
 * SGRAD_MPI, main.c calls it under W2V_WITH_MPI).
 */
#ifndef SG_TOOLS_W2V_H
#define SG_TOOLS_W2V_H

#include "tools.h"

/* The command line: the library's options and the program's files and modes. */
typedef struct {
    sg_w2v_opts o;
    const char *train;
    const char *output;       /* the vectors file (required for training) */
    const char *save_context; /* the output vectors file, or NULL */
    const char *log;          /* -log: JSON lines of training progress, or NULL */
    const char *save_vocab;   /* -save-vocab: the vocabulary as `word count` lines, or NULL */
    const char *read_vocab;   /* -read-vocab: the vocabulary from this file, or NULL */
    const char *export_model; /* -export: a model or checkpoint whose vectors -output gets */
    int binary, classes;
    int debug;                /* 0 errors only, 1 progress and summaries (default), 2 more */
    double dist_timeout;      /* -dist-timeout: seconds a rank waits in a collective under
                                 mpirun; 0: SGRAD_DIST_TIMEOUT, else 300 (dist.c) */
} w2v_flags;

/* Checks before any work that the corpus is a regular file (it is read once per epoch,
 * which a pipe or stdin cannot be), that -resume and -read-vocab name readable files, and
 * that every output (-output, -save-context, -checkpoint, -log, -save-vocab) can be
 * written: its directory exists and is writable, the path is not a directory or other
 * non-regular file, and no output is the same file (by identity, however spelt) as an
 * input or another output, except -checkpoint as -resume's file. 0, or -1 with a message
 * printed to err. Write-time errors (a full disk) remain possible; vectors and
 * checkpoints are written atomically, so they leave an old file intact. */
int w2v_check_paths(const w2v_flags *f, FILE *err);

/* ---- under mpirun (dist.c) */
/* MPI_Init, then with 2+ ranks: checks that every rank got the same arguments, refuses
 * -checkpoint and -resume and sets f->o.merger = *par (main.c then lets rank 0 alone print
 * and write files). *par is NULL with one rank. 0, or -1 with a message on every rank.
 * Every collective of dist.c waits at most f->dist_timeout for the other ranks; past it
 * the rank prints that a rank has died or stopped and the call fails (-1). */
int w2v_dist_start(int *argc, char ***argv, w2v_flags *f, sg_w2v_merger **par);
/* Collective over par's ranks (MPI_COMM_WORLD for par NULL): 0 when every rank has ok and
 * rank 0's hash; otherwise -1 with a message naming `what` and the ranks, on every rank. */
int w2v_dist_agree(sg_w2v_merger *par, bool ok, uint64_t hash, const char *what);
/* Ends the whole job after this rank failed where the others may wait (MPI_Abort). */
void w2v_dist_abort(sg_w2v_merger *par);
/* Frees par (NULL: none) and finalizes MPI if w2v_dist_start initialised it; after a
 * collective timed out, ends the job with MPI_Abort instead (MPI_Finalize would wait for
 * the missing rank). */
void w2v_dist_end(sg_w2v_merger *par);

#endif
