#!/usr/bin/env bash
# A/B: 2 independent pinned 1-rank CNN runs vs the 2-rank DP run, alternating; prints compute/step.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
B=/work/main/build/bench/scaling_bench; STEPS=${STEPS:-600}
cd /tmp
for r in $(seq 1 ${ROUNDS:-3}); do
  d0=$(mktemp -d); d1=$(mktemp -d)
  (cd $d0 && taskset -c 0 $B --model cnn --steps $STEPS --batch 32 --threads 1 | grep ^scaling | sed 's/^/ind0 /') &
  (cd $d1 && taskset -c 1 $B --model cnn --steps $STEPS --batch 32 --threads 1 | grep ^scaling | sed 's/^/ind1 /') &
  wait
  for extra in "$@"; do :; done
  env $DPENV mpirun -np 2 $B --model cnn --steps $STEPS --batch 32 | grep ^scaling | sed 's/^/dp   /'
  [ -n "$DPENV2" ] && env $DPENV2 mpirun -np 2 $B --model cnn --steps $STEPS --batch 32 | grep ^scaling | sed 's/^/dp2  /'
done | awk '{ for (i=1;i<=NF;i++) if ($i ~ /^(step_ms|compute_ms|exposed_comm_ms|samples_per_s)=/) printf "%s ", $i; print "", $1 }'
