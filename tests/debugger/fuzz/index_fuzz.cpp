// libFuzzer target: the index and collections JSON parsers and the file-name parsers on
// arbitrary text. Built by build_fuzzers.sh.
#include <cstddef>
#include <cstdint>
#include <string>

#include "debugger/naming.h"
#include "debugger/trial_files.h"

using namespace strata::debugger;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string error;
  IndexFile index;
  if (parseIndexFile(text, &index, &error)) (void)indexFileJson(index);
  CollectionsFile collections;
  (void)parseCollectionsFile(text, &collections, &error);
  int64_t step = 0;
  std::string worker, base;
  (void)parseStepFileName(text, &step, &worker);
  (void)parseCollectionsFileName(text, &worker);
  Reduction r;
  (void)parseReductionTensorName(text, &base, &r);
  return 0;
}
