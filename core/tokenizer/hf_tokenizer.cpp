#include "core/tokenizer/hf_tokenizer.hpp"

#include <array>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/io/env.hpp"
#include "core/util/error.hpp"

namespace meridian {

const char* const kByteLevelPattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others for 256, 257, ...
const std::array<std::uint32_t, 256>& byte_chars() {
  static const std::array<std::uint32_t, 256> map = [] {
    std::array<std::uint32_t, 256> m{};
    std::uint32_t next = 256;
    for (std::uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      m[b] = printable ? b : next++;
    }
    return m;
  }();
  return map;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | cp >> 6);
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | cp >> 12);
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The next code point of `text` at `at` (advanced), or nullopt for a sequence other than the one-
// to three-byte forms the map's characters take.
std::optional<std::uint32_t> next_code_point(std::string_view text, std::size_t& at) {
  const auto c = static_cast<unsigned char>(text[at]);
  const auto cont = [&](std::size_t i) -> std::optional<std::uint32_t> {
    if (at + i >= text.size() || (static_cast<unsigned char>(text[at + i]) & 0xC0) != 0x80) return std::nullopt;
    return static_cast<unsigned char>(text[at + i]) & 0x3F;
  };
  if (c < 0x80) {
    ++at;
    return c;
  }
  if ((c & 0xE0) == 0xC0) {
    const auto a = cont(1);
    if (!a) return std::nullopt;
    at += 2;
    return (c & 0x1Fu) << 6 | *a;
  }
  if ((c & 0xF0) == 0xE0) {
    const auto a = cont(1), b = cont(2);
    if (!a || !b) return std::nullopt;
    at += 3;
    return (c & 0x0Fu) << 12 | *a << 6 | *b;
  }
  return std::nullopt;
}

}  // namespace

std::string bytes_to_chars(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) append_utf8(out, byte_chars()[b]);
  return out;
}

std::optional<std::string> chars_to_bytes(std::string_view text) {
  static const std::unordered_map<std::uint32_t, char> back = [] {
    std::unordered_map<std::uint32_t, char> m;
    for (int b = 0; b < 256; ++b) m.emplace(byte_chars()[b], static_cast<char>(b));
    return m;
  }();
  std::string out;
  for (std::size_t at = 0; at < text.size();) {
    const auto cp = next_code_point(text, at);
    if (!cp) return std::nullopt;
    const auto it = back.find(*cp);
    if (it == back.end()) return std::nullopt;
    out += it->second;
  }
  return out;
}

namespace {

class JsonFile {
 public:
  JsonFile(std::string_view text, const std::filesystem::path& file) : file_(file) {
    try {
      root_ = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw error("not valid JSON: ", e.what());
    }
    if (!root_.is_object()) throw error("not a JSON object");
  }
  template <class... Args>
  Error error(const Args&... why) const {
    return make_error(ErrorKind::Config, file_.string(), ": ", why...);
  }
  const nlohmann::json& root() const { return root_; }
  const nlohmann::json& at(const nlohmann::json& j, const char* key, const char* where) const {
    if (!j.is_object() || !j.contains(key)) throw error(where, " has no \"", key, "\"");
    return j.at(key);
  }

 private:
  std::filesystem::path file_;
  nlohmann::json root_;
};

// A field that should hold text: its text; what it holds instead, as JSON; "" when absent. Never
// throws, where nlohmann's value() throws on a field of another type.
std::string text_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return {};
  const auto& v = j.at(key);
  return v.is_string() ? v.get<std::string>() : v.dump();
}

bool null_or(const nlohmann::json& j, const char* key, const nlohmann::json& value) {
  return !j.contains(key) || j.at(key).is_null() || j.at(key) == value;
}

// The pre-tokenizer's pattern: ByteLevel's own, or a Split's before a ByteLevel without one.
std::string pattern_of(const JsonFile& f) {
  const auto& pre = f.at(f.root(), "pre_tokenizer", "the file");
  const auto type = [](const nlohmann::json& j) { return text_field(j, "type"); };
  const auto check_byte_level = [&](const nlohmann::json& b, bool own_regex) {
    if (!null_or(b, "add_prefix_space", false))
      throw f.error("pre_tokenizer ByteLevel has add_prefix_space = true, which meridian does not support");
    if (null_or(b, "use_regex", true) != own_regex)
      throw f.error(own_regex ? "pre_tokenizer ByteLevel without use_regex splits nothing"
                              : "pre_tokenizer ByteLevel after a Split has use_regex = true (a second split)");
  };
  if (type(pre) == "ByteLevel") {
    check_byte_level(pre, true);
    return kByteLevelPattern;
  }
  if (type(pre) == "Sequence" && pre.contains("pretokenizers") && pre.at("pretokenizers").is_array() &&
      pre.at("pretokenizers").size() == 2) {
    const auto& split = pre.at("pretokenizers")[0];
    const auto& byte_level = pre.at("pretokenizers")[1];
    const bool regex = split.contains("pattern") && split.at("pattern").is_object() &&
                       split.at("pattern").contains("Regex") && split.at("pattern").at("Regex").is_string();
    if (type(split) == "Split" && type(byte_level) == "ByteLevel" && regex &&
        text_field(split, "behavior") == "Isolated" && null_or(split, "invert", false)) {
      check_byte_level(byte_level, false);
      return split.at("pattern").at("Regex").get<std::string>();
    }
  }
  throw f.error("pre_tokenizer ", pre.dump().substr(0, 200),
                " is not one meridian reads (ByteLevel, or a Split by a Regex, Isolated, then ByteLevel)");
}

