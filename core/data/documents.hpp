#pragma once
// The documents of a corpus as `meridian tokenize` reads them, in order: a plain text file is one
// document (its bytes as they are); a JSON Lines file (.jsonl) is one document a line, the string
// in the line's `field`.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace meridian {

class DocumentReader {
 public:
  DocumentReader(std::vector<std::filesystem::path> inputs, std::string field);

  // Appends documents to `out` until their bytes reach `max_bytes` (at least one); false when
  // none was left. Error(Data) naming the file and line: missing or unreadable, a line that is not
  // a JSON object with a string `field`.
  bool next_batch(std::vector<std::string>& out, std::size_t max_bytes);
  std::int64_t documents() const { return documents_; }
  std::int64_t bytes() const { return bytes_; }

 private:
  bool next(std::string& document);
  bool open_next_file();

  std::vector<std::filesystem::path> inputs_;
  std::string field_;
  std::size_t next_input_ = 0;
  std::ifstream lines_;  // the open JSON Lines file
  std::filesystem::path current_;
  std::int64_t line_ = 0, documents_ = 0, bytes_ = 0;
};

}  // namespace meridian
