#include "pipeline/adapter/engine.h"

#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "core/errors.h"
#include "core/logging.h"
#include "pipeline/partitioner.h"
#include "adapter/ops/agreement.h"
#include "pipeline/adapter/owner_profile.h"
#include "pipeline/adapter/profile.h"
#include "pipeline/adapter/shape_probe.h"
#include "strata/runtime.h"

namespace strata::pipeline {
namespace {

// Tags of the inference forward: a microbatch number no training step uses.
constexpr int kInferenceMicrobatch = 0xfffffe;
constexpr uint64_t kPingTag = (uint64_t{0x50} << 56) | (uint64_t{2} << 48);

// The link between pipeline ranks 0 and 1, for the simulator's prediction: latency from
// small ping-pongs, bandwidth from 1 MiB ones (medians). Collective over the pipeline group
// (ranks other than 0 and 1 only take part in nothing and return the default).
LinkModel measureLink(Group& group) {
  LinkModel link;
  const int me = group.rank();
  if (me > 1) return link;
  const int peer = 1 - me;
  auto roundTrips = [&](size_t bytes, int count) {
    std::vector<uint8_t> buffer(bytes);
    std::vector<double> rtts;
    for (int i = 0; i < count; ++i) {
      const auto start = std::chrono::steady_clock::now();
      if (me == 0) {
        group.send(buffer.data(), bytes, peer, kPingTag);
        group.recv(buffer.data(), bytes, peer, kPingTag);
      } else {
        group.recv(buffer.data(), bytes, peer, kPingTag);
        group.send(buffer.data(), bytes, peer, kPingTag);
      }
      rtts.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(rtts.begin(), rtts.end());
    return rtts[rtts.size() / 2];
  };
  constexpr size_t kLarge = 1 << 20;
  const double small = roundTrips(8, 21), large = roundTrips(kLarge, 5);
  link.latencySeconds = small / 2;
  const double transfer = large / 2 - link.latencySeconds;
  if (transfer > 0) link.bytesPerSecond = static_cast<double>(kLarge) / transfer;
  return link;
}

}  // namespace

Engine::Engine(std::vector<Layer> layers, std::shared_ptr<torch::nn::Module> model, config::ModelParallelConfig mp,
               int worldRank, int worldSize)
    : layers_(std::move(layers)), model_(std::move(model)), mp_(std::move(mp)) {
  ties_ = sharedParameters(layers_);
  checkConfig(worldRank, worldSize);
}

Engine::Engine(std::shared_ptr<const ModelBuilder> builder, config::ModelParallelConfig mp, int worldRank,
               int worldSize)
    : builder_(std::move(builder)), mp_(std::move(mp)) {
  for (int i = 0; i < builder_->numLayers(); ++i) layers_.push_back({builder_->path(i), torch::nn::AnyModule()});
  ties_ = builder_->ties();
  checkConfig(worldRank, worldSize);
}

Engine::~Engine() = default;

void Engine::checkConfig(int worldRank, int worldSize) {
  const int stages = mp_.partitions * mp_.virtualStages;
  if (stages > static_cast<int>(layers_.size()))
    STRATA_THROW(ConfigError, "/modelparallel/partitions: ", mp_.partitions, " partitions x ", mp_.virtualStages,
                 " virtual stage(s) = ", stages, " stages, but the model has only ", layers_.size(), " layers (",
                 builder_ ? "of the LayerList" : "children of the Sequential", "); every stage needs at least one");
  topology_ = makeTopology(worldSize, mp_.partitions, parsePlacement(mp_.placementStrategy));
  if (topology_.dataParallelSize > 1 && !mp_.ddp)
    STRATA_THROW(ConfigError, "/modelparallel/ddp: false, but the world of ", worldSize, " ranks holds ",
                 topology_.dataParallelSize, " pipelines of ", mp_.partitions,
                 " partitions; set \"ddp\": true or launch ", mp_.partitions, " ranks");
  (void)manualStageOfLayer();  // unknown layer names fail here, on every rank, before any wait
  ppRank_ = topology_.ppRankOf.at(static_cast<size_t>(worldRank));
  dpRank_ = topology_.dpRankOf.at(static_cast<size_t>(worldRank));
  // Every rank creates its pipeline group, then its data-parallel group: a pipeline's
  // members never wait on a data-parallel group before their own pipeline group exists.
  if (topology_.partitions > 1) ppGroup_ = newGroup(topology_.pipelineGroups.at(static_cast<size_t>(dpRank_)));
  if (topology_.dataParallelSize > 1)
    dpGroup_ = newGroup(topology_.dataParallelGroups.at(static_cast<size_t>(ppRank_)));
}

// manual_partition keys name layers ("fc1", "blocks.3") or groups of them ("blocks": every
// layer under it); the most specific key wins.
std::vector<int> Engine::manualStageOfLayer() const {
  if (mp_.autoPartition) return {};
  auto matches = [](const std::string& key, const std::string& layer) {
    return layer == key || (layer.size() > key.size() && layer.compare(0, key.size(), key) == 0 && layer[key.size()] == '.');
  };
  std::vector<std::string> names;
  for (const auto& l : layers_) names.push_back(l.name);
  for (const auto& [name, stage] : mp_.manualPartition)
    if (std::none_of(names.begin(), names.end(), [&, &key = name](const std::string& l) { return matches(key, l); }))
      STRATA_THROW(ConfigError, "/modelparallel/manual_partition/", name, ": the model has no layer named \"", name,
                   "\" (layers: ", c10::Join(", ", names), ")");
  std::vector<int> stageOf;
  for (const auto& l : layers_) {
    int stage = mp_.defaultPartition;
    size_t bestLength = 0;
    for (const auto& [key, value] : mp_.manualPartition)
      if (matches(key, l.name) && key.size() >= bestLength) {
        stage = value;
        bestLength = key.size();
      }
    stageOf.push_back(stage);
  }
  return stageOf;
}

void Engine::makePlan(const torch::Tensor& sampleMicrobatch, Group& world, double optimizerStateFactor) {
  ProfileOptions options;
  options.optimizerStateFactor = mp_.optimizerStateFactor.value_or(optimizerStateFactor);
  options.activationCheckpointing = mp_.activationCheckpointing;
  const LayerProfile measured = profile(sampleMicrobatch, world, options);
  const PlanRequest request = planRequest(world);
  plan_ = planPipeline(measured.costs, request);
  if (!plan_.partition.ok)
    STRATA_THROW(ConfigError, "/modelparallel: no partition of the ", layers_.size(), " layers into ",
                 request.schedule.numStages(), " stages: ", plan_.partition.reason);
  STRATA_CHECK(plan_.simulation.ok, "pipeline: the ", mp_.pipeline, " schedule failed its simulation: ",
               c10::Join("; ", plan_.simulation.errors));
  predictedRankBytes_ = rankStaticBytes(plan_.layers, plan_.partition, mp_.partitions);
  if (world.rank() == 0)
    STRATA_LOG(kInfo, kPipe, "pipeline plan (optimizer state ", options.optimizerStateFactor,
               " x gradient bytes):\n", formatPlan(plan_));

  chunks_.clear();
  for (int c = 0; c < mp_.virtualStages; ++c) {
    const int stage = globalStage(ppRank_, c, mp_.partitions);
    const StagePlan& sp = plan_.partition.stages.at(static_cast<size_t>(stage));
    chunks_.push_back({stage, sp.firstLayer, sp.endLayer});
  }
  if (builder_) buildLocalLayers(world);
  connectTies();
  shapeCache_[sampleMicrobatch.sizes().vec()] = measured.shapes;
  // The last instruction that makes parameter gradients (the data-parallel buckets are
  // armed for it): the last backward, or with a split backward the last W.
  for (const Instruction& in : program().instructions)
    if (in.op == Op::kBackward || in.op == Op::kBackwardWeight) lastBackward_ = {in.chunk, in.microbatch};
  LayerStageSetup setup;
  setup.layers = &layers_;
  setup.chunks = chunks_;
  setup.numStages = request.schedule.numStages();
  setup.activationCheckpointing = mp_.activationCheckpointing;
  setup.splitBackward = request.schedule.kind == ScheduleKind::kZeroBubble;
  stage_ = std::make_unique<LayerStage>(std::move(setup));
  executor_ = std::make_unique<Executor>(*stage_, ExecutorSetup{ppRank_, mp_.partitions, ppGroup_.get()});
}

// Each pipeline rank profiles its provisional block (owner_profile.h). The block is split by
// parameter bytes when the model is built whole, evenly by layer count for a LayerList (not
// built yet).
LayerProfile Engine::profile(const torch::Tensor& sample, Group& world, const ProfileOptions& options) {
  OwnerProfileSetup setup;
  std::vector<size_t> layerBytes;
  for (const Layer& l : layers_) {
    setup.names.push_back(l.name);
    if (!builder_) {
      size_t bytes = 0;
      for (const auto& p : l.module.ptr()->parameters(/*recurse=*/true)) bytes += p.nbytes();
      layerBytes.push_back(bytes);
    }
  }
  profiled_ = provisionalSplit(static_cast<int>(layers_.size()), mp_.partitions, layerBytes)
                  .at(static_cast<size_t>(ppRank_));
  setup.ties = ties_;
  setup.acquire = [this](int i) { return provisionalLayer(i); };
  setup.block = profiled_;
  setup.pipelineGroup = ppGroup_.get();
  setup.ppRank = ppRank_;
  setup.partitions = mp_.partitions;
  setup.firstPipelineWorldRanks = topology_.pipelineGroups.at(0);
  return profileOnOwners(setup, sample, world, options);
}

// A layer of this rank's block: the model's own, or (a LayerList) built on first use and kept
// until the plan says whether this rank owns it.
torch::nn::AnyModule Engine::provisionalLayer(int layer) {
  STRATA_CHECK(profiled_.contains(layer), "pipeline: layer ", layer, " is outside this rank's provisional block ",
               profiled_.begin, "..", profiled_.end - 1);
  if (!builder_) return layers_.at(static_cast<size_t>(layer)).module;
  provisional_.resize(layers_.size());
  torch::nn::AnyModule& slot = provisional_[static_cast<size_t>(layer)];
  if (slot.is_empty()) {
    slot = builder_->build(layer);
    ++layersBuilt_;
  }
  return slot;
}

PlanRequest Engine::planRequest(Group& world) const {
  // The measured link (world rank 0's pipeline decides, like the profile).
  double link[2] = {0, 0};
  if (ppGroup_) {
    const LinkModel measured = measureLink(*ppGroup_);
    link[0] = measured.latencySeconds;
    link[1] = std::isfinite(measured.bytesPerSecond) ? measured.bytesPerSecond : 0;
  }
  world.broadcast(link, 2, DType::kFloat64, 0);
  PlanRequest request;
  request.link.latencySeconds = link[0];
  if (link[1] > 0) request.link.bytesPerSecond = link[1];
  request.schedule.kind = parseScheduleKind(mp_.pipeline);
  request.schedule.partitions = mp_.partitions;
  request.schedule.microbatches = mp_.microbatches;
  request.schedule.virtualStages = mp_.virtualStages;
  request.schedule.activeMicrobatches = mp_.activeMicrobatches.value_or(0);
  request.schedule.dataParallelSize = topology_.dataParallelSize;
  request.schedule.optimizerStep = false;  // the user's DistributedOptimizer::step()
  request.objective = parseObjective(mp_.optimize);
  request.memoryWeight = mp_.memoryWeight;
  if (mp_.memoryCapMb) request.memoryCapBytes = static_cast<size_t>(*mp_.memoryCapMb * 1024 * 1024);
  request.manualStageOfLayer = manualStageOfLayer();
  return request;
}

// A LayerList: this rank's chunks' layers, those profiled here as they are (profiling leaves
// no trace on them; each was built with its own seed), the others built now. The block's
// layers of other ranks are freed here, before any optimizer exists. A factory that throws
// on some rank fails construction on every rank, naming the rank and layer.
void Engine::buildLocalLayers(Group& world) {
  std::vector<torch::nn::AnyModule> built(layers_.size());
  // The block's layers this rank owns are kept; the others are freed first, so they never
  // sit beside the layers built next.
  provisional_.resize(layers_.size());
  for (const ChunkRange& c : chunks_)
    for (int i = c.begin; i < c.end; ++i) built[static_cast<size_t>(i)] = std::move(provisional_[static_cast<size_t>(i)]);
  provisional_.clear();
  std::string error;
  try {
    for (const ChunkRange& c : chunks_)
      for (int i = c.begin; i < c.end; ++i) {
        if (!built[static_cast<size_t>(i)].is_empty()) continue;
        built[static_cast<size_t>(i)] = builder_->build(i);
        ++layersBuilt_;
      }
  } catch (const c10::Error& e) {
    error = e.what_without_backtrace();
  } catch (const std::exception& e) {
    error = e.what();
  }
  adapter::agreeOnError(world, error, "building this rank's layers");
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i].module = built[i];
  model_ = builder_->assemble(built).ptr();
  tieHandles_ = shareTiedTensors(layers_, ties_);
}

void Engine::connectTies() {
  TiedGradientsSetup setup;
  setup.ties = ties_;
  setup.stageOfLayer = plan_.partition.stageOfLayer;
  setup.partitions = mp_.partitions;
  setup.ppRank = ppRank_;
  for (const ChunkRange& c : chunks_) setup.chunkStage.push_back(c.globalStage);
  setup.layers = &layers_;
  setup.worldRankOfPpRank = topology_.pipelineGroups.at(static_cast<size_t>(dpRank_));
  setup.broadcastInitialValues = builder_ != nullptr;
  tiedGradients_ = std::make_unique<TiedGradients>(std::move(setup));
  if (tiedGradients_->empty()) tiedGradients_.reset();
}

std::vector<std::pair<std::string, torch::Tensor>> Engine::localParameters() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const ChunkRange& c : chunks_)
    for (auto& p : namedParameters(layers_, c.begin, c.end)) out.push_back(std::move(p));
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> Engine::localBuffers() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const ChunkRange& c : chunks_)
    for (auto& b : namedBuffers(layers_, c.begin, c.end)) out.push_back(std::move(b));
  return out;
}

