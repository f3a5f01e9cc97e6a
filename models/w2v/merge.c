/* Ranks and replicas (sg_w2v_merger): each one's share of the corpus (whole lines of a
 * byte range), its part of the vocabulary pass's record, the hot rows' merge plan, and
 * which merge is due after a step.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "w2v.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The offset of the first line starting at or after byte `at` of f (size bytes). */
static int64_t line_start(FILE *f, int64_t at, int64_t size)
{
    if (at <= 0) return 0;
    if (at >= size || fseeko(f, (off_t)(at - 1), SEEK_SET)) return size;
    int c;
    while ((c = getc(f)) != EOF && c != '\n') at++;
    return c == EOF ? size : at;
}

/* Rank `rank` of `ranks`'s share of the corpus: bytes [*begin, *end), whole lines (see
 * w2v_parallel). 0, or -1 (errno set). */
int w2v_corpus_share(const char *path, int rank, int ranks, int64_t *begin, int64_t *end)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    struct stat st;
    if (fstat(fileno(f), &st)) {
        fclose(f);
        return -1;
    }
    const int64_t size = (int64_t)st.st_size;
    *begin = line_start(f, (int64_t)((double)size * rank / ranks), size);
    *end = line_start(f, (int64_t)((double)size * (rank + 1) / ranks), size);
    fclose(f);
    return 0;
}

int w2v_share_records(const char *path, const tc_vocab *v, const tc_codes *all, int ranks, tc_codes *share)
{
    const int64_t bytes = v->corpus_bytes;
    enum { CHUNK = 1 << 16 };
    int64_t *begin = malloc((size_t)(ranks + 1) * sizeof *begin), *at = malloc((size_t)(ranks + 1) * sizeof *at);
    char *buf = malloc(CHUNK);
    int rc = -1;
    FILE *f = NULL;
    if (!begin || !at || !buf) {
        errno = ENOMEM;
        goto out;
    }
    for (int r = 0; r < ranks; r++)
        if (w2v_corpus_share(path, r, ranks, &begin[r], &begin[r + 1])) goto out;
    /* newlines before each share's start, in one pass (the starts ascend), and the
     * bytes' hash, which the counting pass took of the file it recorded */
    if (!(f = fopen(path, "rb"))) goto out;
    int64_t offset = 0, lines = 0;
    uint64_t hash = TC_FNV_OFFSET;
    int r = 0;
    for (;;) {
        const size_t n = fread(buf, 1, CHUNK, f);
        for (size_t i = 0; i <= n; i++) {
            while (r <= ranks && begin[r] == offset + (int64_t)i) at[r++] = lines;
            if (i < n && buf[i] == '\n') lines++;
        }
        hash = tc_fnv1a(hash, buf, n);
        offset += (int64_t)n;
        if (n < CHUNK) break;
    }
    if (ferror(f)) {
        errno = EIO;
        goto out;
    }
    /* a file that changed since the record was made */
    int64_t eols = 0;
    for (int64_t i = 0; i < all->n; i++) eols += all->code[i] == TC_CODE_EOL;
    if (offset != bytes || hash != v->corpus_hash || begin[ranks] != bytes || r != ranks + 1 || eols != lines) {
        errno = ESTALE;
        goto out;
    }
    /* share r's codes start after the at[r]-th newline mark (a share starts a line) */
    int64_t i = 0, seen = 0;
    for (r = 0; r <= ranks; r++) {
        while (seen < at[r]) seen += all->code[i++] == TC_CODE_EOL;
        at[r] = begin[r] == bytes ? all->n : i; /* the last line may have no newline */
    }
    for (r = 0; r < ranks; r++) share[r] = (tc_codes){.code = all->code + at[r], .n = at[r + 1] - at[r]};
    rc = 0;
out:
    if (f) fclose(f);
    free(begin);
    free(at);
    free(buf);
    return rc;
}

/* The coarsest hot level (0: none) whose period keeps a row changed `per_step` times a
 * step below `bound` changes between merges; at most `finest`. */
