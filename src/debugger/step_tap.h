// A tap on what the debugger hook saves, for a consumer in the same process (the online rule
// engine, rules/step_feed.h): the hook hands over each tensor it saves (sharing its bytes with
// the writer: no copy), each scalar, and the step boundaries, as they happen. The files stay
// the record; the tap only spares the consumer from waiting for them.
//
// Threading: the hook calls a tap from the training thread, under the hook's mutex, so a tap
// must not block, throw or call back into the hook. setStepTap()/stepTap() are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "debugger/collections.h"
#include "debugger/trial_writer.h"
#include "debugger/types.h"

namespace strata::debugger {

class StepTap {
 public:
  virtual ~StepTap() = default;
  // The hook's effective collections, once, before anything else.
  virtual void collections(const std::vector<Collection>& collections) = 0;
  // A step that will reach the files: a due step, or one a scalar was saved in. `due`: some
  // collection was due (the writer then marks the step even when it ends without tensors).
  virtual void stepBegin(int64_t globalStep, Mode mode, int64_t modeStep, bool due) = 0;
  // A tensor of the open step, with what the writer does with it (raw, reductions). `bytes`
  // stays valid while the tap holds its copy of the shared pointer.
  virtual void tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                      const TensorBytes& bytes, const TensorPlan& plan) = 0;
  // A user scalar of the open step (written as "scalar/<name>").
  virtual void scalar(const std::string& name, double value) = 0;
  // Every step handed over so far is complete: the hook began the next step or flushed, or
  // the runtime reached a step boundary (strata::should_stop()).
  virtual void stepsComplete() = 0;
};

// The process's tap; hooks created afterwards hand their data to it (nullptr: none).
void setStepTap(std::shared_ptr<StepTap> tap);
std::shared_ptr<StepTap> stepTap();

}  // namespace strata::debugger
