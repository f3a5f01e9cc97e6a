# Sourced by the tests that launch mpirun: the environment Open MPI needs here and the
# command line, as the array `mpi`. Loopback only, shared memory without the kernel's
# cross-memory attach (containers); as root. Under ASan only Open MPI's own allocations
# that outlive MPI_Finalize are suppressed, and its components stay loaded so that the
# suppressions can name them.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0"
export OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1
mpi=(mpirun --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none
     -x LSAN_OPTIONS -x OMPI_MCA_mca_base_component_disable_dlclose -x PMIX_MCA_mca_base_component_disable_dlclose)
