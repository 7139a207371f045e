// The debugger (tensor) rules' parameters (specs/smdebug.md §3.2): names are SageMaker's
// (rulesconfig and the AWS "List of Debugger built-in rules" page, newer copy where the two
// differ); defaults are the ones the rules in this folder use. Strata additions say so.
#include "rules/declarations.h"

namespace strata::rules {
namespace {

using K = ParamKind;

const ParamDecl kCollectionNames{"collection_names", K::kString, nullptr};
const ParamDecl kTensorRegex{"tensor_regex", K::kRegex, nullptr};

}  // namespace

std::vector<RuleDecl> trainingRuleDecls() {
  return {
      tensorRuleDecl("VanishingGradient", {{"threshold", K::kNonNegative, 1e-7}}),
      tensorRuleDecl("ExplodingTensor",
                     {kCollectionNames, kTensorRegex, {"only_nan", K::kBool, false}}),
      tensorRuleDecl("AllZero", {kCollectionNames, kTensorRegex, {"threshold", K::kPercent, 100}},
                     /*anyOf=*/{"collection_names", "tensor_regex"}),
      tensorRuleDecl("UnchangedTensor", {kCollectionNames,
                                         kTensorRegex,
                                         {"num_steps", K::kPositiveInt, 3},
                                         {"rtol", K::kNonNegative, 1e-05},
                                         {"atol", K::kNonNegative, 1e-08},
                                         {"equal_nan", K::kBool, false}}),
      tensorRuleDecl("LossNotDecreasing",
                     {kCollectionNames,
                      kTensorRegex,
                      {"use_losses_collection", K::kBool, true},
                      {"num_steps", K::kPositiveInt, 10},
                      {"diff_percent", K::kNonNegative, 0.0},
                      {"increase_threshold_percent", K::kNonNegative, nullptr},
                      {"mode", K::kMode, nullptr},
                      {"smoothing", K::kString, "none"},           // Strata: none | mean | ema
                      {"smoothing_window", K::kPositiveInt, 10}}),  // Strata
      tensorRuleDecl("Overfit", {kTensorRegex,
                                 {"start_step", K::kCount, 0},
                                 {"patience", K::kCount, 1},
                                 {"ratio_threshold", K::kNonNegative, 0.1}}),
      tensorRuleDecl("Overtraining", {{"patience_train", K::kCount, 5},
                                      {"patience_validation", K::kCount, 10},
                                      {"delta", K::kNonNegative, 0.01}}),
      tensorRuleDecl("StalledTrainingRule",
                     {{"threshold", K::kNonNegative, 1800},
                      {"stop_training_on_fire", K::kBool, false},
                      // SageMaker's job lookup; accepted, not needed here.
                      {"training_job_name_prefix", K::kString, nullptr}}),
      tensorRuleDecl("WeightUpdateRatio",
                     {{"num_steps", K::kPositiveInt, nullptr},  // absent: consecutive saved steps
                      {"large_threshold", K::kNonNegative, 10.0},
                      {"small_threshold", K::kNonNegative, 1e-8},
                      {"epsilon", K::kNonNegative, 1e-9}}),
      tensorRuleDecl("TensorVariance", {kCollectionNames,
                                        kTensorRegex,
                                        {"max_threshold", K::kNonNegative, nullptr},
                                        {"min_threshold", K::kNonNegative, nullptr}}),
      tensorRuleDecl("PoorWeightInitialization",
                     {{"activation_inputs_regex", K::kRegex, ".*relu_input"},
                      {"threshold", K::kNonNegative, 10.0},
                      {"distribution_range", K::kNonNegative, 0.001},
                      {"patience", K::kCount, 5},
                      {"steps", K::kPositiveInt, 10}}),
      tensorRuleDecl("SaturatedActivation", {kCollectionNames,
                                             kTensorRegex,
                                             {"threshold_tanh_min", K::kNumber, -9.4999},
                                             {"threshold_tanh_max", K::kNumber, 9.4999},
                                             {"threshold_sigmoid_min", K::kNumber, -23},
                                             {"threshold_sigmoid_max", K::kNumber, 16.99999},
                                             {"threshold_inactivity", K::kPercent, 1.0},
                                             {"threshold_layer", K::kPercent, 50.0}}),
      tensorRuleDecl("DeadRelu", {kTensorRegex,  // absent: .*relu_output
                                  {"threshold_inactivity", K::kPercent, 1.0},
                                  {"threshold_layer", K::kPercent, 50.0}}),
      tensorRuleDecl("ClassImbalance", {{"threshold_imbalance", K::kNonNegative, 10},
                                        {"threshold_misprediction", K::kFraction, 0.7},
                                        {"samples", K::kPositiveInt, 500},
                                        {"argmax", K::kBool, false},
                                        {"labels_regex", K::kRegex, ".*labels"},
                                        {"predictions_regex", K::kRegex, ".*predictions"}}),
      tensorRuleDecl("Confusion", {{"category_no", K::kPositiveInt, nullptr},  // absent: from data
                                   {"labels", K::kString, "labels"},
                                   {"predictions", K::kString, "predictions"},
                                   {"labels_collection", K::kString, nullptr},
                                   {"predictions_collection", K::kString, nullptr},
                                   {"min_diag", K::kFraction, 0.9},
                                   {"max_off_diag", K::kFraction, 0.1}}),
      // Known to SageMaker, not run by Strata (docs/rules.md).
      configOnlyRuleDecl("CheckInputImages", {{"threshold_mean", K::kNonNegative, nullptr},
                                              {"threshold_samples", K::kPositiveInt, nullptr},
                                              {"regex", K::kRegex, nullptr},
                                              {"channel", K::kCount, nullptr}}),
      configOnlyRuleDecl("NLPSequenceRatio",
                         {kTensorRegex,
                          {"token_values", K::kString, nullptr},
                          {"token_thresholds_percent", K::kString, nullptr}}),
      configOnlyRuleDecl("SimilarAcrossRuns",
                         {{"other_trials", K::kString, nullptr}, kCollectionNames, kTensorRegex},
                         /*required=*/{"other_trials"}),
  };
}

}  // namespace strata::rules
