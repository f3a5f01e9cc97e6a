/* The dist layer's private header: what its files (dist.c, table.c) share. Only the public
 * headers below it: the layer is a client of sgrad.h and sgrad_dist.h.
 *
 * Error rule of the layer: a message names the function and, for MPI's own failures,
 * the rank and MPI's error string; MPI failures are SG_ERR_IO. Every collective is
 * started non-blocking and completed by sg__dist_wait, so none waits past the handle's
 * timeout for a rank that died or stopped. */
#ifndef SG_DIST_PRIVATE_H
#define SG_DIST_PRIVATE_H

#include "sgrad_dist.h"

#include <stddef.h>

/* The handle's duplicated communicator (errors return) and its context. */
MPI_Comm sg__dist_comm(const sg_dist *d);
sg_ctx *sg__dist_ctx(const sg_dist *d);

/* Records a formatted error on ctx; returns status. */
int sg__dist_fail(sg_ctx *ctx, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Records MPI error err of call `what` on rank `rank` as SG_ERR_IO; returns SG_ERR_IO. */
int sg__dist_mpi_failed(sg_ctx *ctx, int rank, int err, const char *what);

/* Completes the non-blocking collective *req on d's communicator (err: what starting it
 * returned) within d's timeout. SG_OK; SG_ERR_IO when MPI failed (MPI's message) or no
 * answer came in time (the message names fn, this rank, `what` and the timeout). After a
 * timeout the communicator holds an unfinished collective whose buffers MPI may still
 * write: sg__dist_stalled then refuses every later one before it starts. */
int sg__dist_wait(sg_dist *d, const char *fn, const char *what, int err, MPI_Request *req);
/* 1 (SG_ERR_IO recorded, naming fn) when an earlier collective of d timed out, else 0. */
int sg__dist_stalled(sg_dist *d, const char *fn);
/* The layer's one way to run a collective: `start` (an MPI_I... call filling request q)
 * is made only when d has not stalled, then completed by sg__dist_wait; its status. */
#define SG__DIST_RUN(d, fn, what, q, start) \
    (sg__dist_stalled(d, fn) ? SG_ERR_IO : sg__dist_wait(d, fn, what, (start), &(q)))

/* A scratch buffer of at least `bytes` (8-byte aligned) kept in *slot, a persistent
 * tensor of ctx (so its memory accounting sees it), grown by half again on demand;
 * contents kept until the next growth. NULL on allocation failure (recorded on ctx). */
void *sg__dist_scratch(sg_ctx *ctx, sg_tensor **slot, size_t bytes);

/* Every rank's status in one MPI_Allreduce (MPI_MAX): SG_OK when all are fine, else an
 * error on every rank, this rank's own or "<fn>: another rank failed <what>". */
int sg__dist_agree(sg_dist *d, int mine, const char *fn, const char *what);

#endif
