// cuDNN's flash attention through cudnn-frontend's graph API, with the library loaded at run time
// (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING: every cuDNN call goes through dlsym on the handle below).
#include "kernels/cuda/attention_cudnn.hpp"

#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <type_traits>
#include <unordered_map>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_buffer.hpp"

namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;  // the frontend's dynamic loading reads its symbols from here
}

namespace meridian::kernels::cuda {
namespace {

namespace fe = cudnn_frontend;
using Graph = std::shared_ptr<fe::graph::Graph>;
using Uid = fe::graph::Tensor_attributes::uid_t;

enum : Uid { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

// The library, once per process; the reason it could not be loaded otherwise.
const std::string& load_cudnn() {
  static std::string why;
  static std::once_flag once;
  std::call_once(once, [] {
    for (const char* name : {"libcudnn.so.9", "libcudnn.so"}) {
      dlerror();
      if (void* handle = dlopen(name, RTLD_NOW | RTLD_GLOBAL)) {
        fe::cudnn_dlhandle = handle;
        why.clear();
        return;
      }
      const char* error = dlerror();
      why += std::string(why.empty() ? "" : "; ") + (error != nullptr ? error : name);
    }
  });
  return why;
}

template <class T>
fe::DataType_t io_type() {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "cuDNN's flash attention is 16-bit");
  return std::is_same_v<T, __nv_bfloat16> ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
}

// A (B, heads, T, hs) view of rows `row` elements apart, as cuDNN's dims and strides.
std::shared_ptr<fe::graph::Tensor_attributes> heads_view(fe::graph::Graph& g, const char* name, Uid uid,
                                                         const AttentionShape& s, int heads, std::int64_t row) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({s.B, heads, s.Tn, s.hs})
                      .set_stride({s.Tn * row, s.hs, row, 1}));
}

std::int64_t qkv_row(const AttentionShape& s) { return static_cast<std::int64_t>(s.NH + 2 * s.KV) * s.hs; }

// sm_version 0: the current device's, read when the graph is validated.
void set_common(fe::graph::Graph& g, fe::DataType_t io, int sm_version) {
  if (sm_version > 0) g.set_sm_version(sm_version);
  g.set_io_data_type(io).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
}

template <class Attributes>
Attributes causal(Attributes a, const AttentionShape& s) {
  a.set_attn_scale(1.0f / std::sqrt(static_cast<float>(s.hs)));
  a.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
  return a;
}

Graph forward_graph(const AttentionShape& s, fe::DataType_t io, int sm_version = 0) {
  auto g = std::make_shared<fe::graph::Graph>();
  set_common(*g, io, sm_version);
  const std::int64_t row = qkv_row(s);
  auto q = heads_view(*g, "q", kQ, s, s.NH, row);
  auto k = heads_view(*g, "k", kK, s, s.KV, row);
  auto v = heads_view(*g, "v", kV, s, s.KV, row);
  auto options = causal(fe::graph::SDPA_attributes().set_name("attention").set_generate_stats(true), s);
  auto [o, stats] = g->sdpa(q, k, v, options);
  const std::int64_t out_row = static_cast<std::int64_t>(s.NH) * s.hs;
  o->set_output(true).set_uid(kO).set_dim({s.B, s.NH, s.Tn, s.hs}).set_stride({s.Tn * out_row, s.hs, out_row, 1});
  stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT);
  stats->set_dim({s.B, s.NH, s.Tn, 1}).set_stride({static_cast<std::int64_t>(s.NH) * s.Tn, s.Tn, 1, 1});
  return g;
}

Graph backward_graph(const AttentionShape& s, fe::DataType_t io, int sm_version = 0) {
  auto g = std::make_shared<fe::graph::Graph>();
  set_common(*g, io, sm_version);
  const std::int64_t row = qkv_row(s), out_row = static_cast<std::int64_t>(s.NH) * s.hs;
  auto q = heads_view(*g, "q", kQ, s, s.NH, row);
  auto k = heads_view(*g, "k", kK, s, s.KV, row);
  auto v = heads_view(*g, "v", kV, s, s.KV, row);
  auto o = heads_view(*g, "o", kO, s, s.NH, out_row);
  auto dout = heads_view(*g, "dout", kDO, s, s.NH, out_row);
  auto stats = g->tensor(fe::graph::Tensor_attributes()
                             .set_name("stats")
                             .set_uid(kStats)
                             .set_dim({s.B, s.NH, s.Tn, 1})
                             .set_stride({static_cast<std::int64_t>(s.NH) * s.Tn, s.Tn, 1, 1})
                             .set_data_type(fe::DataType_t::FLOAT));
  auto options = causal(fe::graph::SDPA_backward_attributes().set_name("attention_backward"), s);
  options.set_deterministic_algorithm(true);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, options);
  const auto place = [&](auto& t, Uid uid, int heads) {
    t->set_output(true).set_uid(uid).set_dim({s.B, heads, s.Tn, s.hs}).set_stride({s.Tn * row, s.hs, row, 1});
  };
  place(dq, kDQ, s.NH);
  place(dk, kDK, s.KV);
  place(dv, kDV, s.KV);
  return g;
}

struct GraphKey {
  bool backward = false;
  fe::DataType_t io = fe::DataType_t::BFLOAT16;
  AttentionShape shape;
  auto operator<=>(const GraphKey&) const = default;
};

}  // namespace

struct CudnnAttention::Impl {
  cudnnHandle_t handle = nullptr;
  std::map<GraphKey, Graph> graphs;
  DeviceBuffer<std::uint8_t> workspace;

  ~Impl() {
    graphs.clear();  // their plans go before the handle they were built on
    if (handle != nullptr) fe::detail::destroy_handle(handle);
  }

