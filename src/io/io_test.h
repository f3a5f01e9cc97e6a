/* Test seams of the io layer: hooks for tests to inject faults into the library's file
 * output. Not part of the public API: the functions are internal (sg__, hidden in the
 * shared library, so they are not exported), reached by the tests, which link the static
 * library and include this header from src/. Nothing in the library sets them.
 */
#ifndef SG_IO_TEST_H
#define SG_IO_TEST_H

#include "core/core.h"

/* Makes fn (with ud) the context's file output hook: the atomic writer (io.h) calls it
 * instead of write(2), with write(2)'s meaning (bytes written, or -1 with errno set), so
 * that a test can simulate a full disk, EIO, short writes or a save cut off after N bytes.
 * fn NULL: write(2) again. ctx NULL: no-op. */
void sg__set_write_hook(sg_ctx *ctx, sg__write_fn fn, void *ud);

#endif
