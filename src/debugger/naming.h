// Tensor names, worker names and file paths of an smdebug trial (specs/smdebug.md §1.1,
// §1.6, §1.8). Names follow smdebug's PyTorch hook so the default collection regexes and
// the rules' defaults (".*relu_output", "losses") match without configuration:
//
//   parameter       <TopClass>_<param path>            Net_fc1.weight, Sequential_0.bias
//   gradient        gradient/<TopClass>_<param path>   gradient/Net_fc1.weight
//   module output   <module path>_output_<i>           fc1_output_0, layer1.0.relu_output_0
//   module input    <module path>_input_<i>            fc1_input_0
//   top module      <TopClass>_output_<i>              Net_output_0
//   loss            <LossClass>_output_0               CrossEntropyLoss_output_0
//   user scalar     scalar/<name>                      scalar/val_accuracy
//   reduction       smdebug/reductions/[abs_]<op>/<tensor>
//
// Module paths are those of named_modules()/named_parameters() ("fc1", "layer1.0.conv1",
// "0" for a Sequential child). Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "debugger/reductions.h"

namespace strata::debugger {

inline constexpr char kGradientPrefix[] = "gradient/";
inline constexpr char kScalarPrefix[] = "scalar/";
inline constexpr char kReductionPrefix[] = "smdebug/reductions/";
// Written by a rank that saved nothing else at a due step, so that the step counts as
// complete across workers (specs/smdebug.md §1.7, §8.6). One int64 element: the mode step.
inline constexpr char kStepMarkerTensor[] = "strata/step_marker";

// The class name smdebug uses for a module (Python's Module._get_name()) from libtorch's
// Module::name(): namespaces are dropped and a TORCH_MODULE "Impl" suffix removed:
// "torch::nn::Sequential" -> "Sequential", "NetImpl" -> "Net", "ns::MyNetImpl" -> "MyNet".
std::string moduleClassName(const std::string& torchModuleName);

std::string parameterTensorName(const std::string& topClass, const std::string& paramPath);
std::string gradientTensorName(const std::string& topClass, const std::string& paramPath);
std::string moduleOutputTensorName(const std::string& modulePath, int index);
std::string moduleInputTensorName(const std::string& modulePath, int index);
std::string lossTensorName(const std::string& lossClass);  // "<lossClass>_output_0"
std::string scalarTensorName(const std::string& name);     // "scalar/<name>"

// "smdebug/reductions/[abs_]<op>/<name>", with TensorFlow-style ":N" suffixes removed.
std::string reductionTensorName(const std::string& tensorName, const Reduction& r);
// Splits a reduction tensor name; false when `name` is not one (or names an unknown op).
bool parseReductionTensorName(const std::string& name, std::string* tensorName, Reduction* r);

// "worker_<rank>", what smdebug's PyTorch hook names torch.distributed ranks.
std::string workerNameForRank(int rank);
// Usable in file names: non-empty, [A-Za-z0-9_.-] only, no "__" (smdebug's reader turns a
// name with "__" into a TF device name).
bool isValidWorkerName(const std::string& worker);

// Paths relative to the trial directory.
std::string eventFileRelPath(int64_t step, const std::string& worker);
std::string indexFileRelPath(int64_t step, const std::string& worker);
std::string collectionsFileRelPath(const std::string& worker);
inline constexpr char kEventsDir[] = "events";
inline constexpr char kIndexDir[] = "index";
inline constexpr char kCollectionsDir[] = "collections/000000000";
inline constexpr char kEndOfJobFile[] = "training_job_end.ts";
inline constexpr char kTensorboardDir[] = "tensorboard";
// Files are written as <path>.tmp and renamed into place (smdebug's SMDEBUG_TEMP_PATH_SUFFIX).
inline constexpr char kTempSuffix[] = ".tmp";

// Parses "<step>_<worker>.<ext>" (an index or event file's base name): smdebug's
// r".+/\d+_(.+)\.(json|csv|tfevents)$" plus int(basename.split("_")[0]).
bool parseStepFileName(const std::string& baseName, int64_t* step, std::string* worker);
// Parses "<worker>_collections.json"; false for other names.
bool parseCollectionsFileName(const std::string& baseName, std::string* worker);

}  // namespace strata::debugger
