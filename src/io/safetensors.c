/* The safetensors format of checkpoints (io/safetensors.h): FNV-1a, the header writer,
 * the strict, bounded JSON reader and the checks of a file's layout.
 *
 * Invariants (besides safetensors.h's):
 * - The writer emits the header byte for byte as every sgrad since format 2 has: keys in
 *   the order given, no whitespace but the padding, integers in decimal.
 * - The reader accepts only what the writer could write, or a header close to it: JSON
 *   strings (escapes decoded, no NUL, surrogates paired), non-negative integers below
 *   2^63, "__metadata__" a string map or null, tensors with exactly dtype, shape (at most
 *   SG_MAX_DIMS) and data_offsets whose byte count follows from dtype and shape. Its
 *   errors are SG_ERR_FORMAT naming the byte of the header.
 */
#define _POSIX_C_SOURCE 200809L
#include "io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define FORMAT_VERSION "2"      /* the checksum covers the whole file */
#define FORMAT_VERSION_DATA "1" /* read only: the checksum covers the data section */
#define MAX_HEADER ((uint64_t)1 << 30)
#define FNV_PRIME 0x100000001b3ull

uint64_t sg__fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * FNV_PRIME;
    return h;
}

void sg__st_le64(unsigned char out[8], uint64_t v)
{
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t read_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

const char *sg__st_dtype_name(sg_dtype d)
{
    switch (d) {
    case SG_F32: return "F32";
    case SG_F64: return "F64";
    case SG_I32: return "I32";
    case SG_I64: return "I64";
    default: return "?";
    }
}

/* ---- header output */

static void put(sg__st_writer *w, const char *p, size_t n)
{
    if (w->nomem) return;
    if (w->n + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->n + n + 1) cap *= 2;
        char *s = sg__malloc(w->ctx, cap);
        if (!s) {
            w->nomem = true;
            return;
        }
        if (w->n) memcpy(s, w->s, w->n);
        sg__free(w->ctx, w->s);
        w->s = s;
        w->cap = cap;
    }
    memcpy(w->s + w->n, p, n);
    w->n += n;
    w->s[w->n] = '\0';
}

static void put_str(sg__st_writer *w, const char *p) { put(w, p, strlen(p)); }

static void put_json_string(sg__st_writer *w, const char *p)
{
    put(w, "\"", 1);
    for (; *p; p++) {
        unsigned char c = (unsigned char)*p;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(w, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(w, esc, 6);
        } else {
            put(w, p, 1);
        }
    }
    put(w, "\"", 1);
}

void sg__st_meta(sg__st_writer *w, const char *key, const char *value)
{
    if (!w->first) put(w, ",", 1);
    w->first = false;
    put_json_string(w, key);
    put(w, ":", 1);
    put_json_string(w, value);
}

void sg__st_begin(sg__st_writer *w, sg_ctx *ctx)
{
    *w = (sg__st_writer){ctx, NULL, 0, 0, false, true, true, 0, 0};
    put_str(w, "{\"__metadata__\":{");
    sg__st_meta(w, "sgrad.format", FORMAT_VERSION);
    sg__st_meta(w, "sgrad.checksum", "fnv1a64:0000000000000000");
    w->digits_at = w->n - 17; /* before the closing quote */
}

static void close_meta(sg__st_writer *w)
{
    if (w->in_meta) put_str(w, "}");
    w->in_meta = false;
}

void sg__st_tensor(sg__st_writer *w, const char *name, sg_dtype dtype, int ndim, const int64_t *shape)
{
    char num[80];
    uint64_t bytes = (uint64_t)sg__numel(ndim, shape) * sg_dtype_size(dtype);
    close_meta(w);
    put_str(w, ",");
    put_json_string(w, name);
    snprintf(num, sizeof num, ":{\"dtype\":\"%s\",\"shape\":[", sg__st_dtype_name(dtype));
    put_str(w, num);
    for (int d = 0; d < ndim; d++) {
        snprintf(num, sizeof num, d ? ",%lld" : "%lld", (long long)shape[d]);
        put_str(w, num);
    }
    snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)w->off,
             (unsigned long long)(w->off + bytes));
    put_str(w, num);
    w->off += bytes;
}

