#!/bin/bash
# A/B: base 1 rank vs 2 ranks normal vs 2 ranks with experiment env
cd /work/main
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
B=build/bench/scaling_bench
for r in $(seq 1 ${ROUNDS:-4}); do
  one=$(mpirun -np 1 $B --model mlp25m --steps 15 --batch 32 --threads 1 | grep ^scaling)
  two=$(mpirun -np 2 $B --model mlp25m --steps 15 --batch 32 --threads 1 | grep ^scaling)
  exp=$(mpirun -np 2 $EXPENV $B --model mlp25m --steps 15 --batch 32 --threads 1 | grep ^scaling)
  s1=$(echo "$one" | sed -nE 's/.*samples_per_s=([0-9.]+).*/\1/p')
  s2=$(echo "$two" | sed -nE 's/.*samples_per_s=([0-9.]+).*/\1/p')
  s3=$(echo "$exp" | sed -nE 's/.*samples_per_s=([0-9.]+).*/\1/p')
  echo "$one"; echo "$two"; echo "$exp"
  echo "round $r eff normal $(echo "$s2/(2*$s1)" | bc -l | cut -c1-5) exp $(echo "$s3/(2*$s1)" | bc -l | cut -c1-5)"
done
