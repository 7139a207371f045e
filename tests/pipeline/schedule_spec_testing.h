// The schedule spec the pipeline planning tests build their programs from.
#pragma once

#include "pipeline/schedule.h"

namespace strata::pipeline {

// p ranks, m microbatches, one chunk per rank; cap = active_microbatches (0: the default).
inline ScheduleSpec spec(ScheduleKind kind, int p, int m, int cap = 0) {
  ScheduleSpec s;
  s.kind = kind;
  s.partitions = p;
  s.microbatches = m;
  s.activeMicrobatches = cap;
  return s;
}

}  // namespace strata::pipeline