  // The graph of `key`, built on first use; its message when cuDNN will not take it. Any step may
  // throw as well as fail (the frontend's dynamic loading throws where it finds no CUDA runtime, or
  // two; the workspace may not fit): either way there is no plan, and at start-up the model then
  // runs the materialized kernel instead of stopping.
  std::variant<Graph, std::string> build(const GraphKey& key) {
    if (const auto found = graphs.find(key); found != graphs.end()) return found->second;
    try {
      Graph g = key.backward ? backward_graph(key.shape, key.io) : forward_graph(key.shape, key.io);
      if (auto built = g->build(handle, {fe::HeurMode_t::A}); !built.is_good()) return built.get_message();
      std::int64_t bytes = 0;
      if (auto sized = g->get_workspace_size(bytes); !sized.is_good()) return sized.get_message();
      if (static_cast<std::size_t>(bytes) > workspace.size())
        workspace = DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(bytes));
      graphs.emplace(key, g);
      return g;
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  }

  void run(const GraphKey& key, std::unordered_map<Uid, void*> pack) {
    auto built = build(key);
    if (const auto* why = std::get_if<std::string>(&built))
      throw CudaError("cuDNN attention: no plan for B=" + std::to_string(key.shape.B) +
                      ", T=" + std::to_string(key.shape.Tn) + ", heads " + std::to_string(key.shape.NH) + "/" +
                      std::to_string(key.shape.KV) + ", head size " + std::to_string(key.shape.hs) + ": " + *why);
    std::string failed;
    try {
      if (auto done = std::get<Graph>(built)->execute(handle, pack, workspace.data()); !done.is_good())
        failed = done.get_message();
    } catch (const std::exception& e) {
      failed = e.what();
    }
    if (!failed.empty()) throw CudaError("cuDNN attention: execute failed: " + failed);
  }
};

CudnnAttention::CudnnAttention(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudnnAttention::~CudnnAttention() = default;

std::string CudnnAttention::library_missing() {
  const std::string& why = load_cudnn();
  return why.empty() ? why : "libcudnn.so.9 not loaded (" + why + ")";
}

std::variant<std::unique_ptr<CudnnAttention>, std::string> CudnnAttention::open(cudaStream_t stream) {
  if (std::string why = library_missing(); !why.empty()) return why;
  try {
    if (fe::detail::get_backend_version() < 90000)
      return "cuDNN " + fe::detail::get_backend_version_string() + " is older than 9.0";
    const auto failed = [](const char* call, cudnnStatus_t status) {
      return std::string(call) + " failed: " + fe::detail::get_error_string(status);
    };
    auto impl = std::make_unique<Impl>();
    if (const auto status = fe::detail::create_handle(&impl->handle); status != CUDNN_STATUS_SUCCESS)
      return failed("cudnnCreate", status);
    if (const auto status = fe::detail::set_stream(impl->handle, stream); status != CUDNN_STATUS_SUCCESS)
      return failed("cudnnSetStream", status);
    return std::unique_ptr<CudnnAttention>(new CudnnAttention(std::move(impl)));
  } catch (const std::exception& e) {  // a symbol the loaded library lacks
    return std::string(e.what());
  }
}

template <class T>
std::string CudnnAttention::validate_for(int sm_version, const AttentionShape& s) {
  if (std::string why = library_missing(); !why.empty()) return why;
  for (const bool backward : {false, true}) {
    try {
      const Graph g =
          backward ? backward_graph(s, io_type<T>(), sm_version) : forward_graph(s, io_type<T>(), sm_version);
      if (auto valid = g->validate(); !valid.is_good())
        return std::string(backward ? "backward: " : "forward: ") + valid.get_message();
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  return {};
}

std::string CudnnAttention::version() const { return fe::detail::get_backend_version_string(); }
std::size_t CudnnAttention::workspace_bytes() const { return impl_->workspace.size(); }

template <class T>
std::string CudnnAttention::unsupported(const AttentionShape& s) {
  for (const bool backward : {false, true})
    if (const auto built = impl_->build(GraphKey{backward, io_type<T>(), s});
        std::holds_alternative<std::string>(built))
      return std::string(backward ? "backward: " : "forward: ") + std::get<std::string>(built);
  return {};
}

template <class T>
void CudnnAttention::forward(T* out, float* stats, const T* qkv, const AttentionShape& s) {
  T* q = const_cast<T*>(qkv);  // cuDNN's variant pack takes void*; nothing writes through these
  impl_->run(GraphKey{false, io_type<T>(), s},
             {{kQ, q}, {kK, q + s.NH * s.hs}, {kV, q + (s.NH + s.KV) * s.hs}, {kO, out}, {kStats, stats}});
}

template <class T>
void CudnnAttention::backward(T* dqkv, const T* dout, const T* out, const T* qkv, const float* stats,
                              const AttentionShape& s) {
  T* q = const_cast<T*>(qkv);
  impl_->run(GraphKey{true, io_type<T>(), s}, {{kQ, q},
                                               {kK, q + s.NH * s.hs},
                                               {kV, q + (s.NH + s.KV) * s.hs},
                                               {kO, const_cast<T*>(out)},
                                               {kDO, const_cast<T*>(dout)},
                                               {kStats, const_cast<float*>(stats)},
                                               {kDQ, dqkv},
                                               {kDK, dqkv + s.NH * s.hs},
                                               {kDV, dqkv + (s.NH + s.KV) * s.hs}});
}

MERIDIAN_CUDNN_ATTENTION_TYPES(__nv_bfloat16)
MERIDIAN_CUDNN_ATTENTION_TYPES(__half)

}  // namespace meridian::kernels::cuda
