// The CPUs this process may run on, as the launcher's binding (mpirun --bind-to, taskset)
// leaves them. Used to size intra-op threads and to tell whether local ranks share cores.
#pragma once

#include <sched.h>

namespace strata {

// The caller's affinity mask (all online CPUs when it cannot be read).
cpu_set_t ownCpus();

// CPU_COUNT(ownCpus()), at least 1.
int ownCpuCount();

}  // namespace strata