int sg__st_end(sg__st_writer *w)
{
    close_meta(w);
    put_str(w, "}");
    while (w->n % 8 && !w->nomem) put(w, " ", 1); /* the data starts at 8 + n: 8-byte aligned */
    return w->nomem ? sg__failc(w->ctx, SG_ERR_NOMEM, "checkpoint: out of memory") : SG_OK;
}

void sg__st_set_checksum(sg__st_writer *w, uint64_t h)
{
    char digits[17];
    snprintf(digits, sizeof digits, "%016llx", (unsigned long long)h);
    memcpy(w->s + w->digits_at, digits, 16);
}

void sg__st_writer_free(sg__st_writer *w)
{
    sg__free(w->ctx, w->s);
    w->s = NULL;
}

/* ---- strict, bounded JSON reader for a header */

static int bad(sg__st_file *r, const char *what)
{
    if (!r->rc)
        r->rc = sg__failc(r->ctx, SG_ERR_FORMAT, "checkpoint header: %s (at byte %lld of the header)",
                          what, (long long)(r->p - r->start));
    return r->rc;
}

static void ws(sg__st_file *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static bool eat(sg__st_file *r, char c)
{
    ws(r);
    if (r->p < r->end && *r->p == c) {
        r->p++;
        return true;
    }
    return false;
}

static int hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

/* Code point u (not 0, not a surrogate) as UTF-8 at o; returns the end. */
static char *put_utf8(char *o, unsigned u)
{
    if (u < 0x80) {
        *o++ = (char)u;
    } else if (u < 0x800) {
        *o++ = (char)(0xC0 | (u >> 6));
        *o++ = (char)(0x80 | (u & 0x3F));
    } else if (u < 0x10000) {
        *o++ = (char)(0xE0 | (u >> 12));
        *o++ = (char)(0x80 | ((u >> 6) & 0x3F));
        *o++ = (char)(0x80 | (u & 0x3F));
    } else {
        *o++ = (char)(0xF0 | (u >> 18));
        *o++ = (char)(0x80 | ((u >> 12) & 0x3F));
        *o++ = (char)(0x80 | ((u >> 6) & 0x3F));
        *o++ = (char)(0x80 | (u & 0x3F));
    }
    return o;
}

/* The escape after a backslash (r->p at its letter), decoded at o; returns the end, NULL
 * on a bad escape (recorded). */
static char *read_escape(sg__st_file *r, char *o)
{
    if (r->p >= r->end) return bad(r, "unterminated escape"), NULL;
    char e = *r->p++;
    const char *simple = "\"\\/bfnrt", *val = "\"\\/\b\f\n\r\t";
    const char *k = strchr(simple, e);
    if (e && k) {
        *o++ = val[k - simple];
        return o;
    }
    unsigned u;
    if (e != 'u' || r->end - r->p < 4 || hex4(r->p, &u)) return bad(r, "bad escape"), NULL;
    r->p += 4;
    if (u >= 0xD800 && u < 0xDC00) { /* a surrogate pair */
        unsigned lo;
        if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u' || hex4(r->p + 2, &lo) || lo < 0xDC00 ||
            lo >= 0xE000)
            return bad(r, "unpaired surrogate"), NULL;
        r->p += 6;
        u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
    } else if (u >= 0xDC00 && u < 0xE000) {
        return bad(r, "unpaired surrogate"), NULL;
    }
    if (u == 0) return bad(r, "NUL in a string"), NULL;
    return put_utf8(o, u);
}

/* A JSON string, decoded to UTF-8 into r->strings (never longer than its encoding). */
static char *read_string(sg__st_file *r)
{
    if (!eat(r, '"')) return bad(r, "expected a string"), NULL;
    char *out = r->strings + r->str_used, *o = out;
    while (1) {
        if (r->p >= r->end) return bad(r, "unterminated string"), NULL;
        unsigned char c = (unsigned char)*r->p++;
        if (c == '"') break;
        if (c < 0x20) return bad(r, "control character in a string"), NULL;
        if (c != '\\') *o++ = (char)c;
        else if (!(o = read_escape(r, o))) return NULL;
    }
    *o++ = '\0';
    r->str_used += (size_t)(o - out);
    return out;
}

