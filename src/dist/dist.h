/* The dist layer's private header: what its files (dist.c, table.c) share. Only the public
 * headers below it: the layer is a client of sgrad.h and sgrad_dist.h.
 *
 * Error rule of the layer: a message names the function and, for MPI's own failures,
 * the rank and MPI's error string; MPI failures are SG_ERR_IO. */
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

/* A scratch buffer of at least `bytes` (8-byte aligned) kept in *slot, a persistent
 * tensor of ctx (so its memory accounting sees it), grown by half again on demand;
 * contents kept until the next growth. NULL on allocation failure (recorded on ctx). */
void *sg__dist_scratch(sg_ctx *ctx, sg_tensor **slot, size_t bytes);

/* Every rank's status in one MPI_Allreduce (MPI_MAX): SG_OK when all are fine, else an
 * error on every rank, this rank's own or "<fn>: another rank failed <what>". */
int sg__dist_agree(sg_ctx *ctx, MPI_Comm comm, int rank, int mine, const char *fn, const char *what);

#endif
