/* libsgrad_models through its public header only (sgrad_models.h), as a binding sees it:
 * - a vocabulary counted from token chunks handed in equals the one counted from the file
 *   holding those tokens, and training from the file's token ids handed in (in chunks,
 *   sentence ends as SG_W2V_EOS) gives bitwise the vectors of training from the file;
 * - the event callback can stop a run: SG_STOPPED, the steps done so far, and the model of
 *   the last step (the same bits on 1 and 2 threads, not the full run's); a stop under
 *   -replicas ends every replica at the next full merge without a hang;
 * - a model file and a -checkpoint read back without the corpus: the same tables and
 *   vocabulary (words and counts) as the trained model;
 * - continued training: a second training call trains the tables on (the vectors change,
 *   the vocabulary stays), and going on in the process equals saving, loading and going
 *   on bitwise (a model file is resumable), from a file or from token ids; the loaded
 *   model has the saved one's options; a continued call refuses replicas and checkpoints;
 * - errors name the caller's paths: a missing corpus, a missing or damaged model file;
 * - fastText: a classifier trained, saved and loaded predicts the same scores, and its
 *   sentence vector is the mean of its rows (checked against its word vectors).
 */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include "sgrad_models.h"

#include <unistd.h>

enum { TOPICS = 6, PER_TOPIC = 5, SENTENCES = 800, LEN = 9 };

static char corpus[300], dir[200];

static void remove_dir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (dir[0] && system(cmd)) fprintf(stderr, "cannot remove %s\n", dir);
}

/* A corpus of topics (xorshift from testutil), one sentence a line; the last line has no
 * newline, so a sentence ends at the end of the file too. */
static void make_corpus(void)
{
    if (corpus[0]) return;
    snprintf(dir, sizeof dir, "/tmp/sgrad_test_models_api_%d", (int)getpid());
    snprintf(corpus, sizeof corpus, "%s/corpus.txt", dir);
    atexit(remove_dir);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    if (system(cmd)) fprintf(stderr, "cannot make %s\n", dir);
    FILE *f = fopen(corpus, "w");
    for (int s = 0; s < SENTENCES; s++) {
        const int topic = (int)(tu_rand() % TOPICS);
        for (int i = 0; i < LEN; i++) fprintf(f, "%st%dw%d", i ? " " : "", topic, (int)(tu_rand() % PER_TOPIC));
        if (s + 1 < SENTENCES) fputc('\n', f);
    }
    fclose(f);
}

static sg_w2v_opts small_opts(void)
{
    sg_w2v_opts o = sg_w2v_opts_default();
    o.size = 12;
    o.window = 3;
    o.iter = 2;
    o.min_count = 1;
    o.threads = 1;
    o.batch = 200;
    o.cbow = 0;
    o.verbose = 0;
    return o;
}

/* The word vectors of m, copied (malloc'd). */
static float *vectors_of(const sg_w2v *m)
{
    sg_tensor *t = sg_w2v_table(m, 0);
    const size_t n = (size_t)sg_tensor_numel(t);
    float *v = malloc(n * sizeof *v);
    memcpy(v, sg_tensor_f32(t), n * sizeof *v);
    return v;
}

/* A model trained on the corpus file (opts o); NULL on failure. */
static sg_w2v *train_file(const sg_w2v_opts *o, sg_w2v_result *res)
{
    sg_model_error err;
    sg_w2v *m = sg_w2v_new(o, &err);
    CHECK(m != NULL);
    if (!m) return NULL;
    CHECK(sg_w2v_build_vocab(m, corpus, NULL, &err) == SG_OK);
    const int rc = sg_w2v_train_file(m, corpus, res, &err);
    CHECK(rc == SG_OK || rc == SG_STOPPED);
    if (rc != SG_OK && rc != SG_STOPPED) fprintf(stderr, "  %s\n", err.message);
    return m;
}

/* ---- token chunks handed in */

typedef struct {
    const sg_vocab *v;
    sg_lines *l;
    int32_t pending[64];
    int64_t n_pending, at, chunk; /* chunk: ids per call, at most */
    int epochs;
} id_reader;

