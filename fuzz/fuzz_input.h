/* Shared by the fuzz targets: the library's readers take a path, so each input is put in
 * an in-memory file (memfd, made once per process) that is opened again by its
 * /proc/self/fd path. Linux only, as libFuzzer builds are here. */
#ifndef SG_FUZZ_INPUT_H
#define SG_FUZZ_INPUT_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* A contract the target checks was broken: a crash for libFuzzer, saved with its input. */
#define FUZZ_REQUIRE(cond)                                                               \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "fuzz: %s:%d: %s does not hold\n", __FILE__, __LINE__, #cond); \
            __builtin_trap();                                                            \
        }                                                                                \
    } while (0)

/* Replaces the in-memory file's contents with data[0, size); returns its path. */
static const char *fuzz_input_file(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("sgrad-fuzz-input", 0);
        FUZZ_REQUIRE(fd >= 0);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    FUZZ_REQUIRE(ftruncate(fd, 0) == 0);
    size_t done = 0;
    while (done < size) {
        ssize_t n = pwrite(fd, data + done, size - done, (off_t)done);
        FUZZ_REQUIRE(n > 0);
        done += (size_t)n;
    }
    return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
