#pragma once
// The safetensors format (https://huggingface.co/docs/safetensors), F32 tensors only: an 8-byte
// little-endian header length N, N bytes of JSON naming each tensor's dtype, shape and
// [begin, end) byte range in the data buffer, then the data buffer itself.
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace meridian {

struct SafetensorsEntry {
  std::string name;
  std::vector<std::int64_t> shape;
  std::span<const float> data;  // numel(shape) floats
};

// Everything before the data buffer: the length prefix and the JSON header, padded with spaces so
// the data buffer starts 8-byte aligned (readers that mmap the file can then use it in place).
// The data buffer that must follow is the entries' data, back to back, in the given order.
std::string safetensors_prefix(std::span<const SafetensorsEntry> entries);

struct SafetensorsTensor {
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

// Reads a file of F32 tensors, checking it as strictly as the safetensors library does, so a file
// that passes here also loads in Python. Error(Io) when it cannot be read, Error(Data) naming the
// problem when it is malformed.
std::map<std::string, SafetensorsTensor> read_safetensors(const std::filesystem::path& file);

}  // namespace meridian
