/* sgrad-w2v trained for real on a synthetic corpus with planted structure: 10 topics of
 * 5 words, each sentence drawn from one topic, so words of a topic share their contexts
 * and must end up each other's nearest neighbours (checked by cosine, by a loop in this
 * file). Also: skip-gram and CBOW, both engines, Hogwild mode, and bitwise identical
 * vectors for 1 and 2 threads in deterministic mode; -replicas, whose vectors do not
 * depend on the threads running the replicas. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <time.h>
#include <unistd.h>

#include "w2v/replicas.h"

enum { TOPICS = 10, PER_TOPIC = 5, SENTENCES = 1500, LEN = 10 };

static char corpus_path[256];

static void remove_corpus(void) { remove(corpus_path); }

/* Writes the corpus once per run (any test may run alone); removed at exit. */
static void make_corpus(void)
{
    if (corpus_path[0]) return;
    atexit(remove_corpus);
    snprintf(corpus_path, sizeof corpus_path, "/tmp/sgrad_test_w2v_train_%d.txt", (int)getpid());
    FILE *f = fopen(corpus_path, "w");
    tc_rng r = {2024};
    for (int s = 0; s < SENTENCES; s++) {
        int topic = (int)tc_rng_below(&r, TOPICS);
        for (int i = 0; i < LEN; i++)
            fprintf(f, "%st%dw%d", i ? " " : "", topic, (int)tc_rng_below(&r, PER_TOPIC));
        fputc('\n', f);
    }
    fclose(f);
}

static w2v_result last_result; /* of the last train_and_score */
static bool with_corpus_codes;  /* train_and_score: the counting pass records the corpus */

/* Trains and counts the words whose PER_TOPIC - 1 nearest neighbours are exactly their
 * topic mates. The vectors are copied to `vec` when it is not NULL. */
static int train_and_score(w2v_config *cfg, double *loss, float *vec)
{
    tc_vocab v;
    tc_vocab_init(&v);
    tc_codes codes = {0};
    if (with_corpus_codes) tc_codes_start(&codes, W2V_TOKEN_CACHE_MAX);
    CHECK(tc_vocab_count_file_codes(&v, corpus_path, &codes) == 0);
    CHECK(tc_vocab_finalize_codes(&v, cfg->min_count, &codes) == 0);
    CHECK(!with_corpus_codes || codes.code);
    cfg->corpus_codes = codes.code ? &codes : NULL;
    CHECK(v.size == TOPICS * PER_TOPIC);
    CHECK(v.total_tokens == SENTENCES * LEN);
    w2v_result res;
    w2v_model m = {0};
    int good = -1;
    CHECK((cfg->replicas > 1 ? w2v_replicas_train(cfg, &v, cfg->threads, &res, &m, NULL)
                             : w2v_train(cfg, &v, &res, &m, NULL)) == 0);
    last_result = res;
    /* every word of every epoch read once: by the one trainer, or by the replicas' shares
     * together (their rate counts them all) */
    CHECK(res.tokens == (int64_t)cfg->iter * v.total_tokens);
    if (m.ctx) {
        const int64_t V = v.size, D = cfg->size;
        CHECK(res.examples > 0);
        *loss = res.final_loss;
        if (vec) memcpy(vec, sg_tensor_f32(m.in), sizeof(float) * V * D);
        /* cosine similarities by a plain loop */
        const float *x = sg_tensor_f32(m.in);
        good = 0;
        for (int64_t a = 0; a < V; a++) {
            int topic_a = -1, ta = -1;
            sscanf(v.words[a], "t%dw%d", &topic_a, &ta);
            double sims[TOPICS * PER_TOPIC];
            for (int64_t b = 0; b < V; b++) {
                double ab = 0, aa = 0, bb = 0;
                for (int64_t d = 0; d < D; d++) {
                    ab += (double)x[a * D + d] * x[b * D + d];
                    aa += (double)x[a * D + d] * x[a * D + d];
                    bb += (double)x[b * D + d] * x[b * D + d];
                }
                sims[b] = ab / sqrt(aa * bb);
            }
            /* the least similar mate must beat the most similar outsider */
            double worst_mate = 2, best_other = -2;
            for (int64_t b = 0; b < V; b++) {
                if (b == a) continue;
                int topic_b = -1, tb = -1;
                sscanf(v.words[b], "t%dw%d", &topic_b, &tb);
                if (topic_b == topic_a) worst_mate = fmin(worst_mate, sims[b]);
                else best_other = fmax(best_other, sims[b]);
            }
            good += worst_mate > best_other;
        }
        w2v_model_free(&m);
    }
    cfg->corpus_codes = NULL; /* this frame's */
    tc_codes_free(&codes);
    tc_vocab_free(&v);
    return good;
}

