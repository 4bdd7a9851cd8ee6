// Choosing the next token: greedy, the softmax at a temperature, top-k and top-p cuts; the draws'
// frequencies against the distribution they come from, and a seed that replays them.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <vector>

#include "core/generate/sampling.hpp"
#include "core/util/error.hpp"

using namespace meridian;

namespace {

// Frequencies of `draws` samples, each token's count.
std::map<std::int32_t, int> histogram(const std::vector<float>& logits, const SamplingOptions& o, int draws,
                                      std::uint64_t seed) {
  Rng rng(seed);
  std::map<std::int32_t, int> counts;
  for (int i = 0; i < draws; ++i) ++counts[sample_token(logits, o, rng)];
  return counts;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  std::vector<double> p(logits.size());
  double sum = 0;
  for (std::size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp(logits[i] / temperature);
  for (auto& x : p) x /= sum;
  return p;
}

const std::vector<float> kLogits = {0.5f, 2.0f, -1.0f, 1.5f, 2.0f, 0.0f, -3.0f, 1.0f};

}  // namespace

TEST_CASE("temperature 0 is the most likely token, the lowest id among equals, and draws nothing") {
  Rng rng(5);
  CHECK(sample_token(kLogits, {0.0, 0, 1.0}, rng) == 1);
  CHECK(rng.state() == Rng(5).state());
  CHECK(sample_token(kLogits, {1.0, 1, 1.0}, rng) == 1);   // top-1 is greedy too
  CHECK(sample_token(kLogits, {1.0, 0, 1e-9}, rng) == 1);  // and so is a tiny nucleus
}

TEST_CASE("draws follow the softmax at the temperature: every frequency within 4 standard deviations") {
  for (const double temperature : {1.0, 0.5, 2.0}) {
    CAPTURE(temperature);
    const int draws = 40000;
    const auto counts = histogram(kLogits, {temperature, 0, 1.0}, draws, 17);
    const auto p = softmax(kLogits, temperature);
    for (std::size_t i = 0; i < p.size(); ++i) {
      const double expected = p[i] * draws, sd = std::sqrt(draws * p[i] * (1 - p[i]));
      const int seen = counts.count(static_cast<std::int32_t>(i)) ? counts.at(static_cast<std::int32_t>(i)) : 0;
      CAPTURE(i);
      CHECK(std::abs(seen - expected) <= 4 * sd + 1);
    }
  }
}

TEST_CASE("top-k keeps the k most likely tokens, top-p the fewest whose probability reaches p, renormalised") {
  const auto top3 = histogram(kLogits, {1.0, 3, 1.0}, 20000, 3);
  CHECK(top3.size() == 3);  // ids 1 and 4 (2.0) and 3 (1.5)
  CHECK(top3.count(1) == 1);
  CHECK(top3.count(4) == 1);
  CHECK(top3.count(3) == 1);
  // Probabilities at temperature 1: 1 and 4 hold 0.295 each, 3 holds 0.179; together 0.769.
  const auto p = softmax(kLogits, 1.0);
  CHECK(p[1] + p[4] < 0.6);
  CHECK(p[1] + p[4] + p[3] > 0.6);
  const auto nucleus = histogram(kLogits, {1.0, 0, 0.6}, 20000, 4);
  CHECK(nucleus.size() == 3);
  CHECK(nucleus.count(3) == 1);
  const double share3 = nucleus.at(3) / 20000.0, expected3 = p[3] / (p[1] + p[4] + p[3]);
  CHECK(std::abs(share3 - expected3) < 0.02);
  const auto both = histogram(kLogits, {1.0, 2, 0.99}, 2000, 5);  // the stricter cut wins
  CHECK(both.size() == 2);
}

TEST_CASE("a seed replays its draws, another seed gives others") {
  const SamplingOptions o{0.9, 5, 0.95};
  Rng a(42), b(42), c(43);
  std::vector<std::int32_t> da, db, dc;
  for (int i = 0; i < 50; ++i) {
    da.push_back(sample_token(kLogits, o, a));
    db.push_back(sample_token(kLogits, o, b));
    dc.push_back(sample_token(kLogits, o, c));
  }
  CHECK(da == db);
  CHECK(da != dc);
}

TEST_CASE("bad options are named, and logits that are not finite are an error naming the token") {
  CHECK(validate_sampling({}).empty());
  const auto problems = validate_sampling({-1.0, -2, 0.0});
  REQUIRE(problems.size() == 3);
  CHECK(problems[0].find("temperature") == 0);
  CHECK(problems[1].find("top_k") == 0);
  CHECK(problems[2].find("top_p") == 0);
  CHECK(validate_sampling({1.0, 0, 1.5}).size() == 1);
  CHECK(validate_sampling({NAN, 0, 1.0}).size() == 1);
  std::vector<float> broken = kLogits;
  broken[6] = NAN;
  Rng rng(1);
  try {
    sample_token(broken, {}, rng);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Data);
    CHECK(std::string(e.what()).find("token 6") != std::string::npos);
  }
}
