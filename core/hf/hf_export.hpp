#pragma once
// Hands a trained model to the Python ecosystem: the files of a Hugging Face model directory that
// GPT2LMHeadModel / LlamaForCausalLM (Qwen2ForCausalLM for q/k/v biases) .from_pretrained(dir)
// loads as they are. The flat parameter buffer already holds Hugging Face's names and layouts
// (core/model/param_layout.hpp), so the weights are a copy, or a rounding to bf16.
#include <filesystem>
#include <span>

#include "core/hf/dtype.hpp"
#include "core/model/model_config.hpp"
#include "core/tokenizer/tokenizer_file.hpp"

namespace meridian {

// Writes <out_dir>/model.safetensors (every layout tensor under its Hugging Face name, in layout
// order, as `dtype`: F32 or BF16), config.json and generation_config.json. Creates out_dir; each
// file appears whole or not at all (temp file + rename). A tied model writes no lm_head.weight,
// and GPT-2's attn.bias causal masks are buffers that transformers rebuilds, so none is written.
// Error(Io) when the file system refuses.
void export_hf(const ModelConfig& shape, std::span<const float> params, const std::filesystem::path& out_dir,
               HfDtype dtype = HfDtype::F32);

// The job's tokenizer beside the weights. A tokenizer.json as it is, with a tokenizer_config.json
// that makes AutoTokenizer.from_pretrained(out_dir) take it (PreTrainedTokenizerFast, its
// end-of-text token as eos, `context` as model_max_length); a rank file under its own name
// (tiktoken reads it; transformers does not). Error(Io) when the file system refuses.
void export_tokenizer(const TokenizerFile& tokenizer, const std::filesystem::path& out_dir, int context);

}  // namespace meridian
