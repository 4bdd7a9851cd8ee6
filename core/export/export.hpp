#pragma once
// Hands a trained model to the Python ecosystem: Hugging Face GPT-2 files that
// GPT2LMHeadModel.from_pretrained(dir) loads as they are. The flat parameter buffer already uses
// HF's names and Conv1D [in, out] layout (core/model/param_layout.hpp), so export is a copy.
#include <filesystem>
#include <span>

#include "core/export/safetensors.hpp"
#include "core/model/gpt_config.hpp"

namespace meridian {

// Writes <out_dir>/model.safetensors (every layout tensor as F32 under "transformer." + name, in
// layout order) and <out_dir>/config.json (a GPT2Config). Creates out_dir; each file appears whole
// or not at all (temp file + rename). lm_head.weight is tied to wte, and the attn.bias causal
// masks are buffers that transformers rebuilds, so neither is written. Error(Io) when the file
// system refuses.
void export_hf_gpt2(const GptConfig& shape, std::span<const float> params, const std::filesystem::path& out_dir);

}  // namespace meridian
