/* Every family of sgrad-bench, once: X(name, "what it measures"). Each family is
 * `int sgb_<name>(const sgb_cfg *)` defined in bench/bench_<name>.c. */
#define SGB_FAMILIES(X)                                                        \
    X(overhead, "tape overhead of a chain of small ops, forward and backward") \
    X(matmul, "dense matmul forward and backward against a naive loop") \
    X(sparse, "embedding gather/backward, index-add (1 and 2 threads), coalesce") \
    X(optim, "optimizer train steps (fused and unfused), many parameters, dense vs sparse")
