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

#endif
