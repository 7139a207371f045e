#include "debugger/file_util.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/errors.h"

namespace strata::debugger {
namespace fs = std::filesystem;

void touchFile(const std::string& path) {
  makeDirectories(fs::path(path).parent_path().string());
  std::FILE* f = openOutputFile(path, "ab");
  STRATA_CHECK(f != nullptr, "cannot create \"", path, "\": ", std::strerror(errno));
  std::fclose(f);
}

bool fileExists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

bool readWholeFile(const std::string& path, std::string* out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot open \"" + path + "\": " + std::strerror(errno);
    return false;
  }
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) {
    *error = "cannot read \"" + path + "\"";
    return false;
  }
  return true;
}

bool readFileRange(const std::string& path, uint64_t offset, uint64_t length, std::string* out,
                   std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot open \"" + path + "\": " + std::strerror(errno);
    return false;
  }
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  if (offset > size || size - offset < length) {
    *error = "\"" + path + "\" has " + std::to_string(size) + " bytes; cannot read " +
             std::to_string(length) + " at offset " + std::to_string(offset);
    return false;
  }
  out->resize(length);
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(out->data(), static_cast<std::streamsize>(length));
  if (!in) {
    *error = "short read of \"" + path + "\" at offset " + std::to_string(offset);
    return false;
  }
  return true;
}

std::vector<std::string> listFilesRecursive(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code typeEc;
    if (it->is_regular_file(typeEc)) out.push_back(fs::relative(it->path(), dir, typeEc).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

AppendFile::AppendFile(const std::string& path) : path_(path) {
  file_ = openOutputFile(path, "wb");
  STRATA_CHECK(file_ != nullptr, "cannot open \"", path, "\" for writing: ", std::strerror(errno));
}

AppendFile::~AppendFile() {
  if (file_) std::fclose(file_);
}

void AppendFile::append(const void* data, size_t size) {
  STRATA_CHECK(file_ != nullptr, "\"", path_, "\" is closed");
  if (size == 0) return;
  const size_t written = std::fwrite(data, 1, size, file_);
  STRATA_CHECK(written == size, "short write to \"", path_, "\" (", written, " of ", size,
               " bytes): ", std::strerror(errno));
  size_ += size;
}

void AppendFile::flush() {
  if (file_) STRATA_CHECK(std::fflush(file_) == 0, "cannot flush \"", path_, "\": ", std::strerror(errno));
}

void AppendFile::sync() {
  flush();
  if (file_) STRATA_CHECK(::fdatasync(fileno(file_)) == 0, "cannot sync \"", path_, "\": ",
                          std::strerror(errno));
}

void AppendFile::close() {
  if (!file_) return;
  const int flushed = std::fflush(file_);
  const int closed = std::fclose(file_);
  file_ = nullptr;
  STRATA_CHECK(flushed == 0 && closed == 0, "cannot close \"", path_, "\": ", std::strerror(errno));
}

}  // namespace strata::debugger
