#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <span>

#include "core/util/aligned_vector.hpp"
#include "core/util/pages.hpp"

using namespace meridian;

namespace {
const std::size_t kPage = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

TEST_CASE("released pages leave the buffer's residency, read as zero, and the partial pages at the ends keep their values") {
  const std::size_t floats_per_page = kPage / sizeof(float);
  AlignedVector<float> buf(64 * floats_per_page, 1.0f);
  const std::span<float> all(buf);
  REQUIRE(resident_bytes(all) >= 64 * kPage);

  // From the middle of page 3 to the middle of page 40: pages 4..39 go, 3 and 40 stay.
  const std::size_t page0 = (reinterpret_cast<std::uintptr_t>(buf.data()) % kPage) / sizeof(float);
  const std::size_t begin = 3 * floats_per_page + floats_per_page / 2 - page0;
  const std::size_t end = 40 * floats_per_page + floats_per_page / 2 - page0;
  const std::size_t before = resident_bytes(all);
  release_pages(all.subspan(begin, end - begin));
  CHECK(resident_bytes(all) == before - 36 * kPage);
  CHECK(resident_bytes(all.subspan(begin, end - begin)) == 2 * kPage);
  // Writing to a released page maps it again (reading maps the kernel's shared zero page, which
  // mincore counts as resident too: so the values are read last).
  const auto first_released = buf.begin() + static_cast<std::ptrdiff_t>(4 * floats_per_page - page0);
  *first_released = 2.0f;
  CHECK(resident_bytes(all) == before - 35 * kPage);
  CHECK(std::all_of(buf.begin() + static_cast<std::ptrdiff_t>(begin),
                    buf.begin() + static_cast<std::ptrdiff_t>(begin + floats_per_page / 2), [](float x) { return x == 1.0f; }));
  CHECK(std::all_of(first_released + 1, first_released + static_cast<std::ptrdiff_t>(36 * floats_per_page),
                    [](float x) { return x == 0.0f; }));
  CHECK(std::all_of(buf.begin() + static_cast<std::ptrdiff_t>(end - floats_per_page / 2),
                    buf.begin() + static_cast<std::ptrdiff_t>(end), [](float x) { return x == 1.0f; }));
}

TEST_CASE("zero_and_release zeroes every element of the range and nothing outside it") {
  const std::size_t floats_per_page = kPage / sizeof(float);
  AlignedVector<float> buf(16 * floats_per_page, 3.0f);
  const std::size_t begin = 5, end = 11 * floats_per_page + 7;
  zero_and_release(std::span<float>(buf).subspan(begin, end - begin));
  for (std::size_t i = 0; i < buf.size(); ++i) {
    const bool inside = i >= begin && i < end;
    if (buf[i] != (inside ? 0.0f : 3.0f)) FAIL("element ", i, " is ", buf[i]);
  }
  // A range inside one page: written, nothing released.
  zero_and_release(std::span<float>(buf).subspan(1, 2));
  CHECK(buf[0] == 3.0f);
  CHECK(buf[1] == 0.0f);
  CHECK(buf[3] == 3.0f);
  CHECK(resident_bytes(std::span<const float>(buf).first(1)) == kPage);
}

TEST_CASE("a ZeroPageVector reads as zero and holds only the pages written") {
  const std::size_t floats_per_page = kPage / sizeof(float);
  ZeroPageVector<float> buf;
  buf.resize(64 * floats_per_page);
  const std::span<float> all(buf);
  // 64-byte aligned, and its end next to the guard page after it.
  REQUIRE(reinterpret_cast<std::uintptr_t>(buf.data()) % 64 == 0);
  CHECK((kPage - reinterpret_cast<std::uintptr_t>(buf.data() + buf.size()) % kPage) % kPage < 64);
  CHECK(resident_bytes(all) == 0);  // resize wrote nothing
  std::fill(buf.begin() + static_cast<std::ptrdiff_t>(8 * floats_per_page),
            buf.begin() + static_cast<std::ptrdiff_t>(12 * floats_per_page), 3.0f);
  CHECK(resident_bytes(all) == 4 * kPage);
  CHECK(std::all_of(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(8 * floats_per_page),
                    [](float x) { return x == 0.0f; }));
  CHECK(buf[8 * floats_per_page] == 3.0f);
  ZeroPageVector<double> copy(3, 2.5);  // constructed with a value: written as any vector's
  CHECK(copy == ZeroPageVector<double>{2.5, 2.5, 2.5});
  REQUIRE(reinterpret_cast<std::uintptr_t>(copy.data()) % 64 == 0);
  CHECK((kPage - reinterpret_cast<std::uintptr_t>(copy.data() + copy.size()) % kPage) % kPage < 64);
}
