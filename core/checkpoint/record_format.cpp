// The byte layout of checkpoint files; FORMAT.md is its specification.
#include <array>
#include <cctype>

#include "core/checkpoint/checkpoint.hpp"
#include "core/io/env.hpp"
#include "core/util/error.hpp"
#include "core/util/hash.hpp"

namespace meridian {

namespace {

constexpr std::array<char, 8> kFileMagic = {'M', 'R', 'D', 'N', 'C', 'K', 'P', 'T'};
constexpr std::uint32_t kFormatVersion = 1;
constexpr std::uint32_t kRecordMagic = 0x44524352;  // the bytes "RCRD" in little-endian
constexpr std::size_t kFileHeaderSize = 16;
constexpr std::size_t kRecordHeaderSize = 16;
constexpr std::size_t kHashSize = 8;
constexpr std::size_t kEndPayloadSize = 16;

// Explicit byte order, so files move between machines unchanged.
void store_le(std::byte* out, std::uint64_t value, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::byte>(value >> (8 * i));
}

std::uint64_t load_le(const std::byte* in, std::size_t bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < bytes; ++i) value |= std::uint64_t(in[i]) << (8 * i);
  return value;
}

// Records end 8-byte aligned, so padding depends only on the record's own lengths.
std::size_t padding_after(std::uint64_t name_and_payload) { return (8 - name_and_payload % 8) % 8; }

std::span<const std::byte> as_byte_span(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }

class RecordWriter {
 public:
  explicit RecordWriter(WritableFile& out) : out_(out) {
    std::array<std::byte, kFileHeaderSize> header{};
    std::memcpy(header.data(), kFileMagic.data(), kFileMagic.size());
    store_le(header.data() + 8, kFormatVersion, 4);
    out_.append(header);
  }

  void record(std::string_view name, std::span<const std::byte> payload) {
    std::array<std::byte, kRecordHeaderSize> header{};
    store_le(header.data(), kRecordMagic, 4);
    store_le(header.data() + 4, name.size(), 4);
    store_le(header.data() + 8, payload.size(), 8);
    // Trailer = zero padding then the hash; at most 7 + 8 bytes.
    std::array<std::byte, 16> trailer{};
    const std::size_t pad = padding_after(name.size() + payload.size());

    Hasher64 hasher;
    hasher.update(header.data(), header.size());
    hasher.update(name.data(), name.size());
    hasher.update(payload.data(), payload.size());
    hasher.update(trailer.data(), pad);
    const std::uint64_t hash = hasher.digest();
    store_le(trailer.data() + pad, hash, kHashSize);

    out_.append(header);
    out_.append(as_byte_span(name));
    out_.append(payload);
    out_.append(std::span(trailer).first(pad + kHashSize));

    std::array<std::byte, 8> hash_bytes{};
    store_le(hash_bytes.data(), hash, 8);
    chain_.update(hash_bytes.data(), hash_bytes.size());
    ++count_;
  }

  void finish() {
    std::array<std::byte, kEndPayloadSize> payload{};
    store_le(payload.data(), count_, 8);
    store_le(payload.data() + 8, chain_.digest(), 8);
    record(Checkpoint::kEndRecordName, payload);
  }

 private:
  WritableFile& out_;
  Hasher64 chain_;
  std::uint64_t count_ = 0;
};

class VectorFile final : public WritableFile {
 public:
  explicit VectorFile(std::vector<std::byte>& out) : out_(out) {}
  void append(std::span<const std::byte> data) override { out_.insert(out_.end(), data.begin(), data.end()); }
  void sync() override {}
  void close() override {}