static int hot_level(const w2v_parallel *par, int finest, double per_step, double bound)
{
    int l = 0;
    while (l < finest && (double)(l ? par->hot_period[l] : par->sync_steps) * per_step > bound) l++;
    return l;
}

/* The hot levels' periods (none below 3 ranks): the finest level, 0 for none. */
static int hot_periods(w2v_parallel *par)
{
    par->hot_levels = 0;
    memset(par->hot_in, 0, sizeof par->hot_in);
    memset(par->hot_out, 0, sizeof par->hot_out);
    memset(par->hot_node, 0, sizeof par->hot_node);
    memset(par->hot_period, 0, sizeof par->hot_period);
    if (par->ranks < 3) return 0;
    int halvings = 0; /* to a period of 1 step */
    while (par->sync_steps >> (halvings + 1) >= 1) halvings++;
    const int finest = halvings < W2V_MAX_HOT_LEVELS ? halvings : W2V_MAX_HOT_LEVELS;
    for (int l = 1; l <= finest; l++)
        par->hot_period[l] = halvings == finest ? par->sync_steps >> l : (int64_t)1 << (finest - l);
    return finest;
}

/* Each row's expected changes per example: in[w], out[w] (with the noise share first),
 * node[k]; and their maxima. */
typedef struct {
    double *in, *out, *node;
    double in_max, out_max, node_max;
} hot_rates;

static void row_rates(const w2v_trainer *t, hot_rates *r)
{
    const w2v_config *cfg = t->cfg;
    const int64_t V = t->v->size;
    double kept = 0, noise = 0;
    for (int64_t w = 0; w < V; w++) {
        r->in[w] = (double)t->v->counts[w] * tc_keep_prob(t->v->counts[w], cfg->sample, t->v->train_words);
        r->out[w] = pow((double)t->v->counts[w], 0.75);
        kept += r->in[w];
        noise += r->out[w];
    }
    for (int64_t w = 0; w < V; w++) {
        const double share = r->in[w] / kept;
        for (int64_t e = cfg->hs ? t->tree.offsets[w] : 0; cfg->hs && e < t->tree.offsets[w + 1]; e++)
            r->node[t->tree.nodes[e]] += share;
        r->in[w] = (cfg->cbow ? cfg->window + 1 : 1) * share;
        r->out[w] = cfg->negative > 0 ? share + cfg->negative * r->out[w] / noise : 0;
        if (r->in[w] > r->in_max) r->in_max = r->in[w];
        if (r->out[w] > r->out_max) r->out_max = r->out[w];
    }
    for (int64_t k = 0; cfg->hs && k < V - 1; k++)
        if (r->node[k] > r->node_max) r->node_max = r->node[k];
}

/* Each row's level from its changes per step B r, B the examples per step. */
static void assign_levels(const w2v_trainer *t, w2v_parallel *par, const hot_rates *r, int finest, double alpha)
{
    const int64_t V = t->v->size;
    double B = (double)t->cap;
    if (r->in_max * B > t->in_row_cap) B = t->in_row_cap / r->in_max;
    if (r->out_max * B > t->row_cap) B = t->row_cap / r->out_max;
    if (r->node_max * B > t->node_cap) B = t->node_cap / r->node_max;
    const double bound = W2V_HOT_STEP_BOUND / (alpha * (par->ranks - 2));
    for (int64_t w = 0; w < V; w++) {
        const int li = hot_level(par, finest, B * r->in[w], bound);
        const int lo = hot_level(par, finest, B * r->out[w], bound);
        for (int l = 1; l <= li; l++) par->hot_in[l] = w + 1;
        for (int l = 1; l <= lo; l++) par->hot_out[l] = w + 1;
        if (li > par->hot_levels) par->hot_levels = li;
        if (lo > par->hot_levels) par->hot_levels = lo;
    }
    for (int64_t k = 0; t->cfg->hs && k < V - 1; k++) {
        const int ln = hot_level(par, finest, B * r->node[k], bound);
        for (int l = 1; l <= ln; l++)
            if (par->hot_node[l] < V - 1 - k) par->hot_node[l] = V - 1 - k;
        if (ln > par->hot_levels) par->hot_levels = ln;
    }
}

