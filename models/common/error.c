/* Recording an error (or success) in the caller's sg_model_error: the one way the trainer
 * library reports what went wrong. Its own file so that a part built alone (the TSV
 * reader's fuzz target) needs nothing else of the library.
 *
 * Invariants: an error is recorded once, where it is known, with the caller's path in
 * its message; nothing here prints; a NULL error record is allowed and left alone.
 */
#include "common.h"

#include <stdarg.h>
#include <stdio.h>

int tc_fail(sg_model_error *e, int status, const char *fmt, ...)
{
    if (!e) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    e->status = status;
    return -1;
}

int tc_fail_ctx(sg_model_error *e, const sg_ctx *ctx, const char *prefix)
{
    const int status = ctx ? sg_ctx_status(ctx) : SG_ERR_NOMEM;
    return tc_fail(e, status ? status : SG_ERR_STATE, "%s%s", prefix, ctx ? sg_ctx_message(ctx) : "out of memory");
}

void tc_ok(sg_model_error *e)
{
    if (!e) return;
    e->status = SG_OK;
    e->message[0] = '\0';
}
