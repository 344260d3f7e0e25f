#!/usr/bin/env bash
# tests/gpu/check_bundle.sh BUILD DIR — the first-GPU-run kit, checked where
# no GPU is: tests/gpu/bundle.sh makes its bundle in DIR from BUILD (and
# builds it once with nvcc, as build_there.sh does on the lent machine), then
# run.sh runs every stage here. Without a GPU the stages that need one fail,
# but each must fail on the missing GPU, not on the kit itself: the probe,
# the build and the library check pass, and no stage's log says a command
# of run.sh's was not found (run under `timeout`, a shell function is not a
# program: the first lent GPU found that).
set -uo pipefail
BUILD=$1 DIR=$2
rm -rf "$DIR"
# a smaller kit (one step program of each model) built once, by run.sh
BUILD=$BUILD KIT_STEPS="g124m_bf16 tinyllama_bf16" BUNDLE_TRIAL=0 bash "$(dirname "$0")/bundle.sh" "$DIR" > "$DIR.bundle.log" 2>&1 ||
  { cat "$DIR.bundle.log"; echo "check_bundle.sh: bundle.sh failed"; exit 1; }
RUN=$DIR/run
(cd "$DIR" && RUN_BUDGET=300 bash run.sh . "$RUN") > "$DIR.run.log" 2>&1
bad=0
for s in probe build ldd; do
  grep -Eq "^$s +ok" "$RUN/summary.txt" || { echo "check_bundle.sh: stage $s did not pass:"; cat "$RUN/$s.log"; bad=1; }
done
for s in kernels tiny steps calibrate sanitizer profile; do
  grep -Eq "^$s " "$RUN/summary.txt" || { echo "check_bundle.sh: stage $s did not run"; bad=1; }
done
# (nvidia-smi is the machine's, not the kit's: the probe prints its absence)
pat="failed to run command|[a-z_]+: command not found|No such file or directory"
if grep -E "$pat" "$RUN"/*.log | grep -v "nvidia-smi"; then
  echo "check_bundle.sh: a stage could not start a command of the kit (above):"
  bad=1
fi
cat "$RUN/summary.txt"
[ $bad -eq 0 ] && echo "check_bundle.sh: the kit builds and every stage starts"
exit $bad