std::vector<std::string> vocab_of(const JsonFile& f, const nlohmann::json& model,
                                  const std::unordered_map<std::int32_t, std::string>& added) {
  const auto& vocab = f.at(model, "vocab", "model");
  if (!vocab.is_object()) throw f.error("model.vocab is not an object");
  std::vector<std::string> tokens(vocab.size());
  std::vector<bool> seen(vocab.size(), false);
  for (const auto& [text, id_json] : vocab.items()) {
    if (!id_json.is_number_integer() || id_json.get<std::int64_t>() < 0 ||
        id_json.get<std::int64_t>() >= static_cast<std::int64_t>(vocab.size()))
      throw f.error("model.vocab[\"", text, "\"] is ", id_json.dump(), ", expected an id from 0 to ", vocab.size() - 1);
    const auto id = id_json.get<std::int32_t>();
    if (seen[static_cast<std::size_t>(id)]) throw f.error("model.vocab gives id ", id, " twice");
    seen[static_cast<std::size_t>(id)] = true;
    if (const auto it = added.find(id); it != added.end() && it->second == text) {
      tokens[static_cast<std::size_t>(id)] = text;  // an added token in the vocabulary: its own text
      continue;
    }
    const auto bytes = chars_to_bytes(text);
    if (!bytes || bytes->empty())
      throw f.error("model.vocab[\"", text, "\"] is not a token of the byte-level alphabet");
    tokens[static_cast<std::size_t>(id)] = *bytes;
  }
  return tokens;
}

std::vector<std::pair<std::int32_t, std::int32_t>> merges_of(const JsonFile& f, const nlohmann::json& model,
                                                              const BpeModel& ids) {
  const auto& merges = f.at(model, "merges", "model");
  if (!merges.is_array()) throw f.error("model.merges is not an array");
  std::vector<std::pair<std::int32_t, std::int32_t>> out;
  out.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const auto& m = merges[i];
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const std::size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        throw f.error("model.merges[", i, "] \"", s, "\" is not two tokens separated by one space");
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      throw f.error("model.merges[", i, "] is ", m.dump(), ", expected \"a b\" or [\"a\", \"b\"]");
    }
    const auto l = chars_to_bytes(left), r = chars_to_bytes(right);
    const auto lid = l ? ids.find(*l) : std::nullopt, rid = r ? ids.find(*r) : std::nullopt;
    if (!lid || !rid) throw f.error("model.merges[", i, "] merges \"", left, "\" and \"", right, "\", not both tokens");
    if (!ids.find(*l + *r)) throw f.error("model.merges[", i, "] makes \"", left, right, "\", which is no token");
    out.emplace_back(*lid, *rid);
  }
  return out;
}

}  // namespace

Tokenizer load_tokenizer_json(const std::filesystem::path& file) {
  const auto bytes = posix_env().read_all(file);
  return tokenizer_from_json(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), file);
}

Tokenizer tokenizer_from_json(std::string_view text, const std::filesystem::path& file) {
  const JsonFile f(text, file);
  const auto& model = f.at(f.root(), "model", "the file");
  if (text_field(model, "type") != "BPE")
    throw f.error("model.type is ", model.contains("type") ? text_field(model, "type") : "absent",
                  ", meridian reads BPE");
  if (!null_or(model, "byte_fallback", false))
    throw f.error("model.byte_fallback is true: a SentencePiece-style BPE, not a byte-level one");
  if (!null_or(model, "continuing_subword_prefix", "") || !null_or(model, "end_of_word_suffix", ""))
    throw f.error("model has a continuing_subword_prefix or end_of_word_suffix, which a byte-level BPE has not");
  if (f.root().contains("normalizer") && !f.root().at("normalizer").is_null())
    throw f.error("normalizer ", f.root().at("normalizer").dump().substr(0, 100), " is not supported (none is)");
  std::vector<SpecialToken> specials;
  std::unordered_map<std::int32_t, std::string> added;
  if (f.root().contains("added_tokens") && f.root().at("added_tokens").is_array())
    for (const auto& t : f.root().at("added_tokens")) {
      const auto& id = f.at(t, "id", "an added token");
      const auto& content = f.at(t, "content", "an added token");
      if (!id.is_number_integer() || !content.is_string()) throw f.error("added token ", t.dump(), " has no integer id or text");
      specials.push_back({content.get<std::string>(), id.get<std::int32_t>()});
      added.emplace(specials.back().id, specials.back().text);
    }
  auto tokens = vocab_of(f, model, added);
  if (const std::string why = BpeModel::problem(tokens); !why.empty()) throw f.error("model.vocab: ", why);
  const BpeModel lookup = BpeModel::from_ranks(tokens);  // for the merges' ids only
  const auto merges = merges_of(f, model, lookup);
  const bool whole = !null_or(model, "ignore_merges", false);
  try {
    return Tokenizer(file.filename().string(), BpeModel::from_merges(std::move(tokens), merges, whole),
                     Pretokenizer(pattern_of(f), file.string()), std::move(specials));
  } catch (const Error& e) {
    throw f.error(e.what());
  }
}

std::string tokenizer_json(const ByteLevelBpe& bpe) {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (std::size_t id = 0; id < bpe.tokens.size(); ++id) vocab[bytes_to_chars(bpe.tokens[id])] = id;
  nlohmann::ordered_json merges = nlohmann::ordered_json::array();
  for (const auto& [l, r] : bpe.merges)
    merges.push_back({bytes_to_chars(bpe.tokens[static_cast<std::size_t>(l)]), bytes_to_chars(bpe.tokens[static_cast<std::size_t>(r)])});
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  for (const auto& s : bpe.specials)
    added.push_back({{"id", s.id}, {"content", s.text}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  const nlohmann::ordered_json j = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", bpe.pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merges}}},
  };
  return j.dump(2) + "\n";
}

}  // namespace meridian
