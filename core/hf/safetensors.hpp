#pragma once
// The safetensors format (https://huggingface.co/docs/safetensors): an 8-byte little-endian header
// length N, N bytes of JSON naming each tensor's dtype, shape and [begin, end) byte range in the
// data buffer, then the data buffer itself. Written in F32 or BF16; read (mapped, not copied) in
// any dtype, converted to fp32 from F32, BF16 or F16.
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/hf/dtype.hpp"
#include "core/io/mapped_file.hpp"

namespace meridian {

class Env;

struct SafetensorsEntry {
  std::string name;
  std::vector<std::int64_t> shape;
  std::span<const float> data;  // numel(shape) floats, stored as `dtype`
};

// Everything before the data buffer: the length prefix and the JSON header, padded with spaces so
// the data buffer starts 8-byte aligned (readers that mmap the file can then use it in place).
// The data buffer that must follow is the entries' data in `dtype`, back to back, in the given order.
std::string safetensors_prefix(std::span<const SafetensorsEntry> entries, HfDtype dtype = HfDtype::F32);

// Writes the file whole or not at all (a temporary beside it, then a rename), converting each
// entry to `dtype` a tensor at a time. Error(Io) when the file system refuses.
void write_safetensors(Env& env, const std::filesystem::path& path, std::span<const SafetensorsEntry> entries,
                       HfDtype dtype);

// One tensor of a file as its header describes it.
struct SafetensorsInfo {
  std::string dtype;  // safetensors' name: "F32", "BF16", "I64", ...
  std::vector<std::int64_t> shape;
  std::uint64_t numel = 0;
  std::span<const std::byte> bytes;  // within the mapped file
};

// A safetensors file, mapped and its header checked as strictly as the safetensors library does
// (known dtypes, offsets inside the data buffer and matching the shape, tensors contiguous with no
// gap, overlap or trailing byte), so a file that passes here also loads in Python.
class SafetensorsFile {
 public:
  // Error(Io) when it cannot be read, Error(Data) naming the file and the problem when malformed.
  static SafetensorsFile open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return file_.path(); }
  const std::map<std::string, SafetensorsInfo>& tensors() const { return tensors_; }
  // The tensor's values as fp32, into `out` (numel values). Error(Data) naming the file and the
  // tensor when its dtype is not F32, BF16 or F16.
  void read_f32(const std::string& name, std::span<float> out) const;

 private:
  explicit SafetensorsFile(MappedFile file) : file_(std::move(file)) {}
  MappedFile file_;
  std::map<std::string, SafetensorsInfo> tensors_;
};

struct SafetensorsTensor {
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

// Every tensor of a file, converted to fp32 (SafetensorsFile::read_f32's dtypes).
std::map<std::string, SafetensorsTensor> read_safetensors(const std::filesystem::path& file);

}  // namespace meridian
