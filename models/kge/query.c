/* Queries of a trained or loaded model: the k best tails or heads of a pair (one query
 * through the score path, all entities sorted by score, ties by row), and the export of
 * the tables as TSV, .npy and name files, each replaced atomically (tc_outfile).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "engine.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    float s;
    int64_t row;
} scored;

/* Best first: higher score, then lower row; NaN last. */
static int by_score(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    const bool nx = isnan(x->s), ny = isnan(y->s);
    if (nx != ny) return nx ? 1 : -1;
    if (!nx && x->s != y->s) return x->s > y->s ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

int kge_predict(const kge_tables *t, int64_t x, int64_t r, bool head_side, int k, int64_t *rows, float *scores,
                int *n, sg_model_error *e)
{
    const int was = sg_set_grad_enabled(t->ctx, 0);
    if (head_side && t->reciprocal) r += t->n_rel, head_side = false;
    sg_tensor *xe = sg_embedding(t->E, kge_index(t->ctx, &x, 1), NULL);
    sg_tensor *re = sg_embedding(t->R, kge_index(t->ctx, &r, 1), NULL);
    const float *s = sg_tensor_f32(kge_score_cross(t, kge_query(t, xe, re, head_side), t->E, NULL));
    scored *all = s ? malloc((size_t)t->n_ent * sizeof *all) : NULL;
    int rc = 0;
    if (!s) rc = tc_fail_ctx(e, t->ctx, "prediction failed: ");
    else if (!all) rc = tc_fail(e, SG_ERR_NOMEM, "out of memory");
    if (!rc) {
        for (int64_t i = 0; i < t->n_ent; i++) all[i] = (scored){s[i], i};
        qsort(all, (size_t)t->n_ent, sizeof *all, by_score);
        *n = (int64_t)k < t->n_ent ? k : (int)t->n_ent;
        for (int i = 0; i < *n; i++) rows[i] = all[i].row, scores[i] = all[i].s;
    }
    free(all);
    sg_tape_reset(t->ctx);
    sg_set_grad_enabled(t->ctx, was);
    return rc;
}

/* ---- export */

/* dir/name (malloc'd). */
static char *join(const char *dir, const char *name)
{
    const size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (p) snprintf(p, a + b + 2, "%s%s%s", dir, a && dir[a - 1] == '/' ? "" : "/", name);
    return p;
}

/* A .npy (format 1.0) of rows x cols float32 (little-endian hosts, as the checkpoints). */
static int write_npy(FILE *f, const float *x, int64_t rows, int64_t cols)
{
    char head[128];
    int n = snprintf(head, sizeof head, "{'descr': '<f4', 'fortran_order': False, 'shape': (%lld, %lld), }",
                     (long long)rows, (long long)cols);
    while ((10 + n + 1) % 64) head[n++] = ' ';
    head[n++] = '\n';
    const unsigned char magic[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 0xff),
                                     (unsigned char)(n >> 8)};
    if (fwrite(magic, 1, 10, f) != 10 || fwrite(head, 1, (size_t)n, f) != (size_t)n) return -1;
    return fwrite(x, sizeof *x, (size_t)(rows * cols), f) == (size_t)(rows * cols) ? 0 : -1;
}

/* `name<TAB>v1 v2 ...` lines (9 significant digits), or only the names (x NULL). */
static int write_rows(FILE *f, const kg_dict *d, const float *x, int64_t rows, int64_t cols)
{
    for (int64_t i = 0; i < rows; i++) {
        fputs(kge_dict_name(d, i % kge_dict_size(d)), f);
        if (i >= kge_dict_size(d)) fputs(" (inverse)", f);
        for (int64_t c = 0; x && c < cols; c++) fprintf(f, "%c%.9g", c ? ' ' : '\t', (double)x[i * cols + c]);
        if (fputc('\n', f) == EOF) return -1;
    }
    return 0;
}

/* One export file: kind 0 TSV, 1 .npy, 2 names. */
static int export_one(const char *dir, const char *name, int kind, const kg_dict *d, const float *x, int64_t rows,
                      int64_t cols, sg_model_error *e)
{
    char *path = join(dir, name);
    if (!path) return tc_fail(e, SG_ERR_NOMEM, "out of memory");
    tc_outfile o;
    int rc = tc_outfile_open(&o, path);
    if (!rc) {
        rc = kind == 1 ? write_npy(o.f, x, rows, cols) : write_rows(o.f, d, kind == 0 ? x : NULL, rows, cols);
        if (rc || ferror(o.f)) rc = -1, tc_outfile_abort(&o);
        else rc = tc_outfile_commit(&o);
    }
    if (rc) tc_fail(e, SG_ERR_IO, "cannot write %s: %s", path, tc_out_strerror(errno));
    free(path);
    return rc;
}

int kge_export(const sg_kge *m, const char *dir, sg_model_error *e)
{
    /* the directory is made when missing (its parent must exist), as -output names it */
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return tc_fail(e, SG_ERR_IO, "cannot create directory %s: %s", dir, strerror(errno));
    const kge_tables *t = &m->tb;
    const float *E = sg_tensor_f32(t->E), *R = sg_tensor_f32(t->R);
    return export_one(dir, "entities.tsv", 0, &m->ents, E, t->n_ent, t->dim, e) ||
                   export_one(dir, "relations.tsv", 0, &m->rels, R, t->rrows, t->rdim, e) ||
                   export_one(dir, "entities.npy", 1, &m->ents, E, t->n_ent, t->dim, e) ||
                   export_one(dir, "relations.npy", 1, &m->rels, R, t->rrows, t->rdim, e) ||
                   export_one(dir, "entity_names.txt", 2, &m->ents, NULL, t->n_ent, 0, e) ||
                   export_one(dir, "relation_names.txt", 2, &m->rels, NULL, t->rrows, 0, e)
               ? -1
               : 0;
}
