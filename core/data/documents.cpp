#include "core/data/documents.hpp"

#include <nlohmann/json.hpp>

#include "core/io/mapped_file.hpp"
#include "core/util/error.hpp"

namespace meridian {

DocumentReader::DocumentReader(std::vector<std::filesystem::path> inputs, std::string field)
    : inputs_(std::move(inputs)), field_(std::move(field)) {}

bool DocumentReader::open_next_file() {
  lines_.close();
  if (next_input_ >= inputs_.size()) return false;
  current_ = inputs_[next_input_++];
  line_ = 0;
  if (!std::filesystem::is_regular_file(current_))
    throw make_error(ErrorKind::Data, "input ", current_.string(), " does not exist or is not a file");
  return true;
}

bool DocumentReader::next(std::string& document) {
  for (;;) {
    if (lines_.is_open()) {
      std::string line;
      while (std::getline(lines_, line)) {
        ++line_;
        if (line.empty()) continue;
        nlohmann::json j;
        try {
          j = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception& e) {
          throw make_error(ErrorKind::Data, current_.string(), ":", line_, ": not a JSON line: ", e.what());
        }
        if (!j.is_object() || !j.contains(field_) || !j.at(field_).is_string())
          throw make_error(ErrorKind::Data, current_.string(), ":", line_, ": no string field \"", field_, "\"");
        document = j.at(field_).get<std::string>();
        return true;
      }
      if (lines_.bad()) throw make_error(ErrorKind::Io, "cannot read ", current_.string());
      lines_.close();
    }
    if (!open_next_file()) return false;
    if (current_.extension() == ".jsonl") {
      lines_.open(current_);
      if (!lines_) throw make_error(ErrorKind::Io, "cannot open ", current_.string());
      continue;
    }
    const MappedFile file = MappedFile::open(current_);
    document.assign(reinterpret_cast<const char*>(file.bytes().data()), file.bytes().size());
    return true;
  }
}

bool DocumentReader::next_batch(std::vector<std::string>& out, std::size_t max_bytes) {
  std::size_t taken = 0;
  bool any = false;
  std::string document;
  while (taken < max_bytes && next(document)) {
    taken += document.size();
    bytes_ += static_cast<std::int64_t>(document.size());
    ++documents_;
    out.push_back(std::move(document));
    any = true;
  }
  return any;
}

}  // namespace meridian
