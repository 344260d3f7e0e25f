# tests/mpi_env.cmake — read by ctest before it runs the tests (tests/CMakeLists.txt:
# TEST_INCLUDE_FILES), so every test's Open MPI launches (mpirun, and a singleton MPI_Init)
# get these MCA settings; one the caller's environment already sets is left alone.
#  - odls_base_sigkill_timeout 0: after a rank's non-zero exit mpirun ends the job's other
#    ranks with SIGTERM and, by default, 1 s later SIGKILL, waiting out that second even when
#    every rank has already exited. The expected failures (bad inputs, refused checkpoints,
#    dead and hung peers; some 40 launches in each of make test and make asan) waited it out
#    each time: mpirun -np 2 of a program that returns 2 after MPI_Finalize took 1.7 s, 0.6 s
#    with 0 (a load of 40 on 2 cores; 0.6 s when it returns 0 either way).
#  - pml ob1 over the self and vader BTLs: what Open MPI 4.1 selects on one node anyway
#    (--mca pml_base_verbose 10: "selected ob1", "Using vader btl"), without opening and
#    probing the others first (tcp, ofi, openib, ucx).
#  - mpi_yield_when_idle 1: a rank waiting for a message yields the core instead of spinning on
#    it, as Open MPI does by itself when one job oversubscribes the node; here ctest runs a job
#    beside another test (PROCESSORS 1 for the launch-bound MPI tests), which it cannot see.
foreach(kv odls_base_sigkill_timeout=0 pml=ob1 btl=self,vader mpi_yield_when_idle=1)
  string(REPLACE "=" ";" kv "${kv}")
  list(GET kv 0 k)
  list(GET kv 1 v)
  if(NOT DEFINED ENV{OMPI_MCA_${k}})
    set(ENV{OMPI_MCA_${k}} "${v}")
  endif()
endforeach()
