#!/bin/bash
# A/B per round: 1 rank (1 thread), 2 ranks unsharded, 2 ranks --sharding host (mlp25m)
cd /work/main
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
B=build/bench/scaling_bench
M=${MODEL:-mlp25m}
for r in $(seq 1 ${ROUNDS:-4}); do
  one=$(mpirun -np 1 $B --model $M --steps 15 --batch 32 --threads 1 | grep ^scaling)
  two=$(mpirun -np 2 $B --model $M --steps 15 --batch 32 --threads 1 | grep ^scaling)
  hst=$(mpirun -np 2 $B --model $M --steps 15 --batch 32 --threads 1 --sharding host | grep ^scaling)
  s1=$(echo "$one" | sed -nE 's/.*samples_per_s=([0-9.]+).*/\1/p')
  s2=$(echo "$two" | sed -nE 's/.*samples_per_s=([0-9.]+).*/\1/p')
  s3=$(echo "$hst" | sed -nE 's/.*samples_per_s=([0-9.]+).*/\1/p')
  echo "$one"; echo "$two"; echo "$hst"
  echo "round $r eff none $(echo "$s2/(2*$s1)" | bc -l | cut -c1-5) host $(echo "$s3/(2*$s1)" | bc -l | cut -c1-5)"
done