static w2v_config base_config(void)
{
    make_corpus();
    w2v_config c;
    w2v_config_default(&c);
    c.train = corpus_path;
    c.size = 16;
    c.window = 3;
    c.iter = 3;
    c.min_count = 1;
    c.sample = 1e-2;
    c.threads = 1;
    c.batch = 256;
    c.cbow = 0;
    return c;
}

TEST(skipgram_recovers_topics)
{
    w2v_config c = base_config();
    double loss = 0;
    int good = train_and_score(&c, &loss, NULL);
    CHECK(good == TOPICS * PER_TOPIC);
    /* loss per example starts at 6 log 2 = 4.16 (zero output vectors) */
    CHECK(loss < 3.0);
    if (good != TOPICS * PER_TOPIC) fprintf(stderr, "  %d of 50 words\n", good);
}

TEST(cbow_recovers_topics)
{
    w2v_config c = base_config();
    c.cbow = 1;
    c.alpha = 0.05;
    double loss = 0;
    int good = train_and_score(&c, &loss, NULL);
    CHECK(good == TOPICS * PER_TOPIC);
    CHECK(loss < 3.0);
}

TEST(graph_engine_recovers_topics)
{
    w2v_config c = base_config();
    c.engine = SG_W2V_GRAPH;
    double loss = 0;
    CHECK(train_and_score(&c, &loss, NULL) == TOPICS * PER_TOPIC);
    CHECK(loss < 3.0);
}

TEST(hogwild_recovers_topics)
{
    w2v_config c = base_config();
    c.hogwild = 1;
    c.threads = 2;
    c.batch = 1024; /* fewer steps: each ends in a barrier, slow on a busy machine */
    double loss = 0;
    CHECK(train_and_score(&c, &loss, NULL) == TOPICS * PER_TOPIC);
}

TEST(deterministic_across_thread_counts)
{
    w2v_config c = base_config();
    c.iter = 1;
    c.batch = 4000; /* large steps, so that the kernels really split work */
    static float one[TOPICS * PER_TOPIC * 16], two[TOPICS * PER_TOPIC * 16];
    double l1 = 0, l2 = 0;
    c.threads = 1;
    train_and_score(&c, &l1, one);
    c.threads = 2;
    train_and_score(&c, &l2, two);
    /* the run mixed steps on two threads with the picker's steps on one (w2v_pick: 31
     * steps here, the trial at steps 8-15 on one thread) */
    CHECK(last_result.steps > last_result.steps_one_thread);
    CHECK(last_result.steps_one_thread > 0);
    CHECK(memcmp(one, two, sizeof one) == 0);
    CHECK(l1 == l2);
    /* and a different seed gives different vectors (the comparison can fail) */
    c.seed = 99;
    train_and_score(&c, &l2, two);
    CHECK(memcmp(one, two, sizeof one) != 0);
}

/* -replicas R: R models, each trained by one thread on its share, merged every 64 steps
 * (and, from 3 on, their hot rows in between). 1 thread takes the replicas in turn, 2 or
 * 3 run them at once: the same vectors bit for bit, a model that has learnt the topics,
 * and not the one-model run's vectors (the comparison can fail); merges of the marked
 * rows only give the bits of merges of every row. */
