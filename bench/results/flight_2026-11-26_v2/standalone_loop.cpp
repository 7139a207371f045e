// The record+finish loop of bench/flight_bench.cpp (own lane, coarse clock, thread CPU time),
// alone in one process, built twice against collectives/flight_recorder.{h,cpp}: the
// parent commit's (47e059d, "old") and this branch's ("new"), so before and after run back to
// back under the same load (standalone_loop.txt). Built with
//   mpicxx -std=c++17 -O2 -g -I<tree> -I<tree>/include -I<tree>/src -I<build>/generated \
//     standalone_loop.cpp <tree>/collectives/flight_recorder.cpp -o rb <build>/libstrata_core.a -lc10
#include "collectives/flight_recorder.h"
#include <cstdio>
namespace flight = strata::collectives::flight;
static double cpu(){timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(){
  flight::Recorder rec(2000); const uint32_t lane=rec.acquireLane();
  flight::OpInfo info; info.op=flight::Op::kAllReduce; info.dtype=strata::DType::kFloat32; info.count=1024; info.numBytes=4096;
  const int N=2000000;
  for(int r=0;r<5;r++){ double t0=cpu(); for(int i=0;i<N;i++){info.seq=i; rec.finish(rec.record(info,flight::State::kStarted,lane),true);} printf("%.2f ns\n",(cpu()-t0)/N);}
  auto s=rec.snapshot(); printf("entries %zu last seq %lu state %d\n", s.entries.size(), s.entries.back().info.seq, (int)s.entries.back().state);
}
