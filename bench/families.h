/* Every family of sgrad-bench, once: X(name, "what it measures"). Each family is
 * `int sgb_<name>(const sgb_cfg *)` defined in bench/bench_<name>.c. */
#define SGB_FAMILIES(X)                                                        \
    X(overhead, "tape overhead of a chain of small ops, forward and backward") \
    X(matmul, "dense matmul forward and backward: as built (BLAS), hand-written kernel, naive loop") \
    X(sparse, "embedding gather/backward, index-add (1 and 2 threads), coalesce") \
    X(optim, "optimizer train steps (fused and unfused), many parameters, dense vs sparse")

/* Families that run only when named, never by "all": pystep is half of a comparison with
 * the Python script; cores means something only with two cores free; rowmem needs about
 * 500 MB and is the floor under bench/w2v_scale.sh; bagmem needs about 4 GB; dist needs
 * mpirun and the MPI module (built when SGRAD_MPI is on). */
#define SGB_NAMED_ANYWHERE(X) \
    X(pystep, "the step of bench/python_vs_torch.py in C: the same ops, sizes and batches") \
    X(cores, "what moving a cache line and a block of rows between two cores costs (2 threads)") \
    X(rowmem, "what reading and updating word2vec's table rows costs at 15k, 150k and 1M rows") \
    X(bagmem, "the memory floor under sgrad.torch's DLRM embedding step: bag sums and Adagrad, plain loops")
#ifdef SGB_WITH_MPI
#define SGB_NAMED_FAMILIES(X) \
    SGB_NAMED_ANYWHERE(X) \
    X(dist, "data-parallel embedding step under mpirun: step time, bytes sent per rank, sparse vs dense")
#else
#define SGB_NAMED_FAMILIES(X) SGB_NAMED_ANYWHERE(X)
#endif