const std::vector<TensorShape>& Engine::shapesFor(const torch::Tensor& input) {
  const std::vector<int64_t> key = input.sizes().vec();
  auto it = shapeCache_.find(key);
  if (it == shapeCache_.end()) {
    ShapeProbe probe{&layers_, model_.get(), chunks_, ppGroup_.get(), ppRank_, mp_.partitions};
    it = shapeCache_.emplace(key, probe.run(input)).first;
  }
  return it->second;
}

StepReport Engine::step(StepInputs inputs) {
  STRATA_CHECK(planned(), "pipeline: step before the plan was made");
  const int64_t micro = inputs.data.size(0) / inputs.microbatches;
  inputs.layerShapes = shapesFor(inputs.data.narrow(0, 0, micro));
  if (!tiedGradients_) return executor_->run(program(), inputs);
  // Tied tensors across stages: contributions around every backward, the sum at the end.
  tiedGradients_->beginStep(inputs.microbatches);
  auto before = std::move(inputs.beforeBackward);
  inputs.beforeBackward = [this, before](int chunk, int microbatch) {
    tiedGradients_->beforeBackward(chunk, microbatch);
    if (before) before(chunk, microbatch);
  };
  inputs.afterBackward = [this](int chunk, int microbatch) { tiedGradients_->afterBackward(chunk, microbatch); };
  StepReport report = executor_->run(program(), inputs);
  tiedGradients_->finishStep();
  return report;
}

