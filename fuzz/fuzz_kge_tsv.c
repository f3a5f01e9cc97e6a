/* libFuzzer target: sgrad-kge's TSV reader (models/kge/graph.c) and filter index
 * (models/kge/filter.c) on the input as a file, read into dictionaries and triples that
 * already hold a triple, in chunks of 1 to 65536 bytes (the last input byte picks).
 * Beyond memory safety, leaks and undefined behaviour, the reader must agree with a split
 * of the bytes done here: it succeeds exactly when every line is good, then gives each
 * line's three names in order, ids in first-appearance order after the ones held; else
 * its message names the first bad line ("PATH:LINE: ") or says "PATH: no triples", and
 * dictionaries and triples are as they were. The filter of the triples read knows each
 * of them, and its tail and head runs are strictly ascending. */
#include "fuzz_input.h"

#include <inttypes.h>
#include <string.h>

#include "kge/kge.h"

/* What the input's bytes say: -1 every line good, else the first bad line (0: no line). */
static int64_t first_bad_line(const uint8_t *data, size_t size, int64_t *lines)
{
    *lines = 0;
    if (size == 0) return 0;
    for (size_t at = 0; at < size;) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t end = nl ? (size_t)(nl - data) : size, next = nl ? end + 1 : size;
        if (nl && end > at && data[end - 1] == '\r') end--; /* only "\r\n" ends a line */
        ++*lines;
        int tabs = 0;
        size_t field = 0;
        int bad = end == at;
        for (size_t i = at; i <= end && !bad; i++) {
            if (i == end || data[i] == '\t') {
                bad = field == 0 || field >= KG_MAX_NAME;
                tabs += i < end;
                field = 0;
            } else {
                bad = data[i] == '\0' || data[i] == '\r';
                field++;
            }
        }
        if (bad || tabs != 2) return *lines;
        at = next;
    }
    return -1;
}

/* The c-th name of the good line starting at data[at]: its start and length. */
static void field_of(const uint8_t *data, size_t size, size_t at, int c, size_t *start, size_t *len)
{
    for (; c > 0; c--) {
        while (data[at] != '\t') at++;
        at++;
    }
    size_t e = at;
    while (e < size && data[e] != '\t' && data[e] != '\n' && data[e] != '\r') e++;
    *start = at;
    *len = e - at;
}

static void check_triples(const uint8_t *data, size_t size, const kg_dict *E, const kg_dict *R, const kg_triples *x)
{
    int64_t next_e = 2, next_r = 1, i = 1;
    for (size_t at = 0; at < size; i++) {
        FUZZ_REQUIRE(i < x->n);
        const int64_t id[3] = {x->h[i], x->r[i], x->t[i]};
        for (int c = 0; c < 3; c++) {
            const kg_dict *d = c == 1 ? R : E;
            int64_t *next = c == 1 ? &next_r : &next_e;
            size_t s, len;
            field_of(data, size, at, c, &s, &len);
            FUZZ_REQUIRE(id[c] >= 0 && id[c] <= *next && id[c] < d->n);
            if (id[c] == *next) ++*next;
            FUZZ_REQUIRE(strlen(d->names[id[c]]) == len && memcmp(d->names[id[c]], data + s, len) == 0);
            FUZZ_REQUIRE(kg_dict_find(d, (const char *)data + s, len) == id[c]);
        }
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        at = nl ? (size_t)(nl - data) + 1 : size;
    }
    FUZZ_REQUIRE(i == x->n && E->n == next_e && R->n == next_r);
}

static void check_filter(const kg_dict *E, const kg_dict *R, const kg_triples *x)
{
    kg_filter f;
    const kg_triples *sets[1] = {x};
    FUZZ_REQUIRE(kg_filter_build(&f, sets, 1, E->n, R->n) == 0 && f.m <= x->n);
    for (int64_t i = 0; i < x->n; i++) {
        FUZZ_REQUIRE(kg_filter_known(&f, x->h[i], x->r[i], x->t[i]));
        const int64_t *run;
        int64_t n;
        kg_filter_tails(&f, x->h[i], x->r[i], &run, &n);
        for (int64_t j = 1; j < n; j++) FUZZ_REQUIRE(run[j - 1] < run[j]);
        kg_filter_heads(&f, x->r[i], x->t[i], &run, &n);
        FUZZ_REQUIRE(n >= 1);
        for (int64_t j = 1; j < n; j++) FUZZ_REQUIRE(run[j - 1] < run[j]);
    }
    kg_filter_free(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t chunks[8] = {1, 2, 3, 5, 8, 64, 4096, 65536};
    const char *path = fuzz_input_file(data, size);
    kg_dict E, R;
    kg_dict_init(&E), kg_dict_init(&R);
    kg_triples x = {0};
    FUZZ_REQUIRE(kg_dict_add(&E, "a", 1) == 0 && kg_dict_add(&E, "b", 1) == 1 && kg_dict_add(&R, "r", 1) == 0);
    FUZZ_REQUIRE(kg_triples_push(&x, 0, 0, 1) == 0);

    int64_t lines;
    const int64_t bad = first_bad_line(data, size, &lines);
    sg_model_error err;
    const size_t chunk = chunks[size ? data[size - 1] % 8 : 0];
    const int rc = kg_read_tsv_chunked(path, &E, &R, &x, chunk, &err);
    if (bad >= 0) {
        FUZZ_REQUIRE(rc == -1 && err.status == SG_ERR_FORMAT);
        char want[96];
        if (bad == 0) snprintf(want, sizeof want, "%s: no triples", path);
        else snprintf(want, sizeof want, "%s:%" PRId64 ": ", path, bad);
        FUZZ_REQUIRE(strncmp(err.message, want, strlen(want)) == 0);
        FUZZ_REQUIRE(E.n == 2 && R.n == 1 && x.n == 1 && x.h[0] == 0 && x.r[0] == 0 && x.t[0] == 1);
        FUZZ_REQUIRE(kg_dict_find(&E, "a", 1) == 0 && kg_dict_find(&E, "b", 1) == 1 && kg_dict_find(&R, "r", 1) == 0);
    } else {
        FUZZ_REQUIRE(rc == 0 && err.status == SG_OK && x.n == 1 + lines);
        check_triples(data, size, &E, &R, &x);
        check_filter(&E, &R, &x);
    }
    kg_triples_free(&x);
    kg_dict_free(&E), kg_dict_free(&R);
    return 0;
}
