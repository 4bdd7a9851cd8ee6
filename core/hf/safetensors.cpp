#include "core/hf/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/io/atomic_write.hpp"
#include "core/io/env.hpp"
#include "core/util/error.hpp"

namespace meridian {
namespace {

// Tensor bytes are copied to and from the file as they lie in memory; the format is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

constexpr std::size_t kLengthBytes = 8;
constexpr std::string_view kMetadataKey = "__metadata__";

// The dtypes of the safetensors specification and their element sizes: a header naming any of
// them is well formed, though only the floating ones below convert to fp32.
std::optional<std::size_t> element_bytes(std::string_view dtype) {
  static const std::map<std::string_view, std::size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2}, {"U16", 2},
      {"F16", 2},  {"BF16", 2}, {"I32", 4}, {"U32", 4},     {"F32", 4},     {"I64", 8}, {"U64", 8}, {"F64", 8}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? std::nullopt : std::optional(it->second);
}

struct Located {
  std::string name;
  SafetensorsInfo info;
  std::uint64_t begin = 0, end = 0;
};

// One header entry; its fields are checked here because a hand-edited or foreign file can hold
// anything, and a bad offset must become an error, never an out-of-range read.
Located parse_entry(const std::string& name, const nlohmann::json& entry, std::uint64_t data_size) {
  if (!entry.is_object()) throw std::invalid_argument("entry is not a JSON object");
  const auto& dtype = entry.at("dtype");
  if (!dtype.is_string()) throw std::invalid_argument("dtype is not a string");
  Located t{name, {dtype.get<std::string>(), {}, 1, {}}};
  const auto unit = element_bytes(t.info.dtype);
  if (!unit) throw std::invalid_argument("dtype " + t.info.dtype + " is not a safetensors dtype");
  const auto& shape = entry.at("shape");
  if (!shape.is_array()) throw std::invalid_argument("shape is not an array");
  for (const auto& d : shape) {
    if (!d.is_number_unsigned()) throw std::invalid_argument("shape holds " + d.dump() + ", not a size");
    const auto v = d.get<std::uint64_t>();
    // Bounding by the file size also keeps the int64 shape and the byte count below from overflowing.
    if (__builtin_mul_overflow(t.info.numel, v, &t.info.numel) || t.info.numel > data_size)
      throw std::invalid_argument("shape " + shape.dump() + " is larger than the file");
    t.info.shape.push_back(static_cast<std::int64_t>(v));
  }
  const auto& offsets = entry.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    throw std::invalid_argument("data_offsets " + offsets.dump() + " is not [begin, end]");
  t.begin = offsets[0].get<std::uint64_t>();
  t.end = offsets[1].get<std::uint64_t>();
  if (t.begin > t.end || t.end > data_size)
    throw std::invalid_argument("data_offsets " + offsets.dump() + " fall outside the " + std::to_string(data_size) +
                                "-byte data buffer");
  if (t.end - t.begin != t.info.numel * *unit)
    throw std::invalid_argument("data_offsets " + offsets.dump() + " span " + std::to_string(t.end - t.begin) +
                                " bytes but shape " + shape.dump() + " of " + t.info.dtype + " needs " +
                                std::to_string(t.info.numel * *unit));
  return t;
}

// The bytes of `values` as `dtype`.
void append_as(WritableFile& file, std::span<const float> values, HfDtype dtype) {
  if (dtype == HfDtype::F32) return file.append(std::as_bytes(values));
  MERIDIAN_CHECK(dtype == HfDtype::BF16, "writing ", to_string(dtype), " is not supported");
  constexpr std::size_t kBlock = 1 << 16;
  std::vector<std::uint16_t> half(std::min(kBlock, values.size()));
  for (std::size_t at = 0; at < values.size(); at += kBlock) {
    const std::size_t n = std::min(kBlock, values.size() - at);
    for (std::size_t i = 0; i < n; ++i) half[i] = f32_to_bf16(values[at + i]);
    file.append(std::as_bytes(std::span<const std::uint16_t>(half.data(), n)));
  }
}

}  // namespace

