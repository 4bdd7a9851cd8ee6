#pragma once
// The one typed configuration of a job, read from a TOML file (with optional `include` chains)
// plus --set overrides. Everything downstream reads this struct, never TOML.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/config/sim_config.hpp"
#include "core/data/corpus.hpp"
#include "core/model/model_config.hpp"
#include "core/model/recompute.hpp"
#include "core/optim/schedule.hpp"

namespace meridian {

// One emulated WAN link, the same both ways.
struct WanLink {
  enum class Jitter { Normal, Uniform, Pareto };  // the distribution of the one-way latency's spread
  double latency_ms = 0;  // one way
  double jitter_ms = 0;
  Jitter jitter = Jitter::Normal;
  double bandwidth_mbps = 0;  // per direction; 0 = unlimited
  double loss = 0;            // packet loss probability, paid as retransmission delay
  // What one flow (one TCP connection) gets at most, whatever the link's bandwidth: its window
  // over the round trip (6 MiB over 80 ms is about 630 Mbit/s). 0 = one flow fills the link.
  double stream_mbps = 0;
  bool operator==(const WanLink&) const = default;
};

struct JobConfig {
  struct Job {
    std::string name = "meridian";
    std::filesystem::path run_dir;  // absolute; defaults to <cwd>/runs/<name>
    std::uint64_t seed = 1337;
    // Plaintext off this machine: etcd over http:// and links without CURVE to other hosts. Refused
    // unless the job says so here (docs/security.md).
    bool insecure = false;
    bool operator==(const Job&) const = default;
  } job;

  ModelConfig model;                    // the preset's shape with any explicit [model] values on top
  std::string model_preset = "small";
  // [model] init_from: the weights a fresh job starts from on every site (a Hugging Face model
  // directory or a meridian run directory or checkpoint) instead of its seed's initialisation.
  std::optional<std::filesystem::path> model_init_from;

  struct Data {
    using Format = DataFormat;
    // What the job trains on: [data] path as one source of weight 1, or the [[data.source]]
    // entries; each path absolute, a file, a directory or a glob.
    std::vector<SourceSpec> sources;
    Format format = Format::Text;
    double val_fraction = 0.1;                        // ignored when val_path is given
    std::optional<std::filesystem::path> val_path;  // absolute; a file, a directory or a glob
    // The tokenizer the data was made with (a tokenizer.json or a .tiktoken rank file): checked
    // against the model's vocabulary, kept in checkpoints, written by `meridian export`.
    std::optional<std::filesystem::path> tokenizer;
    std::string tokenizer_encoding;  // for a .tiktoken file: the named encoding whose pattern and specials it takes
    bool operator==(const Data&) const = default;
  } data;

  struct Inner {
    enum class Optimizer { AdamW, Sgd, Muon };
    using Schedule = ScheduleKind;
    Optimizer optimizer = Optimizer::AdamW;
    double lr = 1e-3;
    double min_lr_ratio = 0.1;
    int warmup_steps = 0;
    Schedule schedule = Schedule::Cosine;
    double decay_fraction = 0.2;                        // wsd: the share of the steps in the cooldown
    DecayShape decay_shape = DecayShape::OneMinusSqrt;  // wsd: the cooldown's shape
    int batch_per_replica = 8;  // sequences per micro-batch
    int grad_accum = 1;
    int steps = 1000;
    double clip = 1.0;  // 0 = no clipping
    double weight_decay = 0.1;
    double beta1 = 0.9;
    double beta2 = 0.95;
    double eps = 1e-8;
    double muon_momentum = 0.95;  // muon: its momentum on the matrices (AdamW's betas for the rest)
    bool operator==(const Inner&) const = default;
  } inner;

  struct Log {
    int every = 10;         // steps between metrics lines
    int eval_every = 100;   // 0 = evaluate only at the end
    int eval_windows = 64;  // most validation windows per evaluation
    // A sample of the model's text every sample_every steps (0: none): sample_tokens new tokens
    // after sample_prompt (empty: a document's start), at temperature 1, as a `sample` event.
    int sample_every = 0;
    int sample_tokens = 64;
    std::string sample_prompt;
    bool operator==(const Log&) const = default;
  } log;

  // What `meridian launch` does when a site's process dies (a crash, a kill): start it again, after
  // restart_backoff_ms doubled at every restart (up to 30 s), at most max_site_restarts times over
  // the launch. A site whose input is at fault (bad data or config, a checkpoint of another shape)
  // is never restarted: the job stops and says why.
  struct Launch {
    int max_site_restarts = 3;
    int restart_backoff_ms = 1000;
    bool operator==(const Launch&) const = default;
  } launch;

