#include "core/hf/hf_config.hpp"

#include <cmath>

#include "core/util/error.hpp"

namespace meridian {
namespace {

namespace fs = std::filesystem;

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, const fs::path& file) : j_(j), file_(file) {}

  template <class... Args>
  Error error(const Args&... why) const {
    return make_error(ErrorKind::Data, file_.string(), ": ", why...);
  }

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  int integer(const char* key) const {
    if (!has(key)) throw error("missing \"", key, "\"");
    const auto& v = j_.at(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > kMaxVocab)
      throw error("\"", key, "\" is ", v.dump(), ", expected an integer from 1 to ", kMaxVocab);
    return v.get<int>();
  }
  int integer_or(const char* key, int fallback) const { return has(key) ? integer(key) : fallback; }

  double number(const char* key) const {
    if (!has(key)) throw error("missing \"", key, "\"");
    return number_or(key, 0);
  }

  double number_or(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const auto& v = j_.at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>())) throw error("\"", key, "\" is ", v.dump(), ", expected a number");
    return v.get<double>();
  }

  bool boolean_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_boolean()) throw error("\"", key, "\" is ", j_.at(key).dump(), ", expected true or false");
    return j_.at(key).get<bool>();
  }

  std::string string_or(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_string()) throw error("\"", key, "\" is ", j_.at(key).dump(), ", expected a string");
    return j_.at(key).get<std::string>();
  }

  // A setting meridian's model computes one way only: absent, null or that value.
  template <class V>
  void require(const char* key, const V& value, const char* why) const {
    if (has(key) && !(j_.at(key) == nlohmann::json(value)))
      throw error("\"", key, "\" is ", j_.at(key).dump(), ": ", why);
  }

  const nlohmann::json& at(const char* key) const { return j_.at(key); }

 private:
  const nlohmann::json& j_;
  const fs::path file_;  // a copy: a reader of a nested object is made with a temporary path
};

ModelConfig gpt2_from_hf(const ConfigReader& r) {
  ModelConfig c;
  c.family = ModelFamily::Gpt2;
  c.n_layer = r.integer("n_layer");
  c.n_head = r.integer("n_head");
  c.d_model = r.integer("n_embd");
  c.context = r.integer_or("n_positions", r.integer_or("n_ctx", 0));
  if (c.context == 0) throw r.error("missing \"n_positions\"");
  c.vocab = r.integer("vocab_size");
  const std::string act = r.string_or("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    throw r.error("\"activation_function\" is \"", act, "\": meridian's GPT-2 computes GELU's tanh approximation "
                  "(gelu_new) only");
  if (r.has("n_inner") && r.integer("n_inner") != 4 * c.d_model)
    throw r.error("\"n_inner\" is ", r.integer("n_inner"), ": meridian's GPT-2 MLP is 4 x n_embd = ", 4 * c.d_model,
                  " wide");
  if (std::abs(r.number_or("layer_norm_epsilon", 1e-5) - 1e-5) > 1e-12)
    throw r.error("\"layer_norm_epsilon\" is ", r.at("layer_norm_epsilon").dump(), ": meridian's GPT-2 uses 1e-5");
  r.require("scale_attn_weights", true, "meridian's attention scales scores by 1/sqrt(head size)");
  r.require("scale_attn_by_inverse_layer_idx", false, "meridian's attention does not scale by layer");
  r.require("tie_word_embeddings", true, "GPT2LMHeadModel's output head is its token embedding");
  return c;
}

// "rope_scaling" (transformers 4), or "rope_parameters" (transformers 5, which holds rope_theta too).
const char* rope_key(const ConfigReader& r) { return r.has("rope_parameters") ? "rope_parameters" : "rope_scaling"; }

RopeScaling rope_scaling_from_hf(const ConfigReader& r) {
  const char* key = rope_key(r);
  if (!r.has(key)) return {};
  const nlohmann::json& s = r.at(key);
  if (!s.is_object()) throw r.error("\"", key, "\" is ", s.dump(), ", expected an object or null");
  const ConfigReader rs(s, fs::path());
  const std::string type = rs.string_or("rope_type", rs.string_or("type", "default"));
  if (type == "default") return {};
  if (type != "llama3")
    throw r.error("\"", key, "\" has rope_type \"", type, "\": meridian computes Llama 3.1's (\"llama3\") only");
  // Every field is required, as transformers requires them: a default would compute another model.
  try {
    const RopeScaling scaling{rs.number("factor"), rs.number("low_freq_factor"), rs.number("high_freq_factor"),
                              rs.integer("original_max_position_embeddings")};
    if (!scaling.enabled()) throw rs.error("\"factor\" is ", scaling.factor, ", expected a number above 0");
    return scaling;
  } catch (const Error& e) {
    throw r.error("\"", key, "\"", e.what());
  }
}

