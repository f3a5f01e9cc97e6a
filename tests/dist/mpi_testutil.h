/* The MPI tests' harness over testutil.h: every rank runs every test of the table in order
 * (the tests are collective), a failure is printed by the rank that saw it, rank 0 prints
 * the rest, and the job fails when any rank failed. Call after MPI_Init and setting R, P. */
#ifndef SG_MPI_TESTUTIL_H
#define SG_MPI_TESTUTIL_H

#include "sgrad_dist.h"
#include "testutil.h"

static int R, P; /* this rank, the rank count */

/* Runs the tests, then MPI_Finalize; returns main's status on this rank. */
static int tu_mpi_run_all(void)
{
    int failed = 0, passed = 0;
    for (int i = 0; i < tu_n_tests; i++) {
        tu_failures = 0;
        tu_skip_reason = NULL;
        tu_tests[i].fn();
        if (tu_failures) {
            failed++;
            fprintf(stderr, "rank %d: FAIL %s\n", R, tu_tests[i].name);
        } else {
            passed++;
            if (R == 0) printf("ok   %s (%d ranks)\n", tu_tests[i].name, P);
        }
    }
    int worst = 0;
    MPI_Allreduce(&failed, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (R == 0) printf("%d passed, %d failed\n", passed, worst);
    MPI_Finalize();
    return failed || tu_dropped ? 1 : 0;
}

#endif