/* With 3+ ranks or replicas: plans the hot rows' merges (sg_w2v_merger's levels) from the
 * counts. A row's expected changes per step on one rank are B r: r its rate per example
 * (input: its share of the kept words, times the context's mean size W + 1 for CBOW;
 * output: that share, as the positive target, plus -negative times its noise share; an
 * inner node: the share of the centre words whose path holds it), B the examples per step
 * (the batch, or fewer: a step ends once a row reaches its hit cap). A row changed more
 * than U = W2V_HOT_STEP_BOUND / (alpha (P - 2)) times between two merges gets the coarsest
 * level l whose period keeps it below U, or the finest (a period of 1 step). The periods
 * halve from sync_steps / 2; when that takes more than W2V_MAX_HOT_LEVELS halvings to
 * reach 1 step (sync_steps >= 2^17) they are 2^15, ..., 2, 1 whatever sync_steps, so the
 * finest is still every step (halving from sync_steps, at -sync-every 10^6 the finest was
 * 15 steps, and 3 ranks diverged on the bundled corpus) and any -sync-every above a run's
 * steps gives the same file. Periods need not divide each other: a level's rows are
 * merged with a coarser level's whenever its period divides the step (w2v_merge_due). 0, or
 * -1 out of memory. */
int w2v_plan_hot_merges(const w2v_trainer *t, w2v_parallel *par, double alpha)
{
    const int finest = hot_periods(par);
    if (finest == 0) return 0;
    const w2v_config *cfg = t->cfg;
    const int64_t V = t->v->size;
    hot_rates r = {0};
    r.in = malloc((size_t)V * sizeof *r.in);
    r.out = malloc((size_t)V * sizeof *r.out);
    r.node = cfg->hs ? calloc((size_t)V, sizeof *r.node) : NULL;
    if (r.in && r.out && (!cfg->hs || r.node)) {
        row_rates(t, &r);
        assign_levels(t, par, &r, finest, alpha);
    }
    const bool oom = !r.in || !r.out || (cfg->hs && !r.node);
    free(r.in);
    free(r.out);
    free(r.node);
    for (int l = 1; !oom && l <= par->hot_levels; l++)
        tc_info(&cfg->ev, 2, "hot rows merged every %lld steps: %lld input, %lld output, %lld inner nodes",
                (long long)par->hot_period[l], (long long)par->hot_in[l], (long long)par->hot_out[l],
                (long long)par->hot_node[l]);
    return oom ? -1 : 0;
}

/* The merge due after the t-th step since the last full one (1 <= t <= sync_steps): 0 the
 * full merge, l >= 1 hot level l's rows (with every finer level's), -1 none. */
int w2v_merge_due(const w2v_parallel *par, int64_t t)
{
    if (t == par->sync_steps) return 0;
    for (int l = 1; l <= par->hot_levels; l++)
        if (t % par->hot_period[l] == 0) return l;
    return -1;
}

/* The first t' > t (0 <= t < sync_steps) at which merge_due gives a merge: a rank whose
 * share is done jumps there instead of stepping through every step between (with a large
 * -sync-every, up to 2^63 of them). */
int64_t w2v_next_merge(const w2v_parallel *par, int64_t t)
{
    int64_t next = par->sync_steps;
    for (int l = 1; l <= par->hot_levels; l++) {
        const int64_t period = par->hot_period[l], last = t - t % period;
        if (next - last > period) next = last + period; /* no overflow near INT64_MAX */
    }
    return next;
}

void sg_w2v_hot_rows(const sg_w2v_merger *p, int level, int k, int64_t rows, int64_t *lo, int64_t *hi)
{
    const int64_t hot = level == 0 ? rows : k == 0 ? p->hot_in[level] : k == 1 ? p->hot_out[level] : p->hot_node[level];
    *lo = k == 2 ? rows - hot : 0; /* inner nodes: the last, at the root's end */
    *hi = k == 2 ? rows : hot;
}
