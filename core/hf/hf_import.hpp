#pragma once
// Reads a Hugging Face model directory into meridian's flat parameter layout: config.json and the
// weights in safetensors (F32, BF16 or F16; one model.safetensors, or the shards that
// model.safetensors.index.json names), for GPT2LMHeadModel (its Conv1D matrices are stored
// [in, out], as meridian's; names with or without "transformer.") and LlamaForCausalLM (Mistral
// and Qwen 2 too: hf_config.hpp). Every tensor of the layout must be there with its shape, and
// every tensor there must be one of the layout's or a buffer transformers rebuilds.
#include <filesystem>
#include <vector>

#include "core/model/model_config.hpp"

namespace meridian {

struct HfModel {
  ModelConfig config;
  std::vector<float> params;  // ParamLayout::of(config)
};

// True when `dir` looks like a Hugging Face model directory (it has a config.json).
bool is_hf_model_dir(const std::filesystem::path& dir);

// seq_len: the training window the shape gets (0: the context, at most 1,024). Error(Data) naming
// the file and the tensor for everything wrong with the directory (hf_config.hpp for config.json;
// a missing, extra or misshapen tensor, a dtype other than F32/BF16/F16, a truncated file or a
// header that lies about offsets, an index naming a missing shard or a tensor its shard lacks);
// Error(Io) when a file cannot be read.
HfModel read_hf_model(const std::filesystem::path& dir, int seq_len = 0);

}  // namespace meridian
