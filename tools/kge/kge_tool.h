/* sgrad-kge, the program: subcommands train, eval, predict and export over the engine of
 * sgrad_kge.h. main.c parses the training flags and prints its progress; query.c runs the
 * other subcommands. Everything but answers (eval's JSON line, predictions, train's test
 * metrics) goes to stderr.
 */
#ifndef SG_TOOLS_KGE_H
#define SG_TOOLS_KGE_H

#include "sgrad_kge.h"
#include "tools.h"

#define KGE_PROG "sgrad-kge"

/* The metrics as the one JSON line of eval: mrr, hits@1, hits@3, hits@10, mr, count,
 * unseen, unknown (no newline). */
void kge_print_metrics(FILE *f, const sg_kge_metrics *m);
/* Whether path can be opened for reading; else a message naming flag, and false. */
bool kge_check_input(const char *flag, const char *path);
/* The subcommands other than train: argv[0] is the subcommand. Exit status. */
int kge_cmd_eval(int argc, char **argv);
int kge_cmd_predict(int argc, char **argv);
int kge_cmd_export(int argc, char **argv);

/* Under mpirun (dist.c, built with MPI only): MPI started, *out the sg_kge_dist of this
 * rank (also for 1 rank), the ranks' command lines checked to agree. 0, or -1 with a
 * message. verbose: each rank prints the entity rows it holds. */
int kge_dist_start(int *argc, char ***argv, bool verbose, sg_kge_dist **out);
/* The largest of the ranks' rc (collective). */
int kge_dist_agree(sg_kge_dist *p, int rc);
/* Frees p and ends MPI (NULL: nothing). */
void kge_dist_end(sg_kge_dist *p);

#endif
