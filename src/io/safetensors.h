/* The safetensors format as sgrad's checkpoints use it (io/safetensors.c): the header
 * writer, the strict, bounded JSON reader of a header, and the checks of a whole file's
 * layout (offsets, format version, FNV-1a checksum). Knows nothing of parameters or
 * optimizers: checkpoint.c says which tensors and metadata a file holds.
 *
 * A file: 8-byte little-endian header length N, N bytes of JSON (padded with spaces so
 * that the data starts 8-byte aligned), then the data section. The JSON object holds
 * "__metadata__" (a string map; sgrad writes "sgrad.format" and "sgrad.checksum" first)
 * and one object per tensor: dtype, shape, data_offsets [begin, end) in the data section.
 *
 * Invariants:
 * - The checksum (FNV-1a 64, "sgrad.checksum" = "fnv1a64:" and 16 hex digits) covers the
 *   whole file, its own 16 digits read as '0' (format 2); format 1 files, whose checksum
 *   covers the data section only, are still read.
 * - The reader reads the whole file into one buffer; every allocation is bounded by the
 *   file's size (the decoded strings by the header's length).
 */
#ifndef SG_IO_SAFETENSORS_H
#define SG_IO_SAFETENSORS_H

#include "io/io.h"

#define SG__FNV_OFFSET 0xcbf29ce484222325ull

/* FNV-1a 64 of data[0..n) continuing from h (SG__FNV_OFFSET to start). */
uint64_t sg__fnv1a(uint64_t h, const void *data, size_t n);
/* v as 8 little-endian bytes (the header length). */
void sg__st_le64(unsigned char out[8], uint64_t v);

/* ---- writing a header */

typedef struct {
    sg_ctx *ctx;
    char *s;          /* the header so far (sg__malloc'd, NUL-terminated) */
    size_t n, cap;
    bool nomem;       /* an allocation failed: s is incomplete */
    bool first;       /* no metadata pair written yet */
    bool in_meta;     /* "__metadata__" is still open */
    uint64_t off;     /* data bytes of the tensors written so far */
    size_t digits_at; /* where the checksum's 16 hex digits are in s */
} sg__st_writer;

/* Starts a header: the format version and a checksum of zero digits. */
void sg__st_begin(sg__st_writer *w, sg_ctx *ctx);
/* A metadata pair (before the first tensor). */
void sg__st_meta(sg__st_writer *w, const char *key, const char *value);
/* The next tensor; its data follows the previous one's. */
void sg__st_tensor(sg__st_writer *w, const char *name, sg_dtype dtype, int ndim, const int64_t *shape);
/* Closes the header and pads it; SG_OK, or SG_ERR_NOMEM (recorded on the context). */
int sg__st_end(sg__st_writer *w);
/* Writes h's 16 hex digits over the checksum's zeros. */
void sg__st_set_checksum(sg__st_writer *w, uint64_t h);
void sg__st_writer_free(sg__st_writer *w);

/* ---- reading a file */

typedef struct {
    char *name;
    sg_dtype dtype;
    int ndim;
    int64_t shape[SG_MAX_DIMS];
    uint64_t begin, end; /* in the data section */
    bool used;           /* claimed by the reader's caller */
} sg__st_tensor_info;

typedef struct {
    char *key, *value;
} sg__st_kv;

typedef struct {
    sg_ctx *ctx;
    unsigned char *buf; /* the whole file (size bytes) */
    uint64_t size;
    const unsigned char *data; /* its data section (data_len bytes) */
    uint64_t data_len;
    sg__st_tensor_info *t; /* the header's tensors */
    int64_t nt, cap_t;
    sg__st_kv *m; /* the metadata, in file order */
    int64_t nm, cap_m;
    /* the parser's */
    const char *start, *p, *end; /* the header; p: its unread part */
    const char *sum_token;       /* the raw JSON string of "sgrad.checksum", quotes included */
    size_t sum_token_len;
    char *strings; /* decoded strings, each NUL-terminated (at most the header's size) */
    size_t str_used;
    int rc;
} sg__st_file;

/* Reads path and parses its header into f. f is to be closed whatever this returns. */
int sg__st_open(sg_ctx *ctx, const char *path, sg__st_file *f);
/* The checks of the whole file: the tensors' offsets tile the data section, the format
 * version is known and the checksum matches. */
int sg__st_verify(sg__st_file *f);
/* Sorts the tensors by name (for sg__st_find); SG_ERR_FORMAT when a name repeats. */
int sg__st_sort_names(sg__st_file *f);
/* The tensor named name (after sg__st_sort_names), or NULL. */
sg__st_tensor_info *sg__st_find(sg__st_file *f, const char *name);
/* The metadata value of key, or NULL. */
const char *sg__st_meta_get(const sg__st_file *f, const char *key);
void sg__st_close(sg__st_file *f);

/* "F32", "F64", "I32", "I64" ("?" for another dtype). */
const char *sg__st_dtype_name(sg_dtype d);

#endif
