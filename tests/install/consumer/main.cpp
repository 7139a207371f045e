// A program outside the Strata tree: find_package(strata) and strata::strata.
#include <strata/group.h>
#include <strata/runtime.h>
#include <cstdio>
int main(int argc, char** argv) {
  strata::init(argc, argv);
  int x = strata::rank() + 1;
  strata::world().allreduce(&x, &x, 1, strata::DType::kInt32);
  std::printf("rank %d of %d: sum %d\n", strata::rank(), strata::size(), x);
  strata::finalize();
}
