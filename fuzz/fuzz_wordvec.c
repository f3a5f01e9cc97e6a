/* libFuzzer target: sg_wordvec_read of the input as a file, in each mode (text, binary,
 * and detection). Beyond memory safety, leaks and undefined behaviour: a read either fails
 * with an error status and message on the context or gives a table whose count, dim and
 * (V,D) vectors agree, whose words all exist, and where looking a word up finds a row
 * holding that same word. */
#include "fuzz_input.h"

#include <string.h>

#include "sgrad.h"

static void read_and_check(const char *path, int binary)
{
    sg_ctx *ctx = sg_ctx_new(&(sg_ctx_opts){.threads = 1});
    FUZZ_REQUIRE(ctx);
    sg_wordvec *wv = sg_wordvec_read(ctx, path, binary);
    if (!wv) {
        FUZZ_REQUIRE(sg_ctx_status(ctx) != SG_OK);
        FUZZ_REQUIRE(sg_ctx_message(ctx) && sg_ctx_message(ctx)[0]);
        sg_ctx_free(ctx);
        return;
    }
    int64_t V = sg_wordvec_count(wv), D = sg_wordvec_dim(wv);
    FUZZ_REQUIRE(V >= 0 && D >= 0);
    sg_tensor *vectors = sg_wordvec_vectors(wv);
    FUZZ_REQUIRE(vectors && sg_tensor_ndim(vectors) == 2);
    FUZZ_REQUIRE(sg_tensor_dim(vectors, 0) == V && sg_tensor_dim(vectors, 1) == D);
    for (int64_t i = 0; i < V; i++) {
        const char *w = sg_wordvec_word(wv, i);
        FUZZ_REQUIRE(w);
        int64_t j = sg_wordvec_find(wv, w);
        FUZZ_REQUIRE(j >= 0 && j < V && strcmp(sg_wordvec_word(wv, j), w) == 0);
    }
    FUZZ_REQUIRE(sg_wordvec_word(wv, V) == NULL && sg_wordvec_word(wv, -1) == NULL);
    sg_wordvec_free(wv);
    sg_ctx_free(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_input_file(data, size);
    read_and_check(path, 0);
    read_and_check(path, 1);
    read_and_check(path, -1);
    return 0;
}
