/* sgrad-mpi-probe: MPI's per-message latency and bandwidth between ranks 0 and 1 (run it
 * as `mpirun -np 2 sgrad-mpi-probe [--quick]`), the two numbers the README's cost model
 * starts from. Ping-pong: rank 0 sends n bytes, rank 1 sends them back; one-way time =
 * half the round trip. Small messages (8 B to 4 KiB, many round trips per sample) give the
 * latency, large ones (1 to 64 MiB) the bandwidth (n / one-way time). Each size is sampled
 * `reps` times and rank 0 prints one JSON line per size with the median and the spread
 * (min, max) of the samples, so a noisy shared machine shows as a wide spread. Pure MPI:
 * it measures the transport (on one machine, shared memory), not sgrad. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (size < 2) {
        if (rank == 0) fprintf(stderr, "sgrad-mpi-probe: run it under mpirun -np 2\n");
        MPI_Finalize();
        return 1;
    }
    const size_t sizes[] = {8, 64, 512, 4096, (size_t)1 << 20, (size_t)4 << 20, (size_t)16 << 20, (size_t)64 << 20};
    const int nsizes = quick ? 5 : (int)(sizeof sizes / sizeof *sizes);
    const int reps = quick ? 3 : 9;
    unsigned char *buf = calloc(sizes[nsizes - 1], 1);
    double samples[9];
    int rc = buf ? 0 : 1;
    for (int s = 0; s < nsizes && !rc; s++) {
        size_t n = sizes[s];
        int small = n <= 4096;
        int trips = small ? (quick ? 100 : 2000) : (quick ? 2 : 5);
        for (int r = 0; r < reps; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int k = 0; k < trips && rank < 2; k++) {
                if (rank == 0) {
                    MPI_Send(buf, (int)n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                    MPI_Recv(buf, (int)n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf, (int)n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, (int)n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
                }
            }
            samples[r] = (MPI_Wtime() - t0) / trips / 2; /* one way */
        }
        if (rank == 0) {
            qsort(samples, (size_t)reps, sizeof *samples, cmp_double);
            double med = samples[reps / 2];
            printf("{\"bench\":\"mpi_probe\",\"case\":\"%s\",\"bytes\":%zu,\"one_way_us\":%.4g,"
                   "\"one_way_us_min\":%.4g,\"one_way_us_max\":%.4g,\"gbytes_per_s\":%.4g,\"samples\":%d,"
                   "\"round_trips_per_sample\":%d}\n",
                   small ? "latency" : "bandwidth", n, med * 1e6, samples[0] * 1e6, samples[reps - 1] * 1e6,
                   (double)n / med / 1e9, reps, trips);
        }
    }
    free(buf);
    MPI_Finalize();
    return rc;
}
