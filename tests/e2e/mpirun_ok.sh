#!/usr/bin/env bash
# mpirun_ok.sh MPIRUN ARGS... — runs an e2e program under mpirun and passes its
# output and exit status through, with one exception: Open MPI 4.x's launcher
# sometimes reports a rank "with PID 0 ... exiting improperly" after every rank
# has finished and called MPI_Finalize, and exits non-zero (a race in its
# runtime, open-mpi/ompi#7833 and #12607; seen here under load, about once in
# a few thousand launches). That case passes only when every one of the -np
# ranks printed its checks' summary with 0 failed (tests/check.h), which each
# rank prints after its last check and before finalizing; anything else
# keeps mpirun's status.
set -uo pipefail
np=1
for ((i = 1; i <= $#; i++)); do
  [ "${!i}" = -np ] && { j=$((i + 1)); np=${!j}; }
done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
if [ "$rc" != 0 ] && grep -q "with PID 0 on" "$out" && grep -q "exiting improperly" "$out" &&
   ! grep -Eq "checks, [1-9][0-9]* failed" "$out" && [ "$(grep -c "checks, 0 failed" "$out")" -ge "$np" ]; then
  echo "mpirun_ok.sh: all $np ranks passed their checks; mpirun's 'PID 0 exiting improperly' after" \
       "finalize is Open MPI's launcher race (open-mpi/ompi#7833), not this program's: passing"
  exit 0
fi
exit "$rc"
