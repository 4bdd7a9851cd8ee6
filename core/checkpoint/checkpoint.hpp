#pragma once
// A checkpoint is an ordered set of named binary records; it knows nothing about models. The
// file format (FORMAT.md) frames and checksums every record, so a reader either gets exactly
// what was written or an Error saying which byte is wrong.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace meridian {

class WritableFile;

class Checkpoint {
 public:
  static constexpr std::size_t kMaxNameLength = 4096;
  // Marks the end of a file (FORMAT.md), so no user record may carry it.
  static constexpr std::string_view kEndRecordName = "__end__";

  // Replaces an existing record of that name, keeping its position. Names must be 1..4096 bytes
  // and not the reserved "__end__" (Error(Checkpoint) otherwise).
  void put(std::string name, std::vector<std::byte> data);

  template <class T>
  void put_pod(std::string name, std::span<const T> values) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* first = reinterpret_cast<const std::byte*>(values.data());
    put(std::move(name), std::vector<std::byte>(first, first + values.size_bytes()));
  }

  template <class T>
  void put_value(std::string name, const T& value) {
    put_pod(std::move(name), std::span<const T>(&value, 1));
  }

  bool has(std::string_view name) const;
  // Error(Checkpoint) naming the record when it is missing.
  std::span<const std::byte> get(std::string_view name) const;

  // Error(Checkpoint) when the record's size is not a multiple of sizeof(T).
  template <class T>
  std::vector<T> get_pod(std::string_view name) const {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto bytes = get(name);
    if (bytes.size() % sizeof(T) != 0) size_mismatch(name, bytes.size(), sizeof(T), "a multiple of ");
    std::vector<T> values(bytes.size() / sizeof(T));
    if (!bytes.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
    return values;
  }

  // The record's values where they lie, without a copy (for records of a model's size): valid
  // while the record is. Error(Checkpoint) when its size is not a multiple of sizeof(T).
  template <class T>
  std::span<const T> view_pod(std::string_view name) const {
    static_assert(std::is_trivially_copyable_v<T> && alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
    const auto bytes = get(name);
    if (bytes.size() % sizeof(T) != 0) size_mismatch(name, bytes.size(), sizeof(T), "a multiple of ");
    if (bytes.empty()) return {};
    // A record's bytes are a vector's own allocation: aligned for any such T, and the objects
    // implicitly created there are what the bytes written into it represent.
    return {std::launder(reinterpret_cast<const T*>(bytes.data())), bytes.size() / sizeof(T)};
  }

  // Error(Checkpoint) when the record's size is not sizeof(T).
  template <class T>
  T get_value(std::string_view name) const {
    static_assert(std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T>);
    const auto bytes = get(name);
    if (bytes.size() != sizeof(T)) size_mismatch(name, bytes.size(), sizeof(T), "");
    T value;
    std::memcpy(&value, bytes.data(), sizeof(T));
    return value;
  }

  // In insertion order, which is also file order.
  std::vector<std::string> names() const;
  std::size_t size() const { return records_.size(); }
  std::size_t bytes() const;  // the records' data, together

 private:
  struct Record {
    std::string name;
    std::vector<std::byte> data;
  };

  [[noreturn]] static void size_mismatch(std::string_view name, std::size_t size, std::size_t unit,
                                         const char* relation);

  std::vector<Record> records_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

// Streams the file bytes record by record, so a large model is never copied into one buffer.
void write_checkpoint(const Checkpoint& checkpoint, WritableFile& out);
// The whole file in memory; equal to what write_checkpoint appends.
std::vector<std::byte> encode_checkpoint(const Checkpoint& checkpoint);
// Verifies everything before returning. Error(Checkpoint) naming `source_name`, the byte offset
// and what failed: bad magic, unsupported version, truncated record, checksum mismatch in record
// "x", missing end record, ...
Checkpoint decode_checkpoint(std::span<const std::byte> file, const std::string& source_name);

}  // namespace meridian
