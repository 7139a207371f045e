#include "rules/report/rule_texts.h"

#include <map>

namespace strata::rules::report {

const RuleText& ruleText(const std::string& rule) {
  static const std::map<std::string, RuleText> kTexts = {
      {"CPUBottleneck",
       {"Share of system snapshots in which a GPU was nearly idle while a CPU core was saturated.",
        "The CPU cannot feed the GPUs: move preprocessing off the training loop (more data-loader workers, "
        "precomputed features) or onto the GPU, or use an instance with more cores per GPU."}},
      {"IOBottleneck",
       {"Share of system snapshots in which a GPU was nearly idle while the CPUs were waiting on I/O.",
        "Storage is too slow for the input pipeline: prefetch, cache the data set locally, or use larger, "
        "sequentially read files."}},
      {"LowGPUUtilization",
       {"GPUs whose 95th-percentile utilisation over the last samples stayed low, or swung between busy and idle.",
        "Increase the batch size, fix stalls between steps (data loading, synchronisation), or use fewer or "
        "smaller GPUs."}},
      {"GPUMemoryIncrease",
       {"A rise in GPU memory utilisation between consecutive windows of samples.",
        "Look for tensors kept across steps (losses accumulated with their graph, growing caches); if the "
        "growth is expected, make sure the peak fits the device."}},
      {"BatchSize",
       {"CPU, GPU and GPU memory utilisation all low at the same time.",
        "The GPUs have room: increase the batch size (scaling the learning rate), or train on a smaller instance."}},
      {"LoadBalancing",
       {"How differently GPUs are utilised, and how step time, compute time and waiting differ across ranks.",
        "Rebalance the work: for pipelines move layers from the slowest stage to its neighbours "
        "(modelparallel.partitions, manual_partition), for data parallelism check uneven shards or slower hosts."}},
      {"MaxInitializationTime",
       {"Time from the job start to the first training step.",
        "Speed up start-up: load checkpoints and data sets lazily, cache downloads, check for stuck rendezvous."}},
      {"StepOutlier",
       {"Steps longer than the mean plus stddev standard deviations of their series.",
        "Look at what the slow steps do (evaluation, checkpointing, garbage collection, data stalls); spread "
        "periodic work or make it asynchronous."}},
      {"Dataloader",
       {"How many data-loading processes run in parallel compared with the CPU cores.",
        "Set the number of loader workers close to the cores available per GPU; too few starve the GPUs, too "
        "many compete with the training process."}},
      {"OverallSystemUsage", {"Utilisation statistics per node.", ""}},
      {"OverallFrameworkMetrics", {"Where the training loop spends its time.", ""}},
      {"LossNotDecreasing",
       {"The loss compared with the loss num_steps earlier.",
        "Check the learning rate (too high or too low), the data pipeline (shuffling, labels) and the loss itself."}},
      {"Overfit",
       {"Validation loss compared with training loss.",
        "Regularise (dropout, weight decay, augmentation), get more data, or stop earlier."}},
      {"Overtraining",
       {"Steps without improvement of the training or validation loss.", "Stop training earlier or lower the learning rate."}},
      {"StalledTrainingRule", {"Time since the last tensor was written.", "Look for a hung rank, a dead data loader or a deadlock."}},
      {"VanishingGradient",
       {"Gradients whose mean absolute value is tiny.",
        "Use a better initialisation, normalisation layers, residual connections or another activation."}},
      {"ExplodingTensor",
       {"NaN or infinite values in tensors.",
        "Lower the learning rate, clip gradients, check for divisions by zero and logs of zero, use loss scaling "
        "with mixed precision."}},
      {"WeightUpdateRatio",
       {"The size of each weight update relative to the weight.",
        "Ratios near 1e-3 are healthy; much larger updates mean an unstable learning rate, tiny ones a stalled layer."}},
      {"AllZero", {"Tensors whose values are (mostly) zero.", "Check the layer's inputs, its initialisation and dead activations."}},
      {"UnchangedTensor", {"Tensors that do not change across steps.", "Check that the parameters are trained (requires_grad, optimizer groups)."}},
      {"TensorVariance", {"Tensor variances outside the given bounds.", "Check initialisation and normalisation."}},
      {"DeadRelu", {"ReLU layers with mostly inactive units.", "Lower the learning rate, use a leaky activation or better initialisation."}},
      {"SaturatedActivation", {"tanh/sigmoid layers whose inputs sit in the flat tails.", "Normalise the inputs or scale the initialisation down."}},
      {"PoorWeightInitialization",
       {"Activation variances across layers, gradient spread and early loss progress.",
        "Use a variance-preserving initialisation (Xavier/Kaiming) for the activation used."}},
      {"ClassImbalance", {"Class frequencies and per-class misprediction.", "Resample or weight the classes."}},
      {"Confusion", {"The confusion matrix of labels and predictions.", "Inspect the confused classes and their data."}},
  };
  static const RuleText kUnknown{"A custom rule.", ""};
  auto it = kTexts.find(rule);
  return it == kTexts.end() ? kUnknown : it->second;
}

}  // namespace strata::rules::report
