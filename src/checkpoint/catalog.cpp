#include "checkpoint/catalog.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/atomic_file.h"
#include "checkpoint/sha256.h"
#include "core/errors.h"
#include "core/logging.h"

namespace strata::checkpoint {
namespace {

namespace fs = std::filesystem;

bool regularFileSize(const std::string& path, uint64_t* bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  *bytes = static_cast<uint64_t>(st.st_size);
  return true;
}

}  // namespace

std::vector<Entry> listCheckpoints(const std::string& root) {
  std::vector<Entry> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& item : fs::directory_iterator(root, ec)) {
    if (!item.is_directory(ec)) continue;
    const auto step = parseCheckpointDirName(item.path().filename().string());
    if (!step) continue;
    Entry e;
    e.step = *step;
    e.path = item.path().string();
    e.hasManifest = fs::exists(item.path() / kManifestFile, ec);
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.step > b.step; });
  return out;
}

Verdict verifyCheckpoint(const std::string& dir, bool checksums) {
  Verdict v;
  const std::string manifestPath = (fs::path(dir) / kManifestFile).string();
  uint64_t size = 0;
  if (!regularFileSize(manifestPath, &size)) {
    v.why = "no manifest (the write did not finish)";
    return v;
  }
  try {
    const std::vector<char> text = readWholeFile(manifestPath);
    v.manifest = parseManifest(std::string(text.begin(), text.end()), manifestPath);
  } catch (const std::exception& e) {
    std::string what = e.what();
    while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
    v.why = "invalid manifest: " + what;
    return v;
  }
  const auto step = parseCheckpointDirName(fs::path(dir).filename().string());
  if (step && *step != v.manifest.step) {
    v.why = "manifest step " + std::to_string(v.manifest.step) + " does not match the directory name";
    return v;
  }
  for (const ShardInfo& s : v.manifest.shards) {
    const std::string path = (fs::path(dir) / s.file).string();
    uint64_t bytes = 0;
    if (!regularFileSize(path, &bytes)) {
      v.why = "shard " + s.file + " is missing";
      return v;
    }
    if (bytes != s.bytes) {
      v.why = "shard " + s.file + " has " + std::to_string(bytes) + " bytes, the manifest says " +
              std::to_string(s.bytes);
      return v;
    }
    if (!checksums) continue;
    try {
      const std::string sha = sha256File(path, &bytes);
      if (sha != s.sha256) {
        v.why = "shard " + s.file + " fails its checksum (sha256 " + sha + ", the manifest says " + s.sha256 + ")";
        return v;
      }
    } catch (const std::exception& e) {
      v.why = "shard " + s.file + " cannot be read: " + e.what();
      return v;
    }
  }
  v.complete = true;
  return v;
}

std::optional<Found> findNewestComplete(const std::string& root) {
  Found found;
  for (const Entry& e : listCheckpoints(root)) {
    Verdict v = verifyCheckpoint(e.path, /*checksums=*/true);
    if (v.complete) {
      found.path = e.path;
      found.manifest = std::move(v.manifest);
      return found;
    }
    STRATA_LOG(kWarn, kInit, "checkpoint ", e.path, " skipped: ", v.why, "; trying the previous one");
    found.skipped.push_back(e.path + ": " + v.why);
  }
  return std::nullopt;
}

std::vector<int64_t> stepsToPrune(const std::vector<Entry>& entries, int keep) {
  if (keep <= 0) return {};
  std::vector<Entry> sorted = entries;
  std::sort(sorted.begin(), sorted.end(), [](const Entry& a, const Entry& b) { return a.step > b.step; });
  std::vector<int64_t> out;
  int kept = 0;
  for (const Entry& e : sorted) {
    if (e.hasManifest && kept < keep) {
      ++kept;
      continue;
    }
    out.push_back(e.step);
  }
  return out;
}

std::vector<std::string> pruneCheckpoints(const std::string& root, int keep) {
  std::vector<std::string> removed;
  const std::vector<Entry> entries = listCheckpoints(root);
  const std::vector<int64_t> doomed = stepsToPrune(entries, keep);
  const std::set<int64_t> doomedSet(doomed.begin(), doomed.end());
  for (const Entry& e : entries) {
    if (!doomedSet.count(e.step)) continue;
    std::error_code ec;
    // The manifest first: a half-deleted checkpoint must never look complete.
    fs::remove(fs::path(e.path) / kManifestFile, ec);
    fs::remove_all(e.path, ec);
    if (ec) {
      STRATA_LOG(kWarn, kInit, "checkpoint: cannot remove ", e.path, ": ", ec.message());
      continue;
    }
    removed.push_back(e.path);
  }
  if (!removed.empty()) {
    try {
      fsyncDirectory(root);
    } catch (const std::exception& e) {
      STRATA_LOG(kWarn, kInit, "checkpoint: ", e.what());
    }
  }
  return removed;
}

}  // namespace strata::checkpoint