TEST(replicas_give_the_same_vectors_for_any_thread_count)
{
    enum { N = TOPICS * PER_TOPIC * 16 };
    static float single[N], r2[2][N], r3[3][N];
    double loss = 0, l2[2] = {0}, l3[3] = {0};
    w2v_config c = base_config();
    train_and_score(&c, &loss, single);
    c.replicas = 2;
    for (int t = 0; t < 2; t++) {
        c.threads = t + 1;
        CHECK(train_and_score(&c, &l2[t], r2[t]) == TOPICS * PER_TOPIC);
        CHECK(last_result.steps > 2 * c.sync_every); /* merges happened */
    }
    CHECK(memcmp(r2[0], r2[1], sizeof r2[0]) == 0 && l2[0] == l2[1]);
    CHECK(memcmp(r2[0], single, sizeof single) != 0);
    c.replicas = 3;
    for (int t = 0; t < 3; t++) {
        c.threads = t + 1;
        CHECK(train_and_score(&c, &l3[t], r3[t]) == TOPICS * PER_TOPIC);
    }
    CHECK(memcmp(r3[0], r3[1], sizeof r3[0]) == 0 && memcmp(r3[0], r3[2], sizeof r3[0]) == 0);
    CHECK(l3[0] == l3[1] && l3[0] == l3[2]);
    CHECK(memcmp(r3[0], r2[0], sizeof r2[0]) != 0);
    /* merging every row instead of the marked ones: the same bits (a row a step changed
     * but did not mark would merge late, and differ here) */
    static float every[N];
    w2v_rep_merge_every_row = true;
    c.threads = 2;
    train_and_score(&c, &loss, every);
    w2v_rep_merge_every_row = false;
    CHECK(memcmp(r3[0], every, sizeof every) == 0);
}

/* Once every replica's share of an epoch is done, a hot merge tells them so and they go
 * straight to the epoch's full merge, which merges every row the skipped hot merges would
 * (each changed row once, with the same sums): the vectors are those of running each of
 * them (a period of 1024 steps, above each replica's steps, leaves up to 1024 hot merges
 * per epoch after the shares end; a -sync-every of 10^6 or more leaves about 2^16, which
 * took 8-17 s before). */
TEST(replicas_done_with_their_shares_skip_to_the_full_merge)
{
    enum { N = TOPICS * PER_TOPIC * 16 };
    static float skipped[N], every[N];
    double loss[2] = {0};
    int64_t merges[2];
    w2v_config c = base_config();
    c.replicas = 3;
    c.threads = 2;
    c.sync_every = 1024;
    for (int run = 0; run < 2; run++) {
        w2v_rep_hot_report_active = run == 1;
        w2v_rep_merges_run = w2v_rep_full_merges_run = 0;
        train_and_score(&c, &loss[run], run ? every : skipped);
        merges[run] = w2v_rep_merges_run;
        CHECK(last_result.steps < c.sync_every);
        CHECK(w2v_rep_full_merges_run == c.iter + 1); /* the first, and each epoch's end */
    }
    w2v_rep_hot_report_active = false;
    CHECK(memcmp(skipped, every, sizeof every) == 0 && loss[0] == loss[1]);
    /* hot merges while some share goes on (at most one a step: replica 0's steps, with
     * room for a longer share), and each epoch one to learn that none does and the full
     * one; and the first merge. Without the skip: 3073 here. */
    CHECK(merges[0] <= 2 * last_result.steps + 2 * (int64_t)c.iter + 1);
    CHECK(merges[1] > (int64_t)c.iter * c.sync_every / 2); /* the tail, each hot merge run */
}

/* A replica waiting at a merge (here the first, which waits for both) is woken when the
 * other replica's thread ends with a failure, and fails too: no hang. */
static void *wait_at_first_merge(void *arg)
{
    rep_thread *me = arg;
    pthread_mutex_lock(&me->s->mu);
    w2v_rep_take_slot(me->s);
    pthread_mutex_unlock(&me->s->mu);
    bool any = false;
    sg_tensor *tables[3] = {NULL, NULL, NULL};
    me->rc = me->par.sync(&me->par, tables, true, &any);
    w2v_rep_finish(me->s, me->rc);
    return NULL;
}

