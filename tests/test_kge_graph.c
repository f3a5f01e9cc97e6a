/* sgrad-kge's TSV reader, dictionaries and filter index (models/kge/kge.h): triples and ids
 * against the files' text split here by hand, every malformed line refused naming file
 * and line with dictionaries and triples left as they were, reads of 1 byte at a time
 * alike, the filter against a brute-force scan of random triples, and the bundled WordNet
 * graph's counts against those data/prepare_wordnet_kg.py printed (data/README.md). */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <stdbool.h>

#include "kge/kge.h"

/* The path (one of 8 live at once, as tu_tmp_path's) of a new file holding text[0, n). */
static const char *write_text(const char *name, const char *text, size_t n)
{
    char kname[64];
    snprintf(kname, sizeof kname, "kge_graph_%s", name);
    const char *p = tu_tmp_path(kname);
    tu_write_bytes(p, text, n);
    return p;
}
#define WRITE(name, lit) write_text(name, lit, sizeof lit - 1)

static bool has_name(const kg_dict *d, int64_t id, const char *name)
{
    return id >= 0 && id < d->n && strcmp(d->names[id], name) == 0 &&
           kg_dict_find(d, name, strlen(name)) == id;
}

TEST(good_file_ids_in_first_appearance_order)
{
    const char *p = WRITE("good", "a\tr\tb\nb\tr2\tc d\na\tr\tc d\n");
    kg_dict E, R;
    kg_dict_init(&E), kg_dict_init(&R);
    kg_triples x = {0};
    sg_model_error err;
    CHECK(kg_read_tsv(p, &E, &R, &x, &err) == 0 && err.status == SG_OK);
    CHECK(E.n == 3 && R.n == 2 && x.n == 3);
    CHECK(has_name(&E, 0, "a") && has_name(&E, 1, "b") && has_name(&E, 2, "c d"));
    CHECK(has_name(&R, 0, "r") && has_name(&R, 1, "r2"));
    const int64_t want[3][3] = {{0, 0, 1}, {1, 1, 2}, {0, 0, 2}};
    for (int i = 0; i < 3 && x.n == 3; i++) CHECK(x.h[i] == want[i][0] && x.r[i] == want[i][1] && x.t[i] == want[i][2]);
    /* a second file appends: known names keep their ids, new ones come next */
    const char *q = WRITE("good2", "c d\tr\tz\n");
    CHECK(kg_read_tsv(q, &E, &R, &x, &err) == 0);
    CHECK(x.n == 4 && x.h[3] == 2 && x.r[3] == 0 && x.t[3] == 3 && has_name(&E, 3, "z") && R.n == 2);
    kg_triples_free(&x), kg_dict_free(&E), kg_dict_free(&R);
    remove(p), remove(q);
}

TEST(crlf_last_line_without_newline_and_any_bytes_in_names)
{
    /* CRLF ends, a last line with no end, names of spaces, UTF-8 and high bytes, 255 bytes */
    char text[1024];
    char long_name[KG_MAX_NAME];
    memset(long_name, 'x', KG_MAX_NAME - 1);
    long_name[KG_MAX_NAME - 1] = '\0';
    int n = snprintf(text, sizeof text, "a b\t\xc3\xa9t\xc3\xa9\t\xff\x01\r\n%s\tr\ta b", long_name);
    const char *p = write_text("crlf", text, (size_t)n);
    kg_dict E, R;
    kg_dict_init(&E), kg_dict_init(&R);
    kg_triples x = {0};
    CHECK(kg_read_tsv(p, &E, &R, &x, NULL) == 0);
    CHECK(x.n == 2 && E.n == 3 && R.n == 2);
    CHECK(has_name(&E, 0, "a b") && has_name(&E, 1, "\xff\x01") && has_name(&E, 2, long_name));
    CHECK(has_name(&R, 0, "\xc3\xa9t\xc3\xa9") && has_name(&R, 1, "r"));
    CHECK(x.n == 2 && x.h[1] == 2 && x.t[1] == 0);
    kg_triples_free(&x), kg_dict_free(&E), kg_dict_free(&R);
    remove(p);
}

typedef struct {
    const char *text;
    size_t len;
    const char *where; /* the message's start after the path: ":LINE: " or ": " */
    const char *says;  /* and then */
} bad_case;
#define BAD(lit, where, says) {lit, sizeof lit - 1, where, says} /* lit may hold NUL bytes */