/* The file's ids, line by line, `chunk` at a time; 0 at its end, then the next epoch. */
static int64_t read_ids(void *ud, int32_t *ids, int64_t cap)
{
    id_reader *r = ud;
    if (!r->l) r->l = sg_lines_open(corpus, NULL);
    int64_t n = 0;
    while (n < cap && n < r->chunk) {
        if (r->at == r->n_pending) {
            char **tok;
            int64_t nt;
            bool eol;
            const int got = r->l ? sg_lines_next(r->l, &tok, &nt, &eol) : -1;
            if (got <= 0) break;
            r->n_pending = r->at = 0;
            for (int64_t i = 0; i < nt && i < 60; i++) {
                const int64_t id = sg_vocab_find(r->v, tok[i]);
                r->pending[r->n_pending++] = id < 0 ? SG_W2V_OOV : (int32_t)id;
            }
            if (eol) r->pending[r->n_pending++] = SG_W2V_EOS;
            continue;
        }
        ids[n++] = r->pending[r->at++];
    }
    if (n == 0) { /* the end: the next call starts over */
        sg_lines_close(r->l);
        r->l = NULL;
        r->epochs++;
    }
    return n;
}

TEST(token_chunks_count_and_train_as_the_file)
{
    make_corpus();
    /* the vocabulary from chunks of tokens (NULL: a sentence end) */
    sg_vocab *from_tokens = sg_vocab_new(), *from_file = sg_vocab_new();
    CHECK(sg_vocab_count_file(from_file, corpus, NULL) == SG_OK);
    sg_lines *l = sg_lines_open(corpus, NULL);
    char **tok;
    int64_t n;
    bool eol;
    while (sg_lines_next(l, &tok, &n, &eol) > 0) {
        const char *chunk[16];
        for (int64_t i = 0; i < n; i++) chunk[i] = tok[i];
        if (eol) chunk[n++] = NULL;
        CHECK(sg_vocab_add_tokens(from_tokens, chunk, n, NULL) == SG_OK);
    }
    sg_lines_close(l);
    CHECK(sg_vocab_finalize(from_tokens, 1, NULL) == SG_OK && sg_vocab_finalize(from_file, 1, NULL) == SG_OK);
    CHECK(sg_vocab_size(from_tokens) == TOPICS * PER_TOPIC && sg_vocab_size(from_file) == TOPICS * PER_TOPIC);
    CHECK(sg_vocab_tokens(from_tokens) == SENTENCES * LEN && sg_vocab_tokens(from_file) == SENTENCES * LEN);
    for (int64_t i = 0; i < sg_vocab_size(from_file); i++)
        CHECK(!strcmp(sg_vocab_word(from_tokens, i), sg_vocab_word(from_file, i)) &&
              sg_vocab_count(from_tokens, i) == sg_vocab_count(from_file, i));
    /* training: the file, then its ids in chunks of 7 and of 4096, on 1 and 2 threads */
    for (int threads = 1; threads <= 2; threads++) {
        sg_w2v_opts o = small_opts();
        o.threads = threads;
        sg_w2v_result res;
        sg_w2v *file = train_file(&o, &res);
        float *want = vectors_of(file);
        for (int c = 0; c < 2; c++) {
            sg_model_error err;
            sg_w2v *m = sg_w2v_new(&o, &err);
            CHECK(sg_w2v_build_vocab(m, NULL, from_tokens, &err) == SG_OK);
            id_reader r = {.v = sg_w2v_vocab(m), .chunk = c ? 4096 : 7};
            const int rc = sg_w2v_train_tokens(m, read_ids, &r, &res, &err);
            CHECK(rc == SG_OK);
            if (rc) fprintf(stderr, "  %s\n", err.message);
            float *got = vectors_of(m);
            CHECK(memcmp(got, want, sizeof *got * (size_t)sg_tensor_numel(sg_w2v_table(m, 0))) == 0);
            CHECK(r.epochs >= 1); /* read once, then replayed (or read again) */
            free(got);
            sg_w2v_free(m);
        }
        free(want);
        sg_w2v_free(file);
    }
    sg_vocab_free(from_tokens);
    sg_vocab_free(from_file);
}

/* A source that fails, and one that gives an id outside the vocabulary: an error, no hang. */
static int64_t bad_ids(void *ud, int32_t *ids, int64_t cap)
{
    (void)cap;
    ids[0] = *(int32_t *)ud;
    return *(int32_t *)ud == -7 ? -1 : 1;
}

/* The file's lines packed as a binding packs them: NUL-terminated tokens in one buffer
 * and each line's token count. */