TEST(a_replica_waiting_at_a_merge_is_woken_by_a_failure)
{
    rep_shared s = {.replicas = 2, .slots = 2};
    sg_tensor *tables[2][3] = {{NULL}};
    bool active[2] = {false, false}, want_stop[2] = {false, false};
    float *x[3][2];
    s.tables = tables;
    s.active = active;
    s.want_stop = want_stop;
    for (int k = 0; k < 3; k++) s.x[k] = x[k];
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    rep_thread waiting = {.s = &s, .r = 0, .rc = 1};
    waiting.par = (w2v_parallel){.rank = 0, .ranks = 2, .sync_steps = 64, .sync = w2v_rep_sync, .impl = &waiting};
    alarm(60); /* a hang fails the test */
    pthread_t tid;
    CHECK(pthread_create(&tid, NULL, wait_at_first_merge, &waiting) == 0);
    pthread_mutex_lock(&s.mu);
    w2v_rep_take_slot(&s); /* replica 1's slot, as its thread would hold it */
    pthread_mutex_unlock(&s.mu);
    struct timespec pause = {0, 100 * 1000 * 1000};
    nanosleep(&pause, NULL); /* replica 0 is at the merge by now, or gets there failed */
    w2v_rep_finish(&s, -1);
    pthread_join(tid, NULL);
    alarm(0);
    CHECK(waiting.rc == -1);
    CHECK(s.arrived <= 1 && s.base[0] == NULL);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
}

/* A run whose replicas fail (every one diverges) returns the error and no model. */
TEST(a_failing_replica_ends_the_run_without_a_hang)
{
    w2v_config c = base_config();
    c.replicas = 2;
    c.alpha = 10;
    c.sample = 0;
    tc_vocab v;
    tc_vocab_init(&v);
    CHECK(tc_vocab_count_file(&v, corpus_path) == 0 && tc_vocab_finalize(&v, 1) == 0);
    w2v_result res;
    w2v_model m = {0};
    for (int t = 1; t <= 2; t++) {
        alarm(120); /* a hang fails the test */
        CHECK(w2v_replicas_train(&c, &v, t, &res, &m, NULL) == -1);
        alarm(0);
        CHECK(m.ctx == NULL);
    }
    tc_vocab_free(&v);
}

/* Epochs after the first replay its recorded tokens (token ids, not the corpus text):
 * the same vectors bit for bit as reading the corpus each epoch, and as a record too
 * small for the corpus, which is dropped; and as every epoch replaying the counting
 * pass's record (cfg.corpus_codes); CBOW and skip-gram, 1 and 2 threads. */
TEST(replayed_epochs_train_as_read_ones)
{
    static float read[TOPICS * PER_TOPIC * 16], replayed[TOPICS * PER_TOPIC * 16];
    for (int cbow = 0; cbow < 2; cbow++)
        for (int threads = 1; threads <= 2; threads++) {
            w2v_config c = base_config();
            c.cbow = cbow;
            c.threads = threads;
            double l0 = 0, l1 = 0;
            c.token_cache = 0;
            train_and_score(&c, &l0, read);
            CHECK(last_result.epochs_replayed == 0);
            c.token_cache = W2V_TOKEN_CACHE_MAX;
            train_and_score(&c, &l1, replayed);
            CHECK(last_result.epochs_replayed == c.iter - 1);
            CHECK(memcmp(read, replayed, sizeof read) == 0 && l0 == l1);
            c.token_cache = 1000; /* less than the corpus: dropped during the first epoch */
            train_and_score(&c, &l1, replayed);
            CHECK(last_result.epochs_replayed == 0);
            CHECK(memcmp(read, replayed, sizeof read) == 0 && l0 == l1);
            c.token_cache = W2V_TOKEN_CACHE_MAX;
            with_corpus_codes = true;
            train_and_score(&c, &l1, replayed);
            CHECK(last_result.epochs_replayed == c.iter);
            CHECK(memcmp(read, replayed, sizeof read) == 0 && l0 == l1);
            /* the drawing's prefetches (noise columns one centre ahead, row hit counts,
             * a replay's subsampling thresholds), forced on: no draw changes */
            c.prefetch_min = 0;
            train_and_score(&c, &l1, replayed);
            with_corpus_codes = false;
            CHECK(memcmp(read, replayed, sizeof read) == 0 && l0 == l1);
        }
}

