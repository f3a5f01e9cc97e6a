/* Links against an installed libsgrad_models (sgrad_models.h): a vocabulary counted from
 * token chunks, word2vec trained on their ids handed in, then a model file saved and read
 * back: the same vectors, and every word's nearest neighbour in its own topic (3 topics of
 * 3 words, each sentence from one topic). */
#include <stdio.h>
#include <string.h>
#include <sgrad_models.h>

static const char *words[3][3] = {{"ant", "bee", "fly"}, {"oak", "elm", "fir"}, {"red", "tan", "sky"}};

typedef struct {
    const sg_vocab *v;
    unsigned seed;
    int sentence;
} source;

/* 600 sentences of 6 words, a topic each; ids in chunks of at most 7 */
static int64_t read_ids(void *ud, int32_t *ids, int64_t cap)
{
    source *s = ud;
    int64_t n = 0;
    while (n + 7 <= cap && n < 7 && s->sentence < 600) {
        const int topic = s->sentence++ % 3;
        for (int i = 0; i < 6; i++) {
            s->seed = s->seed * 1103515245u + 12345u;
            ids[n++] = (int32_t)sg_vocab_find(s->v, words[topic][(s->seed >> 16) % 3]);
        }
        ids[n++] = SG_W2V_EOS;
    }
    if (n == 0) s->sentence = 0, s->seed = 0; /* the next epoch: the same corpus */
    return n;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "consumer_model.sgw2v";
    sg_model_error err;
    sg_vocab *v = sg_vocab_new();
    source s = {0};
    for (int k = 0; k < 600; k++) { /* the same tokens as words, a NULL ending each sentence */
        const char *chunk[7];
        const int topic = k % 3;
        for (int i = 0; i < 6; i++) {
            s.seed = s.seed * 1103515245u + 12345u;
            chunk[i] = words[topic][(s.seed >> 16) % 3];
        }
        chunk[6] = NULL;
        if (sg_vocab_add_tokens(v, chunk, 7, &err)) return fprintf(stderr, "%s\n", err.message), 1;
    }
    s.seed = 0;
    sg_w2v_opts o = sg_w2v_opts_default();
    o.size = 8, o.window = 2, o.iter = 20, o.min_count = 1, o.threads = 1, o.batch = 64, o.cbow = 0, o.verbose = 0;
    sg_w2v *m = sg_w2v_new(&o, &err);
    if (!m || sg_w2v_build_vocab(m, NULL, v, &err) || (s.v = sg_w2v_vocab(m), sg_w2v_train_tokens(m, read_ids, &s, NULL, &err)) ||
        sg_w2v_save(m, path, &err))
        return fprintf(stderr, "%s\n", err.message), 1;
    sg_w2v *l = sg_w2v_load(path, 1, &err);
    if (!l) return fprintf(stderr, "%s\n", err.message), 1;
    int ok = !memcmp(sg_tensor_f32(sg_w2v_table(m, 0)), sg_tensor_f32(sg_w2v_table(l, 0)), sizeof(float) * 9 * 8);
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < 3; i++) {
            int64_t row;
            float sim;
            int n = 0;
            ok &= sg_w2v_neighbors(l, words[t][i], 1, &row, &sim, &n, &err) == SG_OK && n == 1;
            const char *near = n ? sg_w2v_word(l, row) : "";
            ok &= !strcmp(near, words[t][0]) || !strcmp(near, words[t][1]) || !strcmp(near, words[t][2]);
        }
    printf("%s\n", ok ? "models install ok" : "models: wrong neighbours or a changed file");
    sg_w2v_free(l);
    sg_w2v_free(m);
    sg_vocab_free(v);
    remove(path);
    return ok ? 0 : 1;
}