static char *pack_corpus(int64_t **lens, int64_t *n, int64_t *len)
{
    sg_lines *l = sg_lines_open(corpus, NULL);
    char *buf = malloc(1 << 20), **tok;
    *lens = malloc(sizeof **lens * SENTENCES);
    *n = *len = 0;
    int64_t k;
    bool eol;
    while (sg_lines_next(l, &tok, &k, &eol) > 0) {
        for (int64_t i = 0; i < k; i++) {
            memcpy(buf + *len, tok[i], strlen(tok[i]) + 1);
            *len += (int64_t)strlen(tok[i]) + 1;
        }
        (*lens)[(*n)++] = k;
    }
    sg_lines_close(l);
    return buf;
}

TEST(packed_sentences_count_and_look_up_as_the_tokens_do)
{
    make_corpus();
    int64_t *lens, n, len;
    char *buf = pack_corpus(&lens, &n, &len);
    CHECK(n == SENTENCES);
    sg_vocab *packed = sg_vocab_new(), *from_file = sg_vocab_new();
    CHECK(sg_vocab_count_file(from_file, corpus, NULL) == SG_OK);
    CHECK(sg_vocab_add_packed(packed, buf, len, lens, n, NULL) == SG_OK);
    CHECK(sg_vocab_tokens(packed) == sg_vocab_tokens(from_file) && sg_vocab_lines(packed) == sg_vocab_lines(from_file));
    sg_vocab *tokens = sg_vocab_new(); /* the same tokens one by one: the same hash */
    const char *p = buf;
    for (int64_t s = 0; s < n; s++) {
        const char *one[1];
        for (int64_t t = 0; t < lens[s]; t++, p += strlen(p) + 1) {
            one[0] = p;
            CHECK(sg_vocab_add_tokens(tokens, one, 1, NULL) == SG_OK);
        }
        one[0] = NULL;
        CHECK(sg_vocab_add_tokens(tokens, one, 1, NULL) == SG_OK);
    }
    CHECK(sg_vocab_corpus_hash(tokens) == sg_vocab_corpus_hash(packed));
    sg_vocab_free(tokens);
    /* a NUL inside a token (the counts no longer match): refused, nothing counted */
    sg_model_error err;
    sg_vocab *refused = sg_vocab_new();
    buf[1] = '\0';
    CHECK(sg_vocab_add_packed(refused, buf, len, lens, n, &err) == SG_ERR_ARG && strstr(err.message, "NUL"));
    CHECK(sg_vocab_tokens(refused) == 0 && sg_vocab_lines(refused) == 0);
    /* lengths claiming more tokens than the buffer has bytes (their sum would overflow) */
    const int64_t huge[2] = {INT64_MAX, INT64_MAX};
    CHECK(sg_vocab_add_packed(refused, buf, len, huge, 2, &err) == SG_ERR_ARG && strstr(err.message, "at most"));
    CHECK(sg_vocab_add_packed(refused, buf, len, (const int64_t[]){-1}, 1, &err) == SG_ERR_ARG);
    CHECK(sg_vocab_tokens(refused) == 0 && sg_vocab_lines(refused) == 0);
    sg_vocab_free(refused);
    free(buf);
    free(lens);
    buf = pack_corpus(&lens, &n, &len);
    /* the ids: each token's row (an unknown word OOV), an end after each sentence */
    sg_w2v_opts o = small_opts();
    sg_w2v *m = sg_w2v_new(&o, &err);
    CHECK(sg_w2v_build_vocab(m, NULL, packed, &err) == SG_OK);
    memcpy(buf, "zz", 2); /* the first token, "t?w?" before: now no word's */
    const int64_t cap = SENTENCES * (LEN + 1);
    int32_t *ids = malloc(sizeof *ids * (size_t)cap);
    CHECK(sg_w2v_lookup_packed(m, buf, len, lens, n, ids, cap - 1, &err) == -SG_ERR_ARG);
    CHECK(sg_w2v_lookup_packed(m, buf, len, lens, n, ids, cap, &err) == cap);
    p = buf;
    for (int64_t s = 0, k = 0; s < n; s++, k++) {
        for (int64_t t = 0; t < lens[s]; t++, k++, p += strlen(p) + 1)
            CHECK(ids[k] == (k == 0 ? SG_W2V_OOV : (int32_t)sg_w2v_find(m, p)));
        CHECK(ids[k] == SG_W2V_EOS);
    }
    free(ids);
    free(buf);
    free(lens);
    sg_w2v_free(m);
    sg_vocab_free(packed);
    sg_vocab_free(from_file);
}