/* -replicas replay their shares of the counting pass's record: the vectors of reading
 * the shares from the file, for 2 and 3 replicas on 1 and 2 threads. */
TEST(replicas_replay_their_shares_of_the_record_as_read)
{
    enum { N = TOPICS * PER_TOPIC * 16 };
    static float read[N], replayed[N];
    for (int R = 2; R <= 3; R++)
        for (int threads = 1; threads <= 2; threads++) {
            w2v_config c = base_config();
            c.replicas = R;
            c.threads = threads;
            double l0 = 0, l1 = 0;
            c.token_cache = 0;
            train_and_score(&c, &l0, read);
            CHECK(last_result.epochs_replayed == 0);
            c.token_cache = W2V_TOKEN_CACHE_MAX;
            with_corpus_codes = true;
            train_and_score(&c, &l1, replayed);
            with_corpus_codes = false;
            CHECK(last_result.epochs_replayed == c.iter);
            CHECK(memcmp(read, replayed, sizeof read) == 0 && l0 == l1);
        }
}

/* The reader's tokens of bytes [begin, end) of path as codes (v's ids, TC_CODE_OOV,
 * TC_CODE_EOL) into out (at most cap); how many. */
static int64_t read_share(const char *path, const tc_vocab *v, int64_t begin, int64_t end, int32_t *out,
                          int64_t cap)
{
    tc_reader rd;
    CHECK(tc_reader_open(&rd, path) == 0);
    CHECK(tc_reader_seek(&rd, begin) == 0);
    char word[TC_MAX_WORD];
    int64_t n = 0;
    tc_tok k;
    while (tc_reader_offset(&rd) < end && (k = tc_reader_next(&rd, word)) != TC_TOK_EOF && n < cap)
        out[n++] = k == TC_TOK_EOL ? TC_CODE_EOL : (int32_t)tc_vocab_find(v, word);
    tc_reader_close(&rd);
    return n;
}

/* Each replica's part of the record (found by counting newlines) holds the tokens the
 * reader gives for its share's bytes: blank and empty lines, a line longer than the
 * reader's words, a last line without a newline, more replicas than lines and than bytes,
 * a file of exactly two of the count's reads; and a file changed after the count (a byte in
 * place, a byte or a newline more) is refused (ESTALE). */
