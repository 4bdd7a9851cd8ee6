#include "core/train/train_checkpoint.hpp"

#include <array>
#include <cmath>

#include "core/checkpoint/store.hpp"
#include "core/io/env.hpp"
#include "core/model/param_layout.hpp"
#include "core/util/error.hpp"

namespace meridian {
namespace {

std::array<std::int32_t, 5> shape_record(const GptConfig& c) {
  return {c.n_layer, c.n_head, c.d_model, c.seq_len, c.vocab};
}

void copy_exact(const std::vector<float>& from, std::span<float> to, const std::string& record,
                const std::string& source) {
  if (from.size() != to.size())
    throw make_error(ErrorKind::Checkpoint, source, ": record \"", record, "\" holds ", from.size(),
                     " values, the model needs ", to.size());
  std::copy(from.begin(), from.end(), to.begin());
}

}  // namespace

Checkpoint encode_train_state(const GptConfig& shape, std::span<const float> params, const AdamW& opt,
                              const ResumeState& state, const std::string& config_toml) {
  Checkpoint c;
  const auto s = shape_record(shape);
  c.put_pod<std::int32_t>("model.shape", s);
  c.put_pod<float>("params", params);
  c.put_pod<float>("adamw.m", opt.m());
  c.put_pod<float>("adamw.v", opt.v());
  c.put_value<std::int64_t>("adamw.t", opt.steps_taken());
  c.put_value<std::int64_t>("train.step", state.step);
  c.put_value<std::int64_t>("train.tokens", state.tokens);
  const std::array<std::uint64_t, 2> pos = {state.data.epoch, state.data.index};
  c.put_pod<std::uint64_t>("data.position", pos);
  c.put_value<double>("train.lr_scale", state.lr_scale);
  c.put_value<std::int64_t>("guard.rollbacks", state.rollbacks);
  c.put("job.toml", std::vector<std::byte>(reinterpret_cast<const std::byte*>(config_toml.data()),
                                           reinterpret_cast<const std::byte*>(config_toml.data()) + config_toml.size()));
  return c;
}

GptConfig checkpoint_shape(const Checkpoint& ckpt, const std::string& source) {
  const auto s = ckpt.get_pod<std::int32_t>("model.shape");
  if (s.size() != 5)
    throw make_error(ErrorKind::Checkpoint, source, ": record \"model.shape\" has ", s.size(), " values, expected 5");
  const GptConfig shape{s[0], s[1], s[2], s[3], s[4]};
  const auto problems = validate_gpt_config(shape);
  if (!problems.empty()) throw make_error(ErrorKind::Checkpoint, source, ": invalid model shape: ", problems.front());
  return shape;
}

void decode_optimizer_state(const Checkpoint& ckpt, const std::string& source, AdamW& opt) {
  copy_exact(ckpt.get_pod<float>("adamw.m"), opt.m(), "adamw.m", source);
  copy_exact(ckpt.get_pod<float>("adamw.v"), opt.v(), "adamw.v", source);
  opt.set_steps_taken(ckpt.get_value<std::int64_t>("adamw.t"));
}

ResumeState decode_train_state(const Checkpoint& ckpt, const std::string& source, const GptConfig& expected,
                               std::span<float> params, AdamW& opt) {
  const GptConfig shape = checkpoint_shape(ckpt, source);
  if (!(shape == expected))
    throw make_error(ErrorKind::Checkpoint, source, " is for a model of ", describe(shape),
                     ", but the config asks for ", describe(expected));
  copy_exact(ckpt.get_pod<float>("params"), params, "params", source);
  decode_optimizer_state(ckpt, source, opt);
  ResumeState state;
  state.step = ckpt.get_value<std::int64_t>("train.step");
  state.tokens = ckpt.get_value<std::int64_t>("train.tokens");
  const auto pos = ckpt.get_pod<std::uint64_t>("data.position");
  if (pos.size() != 2)
    throw make_error(ErrorKind::Checkpoint, source, ": record \"data.position\" has ", pos.size(),
                     " values, expected 2");
  state.data = SamplerPosition{pos[0], pos[1]};
  // Checkpoints written before the divergence guard existed have neither record.
  if (ckpt.has("train.lr_scale")) state.lr_scale = ckpt.get_value<double>("train.lr_scale");
  if (ckpt.has("guard.rollbacks")) state.rollbacks = ckpt.get_value<std::int64_t>("guard.rollbacks");
  if (!std::isfinite(state.lr_scale) || state.lr_scale <= 0 || state.rollbacks < 0)
    throw make_error(ErrorKind::Checkpoint, source, ": learning-rate scale ", state.lr_scale, " or rollback count ",
                     state.rollbacks, " out of range");
  if (state.step < 0 || state.tokens < 0)
    throw make_error(ErrorKind::Checkpoint, source, ": negative step or token count");
  return state;
}

ModelSnapshot load_model_snapshot(Env& env, const std::filesystem::path& path,
                                  const std::function<void(const std::string&)>& warn) {
  if (!env.exists(path)) throw make_error(ErrorKind::Checkpoint, "no checkpoint at ", path.string());
  Checkpoint ckpt;
  ModelSnapshot snap;
  if (std::filesystem::is_directory(path)) {
    const auto dir = std::filesystem::is_directory(path / "checkpoints") ? path / "checkpoints" : path;
    CheckpointStore store(env, dir, 1);
    auto loaded = store.load_latest(warn);
    if (!loaded) throw make_error(ErrorKind::Checkpoint, "no usable checkpoint in ", dir.string());
    ckpt = std::move(loaded->checkpoint);
    snap.source = loaded->path;
  } else {
    ckpt = decode_checkpoint(env.read_all(path), path.string());
    snap.source = path;
  }
  snap.shape = checkpoint_shape(ckpt, snap.source.string());
  snap.params = ckpt.get_pod<float>("params");
  const std::size_t expected = ParamLayout::gpt(snap.shape).total();
  if (snap.params.size() != expected)
    throw make_error(ErrorKind::Checkpoint, snap.source.string(), ": record \"params\" holds ", snap.params.size(),
                     " values, a model of ", describe(snap.shape), " has ", expected);
  snap.step = ckpt.get_value<std::int64_t>("train.step");
  return snap;
}

}  // namespace meridian