/* A non-negative integer below 2^63, digits only, no leading zero. */
static int read_uint(sg__st_file *r, uint64_t *out)
{
    ws(r);
    const char *s = r->p;
    uint64_t v = 0;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
        unsigned d = (unsigned)(*r->p - '0');
        if (v > (((uint64_t)1 << 63) - 1 - d) / 10) return bad(r, "integer too large");
        v = v * 10 + d;
        r->p++;
    }
    if (r->p == s) return bad(r, "expected a non-negative integer");
    if (r->p - s > 1 && *s == '0') return bad(r, "integer with a leading zero");
    if (r->p < r->end && (*r->p == '.' || *r->p == 'e' || *r->p == 'E'))
        return bad(r, "integer expected, not a fraction");
    *out = v;
    return SG_OK;
}

/* [int, ...] with at most `max` elements; *n gets the count. */
static int read_uint_array(sg__st_file *r, uint64_t *vals, int max, int *n, const char *what)
{
    *n = 0;
    if (!eat(r, '[')) return bad(r, what);
    if (eat(r, ']')) return SG_OK;
    do {
        if (*n == max) return bad(r, what);
        if (read_uint(r, &vals[(*n)++])) return r->rc;
    } while (eat(r, ','));
    if (!eat(r, ']')) return bad(r, what);
    return SG_OK;
}

static int read_metadata(sg__st_file *r)
{
    ws(r);
    if (r->end - r->p >= 4 && !memcmp(r->p, "null", 4)) {
        r->p += 4;
        return SG_OK;
    }
    if (!eat(r, '{')) return bad(r, "__metadata__ is not an object");
    if (eat(r, '}')) return SG_OK;
    do {
        char *k = read_string(r);
        if (!k || !eat(r, ':')) return bad(r, "expected ':' in __metadata__");
        ws(r);
        const char *token = r->p;
        char *v = read_string(r);
        if (!v) return r->rc;
        if (!strcmp(k, "sgrad.checksum")) {
            r->sum_token = token;
            r->sum_token_len = (size_t)(r->p - token);
        }
        for (int64_t i = 0; i < r->nm; i++)
            if (!strcmp(r->m[i].key, k)) return bad(r, "duplicate key in __metadata__");
        sg__st_kv *g = sg__grow(r->ctx, r->m, &r->cap_m, r->nm, sizeof *g, 16);
        if (!g) return r->rc = SG_ERR_NOMEM;
        r->m = g;
        r->m[r->nm++] = (sg__st_kv){k, v};
    } while (eat(r, ','));
    if (!eat(r, '}')) return bad(r, "expected '}' after __metadata__");
    return SG_OK;
}

static int read_tensor(sg__st_file *r, char *name)
{
    sg__st_tensor_info t = {name, SG_DTYPE_INVALID, -1, {0}, 0, 0, false};
    bool have_dtype = false, have_offsets = false;
    if (!eat(r, '{')) return bad(r, "a tensor is not an object");
    do {
        char *k = read_string(r);
        if (!k || !eat(r, ':')) return bad(r, "expected ':' in a tensor");
        if (!strcmp(k, "dtype") && !have_dtype) {
            char *d = read_string(r);
            if (!d) return r->rc;
            t.dtype = !strcmp(d, "F32") ? SG_F32 : !strcmp(d, "F64") ? SG_F64
                    : !strcmp(d, "I32") ? SG_I32 : !strcmp(d, "I64") ? SG_I64 : SG_DTYPE_INVALID;
            if (t.dtype == SG_DTYPE_INVALID) return bad(r, "unsupported dtype (F32, F64, I32, I64)");
            have_dtype = true;
        } else if (!strcmp(k, "shape") && t.ndim < 0) {
            uint64_t dims[SG_MAX_DIMS];
            if (read_uint_array(r, dims, SG_MAX_DIMS, &t.ndim, "shape of at most 4 dimensions expected"))
                return r->rc;
            for (int d = 0; d < t.ndim; d++) t.shape[d] = (int64_t)dims[d];
        } else if (!strcmp(k, "data_offsets") && !have_offsets) {
            uint64_t off[2];
            int n;
            if (read_uint_array(r, off, 2, &n, "data_offsets [begin, end] expected")) return r->rc;
            if (n != 2 || off[0] > off[1]) return bad(r, "data_offsets [begin, end] expected");
            t.begin = off[0];
            t.end = off[1];
            have_offsets = true;
        } else {
            return bad(r, "unknown or repeated key in a tensor");
        }
    } while (eat(r, ','));
    if (!eat(r, '}')) return bad(r, "expected '}' after a tensor");
    if (!have_dtype || t.ndim < 0 || !have_offsets) return bad(r, "a tensor lacks dtype, shape or data_offsets");
    /* the byte count must follow from dtype and shape, without overflow */
    uint64_t bytes = sg_dtype_size(t.dtype);
    for (int d = 0; d < t.ndim; d++) {
        uint64_t s = (uint64_t)t.shape[d];
        if (s && bytes > (((uint64_t)1 << 62) / s)) return bad(r, "tensor size overflows");
        bytes *= s;
    }
    if (bytes != t.end - t.begin) return bad(r, "data_offsets disagree with dtype and shape");
    sg__st_tensor_info *g = sg__grow(r->ctx, r->t, &r->cap_t, r->nt, sizeof *g, 16);
    if (!g) return r->rc = SG_ERR_NOMEM;
    r->t = g;
    r->t[r->nt++] = t;
    return SG_OK;
}

