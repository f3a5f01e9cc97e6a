/* libFuzzer target: the trainers' corpus reader and vocabulary (models/common/vocab.c) on the
 * input as a corpus file. Beyond memory safety, leaks and undefined behaviour: every token
 * is shorter than TC_MAX_WORD and holds no separator byte; tc_vocab_count_file counts
 * the tokens and lines the reader gives; after tc_vocab_finalize (min-count 1 to 3, from
 * the first byte) the words are in frequency order (ties by bytes), each is found at its
 * own index, every count reaches min-count and the counts sum to train_words (to every
 * token for min-count 1). */
#include "fuzz_input.h"

#include <string.h>

#include "common.h"

static int is_separator(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' || c == '\n';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_input_file(data, size);

    tc_reader r;
    FUZZ_REQUIRE(tc_reader_open(&r, path) == 0);
    char word[TC_MAX_WORD];
    int64_t tokens = 0, lines = 0;
    int line_open = 0;
    for (tc_tok t; (t = tc_reader_next(&r, word)) != TC_TOK_EOF;) {
        if (t == TC_TOK_EOL) {
            lines++;
            line_open = 0;
            continue;
        }
        FUZZ_REQUIRE(t == TC_TOK_WORD);
        size_t n = strlen(word);
        FUZZ_REQUIRE(n < TC_MAX_WORD);
        for (size_t i = 0; i < n; i++) FUZZ_REQUIRE(!is_separator((unsigned char)word[i]));
        tokens++;
        line_open = 1;
    }
    lines += line_open;
    tc_reader_close(&r);

    tc_vocab v;
    tc_vocab_init(&v);
    FUZZ_REQUIRE(tc_vocab_count_file(&v, path) == 0);
    FUZZ_REQUIRE(v.total_tokens == tokens && v.lines == lines);
    int64_t min_count = size ? 1 + data[0] % 3 : 1;
    FUZZ_REQUIRE(tc_vocab_finalize(&v, min_count) == 0);
    int64_t sum = 0;
    for (int64_t i = 0; i < v.size; i++) {
        FUZZ_REQUIRE(v.counts[i] >= min_count);
        FUZZ_REQUIRE(tc_vocab_find(&v, v.words[i]) == i);
        if (i > 0) {
            FUZZ_REQUIRE(v.counts[i - 1] >= v.counts[i]);
            if (v.counts[i - 1] == v.counts[i]) FUZZ_REQUIRE(strcmp(v.words[i - 1], v.words[i]) < 0);
        }
        sum += v.counts[i];
    }
    FUZZ_REQUIRE(sum == v.train_words);
    if (min_count == 1) FUZZ_REQUIRE(sum == tokens);
    tc_vocab_free(&v);
    return 0;
}
