#include "checkpoint/writer.h"

#include <unistd.h>

#include <ctime>
#include <filesystem>

#include "checkpoint/sha256.h"
#include "core/atomic_file.h"
#include "core/errors.h"

namespace strata::checkpoint {

namespace fs = std::filesystem;

std::string beginCheckpoint(const std::string& root, int64_t step) {
  const std::string dir = (fs::path(root) / checkpointDirName(step)).string();
  makeDirectories(dir);
  const std::string manifest = (fs::path(dir) / kManifestFile).string();
  if (::unlink(manifest.c_str()) == 0) fsyncDirectory(dir);
  fsyncDirectory(root);  // the new directory entry itself
  return dir;
}

ShardInfo writeShard(const std::string& dir, const std::string& file, const std::function<void(const ByteSink&)>& produce) {
  AtomicFileWriter writer((fs::path(dir) / file).string(), Durability::kDurable);
  Sha256 sha;
  produce([&writer, &sha](const void* data, size_t size) {
    sha.update(data, size);
    writer.write(data, size);
  });
  ShardInfo info;
  info.file = file;
  info.bytes = writer.bytesWritten();
  writer.commit();
  info.sha256 = sha.hexDigest();
  return info;
}

void commitManifest(const std::string& dir, const Manifest& manifest) {
  writeFileAtomically((fs::path(dir) / kManifestFile).string(), toJson(manifest).dump(2) + "\n",
                      Durability::kDurable);
}

std::string utcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace strata::checkpoint