TEST(malformed_files_are_refused_naming_file_and_line_and_change_nothing)
{
    static const bad_case cases[] = {
        BAD("a\tr\tb\nx\ty\n", ":2: ", "expected 3 tab-separated columns (head, relation, tail), found 2"),
        BAD("new\tr\tb\na\tr\tb\tc\n", ":2: ", "expected 3 tab-separated columns (head, relation, tail), found 4"),
        BAD("abc\n", ":1: ", "expected 3 tab-separated columns (head, relation, tail), found 1"),
        BAD("a\tr\tb\n\nc\tr\td\n", ":2: ", "empty line"),
        BAD("a\tr\tb\r\n\r\n", ":2: ", "empty line"),
        BAD("\n", ":1: ", "empty line"),
        BAD("\tr\tb\n", ":1: ", "empty entity name (head)"),
        BAD("a\t\tb\n", ":1: ", "empty relation name"),
        BAD("new1\tnew2\tnew3\na\tr\t\n", ":2: ", "empty entity name (tail)"),
        BAD("a\tr\t\r\n", ":1: ", "empty entity name (tail)"),
        BAD("a\tr\tb\nx\tr\0s\tb", ":2: ", "NUL byte in a name (column 2)"),
        BAD("a\tr\rs\tb\n", ":1: ", "carriage return inside a name (column 2)"),
        BAD("a\tr\tb\r", ":1: ", "carriage return inside a name (column 3)"),
        BAD("a\tr\tb\r\rc\n", ":1: ", "carriage return inside a name (column 3)"),
        BAD("", ": ", "no triples"),
    };
    char good[256]; /* kept past the 8 paths the loop makes */
    snprintf(good, sizeof good, "%s", WRITE("bad_base", "a\tr\tb\nb\ts\tc\n"));
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const char *p = write_text("bad", cases[k].text, cases[k].len);
        kg_dict E, R;
        kg_dict_init(&E), kg_dict_init(&R);
        kg_triples x = {0};
        CHECK(kg_read_tsv(good, &E, &R, &x, NULL) == 0);
        sg_model_error err;
        CHECK(kg_read_tsv(p, &E, &R, &x, &err) == -1 && err.status == SG_ERR_FORMAT);
        char want[512];
        snprintf(want, sizeof want, "%s%s%s", p, cases[k].where, cases[k].says);
        if (strcmp(err.message, want) != 0) {
            fprintf(stderr, "  case %zu: got \"%s\", want \"%s\"\n", k, err.message, want);
            CHECK(!"the message names file and line");
        }
        CHECK(E.n == 3 && R.n == 2 && x.n == 2);
        CHECK(has_name(&E, 0, "a") && has_name(&E, 1, "b") && has_name(&E, 2, "c"));
        CHECK(has_name(&R, 0, "r") && has_name(&R, 1, "s"));
        CHECK(kg_dict_find(&E, "new", 3) < 0 && kg_dict_find(&E, "new1", 4) < 0 && kg_dict_find(&R, "new2", 4) < 0);
        CHECK(x.h[0] == 0 && x.r[0] == 0 && x.t[0] == 1 && x.h[1] == 1 && x.r[1] == 1 && x.t[1] == 2);
        /* the dictionaries still take names: the next new one gets the next id */
        CHECK(kg_dict_add(&E, "new", 3) == 3 && kg_dict_find(&E, "new", 3) == 3);
        kg_triples_free(&x), kg_dict_free(&E), kg_dict_free(&R);
        remove(p);
    }
    remove(good);
}

TEST(over_long_names_and_unreadable_files)
{
    char text[3 * KG_MAX_NAME];
    for (int col = 0; col < 3; col++) {
        int n = 0;
        for (int c = 0; c < 3; c++) {
            const int len = c == col ? KG_MAX_NAME : 1; /* one byte past the longest name */
            memset(text + n, 'a' + c, (size_t)len);
            n += len;
            text[n++] = c < 2 ? '\t' : '\n';
        }
        const char *p = write_text("long", text, (size_t)n);
        kg_dict E, R;
        kg_dict_init(&E), kg_dict_init(&R);
        kg_triples x = {0};
        sg_model_error err;
        CHECK(kg_read_tsv(p, &E, &R, &x, &err) == -1 && err.status == SG_ERR_FORMAT);
        char want[512];
        snprintf(want, sizeof want, "%s:1: name longer than 255 bytes (column %d)", p, col + 1);
        CHECK(strcmp(err.message, want) == 0);
        CHECK(E.n == 0 && R.n == 0 && x.n == 0);
        kg_triples_free(&x), kg_dict_free(&E), kg_dict_free(&R);
        remove(p);
    }
    kg_dict E, R;
    kg_dict_init(&E), kg_dict_init(&R);
    kg_triples x = {0};
    sg_model_error err;
    const char *missing = "/tmp/sgrad_test_kge_graph_no_such_file";
    CHECK(kg_read_tsv(missing, &E, &R, &x, &err) == -1 && err.status == SG_ERR_IO);
    CHECK(strcmp(err.message, "cannot read /tmp/sgrad_test_kge_graph_no_such_file: No such file or directory") == 0);
    CHECK(kg_read_tsv("/tmp", &E, &R, &x, &err) == -1 && err.status == SG_ERR_IO);
    CHECK(strncmp(err.message, "cannot read /tmp: ", 18) == 0);
    CHECK(E.n == 0 && R.n == 0 && x.n == 0);
    kg_dict_free(&E), kg_dict_free(&R);
}

