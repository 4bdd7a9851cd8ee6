#pragma once
// A model's Hugging Face config.json and meridian's ModelConfig, both ways: GPT2Config for GPT-2,
// LlamaConfig for a Llama (Qwen2Config when it has q/k/v biases). Read are also MistralConfig and
// Qwen2Config where they differ from a Llama only by names, biases or tying; whatever meridian's
// models do not compute (another activation, sliding-window attention, other rope scalings,
// biases elsewhere) is refused, never ignored.
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/hf/dtype.hpp"
#include "core/model/model_config.hpp"

namespace meridian {

// The shape config.json describes; seq_len is the training window to give it (0: the model's
// context, at most 1,024). Error(Data) naming `file` and the key when a field is missing, has the
// wrong type, or asks for what meridian does not compute; "model_type" is named when it is unknown.
ModelConfig model_config_from_hf(const nlohmann::json& config, const std::filesystem::path& file, int seq_len = 0);

// The config.json of a model of this shape, weights stored as `dtype`. bos/eos: GPT-2's
// <|endoftext|> (the last id) for GPT-2, none for a Llama (a tokenizer names them).
nlohmann::ordered_json hf_config_json(const ModelConfig& c, HfDtype dtype);

// The Hugging Face name of a tensor of meridian's layout (ParamLayout's names): GPT-2's under
// "transformer.", a Llama's under "model." but its lm_head.
std::string hf_tensor_name(const ModelConfig& c, const std::string& name);

}  // namespace meridian