TEST(a_bad_token_source_is_an_error)
{
    make_corpus();
    sg_w2v_opts o = small_opts();
    sg_model_error err;
    sg_w2v *m = sg_w2v_new(&o, &err);
    CHECK(sg_w2v_build_vocab(m, corpus, NULL, &err) == SG_OK);
    int32_t what[2] = {-7, 1000000};
    for (int i = 0; i < 2; i++) {
        CHECK(sg_w2v_train_tokens(m, bad_ids, &what[i], NULL, &err) == SG_ERR_ARG);
        CHECK(strstr(err.message, "token source") != NULL);
    }
    sg_w2v_free(m);
}

/* ---- stopping */

typedef struct {
    int64_t stop_at, steps, ends;
} stopper;

static int stop_at_step(void *ud, const sg_event *e)
{
    stopper *s = ud;
    if (e->kind == SG_EVENT_END) s->ends++;
    if (e->kind != SG_EVENT_STEP) return 0;
    s->steps = e->steps;
    return e->steps >= s->stop_at;
}

TEST(the_event_callback_stops_a_run_at_a_step)
{
    make_corpus();
    sg_w2v_opts o = small_opts();
    stopper s = {.stop_at = 5};
    o.on_event = stop_at_step;
    o.event_ud = &s;
    sg_model_error err;
    sg_w2v *m = sg_w2v_new(&o, &err);
    CHECK(sg_w2v_build_vocab(m, corpus, NULL, &err) == SG_OK);
    sg_w2v_result res;
    CHECK(sg_w2v_train_file(m, corpus, &res, &err) == SG_STOPPED);
    CHECK(err.status == SG_STOPPED && strstr(err.message, "step 5") != NULL);
    CHECK(res.steps == 5 && s.steps == 5 && s.ends == 1);
    CHECK(sg_w2v_table(m, 0) != NULL);
    float *stopped = vectors_of(m);
    /* stopped the same way on 2 threads: a step boundary whatever the threads */
    o.threads = 2;
    stopper s2 = {.stop_at = 5};
    o.event_ud = &s2;
    sg_w2v *m2 = sg_w2v_new(&o, &err);
    CHECK(sg_w2v_build_vocab(m2, corpus, NULL, &err) == SG_OK);
    CHECK(sg_w2v_train_file(m2, corpus, &res, &err) == SG_STOPPED && res.steps == 5);
    float *two = vectors_of(m2);
    CHECK(memcmp(stopped, two, sizeof *two * (size_t)sg_tensor_numel(sg_w2v_table(m, 0))) == 0);
    /* and it differs from the start (the 5 steps moved the vectors) and from the full run */
    o.on_event = NULL;
    sg_w2v_result full;
    sg_w2v *m3 = train_file(&o, &full);
    float *all = vectors_of(m3);
    CHECK(full.steps > 5 && memcmp(stopped, all, sizeof *all * (size_t)sg_tensor_numel(sg_w2v_table(m, 0))) != 0);
    free(stopped);
    free(two);
    free(all);
    sg_w2v_free(m);
    sg_w2v_free(m2);
    sg_w2v_free(m3);
}

TEST(a_stop_under_replicas_ends_every_replica_at_a_full_merge)
{
    make_corpus();
    sg_w2v_opts o = small_opts();
    o.replicas = 3;
    o.threads = 2;
    o.sync_every = 4;
    stopper s = {.stop_at = 3};
    o.on_event = stop_at_step;
    o.event_ud = &s;
    alarm(60); /* a hang fails the test */
    sg_w2v_result res;
    sg_w2v *m = train_file(&o, &res);
    alarm(0);
    CHECK(res.steps == 4); /* replica 0's: the stop waits for the full merge after step 4 */
    CHECK(sg_w2v_table(m, 0) != NULL);
    sg_w2v_free(m);
}

/* ---- files */