torch::Tensor Engine::inference(const torch::Tensor& input) {
  STRATA_CHECK(planned(), "pipeline: inference before the plan was made");
  torch::NoGradGuard noGrad;
  const std::vector<TensorShape> shapes = shapesFor(input);
  const int p = mp_.partitions, stages = p * mp_.virtualStages;
  torch::Tensor x;
  std::vector<std::pair<std::shared_ptr<Work>, torch::Tensor>> sends;
  for (int s = 0; s < stages; ++s) {
    const int owner = s % p;
    if (owner != ppRank_) continue;
    const ChunkRange& c = chunks_.at(static_cast<size_t>(s / p));
    const int prev = (s - 1 + p) % p;
    if (s == 0) {
      x = input;
    } else if (prev != ppRank_) {
      x = shapes.at(static_cast<size_t>(c.begin - 1)).empty(input.size(0));
      ppGroup_->recv(x.data_ptr(), x.nbytes(), prev, messageTag(false, kInferenceMicrobatch, s));
    }  // else: x is the previous chunk's output on this rank
    x = runLayers(layers_, c.begin, c.end, x, nullptr).contiguous();
    const int next = (s + 1) % p;
    if (s + 1 < stages && next != ppRank_)
      sends.emplace_back(ppGroup_->isend(x.data_ptr(), x.nbytes(), next, messageTag(false, kInferenceMicrobatch, s + 1)),
                         x);
  }
  for (auto& s : sends) s.first->wait();
  if (p == 1) return x;
  const int root = (stages - 1) % p;
  if (ppRank_ != root) x = shapes.back().empty(input.size(0));
  ppGroup_->broadcast(x.data_ptr(), x.nbytes(), DType::kUInt8, root);
  return x;
}

