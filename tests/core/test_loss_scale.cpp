// The fp16 loss scaler as a state machine: growth after clean steps, halving and skipping on
// overflow, bounds, the collapse signal, restore.
#include <doctest/doctest.h>

#include "core/optim/loss_scale.hpp"
#include "core/util/error.hpp"

using namespace meridian;

namespace {

LossScaleOptions small_options() {
  LossScaleOptions o;
  o.initial = 1024.0f;
  o.growth_interval = 3;
  o.min_scale = 1.0f;
  o.max_scale = 4096.0f;
  o.collapse_scale = 8.0f;
  return o;
}

}  // namespace

TEST_CASE("the scale doubles after growth_interval clean steps and stops at max_scale") {
  LossScaler s(small_options());
  CHECK_FALSE(s.update(false).grew);
  CHECK_FALSE(s.update(false).grew);
  const auto third = s.update(false);
  CHECK(third.grew);
  CHECK(third.apply_step);
  CHECK(s.scale() == 2048.0f);
  CHECK(s.clean_steps() == 0);
  for (int i = 0; i < 3; ++i) s.update(false);
  CHECK(s.scale() == 4096.0f);
  for (int i = 0; i < 2; ++i) s.update(false);
  const auto capped = s.update(false);
  CHECK_FALSE(capped.grew);
  CHECK(s.scale() == 4096.0f);
}

TEST_CASE("an overflow skips the step, halves the scale and restarts the clean count") {
  LossScaler s(small_options());
  s.update(false);
  s.update(false);
  const auto d = s.update(true);
  CHECK_FALSE(d.apply_step);
  CHECK(d.backed_off);
  CHECK(s.scale() == 512.0f);
  CHECK(s.clean_steps() == 0);
  CHECK(s.skipped_steps() == 1);
  s.update(false);
  s.update(false);
  CHECK(s.scale() == 512.0f);  // two clean steps since the overflow: not yet
  CHECK(s.update(false).grew);
}

TEST_CASE("a scale falling to collapse_scale is flagged, and it never goes below min_scale") {
  LossScaler s(small_options());
  int overflows = 0;
  LossScaleDecision d;
  while (!(d = s.update(true)).collapsing) ++overflows;
  CHECK(s.scale() == 8.0f);
  CHECK(overflows == 6);  // 1024 -> 512 ... -> 16, then 8 collapses
  for (int i = 0; i < 10; ++i) d = s.update(true);
  CHECK(s.scale() == 1.0f);
  CHECK(d.collapsing);
  CHECK_FALSE(d.apply_step);
  CHECK(s.skipped_steps() == 17);
  // Recovery: clean steps grow it back out of the collapse zone.
  for (int i = 0; i < 3 * 4; ++i) d = s.update(false);
  CHECK(s.scale() == 16.0f);
  CHECK_FALSE(d.collapsing);
}

TEST_CASE("inconsistent options are Error(Config), a bad restored state Error(Checkpoint)") {
  auto bad = small_options();
  bad.min_scale = 0.0f;
  CHECK_THROWS_AS(LossScaler{bad}, Error);
  bad = small_options();
  bad.initial = 8192.0f;
  CHECK_THROWS_AS(LossScaler{bad}, Error);
  bad = small_options();
  bad.growth_interval = 0;
  CHECK_THROWS_AS(LossScaler{bad}, Error);

  LossScaler s(small_options());
  s.restore(256.0f, 2, 5);
  CHECK(s.scale() == 256.0f);
  CHECK(s.update(false).grew);
  try {
    s.restore(1e9f, 0, 0);
    FAIL("restore accepted a scale above max_scale");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Checkpoint);
  }
  CHECK_THROWS_AS(s.restore(256.0f, 3, 0), Error);
}