/* A random file of n good lines (names from a small pool, CRLF or LF ends, the last one
 * sometimes without), and its triples as this test splits the text. */
static char *random_file(int n, char (*names)[3][16], size_t *len)
{
    char *text = malloc((size_t)n * 64 + 1);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        for (int c = 0; c < 3; c++) {
            const unsigned v = (unsigned)(tu_rand() % (c == 1 ? 5 : 40));
            snprintf(names[i][c], 16, c == 1 ? "rel%u" : "e %u\xc3\xa9", v);
            at += (size_t)sprintf(text + at, "%s%s", names[i][c], c < 2 ? "\t" : "");
        }
        const unsigned end = (unsigned)(tu_rand() % 3);
        if (i + 1 < n || end) at += (size_t)sprintf(text + at, "%s", end == 1 ? "\r\n" : "\n");
    }
    *len = at;
    return text;
}

TEST(reads_in_any_chunk_size_match_the_text)
{
    enum { N = 300 };
    static char names[N][3][16];
    size_t len;
    char *text = random_file(N, names, &len);
    const char *p = write_text("chunks", text, len);
    const size_t chunks[] = {1, 2, 3, 7, 64, 1 << 16};
    for (size_t k = 0; k < sizeof chunks / sizeof *chunks; k++) {
        kg_dict E, R;
        kg_dict_init(&E), kg_dict_init(&R);
        kg_triples x = {0};
        CHECK(kg_read_tsv_chunked(p, &E, &R, &x, chunks[k], NULL) == 0);
        CHECK(x.n == N);
        for (int i = 0; i < N && x.n == N; i++) {
            CHECK(strcmp(E.names[x.h[i]], names[i][0]) == 0);
            CHECK(strcmp(R.names[x.r[i]], names[i][1]) == 0);
            CHECK(strcmp(E.names[x.t[i]], names[i][2]) == 0);
        }
        for (int64_t id = 0; id < E.n; id++) CHECK(kg_dict_find(&E, E.names[id], strlen(E.names[id])) == id);
        kg_triples_free(&x), kg_dict_free(&E), kg_dict_free(&R);
    }
    free(text);
    remove(p);
}

TEST(dictionary_growth_and_truncation)
{
    kg_dict d;
    kg_dict_init(&d);
    char name[32];
    for (int i = 0; i < 20000; i++) {
        snprintf(name, sizeof name, "n%d", i);
        CHECK(kg_dict_add(&d, name, strlen(name)) == i);
    }
    CHECK(kg_dict_add(&d, "n7", 2) == 7 && kg_dict_find(&d, "n", 1) == -1 && kg_dict_find(&d, "n77", 2) == 7);
    kg_dict_truncate(&d, 5000);
    CHECK(d.n == 5000 && kg_dict_find(&d, "n4999", 5) == 4999 && kg_dict_find(&d, "n5000", 5) == -1);
    CHECK(kg_dict_add(&d, "n19999", 6) == 5000);
    kg_dict_free(&d);
    kg_dict_free(&d); /* a freed dictionary is empty */
    CHECK(kg_dict_find(&d, "n1", 2) == -1);
}

/* The sorted distinct entities e with known(e) over every set, by a full scan. */
static int64_t brute(const kg_triples *sets, int nsets, int64_t n_ent, int64_t a, int64_t r, bool tails, int64_t *out)
{
    int64_t n = 0;
    for (int64_t e = 0; e < n_ent; e++) {
        bool hit = false;
        for (int s = 0; s < nsets && !hit; s++)
            for (int64_t i = 0; i < sets[s].n && !hit; i++)
                hit = sets[s].r[i] == r && (tails ? sets[s].h[i] == a && sets[s].t[i] == e
                                                  : sets[s].t[i] == a && sets[s].h[i] == e);
        if (hit) out[n++] = e;
    }
    return n;
}

