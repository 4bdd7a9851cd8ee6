#include "core/tokenizer/tokenizer_file.hpp"

#include <fstream>
#include <iterator>

#include "core/tokenizer/hf_tokenizer.hpp"
#include "core/tokenizer/tiktoken_file.hpp"
#include "core/util/error.hpp"

namespace meridian {

namespace {

// The file's name and bytes as a job keeps them; Error(Config) when it is missing or unreadable.
TokenizerFile read_tokenizer_file(const std::filesystem::path& file, std::string_view encoding) {
  if (!std::filesystem::is_regular_file(file))
    throw make_error(ErrorKind::Config, "tokenizer file ", file.string(), " does not exist or is not a file");
  std::ifstream in(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) throw make_error(ErrorKind::Config, "tokenizer file ", file.string(), " cannot be read");
  return {file.filename().string(), std::move(bytes), std::string(encoding)};
}

}  // namespace

Tokenizer load_tokenizer(const TokenizerFile& file, const std::filesystem::path& where) {
  const std::filesystem::path path = where / file.name;
  const auto ranks = [&](std::string_view encoding) {
    return tiktoken_from_ranks(parse_tiktoken_ranks(file.bytes, path), path, encoding);
  };
  if (!file.encoding.empty()) return ranks(file.encoding);
  if (path.extension() == ".json") return tokenizer_from_json(file.bytes, path);
  const std::string stem = path.stem().string();
  if (path.extension() == ".tiktoken" && find_tiktoken_encoding(stem)) return ranks(stem);
  throw make_error(ErrorKind::Config, "tokenizer file ", path.string(),
                   " is neither a tokenizer.json nor a rank file named after its encoding: name the encoding");
}

Tokenizer load_tokenizer(const std::filesystem::path& file, std::string_view encoding) {
  return load_tokenizer(read_tokenizer_file(file, encoding), file.parent_path());
}

TokenizerFile read_job_tokenizer(const std::filesystem::path& file, std::string_view encoding, int model_vocab) {
  TokenizerFile kept = read_tokenizer_file(file, encoding);
  const Tokenizer tokenizer = load_tokenizer(kept, file.parent_path());
  if (tokenizer.vocab_size() > model_vocab)
    throw make_error(ErrorKind::Config, "tokenizer ", file.string(), " has ", tokenizer.vocab_size(),
                     " tokens (specials included), more than the model's vocabulary of ", model_vocab);
  return kept;
}

}  // namespace meridian
