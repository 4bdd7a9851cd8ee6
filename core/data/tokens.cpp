#include "core/data/tokens.hpp"

#include <string>

#include "core/util/error.hpp"

namespace meridian {

TokenFile load_token_file(const std::filesystem::path& path, DataFormat format) {
  const TokenShard shard = TokenShard::open(path, format);
  TokenFile out{std::vector<std::int32_t>(shard.size()), shard.id_space()};
  shard.copy(0, shard.size(), out.ids.data());
  for (std::size_t i = 0; i < out.ids.size(); ++i)
    if (out.ids[i] < 0)
      throw make_error(ErrorKind::Data, "llm.c shard ", path, ": token ", static_cast<std::uint32_t>(out.ids[i]),
                       " at index ", i, " is 2^31 or more (token ids are 31-bit)");
  return out;
}

void check_vocab(std::span<const std::int32_t> tokens, int vocab, const std::filesystem::path& source) {
  MERIDIAN_CHECK(vocab > 0, "vocab=", vocab);
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] >= vocab || tokens[i] < 0)
      throw make_error(ErrorKind::Data, "data file ", source, ": token ", tokens[i], " at index ", i,
                       " is outside the model's vocabulary of ", vocab);
}

void check_vocab(const TokenFile& file, int vocab, const std::filesystem::path& source) {
  check_id_space(file.id_space, vocab, source);
  check_vocab(file.ids, vocab, source);
}

}  // namespace meridian
