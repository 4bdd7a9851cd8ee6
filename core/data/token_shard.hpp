#pragma once
// One file of tokens, memory-mapped: a text file (its bytes are the tokens, vocab 256) or an llm.c
// shard (a 256 x int32 header, then uint16 tokens: magic 20240520, version 1; or uint32 tokens:
// magic 20240801, version 7). Only the windows a reader copies are paged in, so a replica's
// resident memory does not grow with the corpus.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

#include "core/io/mapped_file.hpp"

namespace meridian {

enum class DataFormat {
  Text,     // the file's bytes are the tokens (byte-level tokenizer, vocab 256)
  LlmcBin,  // llm.c shard, 16-bit or 32-bit ids as its header says
};

// "text" | "llmc-bin"; nullopt for anything else.
std::optional<DataFormat> parse_data_format(std::string_view name);

// Error(Data) naming the file when its ids are 16-bit (llm.c version 1) and the model's vocabulary
// is larger: the data was tokenized for another vocabulary.
void check_id_space(std::int64_t id_space, int vocab, const std::filesystem::path& path);

class TokenShard {
 public:
  // Error(Data) naming the path and the problem: missing, not a regular file, empty, a bad llm.c
  // header field (expected vs found), truncated or with trailing bytes.
  static TokenShard open(const std::filesystem::path& path, DataFormat format);

  const std::filesystem::path& path() const { return file_.path(); }
  std::uint64_t size() const { return count_; }  // tokens
  // The ids the file's encoding can hold: 256 (text), 65,536 (16-bit shards), 2^31 (32-bit).
  std::int64_t id_space() const { return id_space_; }

  // Tokens [begin, begin + n) as int32; the range must lie within the shard. The pages read are
  // released after (MappedFile::release_pages): a shard never stays resident.
  void copy(std::uint64_t begin, std::uint64_t n, std::int32_t* out) const;

  // Reads every token once: Error(Data) naming the file and the first token outside [0, vocab)
  // (its index and value), or a vocabulary the file's encoding cannot address. The pass leaves no
  // page of the file resident in this process.
  void check_vocab(int vocab) const;

 private:
  TokenShard(MappedFile file, std::size_t header_bytes, std::size_t token_bytes, std::uint64_t count);
  MappedFile file_;
  std::size_t header_bytes_, token_bytes_;
  std::uint64_t count_;
  std::int64_t id_space_;
};

}  // namespace meridian
