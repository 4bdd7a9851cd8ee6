#include "core/checkpoint/checkpoint.hpp"

#include "core/util/error.hpp"

namespace meridian {

void Checkpoint::put(std::string name, std::vector<std::byte> data) {
  if (name.empty() || name.size() > kMaxNameLength) {
    throw make_error(ErrorKind::Checkpoint, "record name must be 1..", kMaxNameLength, " bytes, got ",
                     name.size());
  }
  if (name == kEndRecordName) {
    throw make_error(ErrorKind::Checkpoint, "record name \"", kEndRecordName, "\" is reserved");
  }
  if (const auto it = index_.find(name); it != index_.end()) {
    records_[it->second].data = std::move(data);
    return;
  }
  index_.emplace(name, records_.size());
  records_.push_back({std::move(name), std::move(data)});
}

bool Checkpoint::has(std::string_view name) const { return index_.find(name) != index_.end(); }

std::span<const std::byte> Checkpoint::get(std::string_view name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) throw make_error(ErrorKind::Checkpoint, "checkpoint has no record \"", name, "\"");
  return records_[it->second].data;
}

std::size_t Checkpoint::bytes() const {
  std::size_t n = 0;
  for (const auto& r : records_) n += r.data.size();
  return n;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(records_.size());
  for (const auto& r : records_) out.push_back(r.name);
  return out;
}

void Checkpoint::size_mismatch(std::string_view name, std::size_t size, std::size_t unit,
                               const char* relation) {
  throw make_error(ErrorKind::Checkpoint, "checkpoint record \"", name, "\" has ", size,
                   " bytes, expected ", relation, unit);
}

}  // namespace meridian
