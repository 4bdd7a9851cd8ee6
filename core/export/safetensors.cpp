#include "core/export/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/io/env.hpp"
#include "core/util/error.hpp"

namespace meridian {
namespace {

// Tensor bytes are copied to and from the file as they lie in memory; the format is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

constexpr std::size_t kLengthBytes = 8;
constexpr std::string_view kMetadataKey = "__metadata__";

struct Located {
  std::string name;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

// One header entry; its fields are checked here because a hand-edited or foreign file can hold
// anything, and a bad offset must become an error, never an out-of-range read.
Located parse_entry(const std::string& name, const nlohmann::json& entry, std::uint64_t data_size) {
  if (!entry.is_object()) throw std::invalid_argument("entry is not a JSON object");
  const auto& dtype = entry.at("dtype");
  if (!dtype.is_string()) throw std::invalid_argument("dtype is not a string");
  if (dtype.get<std::string>() != "F32") {
    throw std::invalid_argument("dtype is " + dtype.get<std::string>() + "; only F32 is supported");
  }
  Located t{name, {}, 0, 0};
  std::uint64_t numel = 1;
  const auto& shape = entry.at("shape");
  if (!shape.is_array()) throw std::invalid_argument("shape is not an array");
  for (const auto& d : shape) {
    if (!d.is_number_unsigned()) throw std::invalid_argument("shape holds " + d.dump() + ", not a size");
    const auto v = d.get<std::uint64_t>();
    // Bounding by the file size also keeps the int64 shape and the byte count below from overflowing.
    if (__builtin_mul_overflow(numel, v, &numel) || numel > data_size) {
      throw std::invalid_argument("shape " + shape.dump() + " is larger than the file");
    }
    t.shape.push_back(static_cast<std::int64_t>(v));
  }
  const auto& offsets = entry.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    throw std::invalid_argument("data_offsets " + offsets.dump() + " is not [begin, end]");
  }
  t.begin = offsets[0].get<std::uint64_t>();
  t.end = offsets[1].get<std::uint64_t>();
  if (t.begin > t.end || t.end > data_size) {
    throw std::invalid_argument("data_offsets " + offsets.dump() + " fall outside the " +
                                std::to_string(data_size) + "-byte data buffer");
  }
  if (t.end - t.begin != numel * sizeof(float)) {
    throw std::invalid_argument("data_offsets " + offsets.dump() + " span " + std::to_string(t.end - t.begin) +
                                " bytes but shape " + shape.dump() + " needs " +
                                std::to_string(numel * sizeof(float)));
  }
  return t;
}

}  // namespace

std::string safetensors_prefix(std::span<const SafetensorsEntry> entries) {
  // ordered_json keeps the tensors in file order, which makes the header readable next to the data.
  nlohmann::ordered_json header;
  header[kMetadataKey] = {{"format", "pt"}};
  std::uint64_t offset = 0;
  for (const auto& e : entries) {
    std::uint64_t bytes = sizeof(float);
    for (auto d : e.shape) bytes *= static_cast<std::uint64_t>(d);
    MERIDIAN_CHECK(bytes == e.data.size_bytes(), e.name, ": shape needs ", bytes, " bytes, data has ",
                   e.data.size_bytes());
    MERIDIAN_CHECK(!header.contains(e.name), "duplicate tensor ", e.name);
    header[e.name] = {{"dtype", "F32"}, {"shape", e.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((kLengthBytes - json.size() % kLengthBytes) % kLengthBytes, ' ');

  std::string prefix(kLengthBytes, '\0');
  const std::uint64_t n = json.size();
  std::memcpy(prefix.data(), &n, kLengthBytes);
  return prefix + json;
}

std::map<std::string, SafetensorsTensor> read_safetensors(const std::filesystem::path& file) {
  const std::vector<std::byte> bytes = posix_env().read_all(file);
  const auto bad = [&](const auto&... why) { return make_error(ErrorKind::Data, file.string(), ": ", why...); };

  if (bytes.size() < kLengthBytes) {
    throw bad("file is ", bytes.size(), " bytes, too short for the 8-byte header length");
  }
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), kLengthBytes);
  const std::uint64_t after_length = bytes.size() - kLengthBytes;
  if (header_size > after_length) {
    throw bad("header length is ", header_size, " bytes but only ", after_length, " bytes follow it");
  }
  const char* header_begin = reinterpret_cast<const char*>(bytes.data()) + kLengthBytes;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_begin, header_begin + header_size);
  } catch (const nlohmann::json::exception& e) {
    throw bad("header is not valid JSON: ", e.what());
  }
  if (!header.is_object()) throw bad("header is not a JSON object");

  const std::byte* data = bytes.data() + kLengthBytes + header_size;
  const std::uint64_t data_size = after_length - header_size;
  std::vector<Located> located;
  for (const auto& [name, entry] : header.items()) {
    if (name == kMetadataKey) continue;
    try {
      located.push_back(parse_entry(name, entry, data_size));
    } catch (const std::exception& e) {  // ours, or nlohmann's for a missing or mistyped field
      throw bad("tensor '", name, "': ", e.what());
    }
  }

  // The safetensors library rejects gaps, overlaps and trailing bytes; so do we, so a file we
  // accept is one Python accepts.
  std::sort(located.begin(), located.end(), [](const Located& a, const Located& b) { return a.begin < b.begin; });
  std::uint64_t expected = 0;
  for (const auto& t : located) {
    if (t.begin != expected) {
      throw bad("tensor '", t.name, "' starts at byte ", t.begin, " of the data buffer, expected ", expected,
                " (tensors must be contiguous)");
    }
    expected = t.end;
  }
  if (expected != data_size) {
    throw bad("tensors cover ", expected, " bytes but the data buffer holds ", data_size);
  }

  std::map<std::string, SafetensorsTensor> out;
  for (auto& t : located) {
    SafetensorsTensor tensor{"F32", std::move(t.shape), std::vector<float>((t.end - t.begin) / sizeof(float))};
    std::memcpy(tensor.data.data(), data + t.begin, t.end - t.begin);
    out.emplace(std::move(t.name), std::move(tensor));
  }
  return out;
}

}  // namespace meridian