TEST(model_files_and_checkpoints_load_without_the_corpus)
{
    make_corpus();
    char model[300], ckpt[300], moved[300];
    snprintf(model, sizeof model, "%s/m.sgw2v", dir);
    snprintf(ckpt, sizeof ckpt, "%s/ck", dir);
    snprintf(moved, sizeof moved, "%s/moved.txt", dir);
    sg_w2v_opts o = small_opts();
    o.negative = 3;
    o.hs = 1;
    o.checkpoint = ckpt;
    sg_w2v_result res;
    sg_model_error err;
    sg_w2v *m = train_file(&o, &res);
    CHECK(sg_w2v_save(m, model, &err) == SG_OK);
    CHECK(rename(corpus, moved) == 0); /* no corpus from here on */
    const char *paths[2] = {model, ckpt};
    for (int i = 0; i < 2; i++) {
        sg_w2v *l = sg_w2v_load(paths[i], 1, &err);
        CHECK(l != NULL);
        if (!l) {
            fprintf(stderr, "  %s\n", err.message);
            continue;
        }
        CHECK(sg_w2v_size(l) == sg_w2v_size(m) && sg_w2v_dim(l) == sg_w2v_dim(m));
        for (int k = 0; k < 3; k++) {
            sg_tensor *a = sg_w2v_table(m, k), *b = sg_w2v_table(l, k);
            CHECK(a && b && sg_tensor_numel(a) == sg_tensor_numel(b) &&
                  !memcmp(sg_tensor_f32(a), sg_tensor_f32(b), sizeof(float) * (size_t)sg_tensor_numel(a)));
        }
        const sg_vocab *va = sg_w2v_vocab(m), *vb = sg_w2v_vocab(l);
        for (int64_t w = 0; w < sg_vocab_size(va); w++)
            CHECK(!strcmp(sg_vocab_word(va, w), sg_vocab_word(vb, w)) && sg_vocab_count(va, w) == sg_vocab_count(vb, w));
        sg_w2v_free(l);
    }
    CHECK(rename(moved, corpus) == 0);
    sg_w2v_free(m);
}

/* ---- continued training */

/* Whether a's and b's word vectors are the same bits. */
static bool same_vectors(const sg_w2v *a, const sg_w2v *b)
{
    sg_tensor *x = sg_w2v_table(a, 0), *y = sg_w2v_table(b, 0);
    return x && y && sg_tensor_numel(x) == sg_tensor_numel(y) &&
           !memcmp(sg_tensor_f32(x), sg_tensor_f32(y), sizeof(float) * (size_t)sg_tensor_numel(x));
}

/* One more epoch of m, from the file or (ids) from its token ids handed in. */
static int one_more_epoch(sg_w2v *m, bool ids, sg_w2v_result *res, sg_model_error *err)
{
    sg_w2v_opts o = sg_w2v_options(m);
    o.iter = 1;
    if (sg_w2v_set_options(m, &o, err)) return err->status;
    id_reader r = {.v = sg_w2v_vocab(m), .chunk = 4096};
    return ids ? sg_w2v_train_tokens(m, read_ids, &r, res, err) : sg_w2v_train_file(m, corpus, res, err);
}

