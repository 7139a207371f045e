// A minimal PNG decoder for screenshot tests: 8-bit RGB or RGBA, not interlaced (what headless
// Chromium writes). Counts pixels of a colour, so a test can check that a chart was drawn.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace strata::testing {

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // width * height * 3
};

inline uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

inline Image decodePng(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> f((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  static const uint8_t kSig[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  if (f.size() < 8 || !std::equal(kSig, kSig + 8, f.begin())) throw std::runtime_error(path + ": not a PNG");
  Image img;
  int colorType = -1, depth = 0, interlace = 0;
  std::vector<uint8_t> idat;
  for (size_t pos = 8; pos + 12 <= f.size();) {
    const uint32_t len = be32(&f[pos]);
    const std::string type(reinterpret_cast<const char*>(&f[pos + 4]), 4);
    const uint8_t* data = &f[pos + 8];
    if (pos + 12 + len > f.size()) throw std::runtime_error(path + ": truncated chunk " + type);
    if (type == "IHDR") {
      img.width = static_cast<int>(be32(data));
      img.height = static_cast<int>(be32(data + 4));
      depth = data[8];
      colorType = data[9];
      interlace = data[12];
    } else if (type == "IDAT") {
      idat.insert(idat.end(), data, data + len);
    }
    pos += 12 + len;
  }
  if (depth != 8 || (colorType != 2 && colorType != 6) || interlace != 0)
    throw std::runtime_error(path + ": unsupported PNG (depth " + std::to_string(depth) + ", colour type " +
                             std::to_string(colorType) + ")");
  const int bpp = colorType == 6 ? 4 : 3;
  const size_t stride = static_cast<size_t>(img.width) * bpp;
  std::vector<uint8_t> raw((stride + 1) * static_cast<size_t>(img.height));
  uLongf rawLen = static_cast<uLongf>(raw.size());
  if (uncompress(raw.data(), &rawLen, idat.data(), static_cast<uLong>(idat.size())) != Z_OK || rawLen != raw.size())
    throw std::runtime_error(path + ": bad image data");
  std::vector<uint8_t> prev(stride, 0), cur(stride);
  img.rgb.resize(static_cast<size_t>(img.width) * img.height * 3);
  for (int y = 0; y < img.height; ++y) {
    const uint8_t filter = raw[static_cast<size_t>(y) * (stride + 1)];
    const uint8_t* src = &raw[static_cast<size_t>(y) * (stride + 1) + 1];
    for (size_t x = 0; x < stride; ++x) {
      const int a = x >= static_cast<size_t>(bpp) ? cur[x - bpp] : 0, b = prev[x];
      const int c = x >= static_cast<size_t>(bpp) ? prev[x - bpp] : 0;
      int v = src[x];
      switch (filter) {
        case 0: break;
        case 1: v += a; break;
        case 2: v += b; break;
        case 3: v += (a + b) / 2; break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default: throw std::runtime_error(path + ": bad filter");
      }
      cur[x] = static_cast<uint8_t>(v);
    }
    for (int x = 0; x < img.width; ++x)
      for (int k = 0; k < 3; ++k) img.rgb[(static_cast<size_t>(y) * img.width + x) * 3 + k] = cur[x * bpp + k];
    prev.swap(cur);
  }
  return img;
}

// Pixels within `tolerance` per channel of "#rrggbb".
inline int64_t countColor(const Image& img, const std::string& hex, int tolerance = 6) {
  const int r = std::stoi(hex.substr(1, 2), nullptr, 16), g = std::stoi(hex.substr(3, 2), nullptr, 16),
            b = std::stoi(hex.substr(5, 2), nullptr, 16);
  int64_t n = 0;
  for (size_t i = 0; i + 2 < img.rgb.size(); i += 3)
    n += std::abs(img.rgb[i] - r) <= tolerance && std::abs(img.rgb[i + 1] - g) <= tolerance &&
         std::abs(img.rgb[i + 2] - b) <= tolerance;
  return n;
}

}  // namespace strata::testing
