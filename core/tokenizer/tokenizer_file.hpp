#pragma once
// A tokenizer from its file: a Hugging Face tokenizer.json, or a tiktoken rank file with the
// name of its encoding (which a file named <encoding>.tiktoken gives by itself).
#include <filesystem>
#include <string_view>

#include "core/tokenizer/tokenizer.hpp"

namespace meridian {

// Error(Config) naming the file: an unreadable or malformed one, or a rank file whose encoding
// neither `encoding` nor its name says.
Tokenizer load_tokenizer(const std::filesystem::path& file, std::string_view encoding = {});

}  // namespace meridian
