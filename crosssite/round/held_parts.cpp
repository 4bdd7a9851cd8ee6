#include "crosssite/round/held_parts.hpp"

#include <cstring>

#include "core/util/error.hpp"

namespace meridian {
namespace {

template <class T>
void put(std::vector<std::byte>& out, const T* data, std::size_t count) {
  const std::uint64_t n = count;
  const auto at = out.size();
  out.resize(at + sizeof n + count * sizeof(T));
  std::memcpy(out.data() + at, &n, sizeof n);
  if (count > 0) std::memcpy(out.data() + at + sizeof n, data, count * sizeof(T));
}

template <class T>
std::vector<T> take(std::span<const std::byte>& in) {
  std::uint64_t n = 0;
  MERIDIAN_CHECK(in.size() >= sizeof n, "a part report cut short: ", in.size(), " bytes left");
  std::memcpy(&n, in.data(), sizeof n);
  MERIDIAN_CHECK(n <= (in.size() - sizeof n) / sizeof(T), "a part report claims ", n, " items in ", in.size(),
                 " bytes");
  std::vector<T> v(n);
  if (n > 0) std::memcpy(v.data(), in.data() + sizeof n, n * sizeof(T));
  in = in.subspan(sizeof n + n * sizeof(T));
  return v;
}

}  // namespace

std::vector<std::byte> encode_part_report(const PartReport& report) {
  std::vector<std::byte> out;
  const std::uint64_t where[2] = {report.tally.first(), report.tally.values()};
  put(out, where, 2);
  put(out, report.units.data(), report.units.size());
  put(out, report.tally.units().data(), report.tally.units().size());
  put(out, report.tally.bad().data(), report.tally.bad().size());
  return out;
}

PartReport decode_part_report(std::span<const std::byte> bytes) {
  const auto where = take<std::uint64_t>(bytes);
  MERIDIAN_CHECK(where.size() == 2, "a part report's place of ", where.size(), " numbers");
  auto units = take<Digest>(bytes);
  auto sums = take<double>(bytes);
  const auto bad = take<char>(bytes);
  MERIDIAN_CHECK(bytes.empty(), "a part report with ", bytes.size(), " bytes after it");
  return {std::move(units),
          DeltaScreen::Tally(where[0], where[1], std::move(sums), std::string(bad.begin(), bad.end()))};
}

std::optional<HeldInParts> held_in_parts(std::span<const std::vector<std::byte>> reports, std::string ref) {
  MERIDIAN_CHECK(!reports.empty(), "a delta held in no parts");
  HeldInParts held{{}, DeltaScreen::Tally(0), std::move(ref)};
  for (std::size_t i = 0; i < reports.size(); ++i) {
    auto part = decode_part_report(reports[i]);
    if (i == 0) {
      if (part.tally.first() != 0) return std::nullopt;
      held.tally = std::move(part.tally);
    } else {
      if (part.tally.first() != held.tally.first() + held.tally.values()) return std::nullopt;
      held.tally.join(part.tally);
    }
    held.units.insert(held.units.end(), part.units.begin(), part.units.end());
  }
  return held;
}

}  // namespace meridian