std::string safetensors_prefix(std::span<const SafetensorsEntry> entries, HfDtype dtype) {
  // ordered_json keeps the tensors in file order, which makes the header readable next to the data.
  nlohmann::ordered_json header;
  header[kMetadataKey] = {{"format", "pt"}};
  std::uint64_t offset = 0;
  for (const auto& e : entries) {
    std::uint64_t numel = 1;
    for (auto d : e.shape) numel *= static_cast<std::uint64_t>(d);
    MERIDIAN_CHECK(numel == e.data.size(), e.name, ": shape holds ", numel, " values, data has ", e.data.size());
    MERIDIAN_CHECK(!header.contains(e.name), "duplicate tensor ", e.name);
    const std::uint64_t bytes = numel * dtype_bytes(dtype);
    header[e.name] = {{"dtype", to_string(dtype)}, {"shape", e.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((kLengthBytes - json.size() % kLengthBytes) % kLengthBytes, ' ');

  std::string prefix(kLengthBytes, '\0');
  const std::uint64_t n = json.size();
  std::memcpy(prefix.data(), &n, kLengthBytes);
  return prefix + json;
}

void write_safetensors(Env& env, const std::filesystem::path& path, std::span<const SafetensorsEntry> entries,
                       HfDtype dtype) {
  const std::string prefix = safetensors_prefix(entries, dtype);
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  write_atomically(env, path, tmp, [&](WritableFile& file) {
    file.append(std::as_bytes(std::span(prefix.data(), prefix.size())));
    for (const auto& e : entries) append_as(file, e.data, dtype);
  });
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile out(MappedFile::open(path));
  const auto bytes = out.file_.bytes();
  const auto bad = [&](const auto&... why) { return make_error(ErrorKind::Data, path.string(), ": ", why...); };

  if (bytes.size() < kLengthBytes) throw bad("file is ", bytes.size(), " bytes, too short for the 8-byte header length");
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), kLengthBytes);
  const std::uint64_t after_length = bytes.size() - kLengthBytes;
  if (header_size > after_length)
    throw bad("header length is ", header_size, " bytes but only ", after_length, " bytes follow it");
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
    if (t.begin != expected)
      throw bad("tensor '", t.name, "' starts at byte ", t.begin, " of the data buffer, expected ", expected,
                " (tensors must be contiguous)");
    expected = t.end;
  }
  if (expected != data_size) throw bad("tensors cover ", expected, " bytes but the data buffer holds ", data_size);

  for (auto& t : located) {
    t.info.bytes = std::span<const std::byte>(data + t.begin, t.end - t.begin);
    out.tensors_.emplace(std::move(t.name), std::move(t.info));
  }
  return out;
}

void SafetensorsFile::read_f32(const std::string& name, std::span<float> out) const {
  const SafetensorsInfo& t = tensors_.at(name);
  MERIDIAN_CHECK(out.size() == t.numel, name, ": ", t.numel, " values into ", out.size());
  const auto dtype = parse_hf_dtype(t.dtype);
  if (!dtype)
    throw make_error(ErrorKind::Data, path().string(), ": tensor '", name, "' is ", t.dtype,
                     "; weights must be F32, BF16 or F16");
  const std::byte* p = t.bytes.data();
  if (*dtype == HfDtype::F32) {
    if (!out.empty()) std::memcpy(out.data(), p, t.bytes.size());  // an empty span's data() may be null
    return;
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::uint16_t h;
    std::memcpy(&h, p + 2 * i, sizeof h);
    out[i] = *dtype == HfDtype::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
  }
}

std::map<std::string, SafetensorsTensor> read_safetensors(const std::filesystem::path& file) {
  const SafetensorsFile f = SafetensorsFile::open(file);
  std::map<std::string, SafetensorsTensor> out;
  for (const auto& [name, info] : f.tensors()) {
    SafetensorsTensor t{info.dtype, info.shape, std::vector<float>(info.numel)};
    f.read_f32(name, t.data);
    out.emplace(name, std::move(t));
  }
  return out;
}

}  // namespace meridian
