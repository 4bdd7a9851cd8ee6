#pragma once
// What the fuzz targets (fuzz/fuzz_*.cpp) share. Each target is a function
//   int meridian_fuzz_<name>(const std::uint8_t* data, std::size_t size)
// that hands the bytes to one decoder of outside input and returns 0. Input the decoder refuses
// with meridian::Error (its documented answer to bad bytes) is caught there; anything else leaves
// the function and is a finding: a crash, a sanitizer report, another exception (an
// InvariantError, a kj::Exception, std::out_of_range, ...), or a Finding the target throws when
// the decoder broke one of its own promises (a round trip that does not give back what it read).
//
// The same code serves two builds: with MERIDIAN_LIBFUZZER defined (the "fuzz" preset, clang,
// -fsanitize=fuzzer) each file also defines LLVMFuzzerTestOneInput; in the normal build the
// functions are linked into test_fuzz_corpus, which replays fuzz/corpus/<name>/ through them.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/error.hpp"

#ifdef MERIDIAN_LIBFUZZER
#define MERIDIAN_FUZZ_TARGET(name)                                                  \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { \
    return meridian_fuzz_##name(data, size);                                        \
  }
#else
#define MERIDIAN_FUZZ_TARGET(name)
#endif

namespace meridian::fuzz {

// A promise of the code under test broken without an exception of its own saying so.
class Finding : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

#define MERIDIAN_FUZZ_EXPECT(cond, ...)                                                                \
  do {                                                                                                 \
    if (!(cond))                                                                                       \
      throw ::meridian::fuzz::Finding(::meridian::detail::concat(__FILE__, ":", __LINE__, ": ", #cond, \
                                                                 " " __VA_OPT__(, ) __VA_ARGS__));     \
  } while (0)

// Reads an input front to back. Past its end every read gives zeros or nothing, so a target can
// read a fixed layout from any input.
class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : p_(data), left_(size) {}
  bool empty() const { return left_ == 0; }
  std::size_t left() const { return left_; }

  template <class T>
  T take() {
    T v{};
    const std::size_t n = std::min(sizeof(T), left_);
    if (n > 0) std::memcpy(&v, p_, n);
    skip(n);
    return v;
  }
  std::span<const std::byte> bytes(std::size_t n) {
    n = std::min(n, left_);
    const std::span<const std::byte> out(reinterpret_cast<const std::byte*>(p_), n);
    skip(n);
    return out;
  }
  // A piece with a 2-byte length in front.
  std::span<const std::byte> piece() { return bytes(take<std::uint16_t>()); }
  std::span<const std::byte> rest() { return bytes(left_); }
  std::string_view rest_text() {
    const auto b = rest();
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }

 private:
  void skip(std::size_t n) {
    if (n > 0) p_ += n;
    left_ -= n;
  }
  const std::uint8_t* p_;
  std::size_t left_;
};

inline std::string_view as_text(std::span<const std::byte> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

// A file holding `bytes` in a directory of this process's own under /dev/shm (memory, not disk),
// for loaders that take a path; removed with this object.
class TempFile {
 public:
  TempFile(std::string_view name, std::span<const std::byte> bytes);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::filesystem::path& path() const { return path_; }
  // Replaces the file's contents.
  void write(std::span<const std::byte> bytes) const;

 private:
  std::filesystem::path path_;
};

}  // namespace meridian::fuzz

// Every target, for the regression test.
int meridian_fuzz_records(const std::uint8_t* data, std::size_t size);
int meridian_fuzz_chunks(const std::uint8_t* data, std::size_t size);
int meridian_fuzz_store(const std::uint8_t* data, std::size_t size);
int meridian_fuzz_ops(const std::uint8_t* data, std::size_t size);
int meridian_fuzz_etcd(const std::uint8_t* data, std::size_t size);
int meridian_fuzz_config(const std::uint8_t* data, std::size_t size);
int meridian_fuzz_checkpoint(const std::uint8_t* data, std::size_t size);
int meridian_fuzz_tokens(const std::uint8_t* data, std::size_t size);
int meridian_fuzz_codec(const std::uint8_t* data, std::size_t size);
int meridian_fuzz_stripes(const std::uint8_t* data, std::size_t size);
int meridian_fuzz_parts(const std::uint8_t* data, std::size_t size);
int meridian_fuzz_hf(const std::uint8_t* data, std::size_t size);
int meridian_fuzz_tokenizer(const std::uint8_t* data, std::size_t size);
