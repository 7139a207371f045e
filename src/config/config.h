// The job config: what a user writes in job.json (DESIGN.md §2; every key, type, default
// and range is in docs/config.md). Key names and defaults follow SageMaker's (smp
// "parameters", DebuggerHookConfig/CollectionConfig, ProfilerConfig/FrameworkProfile, rule
// names and parameters from specs/smdebug.md) so a SageMaker user recognises every field.
//
// Parsing is strict: unknown keys (with a "did you mean" suggestion), wrong types, out-of-range
// values, unknown enum values, bad regular expressions, unknown rules or rule parameters, and
// contradictory settings all throw strata::ConfigError at the FIRST problem found, with the
// source name, the JSON pointer of the value and the value received.
//
// The structs are plain values holding effective settings: after parsing, defaults are filled
// in and inherited values resolved (collection save settings, checkpoint dir), so consumers
// never re-derive them. Everything here is pure and thread-safe except loadJobConfig, which
// reads argv, the environment and a file.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace strata::config {

// SageMaker model parallel (smp) "parameters", plus manual placement by child name, which
// replaces smp's `with smp.partition(i):` blocks for C++ models.
struct ModelParallelConfig {
  bool enabled = false;
  int partitions = 1;                    // pipeline stages; > 1 needs enabled
  int microbatches = 1;                  // per batch, per pipeline
  std::string pipeline = "interleaved";  // "simple" | "interleaved" | "zero_bubble"
  std::string optimize = "speed";        // "speed" | "memory"
  bool ddp = false;                      // data parallel across pipeline replicas
  std::string placementStrategy =
      "cluster";  // "cluster" | "spread": ranks of one pipeline adjacent or not
  bool autoPartition = true;
  int defaultPartition = 0;                    // for modules not placed (auto_partition false)
  std::map<std::string, int> manualPartition;  // child name -> partition (auto_partition false)
  // Auto partition: weight of memory against time in the stage cost, [0, 1] (SageMaker's
  // memory_weight). Unset: `optimize` alone (time, or memory).
  std::optional<double> memoryWeight;
  std::optional<double> memoryCapMb;           // no stage's predicted memory may exceed it
  // Optimizer state bytes per gradient byte the plan assumes (0 plain SGD, 1 momentum, 2
  // Adam); unset: the DistributedOptimizer's when known at planning time, else 2.
  std::optional<double> optimizerStateFactor;
  std::optional<int> activeMicrobatches;       // in flight at once; unset: partitions + 2 (smp)
  int virtualStages = 1;                 // model chunks per pipeline rank (Megatron-style)
  bool activationCheckpointing = false;  // recompute each stage's forward in its backward
};

struct DataParallelConfig {
  bool enabled = true;
  double bucketCapMb = 25;                // gradient bucket cap in MiB (c10d's bucket_cap_mb)
  std::string gradientDtype = "float32";  // "float32" | "float16" | "bfloat16" on the wire
  bool shardOptimizerState = false;       // ZeRO stage 1: each rank keeps its shard's optimizer state
  bool hostSharedParameters = false;      // with it: parameters, averages, state once per host

  size_t bucketCapBytes() const { return static_cast<size_t>(bucketCapMb * 1024 * 1024); }
};

// smdebug SaveConfig: which steps are saved.
struct SaveConfig {
  int64_t saveInterval = 500;
  int64_t startStep = 0;
  std::optional<int64_t> endStep;  // exclusive; unset: no end
  std::vector<int64_t> saveSteps;  // saved in addition to the interval, sorted

  // smdebug's rule: listed in saveSteps, or startStep <= step < endStep and
  // step % saveInterval == 0 (not relative to startStep).
  bool shouldSave(int64_t step) const;
};

// smdebug's ModeKeys order: TRAIN, EVAL, PREDICT, GLOBAL (index = mode number - 1).
inline constexpr size_t kNumSaveModes = 4;
const std::array<const char*, kNumSaveModes>& saveModeNames();  // "TRAIN", "EVAL", ...