  struct Checkpoint {
    int every = 0;  // 0 = only at the end
    int keep = 3;
    // Under zero_stage >= 1: every replica writes its part of the moments to a file of its own
    // and the leader the rest, naming the parts (core/checkpoint/store.hpp), instead of the
    // leader gathering and writing them all. The site's replicas must share the checkpoints'
    // directory (one machine, or shared storage).
    bool per_replica = false;
    bool operator==(const Checkpoint&) const = default;
  } checkpoint;

  // The divergence guard (core/train/divergence_guard): what counts as a diverging step, and what
  // is done about it -- roll back to the last healthy state, lower the learning rate, go on.
  struct Guard {
    bool enabled = true;
    int window = 50;                // healthy steps the loss z-score and median gradient norm cover
    int min_history = 20;           // steps seen before a spike or an explosion can be judged
    double loss_z = 6.0;            // a loss this many standard deviations above the window's mean is a spike
    double min_rel_std = 0.01;      // the deviation used is at least this share of the mean loss
    double grad_norm_ratio = 10.0;  // a gradient norm this many times the window's median is an explosion
    int snapshot_every = 50;        // K: steps between the in-memory states a rollback returns to
    double lr_factor = 0.5;         // the learning rate is multiplied by this at each rollback
    int max_attempts = 3;           // rollbacks before the run gives up with a report
    // A site of a DiLoCo job of several sites: roll back to its newest version (true), or only
    // report (false, the default: with these thresholds the outer steps' own gradient spikes are
    // taken for divergences; measured on tests/sites/test_site_exchange's streaming job, 2 of 4
    // runs gave up).
    bool across_sites = false;
    // fp16: a loss scale at most this many times its floor (min_scale) is collapsing, and so is
    // one that halved loss_scale_halvings times within the window.
    double loss_scale_floor_factor = 4.0;
    int loss_scale_halvings = 8;
    // Test hook: the step (0-based) whose learning rate is multiplied by inject_lr_factor, and the
    // inject_lr_steps - 1 after it, on the first pass only (before any rollback); -1 = none.
    int inject_lr_step = -1;
    int inject_lr_steps = 1;
    double inject_lr_factor = 1.0;
    bool operator==(const Guard&) const = default;
  } guard;

  // Operating a site: its Prometheus endpoint.
  struct Ops {
    bool metrics = true;
    std::string metrics_address = "127.0.0.1";  // loopback unless the operator opens it
    // 0: a free port each, announced in events.jsonl (metrics_listening) and on stdout; otherwise
    // site i of the job's [[site]] list serves on metrics_port + i.
    std::uint16_t metrics_port = 0;
    // The agent's command socket (meridianctl), always on 127.0.0.1; 0: a free port, written to
    // <site run dir>/ops.json for meridianctl to find.
    std::uint16_t port = 0;
    // A file that holds the token every command that changes anything needs, readable by its owner
    // only (sites/site/ops_token.hpp; MERIDIAN_OPS_TOKEN wins). Neither: such commands are refused.
    // The token itself is never a setting: `token = "..."` is an error.
    std::optional<std::filesystem::path> token_file;
    bool operator==(const Ops&) const = default;
  } ops;

  // The replicas of a site: how many, and what happens when one dies, hangs or corrupts its weights.
  struct Replicas {
    enum class OnFailure { KeepBatch, Scale };
    int count = 1;
    bool restart = true;     // restart a dead replica, which then heals from a live peer
    int max_restarts = 3;    // per replica slot, over the run
    int heartbeat_timeout_ms = 10000;   // a replica silent this long is evicted
    int collective_timeout_ms = 10000;  // a collective stuck this long fails
    OnFailure on_failure = OnFailure::KeepBatch;  // keep the global batch (more micro-batches) or scale it
    int sdc_every = 50;  // steps between parameter-hash comparisons (0 = off)
    // All-reduce each layer's gradients while backward runs on. Off by default: with CPU replicas
    // sharing cores the communication thread competes with compute (bench/site_scaling.sh, 2
    // replicas: 18.1k tokens/s with it, 20.8k without).
    bool overlap_allreduce = false;
    std::uint16_t store_port = 0;  // the site's rendezvous store; 0 = any free port
    bool operator==(const Replicas&) const = default;
  } replicas;

