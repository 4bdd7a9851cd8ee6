#include "core/train/train_checkpoint.hpp"

#include <array>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/checkpoint/store.hpp"
#include "core/io/env.hpp"
#include "core/model/param_layout.hpp"
#include "core/util/error.hpp"

namespace meridian {
namespace {

std::vector<std::byte> bytes_of(const std::string& text) {
  const auto* first = reinterpret_cast<const std::byte*>(text.data());
  return {first, first + text.size()};
}

std::string model_config_json(const ModelConfig& c) {
  const nlohmann::ordered_json j = {
      {"family", to_string(c.family)},
      {"n_layer", c.n_layer},
      {"n_head", c.n_head},
      {"n_kv_head", c.n_kv_head},
      {"d_model", c.d_model},
      {"ffn_hidden", c.ffn_hidden},
      {"seq_len", c.seq_len},
      {"context", c.context},
      {"vocab", c.vocab},
      {"norm_eps", c.norm_eps},
      {"rope_theta", c.rope_theta},
      {"rope_scaling", {{"factor", c.rope_scaling.factor},
                        {"low_freq_factor", c.rope_scaling.low_freq_factor},
                        {"high_freq_factor", c.rope_scaling.high_freq_factor},
                        {"original_context", c.rope_scaling.original_context}}},
      {"tied", c.tied},
      {"qkv_bias", c.qkv_bias},
  };
  return j.dump();
}

ModelConfig model_config_from_json(std::span<const std::byte> bytes, const std::string& source) {
  try {
    const auto j = nlohmann::json::parse(reinterpret_cast<const char*>(bytes.data()),
                                         reinterpret_cast<const char*>(bytes.data()) + bytes.size());
    const std::string family = j.at("family").get<std::string>();
    if (family != "gpt2" && family != "llama") throw std::invalid_argument("family \"" + family + "\" is unknown");
    ModelConfig c;
    c.family = family == "llama" ? ModelFamily::Llama : ModelFamily::Gpt2;
    c.n_layer = j.at("n_layer").get<int>();
    c.n_head = j.at("n_head").get<int>();
    c.n_kv_head = j.at("n_kv_head").get<int>();
    c.d_model = j.at("d_model").get<int>();
    c.ffn_hidden = j.at("ffn_hidden").get<int>();
    c.seq_len = j.at("seq_len").get<int>();
    c.context = j.at("context").get<int>();
    c.vocab = j.at("vocab").get<int>();
    c.norm_eps = j.at("norm_eps").get<double>();
    c.rope_theta = j.at("rope_theta").get<double>();
    const auto& rs = j.at("rope_scaling");
    c.rope_scaling = {rs.at("factor").get<double>(), rs.at("low_freq_factor").get<double>(),
                      rs.at("high_freq_factor").get<double>(), rs.at("original_context").get<int>()};
    c.tied = j.at("tied").get<bool>();
    c.qkv_bias = j.at("qkv_bias").get<bool>();
    return c;
  } catch (const std::exception& e) {  // nlohmann's parse, type and missing-key errors, and ours
    throw make_error(ErrorKind::Checkpoint, source, ": record \"model.config\" is not a model configuration: ", e.what());
  }
}

void copy_exact(std::span<const float> from, std::span<float> to, const std::string& record,
                const std::string& source) {
  if (from.size() != to.size())
    throw make_error(ErrorKind::Checkpoint, source, ": record \"", record, "\" holds ", from.size(),
                     " values, the model needs ", to.size());
  std::copy(from.begin(), from.end(), to.begin());
}

}  // namespace

namespace {

// The records of a training state, the optimizer's after the weights where they belong; without
// `bulk`, neither the weights nor the moments.
Checkpoint encode_state(const ModelConfig& shape, std::span<const float> params, const AdamW* opt,
                        const ResumeState& state, const std::string& config_toml, bool bulk = true) {
  Checkpoint c;
  c.put("model.config", bytes_of(model_config_json(shape)));
  if (bulk) c.put_pod<float>("params", params);
  if (opt) {
    if (bulk) {
      c.put_pod<float>("adamw.m", opt->m());
      c.put_pod<float>("adamw.v", opt->v());
      if (opt->shard().count != params.size())
        c.put_pod<std::uint64_t>("adamw.shard", std::vector<std::uint64_t>{opt->shard().offset, opt->shard().count});
    }
    c.put_value<std::int64_t>("adamw.t", opt->steps_taken());
  }
  c.put_value<std::int64_t>("train.step", state.step);
  c.put_value<std::int64_t>("train.tokens", state.tokens);
  std::vector<std::uint64_t> windows = {state.data.windows};
  windows.insert(windows.end(), state.data.taken.begin(), state.data.taken.end());
  c.put_pod<std::uint64_t>("data.windows", windows);
  c.put_value<double>("train.lr_scale", state.lr_scale);
  c.put_value<std::int64_t>("guard.rollbacks", state.rollbacks);
  c.put("job.toml", bytes_of(config_toml));
  return c;
}

}  // namespace

Checkpoint encode_train_state(const ModelConfig& shape, std::span<const float> params, const AdamW& opt,
                              const ResumeState& state, const std::string& config_toml) {
  return encode_state(shape, params, &opt, state, config_toml);
}

Checkpoint encode_train_meta(const ModelConfig& shape, const AdamW& opt, const ResumeState& state,
                             const std::string& config_toml) {
  return encode_state(shape, {}, &opt, state, config_toml, false);
}

Checkpoint encode_weights(const ModelConfig& shape, std::span<const float> params, const std::string& config_toml) {
  return encode_state(shape, params, nullptr, ResumeState{}, config_toml);
}

ModelConfig checkpoint_shape(const Checkpoint& ckpt, const std::string& source) {
  ModelConfig shape;
  if (ckpt.has("model.config")) {
    shape = model_config_from_json(ckpt.get("model.config"), source);
  } else {
    const auto s = ckpt.get_pod<std::int32_t>("model.shape");
    if (s.size() != 5)
      throw make_error(ErrorKind::Checkpoint, source, ": record \"model.shape\" has ", s.size(), " values, expected 5");
    shape = ModelConfig{s[0], s[1], s[2], s[3], s[4]};
  }
  const auto problems = validate_model_config(shape);
  if (!problems.empty()) throw make_error(ErrorKind::Checkpoint, source, ": invalid model shape: ", problems.front());
  return shape;
}

namespace {

// Checkpoints written before sources could be mixed have "data.position" (epoch and index of a
// single stream, in an order since replaced): the windows taken are the tokens over seq_len.
SamplerPosition decode_data_position(const Checkpoint& ckpt, const std::string& source, std::int64_t tokens,
                                     int seq_len) {
  if (!ckpt.has("data.windows") && ckpt.has("data.position")) {
    const auto windows = static_cast<std::uint64_t>(tokens / seq_len);
    return {windows, {windows}};
  }
  const auto w = ckpt.get_pod<std::uint64_t>("data.windows");
  if (w.empty())
    throw make_error(ErrorKind::Checkpoint, source, ": record \"data.windows\" is empty, expected the windows taken "
                     "and one count per data source");
  return {w[0], std::vector<std::uint64_t>(w.begin() + 1, w.end())};
}

}  // namespace

void decode_optimizer_state(const Checkpoint& ckpt, const std::string& source, AdamW& opt) {
  if (!ckpt.has("adamw.m") && !ckpt.has("adamw.v") && !ckpt.has("adamw.t")) {  // weights only: a fresh AdamW
    std::fill(opt.m().begin(), opt.m().end(), 0.0f);
    std::fill(opt.v().begin(), opt.v().end(), 0.0f);
    opt.set_steps_taken(0);
    return;
  }
  // The moments the record holds are those of a shard (a replica's snapshot under ZeRO) or of the
  // whole model; `opt` takes its own elements from either, when the record has them all.
  ShardRange held{0, opt.total()};
  if (ckpt.has("adamw.shard")) {
    const auto range = ckpt.get_pod<std::uint64_t>("adamw.shard");
    if (range.size() != 2 || range[0] > opt.total() || range[1] > opt.total() - range[0])
      throw make_error(ErrorKind::Checkpoint, source, ": record \"adamw.shard\" is not a range of the model's ",
                       opt.total(), " elements");
    held = {range[0], range[1]};
  }
  const ShardRange own = opt.shard();
  if (own.offset < held.offset || own.end() > held.end())
    throw make_error(ErrorKind::Checkpoint, source, " holds AdamW's moments of elements ", held.offset, "..",
                     held.end(), " only, and this replica keeps ", own.offset, "..", own.end());
  const auto take = [&](const char* record, std::span<float> to) {
    const auto from = ckpt.view_pod<float>(record);
    if (from.size() != held.count)
      throw make_error(ErrorKind::Checkpoint, source, ": record \"", record, "\" holds ", from.size(),
                       " values, the model needs ", held.count);
    std::copy_n(from.begin() + static_cast<std::ptrdiff_t>(own.offset - held.offset), own.count, to.begin());
  };
  take("adamw.m", opt.m());
  take("adamw.v", opt.v());
  opt.set_steps_taken(ckpt.get_value<std::int64_t>("adamw.t"));
}

void put_whole_moments(Checkpoint& c, std::span<const float> m, std::span<const float> v) {
  MERIDIAN_CHECK(m.size() == v.size(), "m has ", m.size(), " values, v ", v.size());
  c.put_pod<float>("adamw.m", m);
  c.put_pod<float>("adamw.v", v);
  // A record cannot be taken out: a shard's range becomes the whole model's.
  if (c.has("adamw.shard")) c.put_pod<std::uint64_t>("adamw.shard", std::vector<std::uint64_t>{0, m.size()});
}

ResumeState decode_train_meta(const Checkpoint& ckpt, const std::string& source, const ModelConfig& expected,
                              AdamW& opt) {
  const ModelConfig shape = checkpoint_shape(ckpt, source);
  if (!(shape == expected)) {
    const std::string weights = weights_mismatch(shape, expected);
    throw make_error(ErrorKind::Checkpoint, source, " is for a model of ", describe(shape),
                     ", but the config asks for ", describe(expected), " (",
                     weights.empty() ? "seq_len is " + std::to_string(shape.seq_len) + ", not " +
                                           std::to_string(expected.seq_len)
                                     : weights,
                     ")");
  }
  ResumeState state;
  state.step = ckpt.get_value<std::int64_t>("train.step");
  state.tokens = ckpt.get_value<std::int64_t>("train.tokens");
  state.data = decode_data_position(ckpt, source, state.tokens, expected.seq_len);
  // Checkpoints written before the divergence guard existed have neither record.
  if (ckpt.has("train.lr_scale")) state.lr_scale = ckpt.get_value<double>("train.lr_scale");
  if (ckpt.has("guard.rollbacks")) state.rollbacks = ckpt.get_value<std::int64_t>("guard.rollbacks");
  if (!std::isfinite(state.lr_scale) || state.lr_scale <= 0 || state.rollbacks < 0)
    throw make_error(ErrorKind::Checkpoint, source, ": learning-rate scale ", state.lr_scale, " or rollback count ",
                     state.rollbacks, " out of range");
  if (state.step < 0 || state.tokens < 0)
    throw make_error(ErrorKind::Checkpoint, source, ": negative step or token count");
  if (ckpt.has("adamw.t")) opt.set_steps_taken(ckpt.get_value<std::int64_t>("adamw.t"));
  return state;
}

ResumeState decode_train_weights(const Checkpoint& ckpt, const std::string& source, const ModelConfig& expected,
                                 std::span<float> params, AdamW& opt) {
  const ResumeState state = decode_train_meta(ckpt, source, expected, opt);
  copy_exact(ckpt.view_pod<float>("params"), params, "params", source);
  return state;
}

ResumeState decode_train_state(const Checkpoint& ckpt, const std::string& source, const ModelConfig& expected,
                               std::span<float> params, AdamW& opt) {
  const ResumeState state = decode_train_weights(ckpt, source, expected, params, opt);
  decode_optimizer_state(ckpt, source, opt);
  return state;
}

void put_tokenizer(Checkpoint& c, const TokenizerFile& tokenizer) {
  c.put("tokenizer.name", bytes_of(tokenizer.name));
  c.put("tokenizer.file", bytes_of(tokenizer.bytes));
  c.put("tokenizer.encoding", bytes_of(tokenizer.encoding));
}

std::optional<TokenizerFile> get_tokenizer(const Checkpoint& c) {
  if (!c.has("tokenizer.file")) return std::nullopt;
  const auto text = [&](const char* name) {
    const auto b = c.get(name);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  };
  return TokenizerFile{text("tokenizer.name"), text("tokenizer.file"), text("tokenizer.encoding")};
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
    ckpt = read_checkpoint(env, path);
    snap.source = path;
  }
  snap.shape = checkpoint_shape(ckpt, snap.source.string());
  snap.params = ckpt.get_pod<float>("params");
  const std::size_t expected = ParamLayout::of(snap.shape).total();
  if (snap.params.size() != expected)
    throw make_error(ErrorKind::Checkpoint, snap.source.string(), ": record \"params\" holds ", snap.params.size(),
                     " values, a model of ", describe(snap.shape), " has ", expected);
  snap.step = ckpt.get_value<std::int64_t>("train.step");
  snap.tokenizer = get_tokenizer(ckpt);
  return snap;
}

}  // namespace meridian
