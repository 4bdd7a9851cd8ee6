#include "core/tokenizer/tokenizer_file.hpp"

#include <fstream>
#include <iterator>

#include "core/tokenizer/hf_tokenizer.hpp"
#include "core/tokenizer/tiktoken_file.hpp"
#include "core/util/error.hpp"

namespace meridian {

Tokenizer load_tokenizer(const std::filesystem::path& file, std::string_view encoding) {
  if (!std::filesystem::is_regular_file(file))
    throw make_error(ErrorKind::Config, "tokenizer file ", file.string(), " does not exist or is not a file");
  if (!encoding.empty()) return load_tiktoken(file, encoding);
  if (file.extension() == ".json") return load_tokenizer_json(file);
  const std::string stem = file.stem().string();
  if (file.extension() == ".tiktoken" && find_tiktoken_encoding(stem)) return load_tiktoken(file, stem);
  throw make_error(ErrorKind::Config, "tokenizer file ", file.string(),
                   " is neither a tokenizer.json nor a rank file named after its encoding: name the encoding");
}

Tokenizer load_tokenizer(const TokenizerFile& file, const std::filesystem::path& where) {
  const std::filesystem::path path = where / file.name;
  const std::string encoding = !file.encoding.empty() ? file.encoding : path.stem().string();
  if (!file.encoding.empty() || (path.extension() == ".tiktoken" && find_tiktoken_encoding(encoding)))
    return tiktoken_from_ranks(parse_tiktoken_ranks(file.bytes, path), path, encoding);
  return tokenizer_from_json(file.bytes, path);
}

TokenizerFile read_job_tokenizer(const std::filesystem::path& file, std::string_view encoding, int model_vocab) {
  const Tokenizer tokenizer = load_tokenizer(file, encoding);
  if (tokenizer.vocab_size() > model_vocab)
    throw make_error(ErrorKind::Config, "tokenizer ", file.string(), " has ", tokenizer.vocab_size(),
                     " tokens (specials included), more than the model's vocabulary of ", model_vocab);
  std::ifstream in(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) throw make_error(ErrorKind::Config, "tokenizer file ", file.string(), " cannot be read");
  return {file.filename().string(), std::move(bytes), std::string(encoding)};
}

}  // namespace meridian