TEST(share_records_hold_what_the_reader_gives_for_each_share)
{
    char path[128];
    snprintf(path, sizeof path, "/tmp/sgrad_test_w2v_shares_%d.txt", (int)getpid());
    static const char *texts[] = {
        "a b c\nd e\n\n  \t\nf g h i\r\nj\n",
        "one line without a newline",
        "x\ny\nz",
        "\n\n\n",
        "w\n",
    };
    char *long_text = malloc(3 * TC_MAX_WORD + 64);
    /* 128 KiB exactly, a multiple of the newline count's 64 KiB reads */
    enum { BLOCKS = 2 << 16 };
    char *block_text = malloc(BLOCKS + 1);
    int32_t *got = malloc(BLOCKS * sizeof *got);
    CHECK(long_text && block_text && got);
    if (!long_text || !block_text || !got) return;
    int n = snprintf(long_text, 64, "p q\n");
    for (int i = 0; i < 2 * TC_MAX_WORD; i++) long_text[n++] = 'l';
    strcpy(long_text + n, " r\ns t\nu\n");
    for (int i = 0; i < BLOCKS; i++) block_text[i] = i % 7 == 6 || i == BLOCKS - 1 ? '\n' : i % 7 == 2 ? ' ' : 'a' + i % 3;
    block_text[BLOCKS] = '\0';
    for (int ti = 0; ti < 7; ti++) {
        const char *text = ti < 5 ? texts[ti] : ti == 5 ? long_text : block_text;
        FILE *f = fopen(path, "wb");
        CHECK(f != NULL);
        if (!f) break;
        fputs(text, f);
        fclose(f);
        tc_vocab v;
        tc_vocab_init(&v);
        tc_codes all = {0};
        tc_codes_start(&all, 1 << 20);
        CHECK(tc_vocab_count_file_codes(&v, path, &all) == 0);
        CHECK(tc_vocab_finalize_codes(&v, 1, &all) == 0);
        CHECK(all.code != NULL);
        for (int R = 1; R <= 40; R += R < 4 ? 1 : 9) {
            tc_codes share[40];
            CHECK(w2v_share_records(path, &v, &all, R, share) == 0);
            int64_t total = 0;
            for (int r = 0; r < R; r++) {
                int64_t begin, end;
                CHECK(w2v_corpus_share(path, r, R, &begin, &end) == 0);
                const int64_t m = read_share(path, &v, begin, end, got, BLOCKS);
                CHECK(share[r].n == m);
                CHECK(m == 0 || memcmp(share[r].code, got, (size_t)m * sizeof *got) == 0);
                CHECK(share[r].code == all.code + total); /* in order, one after the other */
                total += share[r].n;
            }
            CHECK(total == all.n);
        }
        /* a byte changed in place (same size and newlines), then a newline more or a byte
         * more: the file no longer matches the record */
        const char *word = strpbrk(text, "abcdefghijklmnopqrstuvwxyz");
        tc_codes share[2];
        if (word) {
            f = fopen(path, "r+b");
            CHECK(f && fseek(f, word - text, SEEK_SET) == 0 && fputc('Z', f) == 'Z');
            if (f) fclose(f);
            errno = 0;
            CHECK(w2v_share_records(path, &v, &all, 2, share) == -1 && errno == ESTALE);
            f = fopen(path, "wb");
            CHECK(f != NULL);
            if (f) {
                fputs(text, f);
                fclose(f);
            }
            CHECK(w2v_share_records(path, &v, &all, 2, share) == 0); /* restored */
        }
        f = fopen(path, "ab");
        fputs(ti % 2 ? "\n" : " ", f);
        fclose(f);
        errno = 0;
        CHECK(w2v_share_records(path, &v, &all, 2, share) == -1 && errno == ESTALE);
        tc_codes_free(&all);
        tc_vocab_free(&v);
    }
    free(long_text);
    free(block_text);
    free(got);
    remove(path);
}

/* Runs one picker period of W2V_PICK_PERIOD steps, each of 100 examples taking all_secs
 * on all threads or one_secs on one, plus switch_secs for a step whose mode differs from
 * the step before's (*last: that mode, kept across periods); returns how many of its
 * trial steps ran on one. */
static int pick_period_switching(w2v_pick *p, double all_secs, double one_secs, double switch_secs, bool *last)
{
    int trial_one = 0;
    for (int k = 0; k < W2V_PICK_PERIOD; k++) {
        const bool one = w2v_pick_one(p);
        if (k < 2 * W2V_PICK_TRIAL) trial_one += one;
        w2v_pick_record(p, one, (one ? one_secs : all_secs) + (one != *last ? switch_secs : 0), 100);
        *last = one;
    }
    return trial_one;
}
static int pick_period(w2v_pick *p, double all_secs, double one_secs)
{
    bool last = false;
    return pick_period_switching(p, all_secs, one_secs, 0, &last);
}

TEST(picker_cuts_a_slow_all_thread_trial_short)
{
    w2v_pick p = {0};
    /* the first trial, with no one-thread rate yet, runs its all-thread half in full */
    CHECK(pick_period(&p, 3.0, 1.0) == W2V_PICK_TRIAL);
    CHECK(p.one); /* it chose one thread for the rest of the period */
    /* all threads still 3x slower: the all-thread half stops after W2V_PICK_CUT_AFTER */
    CHECK(pick_period(&p, 3.0, 1.0) == 2 * W2V_PICK_TRIAL - W2V_PICK_CUT_AFTER);
    /* all threads within W2V_PICK_CUT of one (here 1.2x): the full half, and one chosen */
    CHECK(pick_period(&p, 1.2, 1.0) == W2V_PICK_TRIAL);
    CHECK(p.one);
    /* all threads faster: a full half, and all threads chosen for the rest */
    CHECK(pick_period(&p, 0.6, 1.0) == W2V_PICK_TRIAL);
    CHECK(!p.one);
}

