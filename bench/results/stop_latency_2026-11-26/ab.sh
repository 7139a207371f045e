#!/bin/bash
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 CI=1
for i in 1 2 3; do
  for which in main obs; do
    if [ $which = main ]; then BIN=$MAIN_BUILD/examples/fashion_mnist; else BIN=$OBS_BUILD/examples/fashion_mnist; fi
    rm -rf /tmp/obs_perf/run
    mpirun -n 2 $BIN --config /tmp/obs_perf/dp.json --seed 3 --lr 1000 --max-steps 2000 > /tmp/obs_perf/ab_$which$i.log 2>&1
    python3 -c "
import json; j=json.load(open('/tmp/obs_perf/run/rule-output/online/worker_0.json'))
print('$which', $i, 'load', open('/proc/loadavg').read().split()[0], 'steps', j['steps_evaluated'], 'us/step %.1f'%j['engine_cpu_per_step_us'], 'max %.1f'%j['engine_cpu_max_step_us'], 'total_us %.0f'%(j['engine_cpu_s']*1e6))"
  done
done