  // How a site's replicas share its training state. zero_stage 1 (ZeRO stage 1): each replica
  // keeps AdamW's moments for its own part of the weights (core/model/shard_map.hpp), the
  // gradients are reduce-scattered and the weights all-gathered; 2 also reduce-scatters the
  // gradients range by range during backward and keeps only the part's; 3 keeps only the part's
  // weights too, each layer's gathered as forward and backward reach it; 0 keeps a whole copy on each.
  // recompute: what backward recomputes instead of forward keeping it (core/model/recompute.hpp).
  struct Parallel {
    int zero_stage = 0;
    Recompute recompute = Recompute::None;
    // Each replica keeps DiLoCo's outer state (version weights, round start, momentum, residual)
    // for its part of the model only, and the site joins the parts (crosssite/outer/outer_parts.hpp).
    bool shard_outer = false;
    bool operator==(const Parallel&) const = default;
  } parallel;

  // The outer loop across sites: how often they synchronise and how the pseudo-gradient travels.
  struct Outer {
    enum class Algorithm { Sync, Diloco, Streaming };
    enum class Codec { Fp32, Bf16, Int8, Int4, Sparse };
    enum class Staleness { Inverse, Constant };  // crosssite/outer's StalenessDecay
    // What an overlapping site trains on while its round's commit is on the way: its own weights
    // until the commit comes and is rebased onto (rebase), or the eager estimate of that commit
    // (crosssite/outer eager_estimate), which measured worse than rebase on the demo (docs/quality.md).
    enum class OverlapUpdate { Rebase, Eager };
    // How far a commit that lacks some sites' deltas moves the weights: by its share of a full
    // round's tokens, the missing sites counting as zero (scaled), or as far as a full round
    // (averaged: the mean of what it has). crosssite/round/commit_rule.hpp commit_share.
    enum class PartialCommit { Scaled, Averaged };
    Algorithm algorithm = Algorithm::Diloco;
    int inner_steps = 50;  // H: inner steps between outer steps
    // Shorter rounds while the loss falls fastest: rounds of early_inner_steps until the job's step
    // early_steps (a multiple of it), then of H. 0: every round H.
    int early_inner_steps = 0;
    int early_steps = 0;
    double lr = 0.7;
    double momentum = 0.9;
    int momentum_warmup = 0;  // outer steps over which the momentum ramps up from 0
    bool nesterov = true;
    Codec codec = Codec::Int8;
    int block = 512;  // elements per quantisation block (one fp32 scale each: int4 pays 4/512 bytes per value)
    double density = 0.03;  // sparse: the share of each block's entries it sends (the largest)
    bool error_feedback = true;
    int max_staleness = 4;  // outer steps a late site's contribution may lag
    int quorum = 0;         // sites an outer step waits for; 0 = all live sites
    int deadline_ms = 0;    // how long an outer step waits for the quorum; 0 = adaptive
    // Asynchronous rounds and their fault tolerance.
    bool overlap = true;  // a site starts its next round at once instead of waiting for the commit
    // With overlap: the inner steps a site trains past a round's end before it waits for that
    // round's commit (Streaming DiLoCo's tau). Bounds how stale the base of a round's progress
    // gets; at inner_steps or more, a site may run a whole round ahead. Left out: H / 10.
    int overlap_steps = 5;
    OverlapUpdate overlap_update = OverlapUpdate::Rebase;
    Staleness staleness = Staleness::Inverse;  // a delta s versions late weighs 1/(1+s) (inverse) or 1 (constant)
    PartialCommit partial_commit = PartialCommit::Scaled;
    int delayed_nesterov = 0;  // 0 or 1: Nesterov at every commit; N > 1: momentum updated every N-th commit
    double deadline_k = 3.0;   // adaptive deadline = median + k * MAD of recent arrival lags (deadline_ms = 0)
    double max_norm_ratio = 20.0;      // refuse a delta whose norm exceeds this x the median of recent ones
    bool dynamic_inner_steps = false;  // a slower site runs fewer inner steps: floor(speed / fastest * H)
    int fragments = 1;  // streaming: parameter fragments synchronised in turn
    // Sparse: the entries each block keeps, at least one.
    int sparse_keep() const { return std::max(1, static_cast<int>(std::lround(density * block))); }
    bool operator==(const Outer&) const = default;
  } outer;