static int read_header(sg__st_file *r)
{
    bool have_meta = false;
    if (!eat(r, '{')) return bad(r, "the header is not a JSON object");
    if (!eat(r, '}')) {
        do {
            char *k = read_string(r);
            if (!k || !eat(r, ':')) return bad(r, "expected ':'");
            if (!strcmp(k, "__metadata__")) {
                if (have_meta) return bad(r, "two __metadata__");
                have_meta = true;
                if (read_metadata(r)) return r->rc;
            } else if (read_tensor(r, k)) {
                return r->rc;
            }
        } while (eat(r, ','));
        if (!eat(r, '}')) return bad(r, "expected '}' at the end of the header");
    }
    ws(r);
    if (r->p != r->end) return bad(r, "bytes after the header's object");
    return SG_OK;
}

/* ---- a file */

static int cmp_begin(const void *a, const void *b)
{
    const sg__st_tensor_info *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const sg__st_tensor_info *)a)->name, ((const sg__st_tensor_info *)b)->name);
}

const char *sg__st_meta_get(const sg__st_file *f, const char *key)
{
    for (int64_t i = 0; i < f->nm; i++)
        if (!strcmp(f->m[i].key, key)) return f->m[i].value;
    return NULL;
}

sg__st_tensor_info *sg__st_find(sg__st_file *f, const char *name)
{
    sg__st_tensor_info key = {(char *)name, SG_DTYPE_INVALID, 0, {0}, 0, 0, false};
    return f->nt ? bsearch(&key, f->t, (size_t)f->nt, sizeof *f->t, cmp_name) : NULL; /* f->t NULL: none */
}


/* Reads path whole: *buf (size *n). */
static int slurp(sg_ctx *ctx, const char *path, unsigned char **buf, uint64_t *n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return sg__failc(ctx, SG_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return sg__failc(ctx, SG_ERR_IO, "cannot read %s: not a regular file", path);
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size < 8 || size > (uint64_t)SIZE_MAX / 2) {
        close(fd);
        return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint %s: %llu bytes, too short for a header",
                         path, (unsigned long long)size);
    }
    unsigned char *b = sg__malloc(ctx, (size_t)size);
    if (!b) {
        close(fd);
        return SG_ERR_NOMEM;
    }
    uint64_t got = 0;
    while (got < size) {
        ssize_t k = read(fd, b + got, (size_t)(size - got));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int err = k < 0 ? errno : EIO;
            close(fd);
            sg__free(ctx, b);
            return sg__failc(ctx, SG_ERR_IO, "cannot read %s: %s", path, strerror(err));
        }
        got += (uint64_t)k;
    }
    close(fd);
    *buf = b;
    *n = size;
    return SG_OK;
}

int sg__st_open(sg_ctx *ctx, const char *path, sg__st_file *f)
{
    *f = (sg__st_file){.ctx = ctx, .rc = SG_OK};
    int rc = slurp(ctx, path, &f->buf, &f->size);
    if (rc) return rc;
    uint64_t hlen = read_le64(f->buf);
    if (hlen > f->size - 8 || hlen > MAX_HEADER || hlen < 2)
        return sg__failc(ctx, SG_ERR_FORMAT, "checkpoint %s: header of %llu bytes in a file of %llu", path,
                         (unsigned long long)hlen, (unsigned long long)f->size);
    f->start = f->p = (const char *)f->buf + 8;
    f->end = f->p + hlen;
    f->data = f->buf + 8 + hlen;
    f->data_len = f->size - 8 - hlen;
    f->strings = sg__malloc(ctx, (size_t)hlen);
    return f->strings ? read_header(f) : SG_ERR_NOMEM;
}

