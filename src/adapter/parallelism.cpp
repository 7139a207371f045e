// The one place that decides how a model trains (parallelism.h).
#include "adapter/parallelism.h"

#include "core/errors.h"
#include "pipeline/adapter/layer_list_model.h"
#include "pipeline/adapter/layers.h"
#include "runtime/runtime_internal.h"
#include "strata/runtime.h"

namespace strata::adapter {
namespace {

config::ModelParallelConfig modelParallelConfig(const DistributedModelOptions& options) {
  if (options.modelParallel.empty()) return runtime::jobConfig().modelParallel;
  return config::parseJobConfig("{\"modelparallel\": " + options.modelParallel + "}",
                                "DistributedModelOptions::modelParallel")
      .modelParallel;
}

}  // namespace

DistributedModelOptions resolvedOptions(DistributedModelOptions options) {
  const config::JobConfig& cfg = runtime::jobConfig();
  if (options.bucketCapMb <= 0) options.bucketCapMb = cfg.dataParallel.bucketCapMb;
  if (options.gradientDtype.empty()) options.gradientDtype = cfg.dataParallel.gradientDtype;
  return options;
}

std::unique_ptr<Parallelism> chooseParallelism(ModelSource source, const DistributedModelOptions& options) {
  const config::ModelParallelConfig mp = modelParallelConfig(options);
  if (!mp.enabled) return makeDataParallel(std::move(source), options);
  STRATA_CHECK_WITH(ConfigError, source.sequential != nullptr, "/modelparallel/enabled: ",
                    pipeline::notASequentialMessage(*source.module));
  return makePipelineParallel(std::move(source), mp, options);
}

std::unique_ptr<Parallelism> chooseParallelism(const LayerList& layers, const torch::Tensor& exampleBatch,
                                               const DistributedModelOptions& options) {
  const config::ModelParallelConfig mp = modelParallelConfig(options);
  if (mp.enabled) return makeLayerListPipeline(layers, exampleBatch, mp, options);
  // Every layer, in one process or on every data-parallel rank.
  auto builder = std::make_shared<pipeline::ModelBuilder>(layers, worldModelSeed(world()));
  WholeModel whole = buildWholeModel(*builder, options.group ? *options.group : world());
  ModelSource source;
  source.module = whole.root.ptr();
  source.forward = [root = whole.root.ptr()](const torch::Tensor& x) { return root->forward(x); };
  source.forwardIsModulesOwn = true;
  source.sequential = &whole.root;
  source.tieHandles = std::move(whole.tieHandles);
  return makeDataParallel(std::move(source), options);
}

}  // namespace strata::adapter