TEST(filter_matches_a_brute_force_scan)
{
    enum { NE = 25, NR = 4, NS = 3 };
    kg_triples sets[NS] = {{0}};
    for (int s = 0; s < NS; s++) /* duplicates within and across sets are likely */
        for (int i = 0; i < 60 + 40 * s; i++)
            kg_triples_push(&sets[s], (int64_t)(tu_rand() % NE), (int64_t)(tu_rand() % NR), (int64_t)(tu_rand() % NE));
    const kg_triples *ptrs[NS + 1] = {&sets[0], NULL, &sets[1], &sets[2]};
    kg_filter f;
    CHECK(kg_filter_build(&f, ptrs, NS + 1, NE, NR) == 0);
    int64_t want[NE], n, distinct = 0;
    const int64_t *got;
    for (int64_t a = 0; a < NE; a++)
        for (int64_t r = 0; r < NR; r++) {
            for (int side = 0; side < 2; side++) {
                const int64_t nw = brute(sets, NS, NE, a, r, side == 0, want);
                if (side == 0) kg_filter_tails(&f, a, r, &got, &n);
                else kg_filter_heads(&f, r, a, &got, &n);
                CHECK(n == nw && (n == 0 || memcmp(got, want, (size_t)n * sizeof *got) == 0));
                if (side == 0) distinct += nw;
            }
            int64_t nw = brute(sets, NS, NE, a, r, true, want), j = 0;
            for (int64_t t = 0; t < NE; t++) {
                const bool known = j < nw && want[j] == t;
                j += known;
                CHECK(kg_filter_known(&f, a, r, t) == known);
            }
        }
    CHECK(f.m == distinct);
    kg_filter_tails(&f, NE, 0, &got, &n);
    CHECK(n == 0);
    kg_filter_heads(&f, NR, 0, &got, &n);
    CHECK(n == 0);
    CHECK(!kg_filter_known(&f, -1, 0, 0));
    kg_filter_free(&f);
    kg_triples_push(&sets[1], 0, NR, 0); /* a relation id out of range */
    CHECK(kg_filter_build(&f, ptrs, NS + 1, NE, NR) == SG_ERR_INDEX);
    kg_filter_free(&f);
    for (int s = 0; s < NS; s++) kg_triples_free(&sets[s]);
}

TEST(bundled_wordnet_graph)
{
    /* The counts data/prepare_wordnet_kg.py printed for data/wordnet-kg (data/README.md). */
    static const char *const part[3] = {"train", "valid", "test"};
    static const int64_t triples[3] = {85586, 3000, 3000};
    static const int64_t ents_after[3] = {33048, -1, 33217}; /* -1: not checked */
    if (system("command -v xz >/dev/null 2>&1") != 0) TU_SKIP("no xz program");
    kg_dict E, R;
    kg_dict_init(&E), kg_dict_init(&R);
    kg_triples x[3] = {{0}};
    for (int k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "kge_graph_%s", part[k]);
        const char *p = tu_tmp_path(name);
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "xz -dc '%s/data/wordnet-kg/%s.tsv.xz' > '%s'", SG_SOURCE_DIR, part[k], p);
        CHECK(system(cmd) == 0);
        sg_model_error err;
        CHECK(kg_read_tsv(p, &E, &R, &x[k], &err) == 0);
        if (err.status) fprintf(stderr, "  %s\n", err.message);
        CHECK(x[k].n == triples[k] && R.n == 11);
        if (ents_after[k] >= 0) CHECK(E.n == ents_after[k]);
        remove(p);
    }
    /* the parts are disjoint and each holds no duplicate */
    kg_filter f;
    const kg_triples *train = &x[0];
    CHECK(kg_filter_build(&f, &train, 1, E.n, R.n) == 0 && f.m == triples[0]);
    for (int k = 1; k < 3; k++)
        for (int64_t i = 0; i < x[k].n; i++) CHECK(!kg_filter_known(&f, x[k].h[i], x[k].r[i], x[k].t[i]));
    kg_filter_free(&f);
    const kg_triples *all[3] = {&x[0], &x[1], &x[2]};
    CHECK(kg_filter_build(&f, all, 3, E.n, R.n) == 0 && f.m == triples[0] + triples[1] + triples[2]);
    kg_filter_free(&f);
    for (int k = 0; k < 3; k++) kg_triples_free(&x[k]);
    kg_dict_free(&E), kg_dict_free(&R);
}

TEST_MAIN()