/* A switch of mode costs its first step dearly (the rows move between the cores' caches);
 * the one-thread half always follows a switch, so if that step were timed, all threads
 * would keep winning while slower. The settling steps are not timed. */
TEST(picker_is_not_swayed_by_the_cost_of_switching)
{
    w2v_pick p = {0};
    bool last = false; /* the run starts on all threads */
    for (int period = 0; period < 4; period++) {
        /* one thread 10% faster; a switch costs 30 steps' time (more than a half's) */
        pick_period_switching(&p, 1.1, 1.0, 30.0, &last);
        CHECK(p.one);
    }
    /* and all threads faster by 10% is still seen, past the same switching cost */
    for (int period = 0; period < 4; period++) {
        pick_period_switching(&p, 0.9, 1.0, 30.0, &last);
        CHECK(!p.one);
    }
    /* all threads much slower, so the trial's all-thread half is cut short: the switch
     * inside the half is not timed either (it would inflate the one-thread rate, and
     * with it the next cut's threshold, until all threads won every other period) */
    const double slow[][2] = {{1.6, 8.0}, {2.0, 12.0}, {3.0, 30.0}};
    for (int c = 0; c < 3; c++) {
        w2v_pick q = {0};
        bool at = false;
        for (int period = 0; period < 20; period++) {
            pick_period_switching(&q, slow[c][0], 1.0, slow[c][1], &at);
            CHECK(q.one);
        }
    }
}

TEST(dominant_word_keeps_training_stable)
{
    /* "the" is 30% of the tokens and a common noise word: an 8192-example batch would
     * give it one huge summed step (on the demo corpus such batches diverged before the
     * per-row cap); batches must end early instead, and training must converge. */
    char path[256];
    snprintf(path, sizeof path, "/tmp/sgrad_test_w2v_zipf_%d.txt", (int)getpid());
    FILE *f = fopen(path, "w");
    tc_rng r = {3};
    for (int s = 0; s < 4000; s++)
        for (int i = 0; i < 12; i++) {
            uint32_t a = tc_rng_below(&r, 1000), b = tc_rng_below(&r, 200);
            if (a < 300) fprintf(f, "the");
            else fprintf(f, "w%u", b * tc_rng_below(&r, 200) / 200);
            fputc(i == 11 ? '\n' : ' ', f);
        }
    fclose(f);
    w2v_config c;
    w2v_config_default(&c);
    c.train = path;
    c.cbow = 0;
    c.size = 32;
    c.sample = 0;
    c.threads = 1;
    c.batch = 8192;
    c.iter = 2;
    tc_vocab v;
    tc_vocab_init(&v);
    CHECK(tc_vocab_count_file(&v, path) == 0 && tc_vocab_finalize(&v, 5) == 0);
    w2v_result res;
    w2v_model m = {0};
    CHECK(w2v_train(&c, &v, &res, &m, NULL) == 0);
    CHECK(isfinite(res.final_loss) && res.final_loss < 3.0);
    CHECK(res.steps > 0 && (double)res.examples / (double)res.steps < 2000);
    if (m.ctx) w2v_model_free(&m);
    tc_vocab_free(&v);
    remove(path);
}