// A SaveConfig per mode (smdebug's SaveConfig with mode_save_configs), resolved key by key:
// the section's keys, then its save_config.<MODE> keys, then the collection's keys, then the
// collection's save_config.<MODE> keys.
using ModeSaveConfigs = std::array<SaveConfig, kNumSaveModes>;

struct CollectionConfig {
  std::string name;                       // built-in (see builtinCollectionNames) or custom
  std::vector<std::string> includeRegex;  // empty for a built-in: its own selection applies
  SaveConfig save;                        // unset keys inherit DebuggerConfig::save
  ModeSaveConfigs modeSave;               // effective schedule per mode (what the hook uses)
  std::vector<std::string> reductions;    // canonical smdebug names: "mean", "abs_l2_norm"...
  bool saveRawTensor = true;              // default: true without reductions, else false
  bool saveShape = false;                 // smdebug's save_shape: the index gets each tensor's shape
  bool saveHistogram = false;             // TensorBoard histograms of its tensors (not scalars)
};

struct DebuggerConfig {
  std::vector<CollectionConfig> collections;  // empty: the debugger saves nothing
  SaveConfig save;                            // defaults for every collection
  ModeSaveConfigs modeSave;                   // defaults per mode (save + save_config.<MODE>)
  std::string includeWorkers = "one";         // "one" (rank 0 only) | "all"

  bool enabled() const { return !collections.empty(); }
};

// SageMaker FrameworkProfile: a step range or a time range of detailed profiling.
struct FrameworkProfile {
  int64_t startStep = 5;  // SageMaker's FrameworkProfile() default
  int64_t numSteps = 1;
  std::optional<std::chrono::seconds> startUnixTime;      // time range instead of steps
  std::optional<std::chrono::duration<double>> duration;  // set together with startUnixTime

  bool byTime() const { return startUnixTime.has_value(); }
};

struct ProfilerConfig {
  bool disableProfiler = false;
  std::chrono::milliseconds systemMonitorInterval{500};  // one of kSystemMonitorIntervalsMs
  std::optional<FrameworkProfile> frameworkProfile;      // unset: no framework profiling
};

struct RuleConfig {
  std::string name;                  // one of knownRuleNames()
  std::vector<std::string> actions;  // "StopTraining"
  // Validated against the rule's parameter table and normalised: SageMaker-style string
  // values ("90", "True") become numbers and booleans. Absent ones take the rule's default.
  std::map<std::string, nlohmann::json> parameters;

  bool stopsTraining() const;
};

struct CheckpointConfig {
  std::string dir;         // unset in the file: <output_dir>/ckpt
  int64_t everySteps = 0;  // 0: only explicit strata::save calls
  bool resume = false;     // start from the newest complete checkpoint
  int keep = 3;            // newest checkpoints kept; 0 keeps all
  bool async = false;      // copy at the step boundary, write in a background thread
};

struct CollectivesConfig {
  std::chrono::milliseconds timeout{300000};  // every blocking wait
  std::string transport = "auto";             // "auto" | "shm" | "tcp" (CUDA tensors always use NCCL)
  std::string allreduceAlgo = "auto";         // "auto" or an algorithm of collectives/cost_model.h
};

// Authentication and encryption of the job's connections (docs/security.md). Environment
// variables take precedence: STRATA_TLS over encrypt_inter_node_traffic, STRATA_JOB_SECRET
// and STRATA_JOB_SECRET_FILE over job_secret_file.
struct SecurityConfig {
  bool encryptInterNodeTraffic = false;      // TLS between ranks of different hosts
  std::optional<std::string> jobSecretFile;  // mode 0600 or stricter; relative to the cwd
  bool allowUnauthenticated = false;         // an env launch without a secret runs (warned)
};

