/* The io layer's private header: atomic file output, the one way the library writes a
 * file. Includes only the layers below, and of the optimizer only its checkpoint interface
 * (optim/state_io.h): io never sees an optimizer's internals.
 *
 * A save writes a temporary file beside the destination (same directory, so the rename is
 * atomic), fsyncs it, renames it over the destination and fsyncs the directory. Until the
 * rename the destination is untouched; a process killed at any point leaves either the old
 * file or the new one complete (and at worst a stray temporary file). An error at any step
 * removes the temporary file and leaves the destination as it was.
 */
#ifndef SG_IO_H
#define SG_IO_H

#include "optim/state_io.h"

typedef struct {
    sg_ctx *ctx;
    int fd;             /* the temporary file, -1 once closed */
    char *path, *tmp;   /* destination and temporary paths (sg__malloc'd) */
    unsigned char *buf; /* output buffer of SG__OUT_BUF bytes */
    size_t used;        /* bytes in buf */
    uint64_t written;   /* bytes handed to sg__out_write so far */
    int status;         /* first error (recorded on ctx), SG_OK if none: sticky */
} sg__out;

#define SG__OUT_BUF ((size_t)1 << 16)

/* Creates the temporary file for an atomic save to path. A symlink is followed: its final
 * target is the file replaced (the link stays). Checks what can be checked before any long
 * work: the directory exists and is writable, the target is a regular file or does not
 * exist (a directory, device, FIFO or socket is refused before anything is created). A
 * replaced file's permission bits go to the new one; a new file gets 0666 minus the umask.
 * On error records SG_ERR_IO (naming path and the reason) and returns it; *o is then
 * inert (abort is a no-op). */
int sg__out_open(sg_ctx *ctx, const char *path, sg__out *o);
/* Appends n bytes (buffered). Returns o->status: once a write failed, later calls do
 * nothing and return the same error. */
int sg__out_write(sg__out *o, const void *data, size_t n);
/* Flushes, fsyncs and closes the temporary file, renames it over path and fsyncs the
 * directory. On any error removes the temporary file (path untouched) and returns it.
 * Frees o's buffers either way. */
int sg__out_commit(sg__out *o);
/* Drops the save: removes the temporary file, frees o's buffers; path untouched. Safe on
 * an inert or already committed o. */
void sg__out_abort(sg__out *o);

#endif
