// The trainer on a GPU (core/train/device_step.hpp) against the trainer on the CPU, the reference:
// the same job, data and seed must give the same losses, gradient norms, weights and validation
// loss, through the group's reduce hook, host edits of the weights (what the layers above do at a
// round's end) and snapshot/restore (heal, checkpoints, the divergence guard). The GPU cases skip
// without a device; the start-up refusals run where there is none.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/config/job_config.hpp"
#include "core/device/cuda_probe.hpp"
#include "core/io/env.hpp"
#include "core/model/language_model.hpp"
#include "core/runlog/run_log.hpp"
#include "core/train/device_step.hpp"
#include "core/train/trainer.hpp"
#include "core/util/error.hpp"
#include "tests/support/cuda_parity.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/tiny_job.hpp"

using namespace meridian;
using meridian::testing::have_gpu;
using meridian::testing::TempDir;
using meridian::testing::fake_clock;
using meridian::testing::tiny_job;

namespace {

using Device = JobConfig::Site::Device;
using Precision = JobConfig::Site::Precision;

ComputeDevice gpu(Precision precision = Precision::Fp32,
                  JobConfig::Site::Attention attention = JobConfig::Site::Attention::Materialized) {
  return {Device::Cuda, precision, attention, 0};
}

struct Trace {
  std::vector<double> losses, norms;
};

Trace train(Trainer& t, int steps) {
  Trace out;
  for (int i = 0; i < steps; ++i) {
    const auto r = t.step();
    out.losses.push_back(r.loss);
    out.norms.push_back(r.grad_norm);
  }
  return out;
}

std::vector<float> weights(Trainer& t) {
  const auto p = t.model().params();
  return {p.begin(), p.end()};
}

}  // namespace

TEST_CASE("a trainer asked for a GPU where there is none fails at start-up with the probe's reason") {
  if (cuda_device_count() > 0) {
    MESSAGE("skipped: a CUDA device is present");
    return;
  }
  TempDir dir("cuda_trainer_none");
  const auto config = tiny_job(dir, "run", {"inner.grad_accum=2"});
  RunLog log(config.job.run_dir);
  CHECK_THROWS_AS(Trainer(config, posix_env(), log, nullptr, fake_clock, {}, gpu()), DeviceError);
}

TEST_CASE("SGD as the inner optimizer is refused on a GPU before the device is touched") {
  TempDir dir("cuda_trainer_sgd");
  const auto config = tiny_job(dir, "run", {"inner.optimizer=\"sgd\""});
  RunLog log(config.job.run_dir);
  try {
    Trainer t(config, posix_env(), log, nullptr, fake_clock, {}, gpu());
    FAIL("a GPU trainer with SGD was built");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Config);
    CHECK(std::string(e.what()).find("sgd") != std::string::npos);
  }
}

TEST_CASE("fp32 on a GPU follows the CPU trainer step for step, with either attention kernel") {
  if (!have_gpu()) return;
  TempDir dir("cuda_trainer_fp32");
  const auto config = tiny_job(dir, "run", {"inner.grad_accum=2"});
  RunLog log(config.job.run_dir);
  for (const auto attention : {JobConfig::Site::Attention::Materialized, JobConfig::Site::Attention::Tiled}) {
    CAPTURE(to_string(attention));
    Trainer cpu(config, posix_env(), log, nullptr, fake_clock);
    Trainer dev(config, posix_env(), log, nullptr, fake_clock, {}, gpu(Precision::Fp32, attention));
    CHECK(weights(dev) == weights(cpu));  // the same initialisation, uploaded
    const auto a = train(cpu, 8), b = train(dev, 8);
    CHECK_CLOSE(b.losses, a.losses, 1e-4);
    CHECK_CLOSE(b.norms, a.norms, 1e-4);
    CHECK_CLOSE(weights(dev), weights(cpu), 1e-4);
    CHECK(dev.validation_loss() == doctest::Approx(cpu.validation_loss()).epsilon(1e-4));
    CHECK(dev.state().step == cpu.state().step);
    CHECK(dev.state().tokens == cpu.state().tokens);
    // The SDC fingerprint on the device equals the CPU's over the same (downloaded) weights.
    const auto w = weights(dev);
    std::copy(w.begin(), w.end(), cpu.model().params().begin());
    CHECK(dev.params_hash() == cpu.params_hash());
  }
}