// Job-file defaults for logging; STRATA_LOG_* environment variables take precedence.
struct LoggingConfig {
  std::optional<std::string> level;  // "ERROR" | "WARN" | "INFO" | "DEBUG" | "TRACE"
  std::vector<std::string> subsys;   // e.g. {"COLL", "NET"}; empty: all
  std::vector<int> ranks;            // empty: all
  std::optional<std::string> file;   // pattern with %h %p %r
};

// The flight recorder (docs/flight_recorder.md): every rank's last `entries` collective and
// point-to-point operations, dumped to <output_dir>/flight/ on a failure, on SIGUSR2 and,
// when asked, at finalize. STRATA_FLIGHT_ENTRIES / STRATA_FLIGHT_DUMP_ON_FINALIZE override.
struct FlightRecorderConfig {
  int64_t entries = 2000;  // 0: off
  bool dumpOnFinalize = false;
  // "ticker" (a thread stores the time every 1 ms: cheapest) | "coarse" (kernel tick) |
  // "precise" (ns); STRATA_FLIGHT_CLOCK
  std::string clock = "ticker";
  // The ticker's period: the times' resolution, against ~1000/tick_ms wake-ups a second
  // (docs/flight_recorder.md); STRATA_FLIGHT_TICK_MS.
  int64_t tickMs = 50;
};
inline constexpr int64_t kMinFlightTickMs = 1;
inline constexpr int64_t kMaxFlightTickMs = 1000;
inline constexpr int64_t kMaxFlightRecorderEntries = int64_t{1} << 20;  // 80 MiB of records

// Host memory (docs/config.md): "retain" keeps freed memory in the process so tensors freed
// and allocated every step are not faulted in again; "system" is glibc's behaviour
// (core/malloc_policy.h). STRATA_MALLOC overrides.
struct MemoryConfig {
  std::string malloc = "retain";
};

struct JobConfig {
  ModelParallelConfig modelParallel;
  DataParallelConfig dataParallel;
  std::string outputDir = "runs/strata";
  DebuggerConfig debugger;
  ProfilerConfig profiler;
  std::vector<RuleConfig> rules;
  CheckpointConfig checkpoint;
  CollectivesConfig collectives;
  LoggingConfig logging;
  SecurityConfig security;
  FlightRecorderConfig flightRecorder;
  MemoryConfig memory;
  std::string source = "<defaults>";  // where it came from, for logs (not a key)
};

// Parses and validates one job config. `sourceName` (a path, "STRATA_CONFIG") starts every
// error message. Throws strata::ConfigError on the first problem.
JobConfig parseJobConfig(const std::string& jsonText, const std::string& sourceName);

// The effective defaults: parseJobConfig("{}"), with derived values resolved.
JobConfig defaultJobConfig();

// Finds the config: `--config FILE` or `--config=FILE` in argv (the last one wins), else
// the STRATA_CONFIG environment variable, else the defaults. Throws ConfigError when the
// file cannot be read (naming the path and the errno text) or is invalid. argv is not changed.
JobConfig loadJobConfig(int argc, char** argv);

// Every effective setting, in the file's key names; parseJobConfig accepts it back.
nlohmann::json toJson(const JobConfig& config);

// Checks what needs the world size, known only after bootstrap: partitions must divide it,
// and without ddp (or data parallelism) it must equal partitions. Throws ConfigError.
void checkWorldSize(const JobConfig& config, int worldSize);

// Built-in debugger collection names (smdebug CollectionKeys usable with PyTorch).
const std::vector<std::string>& builtinCollectionNames();
// Built-in rule names a config may list (specs/smdebug.md §3).
const std::vector<std::string>& knownRuleNames();
bool isProfilerRule(const std::string& ruleName);

// SageMaker's allowed system_monitor_interval_millis values.
inline constexpr int64_t kSystemMonitorIntervalsMs[] = {100, 200, 500, 1000, 5000, 60000};

}  // namespace strata::config
