#!/bin/bash
# A/B per round (mlp25m, 15 steps, batch 32, 1 thread): 1 rank; 2 ranks unsharded and
# host-shared, each with the buckets' reduction overlapped with backward (as shipped) and
# launched only after backward (STRATA_EXP_NO_OVERLAP=1, a temporary patch).
cd /work/main
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
B=build/bench/scaling_bench
M=${MODEL:-mlp25m}
sps() { sed -nE 's/.*samples_per_s=([0-9.]+).*/\1/p'; }
for r in $(seq 1 ${ROUNDS:-4}); do
  one=$(mpirun -np 1 $B --model $M --steps 15 --batch 32 --threads 1 | grep ^scaling)
  a=$(mpirun -np 2 $B --model $M --steps 15 --batch 32 --threads 1 | grep ^scaling)
  b=$(mpirun -np 2 -x STRATA_EXP_NO_OVERLAP=1 $B --model $M --steps 15 --batch 32 --threads 1 | grep ^scaling)
  c=$(mpirun -np 2 $B --model $M --steps 15 --batch 32 --threads 1 --sharding host | grep ^scaling)
  d=$(mpirun -np 2 -x STRATA_EXP_NO_OVERLAP=1 $B --model $M --steps 15 --batch 32 --threads 1 --sharding host | grep ^scaling)
  s1=$(echo "$one" | sps)
  echo "$one"; echo "none overlap: $a"; echo "none after: $b"; echo "host overlap: $c"; echo "host after: $d"
  e() { echo "$1/(2*$s1)" | bc -l | cut -c1-5; }
  echo "round $r eff none overlap $(e $(echo "$a" | sps)) after $(e $(echo "$b" | sps)) | host overlap $(e $(echo "$c" | sps)) after $(e $(echo "$d" | sps))"
done