TEST(continued_training_goes_on_from_the_tables_and_through_a_model_file)
{
    make_corpus();
    char model[300];
    snprintf(model, sizeof model, "%s/more.sgw2v", dir);
    for (int hs = 0; hs <= 1; hs++) {
        sg_w2v_opts o = small_opts();
        o.iter = 1;
        o.hs = hs;
        o.cbow = hs;
        sg_w2v_result res;
        sg_model_error err;
        sg_w2v *m = train_file(&o, &res), *fresh = train_file(&o, &res);
        const int64_t V = sg_w2v_size(m);
        CHECK(sg_w2v_save(m, model, &err) == SG_OK);
        sg_w2v *l = sg_w2v_load(model, 2, &err);
        CHECK(l != NULL);
        if (!l) return;
        const sg_w2v_opts a = sg_w2v_options(m), b = sg_w2v_options(l);
        CHECK(a.window == b.window && a.iter == b.iter && a.sample == b.sample && a.seed == b.seed &&
              a.batch == b.batch && a.cbow == b.cbow && a.hs == b.hs && a.negative == b.negative &&
              a.min_count == b.min_count && b.threads == 2 && b.alpha == (hs ? 0.05 : 0.025));
        CHECK(sg_vocab_tokens(sg_w2v_vocab(l)) == SENTENCES * LEN && sg_vocab_lines(sg_w2v_vocab(l)) == SENTENCES);
        /* in the process, from the file; loaded, from its ids: the same bits */
        CHECK(one_more_epoch(m, false, &res, &err) == SG_OK && res.steps > 0);
        CHECK(one_more_epoch(l, true, &res, &err) == SG_OK);
        CHECK(!same_vectors(m, fresh) && same_vectors(m, l));
        for (int k = 1; k < 3; k++) {
            sg_tensor *x = sg_w2v_table(m, k), *y = sg_w2v_table(l, k);
            CHECK(!x == !y && (!x || !memcmp(sg_tensor_f32(x), sg_tensor_f32(y),
                                             sizeof(float) * (size_t)sg_tensor_numel(x))));
        }
        CHECK(sg_w2v_size(m) == V && sg_w2v_size(l) == V);
        for (int64_t w = 0; w < V; w++) CHECK(!strcmp(sg_w2v_word(m, w), sg_w2v_word(fresh, w)));
        /* a third call goes on from the second's random stream: not a repeat of it */
        CHECK(sg_w2v_save(m, model, &err) == SG_OK);
        sg_w2v *again = sg_w2v_load(model, 1, &err);
        CHECK(one_more_epoch(m, false, &res, &err) == SG_OK && one_more_epoch(again, false, &res, &err) == SG_OK);
        CHECK(same_vectors(m, again));
        sg_w2v_free(again);
        sg_w2v_free(l);
        sg_w2v_free(fresh);
        sg_w2v_free(m);
    }
}

TEST(continued_training_is_one_model_without_checkpoints)
{
    make_corpus();
    char ckpt[300];
    snprintf(ckpt, sizeof ckpt, "%s/more.ckpt", dir);
    sg_w2v_opts o = small_opts();
    sg_w2v_result res;
    sg_model_error err;
    sg_w2v *m = train_file(&o, &res);
    float *before = vectors_of(m);
    sg_w2v_opts more = sg_w2v_options(m);
    more.replicas = 2;
    CHECK(sg_w2v_set_options(m, &more, &err) == SG_OK);
    CHECK(sg_w2v_train_file(m, corpus, &res, &err) == SG_ERR_ARG && strstr(err.message, "replicas"));
    more.replicas = 1;
    more.checkpoint = ckpt;
    CHECK(sg_w2v_set_options(m, &more, &err) == SG_OK);
    CHECK(sg_w2v_train_file(m, corpus, &res, &err) == SG_ERR_ARG && strstr(err.message, "checkpoint"));
    CHECK(!memcmp(before, sg_tensor_f32(sg_w2v_table(m, 0)), sizeof(float) * (size_t)sg_tensor_numel(sg_w2v_table(m, 0))));
    more.checkpoint = NULL;
    more.size = 13; /* the tables' shape is theirs */
    CHECK(sg_w2v_set_options(m, &more, &err) == SG_ERR_ARG && strstr(err.message, "size"));
    /* a new vocabulary drops the tables: the next training starts afresh, as the first */
    more.size = o.size;
    CHECK(sg_w2v_set_options(m, &more, &err) == SG_OK && sg_w2v_build_vocab(m, corpus, NULL, &err) == SG_OK);
    CHECK(sg_w2v_table(m, 0) == NULL && sg_w2v_train_file(m, corpus, &res, &err) == SG_OK);
    CHECK(!memcmp(before, sg_tensor_f32(sg_w2v_table(m, 0)), sizeof(float) * (size_t)sg_tensor_numel(sg_w2v_table(m, 0))));
    free(before);
    sg_w2v_free(m);
}