  struct Transport {
    enum class Kind { Zmq, Ucx };
    // What joins the sites: the public internet or a line shared with others, or a network only
    // the job's operator can reach. UCX encrypts nothing, so it carries deltas between sites only
    // on a private one.
    enum class Network { Public, Private };
    // Who carries a site's deltas across the WAN: its leader alone, on one stream to each peer site,
    // or every replica its share (a stripe) on a stream of its own, to the replica of the same
    // rank at the peer site (docs/wan.md, "The split exchange"). A stream over a long WAN path gets
    // its window over the round trip, often far below the link: split, a site of M replicas sends
    // on min(M, M') streams to a site of M'.
    enum class Exchange { Leader, Split };
    Kind kind = Kind::Zmq;
    Network network = Network::Public;
    Exchange exchange = Exchange::Leader;
    std::int64_t chunk_bytes = 4194304;
    // This site's CURVE secret key (a file only its owner reads; `meridian keys` writes it). With
    // it the links speak CURVE: encrypted, and each site proves the key its [[site]] entry lists.
    std::optional<std::filesystem::path> link_key_file;
    // Where each site's public key is, for sites whose [[site]] entry lists none ("{site}" in the
    // path stands for the site's name).
    std::optional<std::filesystem::path> link_public_key_file;
    bool operator==(const Transport&) const = default;
  } transport;

  struct Control {
    // "http://host:port", or "https://host:port" with the TLS files below; empty = start a local
    // etcd member (over TLS with throwaway certificates).
    std::vector<std::string> endpoints;
    // Mutual TLS with etcd: the job's CA, and this site's certificate and private key ("{site}" in
    // a path stands for the site's name), as `meridian keys` writes them. All three or none.
    std::optional<std::filesystem::path> ca_file, cert_file, key_file;
    // With etcd's auth on: this site's password ("{site}" as above); its user is
    // meridian/<job>/<site> (crosssite/control/etcd_auth.hpp), its role the job's.
    std::optional<std::filesystem::path> password_file;
    // A dead site's membership key lapses ~5 s after its last keep-alive; one keep-alive a second
    // leaves a healthy site four misses to spare.
    int lease_ttl_s = 5;
    int keepalive_ms = 1000;  // below lease_ttl_s, or a healthy site's lease would lapse
    // A site whose steps are done waits this long for an unreachable control plane before it ends
    // on the version it holds (0: as long as the control plane stays away). It cannot tell
    // whether the others still train or ended long ago; an outage of minutes it rides out.
    int end_unreachable_s = 1800;
    bool operator==(const Control&) const = default;
  } control;

  struct Site {
    enum class Device { Cpu, Cuda };
    // What a CUDA site computes in: fp32 throughout, or bf16 / fp16 activations and matmul inputs
    // with fp32 master weights, gradients and moments (CudaGpt); fp16 with dynamic loss scaling.
    // The CPU computes in fp32 only.
    enum class Precision { Fp32, Bf16, Fp16 };
    // A CUDA site's attention kernel: cuBLAS products keeping every head's (T, T) probabilities,
    // the tiled kernel (one log-sum-exp per row: O(T) memory, for long contexts), or cuDNN's
    // flash attention (bf16 or fp16; loaded at run time, materialized where it cannot run).
    enum class Attention { Materialized, Tiled, Cudnn };
    std::string name;
    // Where the site's link listens while its leader is on this host; a leader on another of the
    // site's hosts listens on its own address there (the other sites read it from etcd).
    std::string host = "127.0.0.1";
    std::uint16_t port = 0;  // 0 = any free port
    int replicas = 1;
    Device device = Device::Cpu;
    double speed = 1.0;  // relative speed hint, for balancing work across sites
    Precision precision = Precision::Fp32;
    Attention attention = Attention::Materialized;
    std::string link_public_key = "";  // Z85, 40 characters: the CURVE key its link proves ("" without CURVE)
    bool operator==(const Site&) const = default;
  };
  // Never empty: a job without [[site]] entries has one site "local" with [replicas].count replicas.
  std::vector<Site> sites;

