/* An optimizer's state as a checkpoint holds it: the interface src/io (a layer above) uses
 * to save and restore it without seeing an optimizer's internals. io includes this header
 * and not optim/optim.h (tests/test_layers.sh checks that only src/optim includes that
 * one): sg_optim and the per-parameter state stay opaque to it.
 *
 * What the optimizer decides, io only carries: the names, dtypes, shapes and bytes of each
 * parameter's state tensors in the file ("optim/<param>/<entry>"), the parameter's own
 * bytes (exact lazy SGD writes its rows caught up), the library's optimizer metadata
 * ("sgrad.optim*"), and every check of what a load brings back.
 *
 * Invariants:
 * - sg__optim_ckpt_entries gives, for the same optimizer kind, options and parameter, the
 *   same entries in the same order at save and at load; only the first dimension of an
 *   entry marked size_from_file (exact lazy SGD's rows behind and learning-rate runs) is
 *   the optimizer's now, and a load takes the file's instead.
 * - A save writes exactly the bytes the entries' dtypes and shapes announce, the same on
 *   every call (a save runs the writer twice: checksum, then file), and changes nothing.
 * - A load is begun (metadata checked), prepared one parameter at a time (everything that
 *   can fail: range checks, allocations), then committed, which cannot fail, or aborted,
 *   which changes nothing. Host byte order is little-endian (io checks before).
 */
#ifndef SG_OPTIM_STATE_IO_H
#define SG_OPTIM_STATE_IO_H

#include "core/core.h"

/* A parameter's entries: at most 4 state tensors, and exact lazy SGD's 5 more. */
#define SG__CKPT_MAX_ENTRIES 9
/* The optimizer's metadata pairs: kind, steps, lr, up to 5 options, schedule (3). */
#define SG__CKPT_MAX_META 11

/* One tensor of a parameter's optimizer state, saved as "optim/<param>/<name>". */
typedef struct {
    const char *name; /* static, or the state tensor's name (valid while the optimizer is) */
    sg_dtype dtype;
    int ndim;
    int64_t shape[SG_MAX_DIMS];
    bool size_from_file; /* a load takes the first dimension from the file */
} sg__ckpt_entry;

/* An optimizer metadata pair ("sgrad.optim" or "sgrad.optim.<key>", value as text). */
typedef struct {
    char key[40], value[40];
} sg__ckpt_kv;

/* Where a save's bytes go: SG_OK, or the sink's error (which ends the save). */
typedef int (*sg__ckpt_put)(void *sink, const void *bytes, size_t n);

/* A load's view of one entry in the file: its bytes (the entry's dtype, little-endian),
 * its first dimension as the file has it, and its full name (for messages). */
typedef struct {
    const unsigned char *data;
    int64_t len0;
    const char *name;
} sg__ckpt_bytes;

/* ---- save (and the checks shared with load) */

/* The checks of opt against the tensors a save or load is given, as sg_checkpoint_save
 * states them: opt is of ctx, each of its parameters is among params, and no tensor with
 * optimizer state is listed twice. SG_OK or the error (recorded on ctx). */
int sg__optim_ckpt_check(sg_ctx *ctx, const sg_optim *opt, sg_tensor *const *params, int64_t n,
                         const char *const *names);
/* opt's metadata pairs in file order; returns their count (<= SG__CKPT_MAX_META). */
int sg__optim_ckpt_meta(const sg_optim *opt, sg__ckpt_kv kv[SG__CKPT_MAX_META]);
/* param's entries in file order; returns their count, 0 when param is not opt's (every
 * parameter has at least its "step"). */
int sg__optim_ckpt_entries(const sg_optim *opt, const sg_tensor *param,
                           sg__ckpt_entry e[SG__CKPT_MAX_ENTRIES]);
/* Bytes of scratch sg__optim_ckpt_write needs for param (0 for most optimizers). */
size_t sg__optim_ckpt_scratch(const sg_optim *opt, const sg_tensor *param);
/* Writes entry i of param (one of opt's) through put: i == -1 is the parameter's values
 * (rows exact lazy SGD left behind caught up, as sg_optim_flush would make them),
 * 0 <= i < count its entries. Changes nothing. */
int sg__optim_ckpt_write(const sg_optim *opt, const sg_tensor *param, int i, sg__ckpt_put put,
                         void *sink, void *scratch);

/* ---- load */

typedef struct sg__ckpt_load sg__ckpt_load;
/* The file's metadata value of key, or NULL. */
typedef const char *(*sg__ckpt_lookup)(const void *ud, const char *key);

/* Checks the file's optimizer metadata against opt (kind, options, steps, learning rate,
 * schedule) and starts a load (*out, freed by commit or abort). SG_OK or the error. */
int sg__optim_ckpt_load_begin(sg_optim *opt, sg__ckpt_lookup meta, const void *ud, sg__ckpt_load **out);
/* Checks the file's entries of param (in[i] for its entry i, as sg__optim_ckpt_entries
 * gives them, matched by name, dtype and shape) and prepares their installation. */
int sg__optim_ckpt_load_param(sg__ckpt_load *l, sg_tensor *param, const sg__ckpt_bytes *in);
/* Installs what was prepared (after io wrote the parameters' values): state tensors, the
 * raw rows exact lazy SGD had left behind, learning-rate runs, step count, learning rate,
 * schedule. Cannot fail; frees l. */
void sg__optim_ckpt_load_commit(sg__ckpt_load *l);
/* Drops a load: nothing changes; frees l. NULL: no-op. */
void sg__optim_ckpt_load_abort(sg__ckpt_load *l);

#endif
