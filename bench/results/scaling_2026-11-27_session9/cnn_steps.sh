#!/usr/bin/env bash
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
B=/work/main/build/bench/scaling_bench; cd /tmp
sps() { sed -nE 's/.*samples_per_s=([0-9.]+).*/\1/p'; }
for r in $(seq 1 ${ROUNDS:-4}); do
  for S in ${STEPSLIST:-15 300}; do
    b=$(mpirun -np 1 $B --model cnn --steps $S --batch 32 --threads 1 | grep ^scaling | sps)
    d=$(mpirun -np 2 $B --model cnn --steps $S --batch 32 | grep ^scaling | sps)
    awk -v b=$b -v d=$d -v s=$S -v r=$r 'BEGIN { printf "round %d steps %4d base %8.1f dp %8.1f eff %.3f\n", r, s, b, d, d / (2 * b) }'
  done
done