TEST_CASE("the group's reduce and host edits of the weights reach the device") {
  if (!have_gpu()) return;
  TempDir dir("cuda_trainer_hooks");
  const auto config = tiny_job(dir, "run", {"inner.grad_accum=2"});
  RunLog log(config.job.run_dir);
  // A stand-in for the group's all-reduce that changes what it is given, so a lost round trip shows.
  ReplicaSlot slot;
  slot.reduce = [](std::span<float> grads, double& loss) {
    for (float& g : grads) g *= 0.5f;
    loss += 1.0;
  };
  Trainer cpu(config, posix_env(), log, nullptr, fake_clock, slot);
  Trainer dev(config, posix_env(), log, nullptr, fake_clock, slot, gpu());
  auto a = train(cpu, 3), b = train(dev, 3);
  CHECK_CLOSE(b.losses, a.losses, 1e-4);
  CHECK_CLOSE(b.norms, a.norms, 1e-4);
  // What a round's end does: rewrite the weights on the host (here: halve them).
  for (Trainer* t : {&cpu, &dev})
    for (float& w : t->model().params()) w *= 0.5f;
  a = train(cpu, 3);
  b = train(dev, 3);
  CHECK_CLOSE(b.losses, a.losses, 1e-4);
  CHECK_CLOSE(weights(dev), weights(cpu), 1e-4);
}

TEST_CASE("a snapshot taken on a GPU restores the device's weights, moments and step") {
  if (!have_gpu()) return;
  TempDir dir("cuda_trainer_snapshot");
  const auto config = tiny_job(dir, "run", {"inner.grad_accum=2"});
  RunLog log(config.job.run_dir);
  Trainer first(config, posix_env(), log, nullptr, fake_clock, {}, gpu());
  train(first, 4);
  const Checkpoint saved = first.snapshot();
  Trainer second(config, posix_env(), log, nullptr, fake_clock, {}, gpu());
  second.restore(saved, "the first trainer");
  Trainer on_cpu(config, posix_env(), log, nullptr, fake_clock);
  on_cpu.restore(saved, "the first trainer");
  const auto a = train(first, 3), b = train(second, 3), c = train(on_cpu, 3);
  CHECK(b.losses == a.losses);  // the device's kernels are deterministic: bit-identical
  CHECK(weights(second) == weights(first));
  CHECK_CLOSE(c.losses, a.losses, 1e-4);  // and the state moves between backends
}

TEST_CASE("bf16 mixed precision on a GPU trains like the CPU within bf16's error") {
  if (!have_gpu()) return;
  TempDir dir("cuda_trainer_bf16");
  const auto config = tiny_job(dir, "run", {"inner.grad_accum=2"});
  RunLog log(config.job.run_dir);
  Trainer cpu(config, posix_env(), log, nullptr, fake_clock);
  const auto a = train(cpu, 10);
  for (const auto attention : {JobConfig::Site::Attention::Materialized, JobConfig::Site::Attention::Cudnn}) {
    CAPTURE(to_string(attention));
    Trainer dev(config, posix_env(), log, nullptr, fake_clock, {}, gpu(Precision::Bf16, attention));
    MESSAGE("attention: " << dev.device_attention());
    const auto b = train(dev, 10);
    CHECK_CLOSE(b.losses, a.losses, 2e-2);
    CHECK(b.losses.back() < b.losses.front());
    // Two runs of the same job give the same losses, bit for bit: no kernel sums in a racing order.
    Trainer again(config, posix_env(), log, nullptr, fake_clock, {}, gpu(Precision::Bf16, attention));
    CHECK(train(again, 10).losses == b.losses);
  }
}