 private:
  std::vector<std::byte>& out_;
};

// A record name read from a damaged file may hold any bytes; show it safely and briefly.
std::string printable(std::string_view raw) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < raw.size() && i < 64; ++i) {
    const auto c = static_cast<unsigned char>(raw[i]);
    if (std::isprint(c) && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (raw.size() > 64) out += "...";
  return out;
}

class Decoder {
 public:
  Decoder(std::span<const std::byte> file, const std::string& source) : file_(file), source_(source) {}

  Checkpoint run() {
    read_file_header();
    Checkpoint checkpoint;
    Hasher64 chain;
    std::uint64_t count = 0;
    while (true) {
      const std::size_t start = offset_;
      const auto [name, payload, hash] = read_record();
      if (name == Checkpoint::kEndRecordName) {
        check_end(start, payload, count, chain.digest());
        return checkpoint;
      }
      if (checkpoint.has(name)) fail(start, "duplicate record \"", printable(name), "\"");
      checkpoint.put(std::string(name), std::vector<std::byte>(payload.begin(), payload.end()));
      std::array<std::byte, 8> hash_bytes{};
      store_le(hash_bytes.data(), hash, 8);
      chain.update(hash_bytes.data(), hash_bytes.size());
      ++count;
    }
  }

 private:
  struct RawRecord {
    std::string_view name;
    std::span<const std::byte> payload;
    std::uint64_t hash;
  };

  template <class... Args>
  [[noreturn]] void fail(std::size_t offset, const Args&... what) const {
    throw make_error(ErrorKind::Checkpoint, "checkpoint ", source_, ": ", what..., " at byte offset ", offset);
  }

  std::size_t remaining() const { return file_.size() - offset_; }

  void read_file_header() {
    if (file_.size() < kFileHeaderSize) {
      fail(0, "file is ", file_.size(), " bytes, too short for the ", kFileHeaderSize, "-byte header");
    }
    if (std::memcmp(file_.data(), kFileMagic.data(), kFileMagic.size()) != 0) {
      fail(0, "bad magic (not a meridian checkpoint file)");
    }
    const auto version = load_le(file_.data() + 8, 4);
    if (version != kFormatVersion) {
      fail(8, "unsupported format version ", version, " (this build reads version ", kFormatVersion, ")");
    }
    const auto reserved = load_le(file_.data() + 12, 4);
    if (reserved != 0) fail(12, "reserved header field is ", reserved, ", expected 0");
    offset_ = kFileHeaderSize;
  }

  RawRecord read_record() {
    const std::size_t start = offset_;
    if (remaining() == 0) fail(start, "missing end record (file truncated?)");
    if (remaining() < kRecordHeaderSize) {
      fail(start, "truncated record header (", remaining(), " of ", kRecordHeaderSize, " bytes present)");
    }
    const std::byte* header = file_.data() + start;
    const auto magic = load_le(header, 4);
    if (magic != kRecordMagic) fail(start, "bad record magic 0x", std::hex, magic, std::dec);
    const std::uint64_t name_len = load_le(header + 4, 4);
    const std::uint64_t payload_len = load_le(header + 8, 8);
    if (name_len == 0 || name_len > Checkpoint::kMaxNameLength) {
      fail(start, "record name length ", name_len, " is outside 1..", Checkpoint::kMaxNameLength);
    }
    // Compared before any sum, so a corrupt length can neither overflow nor drive an allocation.
    const std::uint64_t available = remaining() - kRecordHeaderSize;
    const std::uint64_t pad = payload_len <= available ? padding_after(name_len + payload_len) : 0;
    if (payload_len > available || name_len + payload_len + pad + kHashSize > available) {
      fail(start, "truncated record (name ", name_len, " + payload ", payload_len, " bytes, only ", available,
           " bytes left)");
    }
    const std::byte* name_bytes = header + kRecordHeaderSize;
    const std::string_view name(reinterpret_cast<const char*>(name_bytes), name_len);
    const std::byte* payload = name_bytes + name_len;
    const std::byte* stored_hash = payload + payload_len + pad;
    const std::uint64_t hash = hash64(header, static_cast<std::size_t>(stored_hash - header));
    if (hash != load_le(stored_hash, kHashSize)) {
      fail(start, "checksum mismatch in record \"", printable(name), "\"");
    }
    offset_ = static_cast<std::size_t>(stored_hash + kHashSize - file_.data());
    return {name, {payload, payload_len}, hash};
  }

  void check_end(std::size_t start, std::span<const std::byte> payload, std::uint64_t count,
                 std::uint64_t chain) const {
    if (payload.size() != kEndPayloadSize) {
      fail(start, "end record has ", payload.size(), " payload bytes, expected ", kEndPayloadSize);
    }
    const auto stored_count = load_le(payload.data(), 8);
    if (stored_count != count) fail(start, "end record counts ", stored_count, " records but the file has ", count);
    if (load_le(payload.data() + 8, 8) != chain) fail(start, "end record hash does not match the records");
    if (offset_ != file_.size()) fail(offset_, file_.size() - offset_, " unexpected bytes after the end record");
  }

  std::span<const std::byte> file_;
  const std::string& source_;
  std::size_t offset_ = 0;
};

}  // namespace

void write_checkpoint(const Checkpoint& checkpoint, WritableFile& out) {
  RecordWriter writer(out);
  for (const auto& name : checkpoint.names()) writer.record(name, checkpoint.get(name));
  writer.finish();
}

std::vector<std::byte> encode_checkpoint(const Checkpoint& checkpoint) {
  std::vector<std::byte> bytes;
  VectorFile file(bytes);
  write_checkpoint(checkpoint, file);
  return bytes;
}

Checkpoint decode_checkpoint(std::span<const std::byte> file, const std::string& source_name) {
  return Decoder(file, source_name).run();
}

}  // namespace meridian
