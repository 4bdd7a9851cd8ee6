#pragma once
// How a training state maps onto checkpoint records (the record framing itself is core/checkpoint).
// Records: "model.config" (the ModelConfig as JSON, its keys those of [model]; checkpoints
// written before the Llama family have "model.shape" instead, int32 x5: n_layer, n_head, d_model,
// seq_len, vocab of a GPT-2), "params" (fp32, flat layout), "adamw.m", "adamw.v" (fp32), "adamw.t" (int64), "train.step", "train.tokens" (int64),
// "data.windows" (uint64: the windows taken, then per data source those from it), "train.lr_scale" (f64), "guard.rollbacks" (int64),
// "job.toml" (the resolved config, for people).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.hpp"
#include "core/data/sampler.hpp"
#include "core/model/model_config.hpp"
#include "core/optim/adamw.hpp"
#include "core/tokenizer/tokenizer_file.hpp"

namespace meridian {

class Env;

struct ResumeState {
  std::int64_t step = 0;    // optimizer steps completed
  std::int64_t tokens = 0;  // training tokens consumed
  SamplerPosition data;
  // What the divergence guard changed: the factor on the scheduled learning rate and how many
  // rollbacks led to it. Part of the state so a resumed or healed replica trains as the others do.
  double lr_scale = 1.0;
  std::int64_t rollbacks = 0;
};

Checkpoint encode_train_state(const ModelConfig& shape, std::span<const float> params, const AdamW& opt,
                              const ResumeState& state, const std::string& config_toml);

// A checkpoint of weights alone at step 0 (what `meridian import` writes): no optimizer records,
// so training from it starts AdamW afresh, and it is a third of a training checkpoint's size.
Checkpoint encode_weights(const ModelConfig& shape, std::span<const float> params, const std::string& config_toml);

// Restores params and optimizer; Error(Checkpoint) naming `source` when the checkpoint is for
// another model shape or a record is missing or has the wrong size.
ResumeState decode_train_state(const Checkpoint& ckpt, const std::string& source, const ModelConfig& expected,
                               std::span<float> params, AdamW& opt);

// The same without the moments ("adamw.m" and "adamw.v", which `opt` keeps as it holds them):
// what a replica restores before it reads its part of a checkpoint's moments (CheckpointParts).
ResumeState decode_train_weights(const Checkpoint& ckpt, const std::string& source, const ModelConfig& expected,
                                 std::span<float> params, AdamW& opt);

// A training state without its bulk (the weights and the moments, "params", "adamw.m" and
// "adamw.v"): what a healing group sends as records while the bulk travels straight between the
// replicas' buffers (intrasite/group/state_sync). Decoding it checks the shape and sets the
// optimizer's step count ("adamw.t") and nothing else of `opt`.
Checkpoint encode_train_meta(const ModelConfig& shape, const AdamW& opt, const ResumeState& state,
                             const std::string& config_toml);
ResumeState decode_train_meta(const Checkpoint& ckpt, const std::string& source, const ModelConfig& expected,
                              AdamW& opt);

// Only the AdamW records ("adamw.m", "adamw.v", "adamw.t"), into `opt` (a fresh AdamW when the
// checkpoint has none of them: weights only); Error(Checkpoint) naming `source` when one is
// missing or mis-sized.
void decode_optimizer_state(const Checkpoint& ckpt, const std::string& source, AdamW& opt);

// Replaces the moments of a replica's snapshot (its part's, under a shard) with the whole
// model's: what a site writes to disk or heals from, whatever its replicas hold.
void put_whole_moments(Checkpoint& c, std::span<const float> m, std::span<const float> v);

ModelConfig checkpoint_shape(const Checkpoint& ckpt, const std::string& source);

// "tokenizer.name", "tokenizer.file", "tokenizer.encoding": the job's tokenizer, so that an
// export carries it wherever the checkpoint goes.
void put_tokenizer(Checkpoint& c, const TokenizerFile& tokenizer);
std::optional<TokenizerFile> get_tokenizer(const Checkpoint& c);

struct ModelSnapshot {
  ModelConfig shape;
  std::vector<float> params;
  std::int64_t step = 0;
  std::filesystem::path source;
  std::optional<TokenizerFile> tokenizer;
};

// `path` is a checkpoint file, a checkpoints/ directory or a run directory; for a directory the
// newest checkpoint that verifies is used and every skipped one is reported through `warn`.
ModelSnapshot load_model_snapshot(Env& env, const std::filesystem::path& path,
                                  const std::function<void(const std::string&)>& warn);

}  // namespace meridian