void sg__st_close(sg__st_file *f)
{
    sg__free(f->ctx, f->strings);
    sg__free(f->ctx, f->t);
    sg__free(f->ctx, f->m);
    sg__free(f->ctx, f->buf);
    f->strings = NULL;
    f->t = NULL;
    f->m = NULL;
    f->buf = NULL;
}

/* The tensors' offsets, sorted by begin, tile [0, data_len) exactly. */
static int check_offsets(sg__st_file *f)
{
    if (f->nt > 1) qsort(f->t, (size_t)f->nt, sizeof *f->t, cmp_begin); /* none: f->t NULL, not for qsort */
    uint64_t at = 0;
    for (int64_t i = 0; i < f->nt; i++) {
        if (f->t[i].begin != at)
            return sg__failc(f->ctx, SG_ERR_FORMAT, "checkpoint: tensor \"%s\" at byte %llu %s", f->t[i].name,
                             (unsigned long long)f->t[i].begin, f->t[i].begin < at ? "overlaps another" : "leaves a gap");
        at = f->t[i].end;
    }
    if (at != f->data_len)
        return sg__failc(f->ctx, SG_ERR_FORMAT, "checkpoint: tensors cover %llu bytes of a data section of %llu",
                         (unsigned long long)at, (unsigned long long)f->data_len);
    return SG_OK;
}

/* The file's checksum as its format computes it: of the data (format 1) or of the whole
 * file with the checksum's digits read as '0' (format 2; *h unset and SG_ERR_FORMAT when
 * the checksum is not exactly "fnv1a64:" and 16 characters without escapes). */
static int file_checksum(sg__st_file *f, bool whole_file, const char *sum, uint64_t *h)
{
    *h = SG__FNV_OFFSET;
    if (!whole_file) {
        *h = sg__fnv1a(*h, f->data, (size_t)f->data_len);
        return SG_OK;
    }
    if (f->sum_token_len != 26 || memcmp(f->sum_token, "\"fnv1a64:", 9))
        return sg__failc(f->ctx, SG_ERR_FORMAT, "checkpoint: checksum %s is not fnv1a64: and 16 hex digits", sum);
    size_t digits = (size_t)((const unsigned char *)f->sum_token + 9 - f->buf);
    char zeros[16];
    memset(zeros, '0', sizeof zeros);
    *h = sg__fnv1a(*h, f->buf, digits);
    *h = sg__fnv1a(*h, zeros, sizeof zeros);
    *h = sg__fnv1a(*h, f->buf + digits + 16, (size_t)(f->size - digits - 16));
    return SG_OK;
}

int sg__st_verify(sg__st_file *f)
{
    int rc = check_offsets(f);
    if (rc) return rc;
    const char *ver = sg__st_meta_get(f, "sgrad.format");
    bool whole_file = ver && !strcmp(ver, FORMAT_VERSION);
    if (!whole_file && (!ver || strcmp(ver, FORMAT_VERSION_DATA)))
        return sg__failc(f->ctx, SG_ERR_FORMAT, "checkpoint: format version %s (this library reads %s and %s)",
                         ver ? ver : "missing", FORMAT_VERSION_DATA, FORMAT_VERSION);
    const char *sum = sg__st_meta_get(f, "sgrad.checksum");
    if (!sum) return sg__failc(f->ctx, SG_ERR_FORMAT, "checkpoint: checksum missing");
    uint64_t h;
    rc = file_checksum(f, whole_file, sum, &h);
    if (rc) return rc;
    char want[40];
    snprintf(want, sizeof want, "fnv1a64:%016llx", (unsigned long long)h);
    if (strcmp(sum, want))
        return sg__failc(f->ctx, SG_ERR_FORMAT, "checkpoint: checksum %s, the %s gives %s", sum,
                         whole_file ? "file" : "data", want);
    return SG_OK;
}

int sg__st_sort_names(sg__st_file *f)
{
    if (f->nt > 1) qsort(f->t, (size_t)f->nt, sizeof *f->t, cmp_name);
    for (int64_t i = 1; i < f->nt; i++)
        if (!strcmp(f->t[i - 1].name, f->t[i].name))
            return sg__failc(f->ctx, SG_ERR_FORMAT, "checkpoint: tensor \"%s\" appears twice", f->t[i].name);
    return SG_OK;
}