TEST_CASE("fp16 on a GPU scales the loss: an overflowed step is skipped, the scale backs off, training goes on") {
  if (!have_gpu()) return;
  TempDir dir("cuda_trainer_fp16");
  const auto config = tiny_job(dir, "run", {"inner.grad_accum=2"});
  RunLog log(config.job.run_dir);
  // Started at the ceiling, 2^24, the first steps' gradients overflow fp16 (the first GPU run, at
  // the default 2^16, overflowed in none of 20 steps and never reached the skip path).
  auto device = gpu(Precision::Fp16);
  device.loss_scale.initial = device.loss_scale.max_scale;
  Trainer dev(config, posix_env(), log, nullptr, fake_clock, {}, device);
  std::vector<double> losses;
  int skipped = 0;
  double scale = 0;
  for (int i = 0; i < 40; ++i) {
    const auto before = weights(dev);
    const auto r = dev.step();
    CHECK(r.loss_scale > 0);
    if (r.skipped) {
      ++skipped;
      CHECK(weights(dev) == before);  // the update was not applied
      if (scale > 0) CHECK(r.loss_scale == scale / 2);
    } else {
      losses.push_back(r.loss);
    }
    CHECK(dev.state().step == i + 1);  // a skipped step still counts
    scale = r.loss_scale;
  }
  MESSAGE("fp16: ", skipped, " of 40 steps skipped, final loss scale ", scale);
  CHECK(skipped >= 1);
  REQUIRE(losses.size() >= 10);
  CHECK(losses.back() < losses.front());
  // The scaler is part of the state: a restored trainer takes the same decisions.
  Trainer resumed(config, posix_env(), log, nullptr, fake_clock, {}, device);
  resumed.restore(dev.snapshot(), "the fp16 trainer");
  for (int i = 0; i < 3; ++i) {
    const auto a = dev.step(), b = resumed.step();
    CHECK(b.loss_scale == a.loss_scale);
    CHECK(b.skipped == a.skipped);
    CHECK(b.loss == a.loss);
  }
}

TEST_CASE("phase timing on a device step times every kernel group and changes no result") {
  if (!have_gpu()) return;
  TempDir dir("cuda_trainer_phases");
  for (const std::string preset : {"tiny", "llama-small"}) {
    CAPTURE(preset);
    const auto config = tiny_job(dir, "run-" + preset, {"model.preset=" + preset});
    const bool llama = config.model.family == ModelFamily::Llama;
    const auto init = make_model<float>(config.model);
    init->init_weights(3);
    const int B = 2;
    const std::size_t BT = static_cast<std::size_t>(B) * config.model.seq_len;
    std::vector<std::int32_t> inputs(BT), targets(BT);
    for (std::size_t i = 0; i < BT; ++i) {
      inputs[i] = static_cast<std::int32_t>((7 * i) % config.model.vocab);
      targets[i] = static_cast<std::int32_t>((7 * i + 1) % config.model.vocab);
    }
    auto one_step = [&](bool timed, std::map<std::string, double>& phases) {
      auto step = make_cuda_step(config.model, AdamWOptions{}, gpu(Precision::Bf16));
      step->upload_params(init->params());
      step->time_phases(timed);
      step->zero_grads();
      const float loss = step->forward_backward(inputs.data(), targets.data(), B, 1.0f);
      REQUIRE(step->clip(1.0).has_value());
      step->adamw(1e-3f);
      phases = step->take_phase_ms();
      return std::pair{loss, step->params_hash()};
    };
    std::map<std::string, double> untimed, timed;
    const auto plain = one_step(false, untimed);
    const auto with_events = one_step(true, timed);
    CHECK(untimed.empty());
    CHECK(with_events == plain);  // events only: the same loss and weights, bit for bit
    const std::string norm = llama ? "RMSNorm" : "layernorm";
    for (const std::string& phase : std::vector<std::string>{
             "embedding (fwd)", norm + " (fwd)", "attention matmuls (fwd)", "attention (fwd)", "output layer (fwd)",
             "cross-entropy with its gradient, loss to host (fwd)", "output layer (bwd)", "attention (bwd)",
             "embedding (bwd)", "gradient norm and clip", "AdamW"}) {
      CAPTURE(phase);
      REQUIRE(timed.count(phase) == 1);
      CHECK(timed[phase] > 0);
    }
    CHECK(timed.count("cross-entropy (bwd)") == 0);  // the forward's pass wrote the logits' gradient
  }
}
