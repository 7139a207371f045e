#include "debugger/naming.h"

#include <cctype>
#include <cstdio>
#include <regex>

namespace strata::debugger {
namespace {

std::string padded(int64_t value, int width) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%0*lld", width, static_cast<long long>(value));
  return buf;
}

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string moduleClassName(const std::string& torchModuleName) {
  std::string name = torchModuleName;
  const size_t colons = name.rfind("::");
  if (colons != std::string::npos) name = name.substr(colons + 2);
  if (name.size() > 4 && endsWith(name, "Impl")) name.resize(name.size() - 4);
  return name;
}

std::string parameterTensorName(const std::string& topClass, const std::string& paramPath) {
  return topClass + "_" + paramPath;
}

std::string gradientTensorName(const std::string& topClass, const std::string& paramPath) {
  return kGradientPrefix + parameterTensorName(topClass, paramPath);
}

std::string moduleOutputTensorName(const std::string& modulePath, int index) {
  return modulePath + "_output_" + std::to_string(index);
}

std::string moduleInputTensorName(const std::string& modulePath, int index) {
  return modulePath + "_input_" + std::to_string(index);
}

std::string lossTensorName(const std::string& lossClass) {
  return moduleOutputTensorName(lossClass, 0);
}

std::string scalarTensorName(const std::string& name) { return kScalarPrefix + name; }

std::string reductionTensorName(const std::string& tensorName, const Reduction& r) {
  static const std::regex kColonIndex(":\\d+");
  return std::string(kReductionPrefix) + (r.abs ? "abs_" : "") + reductionOpName(r.op) + "/" +
         std::regex_replace(tensorName, kColonIndex, "");
}

bool parseReductionTensorName(const std::string& name, std::string* tensorName, Reduction* r) {
  const std::string prefix = kReductionPrefix;
  const size_t at = name.find(prefix);  // smdebug splits on the prefix anywhere in the name
  if (at == std::string::npos) return false;
  const std::string rest = name.substr(at + prefix.size());
  const size_t slash = rest.find('/');
  if (slash == std::string::npos) return false;
  std::string op = rest.substr(0, slash);
  Reduction parsed;
  if (op.rfind("abs_", 0) == 0) {
    parsed.abs = true;
    op = op.substr(4);
  }
  const auto kind = parseReductionOp(op);
  if (!kind) return false;
  parsed.op = *kind;
  *r = parsed;
  *tensorName = rest.substr(slash + 1);
  return true;
}

std::string workerNameForRank(int rank) { return "worker_" + std::to_string(rank); }

bool isValidWorkerName(const std::string& worker) {
  if (worker.empty() || worker.find("__") != std::string::npos) return false;
  for (char c : worker) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
  }
  return true;
}

std::string eventFileRelPath(int64_t step, const std::string& worker) {
  const std::string s = padded(step, 12);
  return std::string(kEventsDir) + "/" + s + "/" + s + "_" + worker + ".tfevents";
}

std::string indexFileRelPath(int64_t step, const std::string& worker) {
  return std::string(kIndexDir) + "/" + padded(step / 1000, 9) + "/" + padded(step, 12) + "_" +
         worker + ".json";
}

std::string collectionsFileRelPath(const std::string& worker) {
  return std::string(kCollectionsDir) + "/" + worker + "_collections.json";
}

bool parseStepFileName(const std::string& baseName, int64_t* step, std::string* worker) {
  static const std::regex kPattern("^(\\d+)_(.+)\\.(json|csv|tfevents)$");
  std::smatch m;
  if (!std::regex_match(baseName, m, kPattern)) return false;
  const std::string digits = m[1].str();
  if (digits.size() > 18) return false;  // would overflow int64
  *step = std::stoll(digits);
  *worker = m[2].str();
  return true;
}

bool parseCollectionsFileName(const std::string& baseName, std::string* worker) {
  const std::string suffix = "_collections.json";
  if (!endsWith(baseName, suffix) || baseName.size() == suffix.size()) return false;
  *worker = baseName.substr(0, baseName.size() - suffix.size());
  return true;
}

}  // namespace strata::debugger