ModelConfig llama_from_hf(const ConfigReader& r, const std::string& model_type) {
  ModelConfig c;
  c.family = ModelFamily::Llama;
  c.n_layer = r.integer("num_hidden_layers");
  c.n_head = r.integer("num_attention_heads");
  c.n_kv_head = r.integer_or("num_key_value_heads", c.n_head);
  c.d_model = r.integer("hidden_size");
  c.ffn_hidden = r.integer("intermediate_size");
  c.context = r.integer("max_position_embeddings");
  c.vocab = r.integer("vocab_size");
  c.norm_eps = r.number_or("rms_norm_eps", 1e-6);
  c.rope_theta = r.has("rope_parameters") ? ConfigReader(r.at("rope_parameters"), fs::path()).number_or("rope_theta", 10000)
                                           : r.number_or("rope_theta", 10000);
  c.rope_scaling = rope_scaling_from_hf(r);
  c.tied = r.boolean_or("tie_word_embeddings", false);
  c.qkv_bias = model_type == "qwen2";
  if (r.has("head_dim") && r.integer("head_dim") * c.n_head != c.d_model)
    throw r.error("\"head_dim\" is ", r.integer("head_dim"), ": meridian's heads are hidden_size / num_attention_heads = ",
                  c.d_model / c.n_head, " wide");
  const std::string act = r.string_or("hidden_act", "silu");
  if (act != "silu") throw r.error("\"hidden_act\" is \"", act, "\": meridian's SwiGLU gates with silu only");
  r.require("mlp_bias", false, "meridian's SwiGLU has no biases");
  if (model_type == "llama")
    r.require("attention_bias", false, "meridian's Llama has no attention biases (Qwen 2's q/k/v biases excepted)");
  if (model_type == "qwen2") r.require("use_sliding_window", false, "meridian does not compute sliding-window attention");
  if (model_type == "mistral" && r.has("sliding_window") && r.integer("sliding_window") < c.context)
    throw r.error("\"sliding_window\" is ", r.integer("sliding_window"), ", below max_position_embeddings ", c.context,
                  ": meridian does not compute sliding-window attention");
  return c;
}

}  // namespace

ModelConfig model_config_from_hf(const nlohmann::json& config, const fs::path& file, int seq_len) {
  if (!config.is_object()) throw make_error(ErrorKind::Data, file.string(), ": not a JSON object");
  const ConfigReader r(config, file);
  const std::string model_type = r.string_or("model_type", "");
  ModelConfig c;
  if (model_type == "gpt2") c = gpt2_from_hf(r);
  else if (model_type == "llama" || model_type == "mistral" || model_type == "qwen2") c = llama_from_hf(r, model_type);
  else
    throw r.error(model_type.empty() ? std::string("missing \"model_type\"") : "\"model_type\" is \"" + model_type + "\"",
                  ": meridian imports gpt2 (GPT2LMHeadModel), llama (LlamaForCausalLM), mistral and qwen2");
  c.seq_len = seq_len > 0 ? seq_len : std::min(c.context, 1024);
  if (const auto problems = validate_model_config(c); !problems.empty()) throw r.error(problems.front());
  return c;
}

namespace {

nlohmann::ordered_json gpt2_config_json(const ModelConfig& c, HfDtype dtype) {
  // Token ids have no special meaning to meridian; GPT-2 puts <|endoftext|> last, so do we.
  const int end_of_text = c.vocab - 1;
  return {
      {"model_type", "gpt2"},
      {"architectures", {"GPT2LMHeadModel"}},
      {"vocab_size", c.vocab},
      {"n_positions", c.positions()},
      {"n_ctx", c.positions()},
      {"n_embd", c.d_model},
      {"n_layer", c.n_layer},
      {"n_head", c.n_head},
      {"n_inner", nullptr},  // null means 4 * n_embd, the width meridian's MLP has
      {"activation_function", "gelu_new"},  // the tanh approximation, as in kernels/cpu/gelu.cpp
      {"layer_norm_epsilon", 1e-5},
      {"resid_pdrop", 0.0},
      {"embd_pdrop", 0.0},
      {"attn_pdrop", 0.0},
      {"initializer_range", 0.02},
      {"bos_token_id", end_of_text},
      {"eos_token_id", end_of_text},
      {"tie_word_embeddings", true},  // meridian's logits reuse wte, so there is no lm_head to save
      {"torch_dtype", torch_dtype_name(dtype)},
  };
}

nlohmann::ordered_json llama_config_json(const ModelConfig& c, HfDtype dtype) {
  const bool qwen2 = c.qkv_bias;
  nlohmann::ordered_json j = {
      {"model_type", qwen2 ? "qwen2" : "llama"},
      {"architectures", {qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
      {"vocab_size", c.vocab},
      {"hidden_size", c.d_model},
      {"intermediate_size", c.ffn_hidden},
      {"num_hidden_layers", c.n_layer},
      {"num_attention_heads", c.n_head},
      {"num_key_value_heads", c.kv_heads()},
      {"head_dim", c.head_size()},
      {"max_position_embeddings", c.positions()},
      {"rms_norm_eps", c.norm_eps},
      {"rope_theta", c.rope_theta},
      {"rope_scaling", nullptr},
      {"hidden_act", "silu"},
      {"tie_word_embeddings", c.tied},
      {"attention_dropout", 0.0},
      {"initializer_range", 0.02},
      {"use_cache", true},
      {"torch_dtype", torch_dtype_name(dtype)},
  };
  if (c.rope_scaling.enabled())
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", c.rope_scaling.factor},
                         {"low_freq_factor", c.rope_scaling.low_freq_factor},
                         {"high_freq_factor", c.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", c.rope_scaling.original_context}};
  if (qwen2) {
    j["use_sliding_window"] = false;
    j["sliding_window"] = c.positions();
    j["max_window_layers"] = c.n_layer;
  } else {
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
    j["pretraining_tp"] = 1;
  }
  return j;
}

}  // namespace

nlohmann::ordered_json hf_config_json(const ModelConfig& c, HfDtype dtype) {
  return c.family == ModelFamily::Llama ? llama_config_json(c, dtype) : gpt2_config_json(c, dtype);
}

std::string hf_tensor_name(const ModelConfig& c, const std::string& name) {
  if (c.family == ModelFamily::Gpt2) return "transformer." + name;
  return name == "lm_head.weight" ? name : "model." + name;
}

}  // namespace meridian