TEST(oversized_step_arrays_are_refused_before_allocating)
{
    /* CBOW with -batch 2^24 and -window 100 would take 2^24 * 200 int32 context slots
     * (13 GB, offsets past INT32_MAX); skip-gram with -negative 100, 2^24 * 101 targets */
    make_corpus();
    tc_vocab v;
    tc_vocab_init(&v);
    CHECK(tc_vocab_count_file(&v, corpus_path) == 0 && tc_vocab_finalize(&v, 1) == 0);
    w2v_config c;
    w2v_config_default(&c);
    c.train = corpus_path;
    c.threads = 1;
    c.batch = (int64_t)1 << 24;
    c.window = 100;
    sg_model_error *null = NULL; /* the reason is not looked at here */
    CHECK(w2v_config_check(&c, null) != 0);
    w2v_result res;
    w2v_model m = {0};
    CHECK(w2v_train(&c, &v, &res, &m, NULL) == -1);
    CHECK(m.ctx == NULL);
    c.cbow = 0;
    c.negative = 100;
    CHECK(w2v_config_check(&c, null) != 0);
    /* the largest accepted: 2^26 context slots and 2^26 targets */
    c.cbow = 1;
    c.window = 2;
    c.negative = 3;
    CHECK(w2v_config_check(&c, null) == 0);
    c.batch = 335544;
    c.window = 100;
    CHECK(w2v_config_check(&c, null) == 0);
    c.batch++;
    CHECK(w2v_config_check(&c, null) != 0);
    /* -window and -negative past the limits the 16-bit row hit counts are sized for */
    c.batch = 8192;
    c.window = 101;
    CHECK(w2v_config_check(&c, null) != 0);
    c.window = 5;
    c.negative = 101;
    CHECK(w2v_config_check(&c, null) != 0);
    c.negative = 100;
    CHECK(w2v_config_check(&c, null) == 0);
    tc_vocab_free(&v);
}

TEST(cbow_on_equally_frequent_words_converges)
{
    /* The case: default CBOW (alpha 0.05, -batch 8192) on 200 equally frequent
     * words in random order. With a batch cap of 256 hits per row a step summed about 245
     * coherent updates of every output row (the bags' means are all near the mean vector)
     * and the loss went to 3e24; with word2vec.c's undivided context errors and the input
     * rows capped like the output rows (128 hits) it diverged again. A random corpus has nothing to learn beyond the words'
     * frequencies: the loss must end finite and below its start, 6 ln 2 per example
     * (output rows start at zero), and the vectors stay small. */
    char path[256];
    snprintf(path, sizeof path, "/tmp/sgrad_test_w2v_cbow200_%d.txt", (int)getpid());
    FILE *f = fopen(path, "w");
    tc_rng r = {77};
    for (int s = 0; s < 4000; s++) {
        for (int i = 0; i < 100; i++) fprintf(f, "%sw%d", i ? " " : "", (int)tc_rng_below(&r, 200));
        fputc('\n', f);
    }
    fclose(f);
    w2v_config cfg;
    w2v_config_default(&cfg);
    cfg.train = path;
    cfg.threads = 1;
    cfg.iter = 3;
    CHECK(tc_row_hit_cap(TC_ROW_STEP_BOUND, 0.05) * 0.05 <= TC_ROW_STEP_BOUND + 1e-9);
    CHECK(tc_row_hit_cap(TC_CBOW_INPUT_STEP_BOUND, 0.05) * 0.05 <= TC_CBOW_INPUT_STEP_BOUND + 1e-9);
    /* skip-gram's default is unchanged */
    CHECK(tc_row_hit_cap(TC_ROW_STEP_BOUND, 0.025) == TC_MAX_ROW_HITS);
    tc_vocab v;
    tc_vocab_init(&v);
    CHECK(tc_vocab_count_file(&v, path) == 0 && tc_vocab_finalize(&v, 5) == 0);
    CHECK(v.size == 200);
    w2v_result res;
    w2v_model m = {0};
    CHECK(w2v_train(&cfg, &v, &res, &m, NULL) == 0);
    if (m.ctx) {
        CHECK(isfinite(res.final_loss) && res.final_loss < 6 * log(2.0));
        float maxabs = 0;
        const float *x = sg_tensor_f32(m.in);
        for (int64_t i = 0; i < v.size * cfg.size; i++) maxabs = fmaxf(maxabs, fabsf(x[i]));
        CHECK(maxabs < 10);
    }
    w2v_model_free(&m);
    tc_vocab_free(&v);
    remove(path);
}

TEST_MAIN()