std::vector<torch::Tensor> Engine::shareOutputs(std::vector<torch::Tensor> outputs) {
  if (topology_.partitions == 1) return outputs;
  const int root = lastStageRank();
  // Header: per output its dtype, rank and sizes; then all payloads back to back.
  std::vector<int64_t> header;
  if (ppRank_ == root)
    for (const auto& t : outputs) {
      header.push_back(static_cast<int64_t>(t.scalar_type()));
      header.push_back(t.dim());
      for (int64_t d : t.sizes()) header.push_back(d);
    }
  int64_t length = static_cast<int64_t>(header.size());
  ppGroup_->broadcast(&length, 1, DType::kInt64, root);
  header.resize(static_cast<size_t>(length));
  ppGroup_->broadcast(header.data(), header.size(), DType::kInt64, root);
  if (ppRank_ != root) {
    outputs.clear();
    for (size_t i = 0; i < header.size();) {
      const auto dtype = static_cast<c10::ScalarType>(header[i]);
      const auto dims = static_cast<size_t>(header[i + 1]);
      std::vector<int64_t> sizes(header.begin() + static_cast<std::ptrdiff_t>(i + 2),
                                 header.begin() + static_cast<std::ptrdiff_t>(i + 2 + dims));
      outputs.push_back(torch::empty(sizes, torch::TensorOptions().dtype(dtype)));
      i += 2 + dims;
    }
  }
  int64_t total = 0;
  for (auto& t : outputs) {
    t = t.contiguous();
    total += static_cast<int64_t>(t.nbytes());
  }
  torch::Tensor payload = torch::empty({total}, torch::kUInt8);
  int64_t offset = 0;
  if (ppRank_ == root)
    for (const auto& t : outputs) {
      std::memcpy(static_cast<uint8_t*>(payload.data_ptr()) + offset, t.data_ptr(), t.nbytes());
      offset += static_cast<int64_t>(t.nbytes());
    }
  ppGroup_->broadcast(payload.data_ptr(), static_cast<size_t>(total), DType::kUInt8, root);
  offset = 0;
  if (ppRank_ != root)
    for (auto& t : outputs) {
      std::memcpy(t.data_ptr(), static_cast<uint8_t*>(payload.data_ptr()) + offset, t.nbytes());
      offset += static_cast<int64_t>(t.nbytes());
    }
  return outputs;
}

}  // namespace strata::pipeline