  // The emulated WAN between sites (sim/emulator shapes the links as this says): a default link,
  // per-pair links that differ from it, and a schedule of faults in seconds from the job's start.
  struct Wan {
    struct Pair {  // both directions between sites a and b
      std::string a, b;
      WanLink link;
      bool operator==(const Pair&) const = default;
    };
    struct Fault {
      // Partition: `sites` are cut off from every other site, data links and control plane alike.
      // Bandwidth: every link touching one of `sites` (only the pair's, with `pair`) runs at
      // bandwidth_mbps. Latency: those links take latency_ms more one way.
      enum class Kind { Partition, Bandwidth, Latency };
      Kind kind = Kind::Partition;
      std::vector<std::string> sites;
      bool pair = false;
      double from_s = 0, to_s = 0;
      double bandwidth_mbps = 0;
      double latency_ms = 0;
      bool operator==(const Fault&) const = default;
    };
    std::string profile;  // the named profile the default link started from; empty = none
    WanLink link;
    std::vector<Pair> links;
    std::vector<Fault> faults;
    // Whether any link is shaped or any fault scheduled: without, sites talk unshaped at no cost.
    bool emulated() const { return link != WanLink{} || !links.empty() || !faults.empty(); }
    bool operator==(const Wan&) const = default;
  } wan;

  SimConfig sim;  // what `meridian sim` assumes beyond the job (core/config/sim_config.hpp)

  // The file the job was loaded from (absolute). Compared like the rest, so a config re-read from
  // to_toml() output written elsewhere equals the original once source is aligned.
  std::filesystem::path source;
  // The settings the resolver derived from the job's shape because the file left them out
  // ("outer.lr = 0.6 (3 sites, H = 50)"), for `meridian validate` to show.
  std::vector<std::string> derived;

  bool operator==(const JobConfig&) const = default;
};

std::string_view to_string(JobConfig::Data::Format f);
std::string_view to_string(JobConfig::Inner::Optimizer o);
std::string_view to_string(JobConfig::Inner::Schedule s);
std::string_view to_string(DecayShape s);
std::string_view to_string(JobConfig::Replicas::OnFailure f);
std::string_view to_string(JobConfig::Outer::Algorithm a);
std::string_view to_string(JobConfig::Outer::Codec c);
std::string_view to_string(JobConfig::Outer::Staleness s);
std::string_view to_string(JobConfig::Outer::OverlapUpdate u);
std::string_view to_string(JobConfig::Outer::PartialCommit p);
std::string_view to_string(JobConfig::Transport::Kind k);
std::string_view to_string(JobConfig::Transport::Network n);
std::string_view to_string(JobConfig::Transport::Exchange e);
std::string_view to_string(JobConfig::Site::Device d);
std::string_view to_string(JobConfig::Site::Precision p);
std::string_view to_string(JobConfig::Site::Attention a);
std::string_view to_string(WanLink::Jitter j);
std::string_view to_string(JobConfig::Wan::Fault::Kind k);

// One thing wrong with a job: where (file and line, or "--set key=value" with line 0), which
// dotted key (empty for whole-file problems), and what was expected and found.
struct ConfigProblem {
  std::string file;
  int line = 0;
  std::string key;
  std::string message;
  // "configs/demo.toml:12: inner.lr: expected a number > 0, found -0.5"
  std::string to_string() const;
};

// Loads `file`, applies overrides ("inner.lr=3e-3"; the value is read as a TOML value, or else
// taken as a bare string: "data.path=foo.txt"), and validates. Returns every problem found.
std::variant<JobConfig, std::vector<ConfigProblem>> try_load_job_config(
    const std::filesystem::path& file, const std::vector<std::string>& overrides = {});

// Same, but throws Error(ErrorKind::Config) whose what() lists every problem, one per line.
JobConfig load_job_config(const std::filesystem::path& file, const std::vector<std::string>& overrides = {});

// Where one site of the job keeps its files (metrics, events, summary, checkpoints): the job's
// run_dir for a one-site job, <run_dir>/<site> when several sites share the job (and, on one
// machine, its disk). Error(Config) when `site` is not one of config.sites.
std::filesystem::path site_run_dir(const JobConfig& config, std::string_view site);
// The config one site runs with: job.run_dir replaced by site_run_dir, replicas.count by the site's.
JobConfig config_for_site(JobConfig config, std::string_view site);

// The link between sites a and b (either order): its [[wan.link]] entry, else the default [wan] link.
WanLink wan_link(const JobConfig& config, std::string_view a, std::string_view b);

// The resolved config as TOML text (absolute paths, explicit shape); loading it gives an equal JobConfig.
std::string to_toml(const JobConfig& c);

// A [model] table that gives the shape `m` when loaded: the family's keys only, the preset line
// when `preset` is not empty, init_from when given.
std::string model_toml(const ModelConfig& m, const std::string& preset = {},
                       const std::optional<std::filesystem::path>& init_from = std::nullopt);

}  // namespace meridian