TEST(errors_name_the_callers_paths)
{
    make_corpus();
    char missing[300], damaged[300], model[300];
    snprintf(missing, sizeof missing, "%s/no-such-file.txt", dir);
    snprintf(model, sizeof model, "%s/e.sgw2v", dir);
    snprintf(damaged, sizeof damaged, "%s/damaged.sgw2v", dir);
    sg_w2v_opts o = small_opts();
    sg_model_error err;
    sg_w2v *m = sg_w2v_new(&o, &err);
    CHECK(sg_w2v_build_vocab(m, missing, NULL, &err) == SG_ERR_IO && strstr(err.message, missing));
    CHECK(sg_w2v_build_vocab(m, corpus, NULL, &err) == SG_OK && sg_w2v_train_file(m, corpus, NULL, &err) == SG_OK);
    CHECK(sg_w2v_save(m, model, &err) == SG_OK);
    CHECK(sg_w2v_load(missing, 1, &err) == NULL && strstr(err.message, missing));
    /* a byte changed in the middle of the file: its checksum no longer holds */
    FILE *in = fopen(model, "rb"), *out = fopen(damaged, "wb");
    fseek(in, 0, SEEK_END);
    const long size = ftell(in);
    rewind(in);
    for (long i = 0; i < size; i++) {
        const int c = fgetc(in);
        fputc(i == size / 2 ? c ^ 0x55 : c, out);
    }
    fclose(in);
    fclose(out);
    CHECK(sg_w2v_load(damaged, 1, &err) == NULL && strstr(err.message, damaged) && err.status == SG_ERR_FORMAT);
    CHECK(sg_ft_load(missing, SG_FT_SUPERVISED, &err) == NULL && strstr(err.message, missing));
    CHECK(sg_ft_load(damaged, SG_FT_SUPERVISED, &err) == NULL && strstr(err.message, damaged));
    CHECK(sg_w2v_load_vectors(missing, -1, &err) == NULL && strstr(err.message, missing));
    /* bad options are refused by name */
    o.window = 0;
    CHECK(sg_w2v_new(&o, &err) == NULL && err.status == SG_ERR_ARG && strstr(err.message, "-window"));
    sg_w2v_free(m);
}

/* ---- fastText */

TEST(fasttext_predicts_the_same_after_a_save_and_a_load)
{
    make_corpus();
    char labelled[300], model[300];
    snprintf(labelled, sizeof labelled, "%s/labelled.txt", dir);
    snprintf(model, sizeof model, "%s/ft.bin", dir);
    FILE *f = fopen(labelled, "w");
    for (int i = 0; i < 300; i++)
        fprintf(f, "__label__%c w%d x%d common\n", "abc"[i % 3], i % 3, (int)(tu_rand() % 7));
    fclose(f);
    sg_ft_opts o = sg_ft_opts_default(SG_FT_SUPERVISED);
    o.dim = 8;
    o.epoch = 3;
    o.word_ngrams = 2;
    o.bucket = 1000;
    o.verbose = 0;
    CHECK(sg_ft_opts_check(&o, NULL) == SG_OK);
    sg_model_error err;
    sg_ft_result res;
    sg_ft *m = sg_ft_train_file(labelled, &o, &res, &err);
    CHECK(m != NULL && res.examples == 300);
    if (!m) return;
    CHECK(sg_ft_save(m, model, &err) == SG_OK);
    sg_ft *l = sg_ft_load(model, SG_FT_SUPERVISED, &err);
    CHECK(l != NULL && sg_ft_labels(l) == 3 && sg_ft_kind_of(l) == SG_FT_SUPERVISED);
    char *line[] = {"w1", "x3", "common", "__label__b"};
    double a[3], b[3];
    int64_t inputs, gold[4], n_gold;
    CHECK(sg_ft_predict(m, line, 4, true, a, &inputs, gold, 4, &n_gold, &err) == SG_OK && inputs > 0);
    CHECK(n_gold == 1 && !strcmp(sg_ft_label(m, gold[0]), "__label__b"));
    CHECK(sg_ft_predict(l, line, 4, true, b, &inputs, NULL, 0, NULL, &err) == SG_OK);
    for (int k = 0; k < 3; k++) CHECK(fabs(a[k] - b[k]) < 1e-12);
    /* the classifier's line vector: the mean of its input rows; a line of one known word
     * and no n-grams, no newline, is that word's vector */
    float sv[8], wv[8];
    char *one[] = {"common"};
    sg_ft_opts o1 = o;
    o1.word_ngrams = 1;
    o1.bucket = 0;
    sg_ft *m1 = sg_ft_train_file(labelled, &o1, &res, &err);
    CHECK(m1 && sg_ft_sentence_vector(m1, one, 1, false, sv, &err) == SG_OK && sg_ft_word_vector(m1, "common", wv, &err) == SG_OK);
    for (int d = 0; m1 && d < 8; d++) CHECK(sv[d] == wv[d]);
    sg_ft_free(m1);
    sg_ft_free(l);
    sg_ft_free(m);
}

TEST_MAIN()
