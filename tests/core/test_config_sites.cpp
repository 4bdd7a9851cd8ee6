// The multi-site tables: [outer], [transport], [control], [[site]], and the rules between them.
#include <doctest/doctest.h>

#include "tests/support/config_files.hpp"

using namespace meridian;
using namespace meridian::testing;
namespace fs = std::filesystem;

TEST_CASE("multi-site tables: defaults, the implicit site, and values") {
  TempDir dir("config");
  const JobConfig d = load_ok(write(dir / "job.toml", kData + "[replicas]\ncount = 2\n"));
  CHECK(d.outer == JobConfig::Outer{});
  CHECK((d.outer.algorithm == JobConfig::Outer::Algorithm::Diloco && d.outer.inner_steps == 50 && d.outer.lr == 0.7));
  CHECK((d.outer.codec == JobConfig::Outer::Codec::Int8 && d.outer.block == 512 && d.outer.max_staleness == 4));
  CHECK((d.transport.kind == JobConfig::Transport::Kind::Zmq && d.transport.chunk_bytes == 4194304));
  CHECK(d.transport.network == JobConfig::Transport::Network::Public);
  CHECK((d.control.endpoints.empty() && d.control.lease_ttl_s == 5 && d.control.keepalive_ms == 1000));
  CHECK(d.control.end_unreachable_s == 1800);
  CHECK(
      (d.outer.overlap && d.outer.staleness == JobConfig::Outer::Staleness::Inverse && d.outer.delayed_nesterov == 0));
  CHECK((d.outer.deadline_k == 3.0 && d.outer.max_norm_ratio == 20.0 && !d.outer.dynamic_inner_steps));
  CHECK(d.outer.fragments == 1);
  CHECK(d.sites == std::vector{JobConfig::Site{.name = "local", .replicas = 2}});  // from [replicas].count
  CHECK(d.wan == JobConfig::Wan{});
  const JobConfig c = load_ok(write(
      dir / "job.toml",
      kData + "[outer]\nalgorithm = \"streaming\"\ninner_steps = 16\n"
              "codec = \"int4\"\nmomentum = 0\nquorum = 2\noverlap = false\nstaleness = \"constant\"\ndelayed_nesterov "
              "= 4\n"
              "deadline_k = 2.5\nmax_norm_ratio = 20\ndynamic_inner_steps = true\nfragments = 8\n[transport]\nkind = "
              "\"ucx\"\nnetwork = \"private\"\nchunk_bytes = 1024\n"
              "[control]\nendpoints = [\"http://127.0.0.2:2379\"]\nlease_ttl_s = 1\nkeepalive_ms = "
              "999\nend_unreachable_s = 90\n"
              "[[site]]\nname = \"eu\"\nhost = \"h1\"\nport = 7000\nreplicas = 4\ndevice = \"cuda\"\nspeed = 0.5\n"
              "precision = \"bf16\"\nattention = \"tiled\"\n[[site]]\nname = \"us\"\nhost = \"h2\"\nport = "
              "7000\n[wan]\nlatency_ms = 50\nloss = 0.01\n"));
  CHECK((c.outer.algorithm == JobConfig::Outer::Algorithm::Streaming && c.outer.inner_steps == 16 &&
         c.outer.quorum == 2));
  CHECK((!c.outer.overlap && c.outer.staleness == JobConfig::Outer::Staleness::Constant &&
         c.outer.delayed_nesterov == 4));
  CHECK((c.outer.deadline_k == 2.5 && c.outer.max_norm_ratio == 20.0 && c.outer.dynamic_inner_steps));
  CHECK(c.outer.fragments == 8);
  CHECK((c.transport.kind == JobConfig::Transport::Kind::Ucx && c.transport.chunk_bytes == 1024));
  CHECK(c.transport.network == JobConfig::Transport::Network::Private);
  CHECK((c.control.endpoints == std::vector<std::string>{"http://127.0.0.2:2379"} && c.control.keepalive_ms == 999));
  CHECK(c.control.end_unreachable_s == 90);
  REQUIRE(c.sites.size() == 2);
  CHECK(c.sites[0] == JobConfig::Site{"eu", "h1", 7000, 4, JobConfig::Site::Device::Cuda, 0.5,
                                      JobConfig::Site::Precision::Bf16, JobConfig::Site::Attention::Tiled});
  CHECK(c.sites[1] == JobConfig::Site{.name = "us", .host = "h2", .port = 7000});  // other hosts: no clash
  CHECK((c.wan.link.latency_ms == 50 && c.wan.link.loss == 0.01));
}

TEST_CASE("plaintext off this machine is refused unless the job says insecure = true") {
  TempDir dir("config");
  const std::string sites =
      "[[site]]\nname = \"a\"\nhost = \"10.0.0.1\"\n[[site]]\nname = \"b\"\nhost = \"10.0.0.2\"\n";
  std::string problem = only_problem(dir, kData + sites);
  CHECK(problem.find("transport.link_key_file: site \"a\" is on host \"10.0.0.1\"") != std::string::npos);
  CHECK(problem.find("insecure = true") != std::string::npos);
  problem =
      only_problem(dir, kData + "[control]\nendpoints = [\"http://127.0.0.1:2379\", \"http://etcd.example:2379\"]\n");
  CHECK(problem.find(": control.endpoints: etcd at \"http://etcd.example:2379\" is on another host") !=
        std::string::npos);
  // Over https with the TLS files, etcd on another host is fine.
  const std::string tls =
      "ca_file = \"/k/ca.crt\"\ncert_file = \"/k/{site}/etcd.crt\"\nkey_file = \"/k/{site}/etcd.key\"\n";
  const JobConfig secure =
      load_ok(write(dir / "tls.toml", kData + "[control]\nendpoints = [\"https://etcd.example:2379\"]\n" + tls));
  CHECK(secure.control.cert_file == std::filesystem::path("/k/{site}/etcd.crt"));
  const JobConfig insecure =
      load_ok(write(dir / "insecure.toml", kData + "[job]\ninsecure = true\n" + sites +
                                               "[control]\nendpoints = [\"http://10.0.0.9:2379\"]\n"));
  CHECK(insecure.job.insecure);
  CHECK(load_ok(write(dir / "cli.toml", kData + sites), {"job.insecure=true"}).job.insecure);
  // On loopback nothing leaves the machine; UCX answers to network = "private" instead.
  const std::string local = "[[site]]\nname = \"a\"\n[[site]]\nname = \"b\"\nhost = \"localhost\"\nport = 7001\n";
  CHECK_FALSE(load_ok(write(dir / "local.toml", kData + local)).job.insecure);
  CHECK(load_ok(write(dir / "ucx.toml", kData + "[transport]\nkind = \"ucx\"\nnetwork = \"private\"\n" + sites))
            .sites.size() == 2);
}

TEST_CASE("etcd over TLS: all three files or none, and then every endpoint https") {
  TempDir dir("config");
  const std::string files = "ca_file = \"/k/ca.crt\"\ncert_file = \"/k/a.crt\"\nkey_file = \"/k/a.key\"\n";
  std::string problem = only_problem(dir, kData + "[control]\nendpoints = [\"https://127.0.0.1:2379\"]\n");
  CHECK(problem.find("control.endpoints: etcd at \"https://127.0.0.1:2379\": https needs [control] ca_file") !=
        std::string::npos);
  problem = only_problem(dir, kData + "[control]\nendpoints = [\"http://127.0.0.1:2379\"]\n" + files);
  CHECK(problem.find("every endpoint is https://") != std::string::npos);
  problem = only_problem(dir, kData + "[control]\nca_file = \"/k/ca.crt\"\n");
  CHECK(problem.find("takes all three of ca_file, cert_file and key_file") != std::string::npos);
  const JobConfig ok =
      load_ok(write(dir / "ok.toml", kData + "[control]\nendpoints = [\"https://127.0.0.1:2379\"]\n" + files));
  CHECK(ok.control.key_file == std::filesystem::path("/k/a.key"));
  // What validate prints loads back the same.
  CHECK(load_ok(write(dir / "again.toml", to_toml(ok))).control == ok.control);
}

TEST_CASE("UCX between sites only on a network the job calls private, and validate says why") {
  TempDir dir("config");
  const std::string two_sites = "[[site]]\nname = \"a\"\n[[site]]\nname = \"b\"\n";
  const std::string problem = only_problem(dir, kData + "[transport]\nkind = \"ucx\"\n" + two_sites);
  CHECK(problem.find("job.toml:4") != std::string::npos);
  CHECK(problem.find("transport.kind: UCX encrypts nothing") != std::string::npos);
  CHECK(problem.find("network = \"private\"") != std::string::npos);
  CHECK(load_ok(write(dir / "private.toml", kData + "[transport]\nkind = \"ucx\"\nnetwork = \"private\"\n" + two_sites))
            .transport.kind == JobConfig::Transport::Kind::Ucx);
  CHECK(load_ok(write(dir / "one.toml", kData + "[transport]\nkind = \"ucx\"\n")).transport.kind ==
        JobConfig::Transport::Kind::Ucx);  // one site: nothing crosses a network
  CHECK(only_problem(dir, kData + "[transport]\nnetwork = \"lan\"\n").find("one of \"public\", \"private\"") !=
        std::string::npos);
}

TEST_CASE("transport.exchange: leader or split, and split only where DiLoCo's deltas go") {
  TempDir dir("config");
  const std::string two_sites = "[[site]]\nname = \"a\"\nreplicas = 2\n[[site]]\nname = \"b\"\n";
  CHECK(load_ok(write(dir / "default.toml", kData + two_sites)).transport.exchange ==
        JobConfig::Transport::Exchange::Leader);
  const auto split = load_ok(write(dir / "split.toml", kData + "[transport]\nexchange = \"split\"\n" + two_sites));
  CHECK(split.transport.exchange == JobConfig::Transport::Exchange::Split);
  CHECK(load_ok(write(dir / "again.toml", to_toml(split))).transport == split.transport);  // what validate prints
  CHECK(only_problem(dir, kData + "[transport]\nexchange = \"striped\"\n").find("one of \"leader\", \"split\"") !=
        std::string::npos);
  const std::string problem =
      only_problem(dir, kData + "[outer]\nalgorithm = \"sync\"\n[transport]\nexchange = \"split\"\n" + two_sites);
  CHECK(problem.find("job.toml:6") != std::string::npos);
  CHECK(problem.find("transport.exchange: expected \"leader\" with outer.algorithm = \"sync\"") != std::string::npos);
}

TEST_CASE("CURVE keys on the links: all sites list one and the file names this site's secret, or none does") {
  TempDir dir("config");
  // Z85 keys from ZeroMQ's own CURVE test (public halves).
  const std::string ka = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7", kb = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID";
  const auto site = [](const std::string& name, const std::string& key) {
    return "[[site]]\nname = \"" + name + "\"\n" + (key.empty() ? "" : "link_public_key = \"" + key + "\"\n");
  };
  const JobConfig c =
      load_ok(write(dir / "curve.toml",
                    kData + "[transport]\nlink_key_file = \"keys/{site}/link.key\"\n" + site("a", ka) + site("b", kb)));
  REQUIRE(c.transport.link_key_file.has_value());
  CHECK(*c.transport.link_key_file == dir / "keys/{site}/link.key");  // beside the file that names it
  CHECK(c.sites[0].link_public_key == ka);
  CHECK(c.sites[1].link_public_key == kb);
  // Read back from its own text, the config is the same (but for where it came from).
  const auto same_again = [&](const JobConfig& config, const char* name) {
    JobConfig again = load_ok(write(dir / name, to_toml(config)));
    again.source = config.source;
    again.derived = config.derived;
    return again == config;
  };
  CHECK(same_again(c, "again.toml"));

  std::string problem =
      only_problem(dir, kData + "[transport]\nlink_key_file = \"k\"\n" + site("a", ka) + site("b", ""));
  CHECK(problem.find("site[1].link_public_key") != std::string::npos);
  CHECK(problem.find("site \"b\" must list the public key it proves") != std::string::npos);
  problem = only_problem(dir, kData + site("a", ka) + site("b", kb));
  CHECK(problem.find("transport.link_key_file: the sites' CURVE public keys are given") != std::string::npos);
  const JobConfig files = load_ok(write(dir / "files.toml", kData +
                                                                "[transport]\nlink_key_file = \"k/{site}.key\"\n"
                                                                "link_public_key_file = \"k/{site}.pub\"\n" +
                                                                site("a", "") + site("b", kb)));
  CHECK(*files.transport.link_public_key_file == dir / "k/{site}.pub");
  CHECK(same_again(files, "files-again.toml"));
  problem = only_problem(dir, kData + "[transport]\nlink_key_file = \"k\"\n" + site("a", ka) + site("b", "too short"));
  CHECK(problem.find("site[1].link_public_key: expected a CURVE public key") != std::string::npos);
  problem = only_problem(dir, kData + "[transport]\nkind = \"ucx\"\nnetwork = \"private\"\nlink_key_file = \"k\"\n" +
                                  site("a", ka) + site("b", kb));
  CHECK(problem.find("UCX has no CURVE") != std::string::npos);
}

TEST_CASE("multi-site rules name file:line and the key") {
  TempDir dir("config");
  const std::pair<std::string, std::string> cases[] = {
      {"[outer]\ninner_steps = 0\n", ":2: outer.inner_steps: expected an integer >= 1, found 0"},
      {"[outer]\ncodec = \"int3\"\n",
       ":2: outer.codec: expected one of \"fp32\", \"bf16\", \"int8\", \"int4\", \"sparse\", found \"int3\""},
      {"[outer]\ncodec = \"sparse\"\nerror_feedback = false\n",
       ":3: outer.error_feedback: expected true with outer.codec = \"sparse\" (what it leaves out is sent in later "
       "rounds), found false"},
      {"[outer]\ncodec = \"sparse\"\nblock = 70000\n",
       ":3: outer.block: expected at most 65536 with outer.codec = \"sparse\" (positions are 16-bit), found 70000"},
      {"[outer]\ndensity = 0\n", ":2: outer.density: expected a number in (0, 1], found 0"},
      {"[outer]\nearly_inner_steps = 10\nearly_steps = 25\n",
       ":3: outer.early_steps: expected outer.early_steps a positive multiple of outer.early_inner_steps (whole early "
       "rounds), found early_inner_steps = 10 and early_steps = 25"},
      {"[outer]\nearly_steps = 100\n",
       ":2: outer.early_steps: expected outer.early_inner_steps from 1 to outer.inner_steps - 1 = 49, found "
       "early_inner_steps = 0 and early_steps = 100"},
      {"[outer]\nearly_inner_steps = 50\nearly_steps = 100\n",
       ":3: outer.early_steps: expected outer.early_inner_steps from 1 to outer.inner_steps - 1 = 49"},
      {"[inner]\nsteps = 100\n[outer]\nearly_inner_steps = 10\nearly_steps = 100\n",
       ":5: outer.early_steps: expected outer.early_steps below inner.steps = 100"},
      {"[outer]\nalgorithm = \"streaming\"\nfragments = 2\nearly_inner_steps = 10\nearly_steps = 100\n",
       ":5: outer.early_steps: shorter early rounds are for outer.algorithm = \"diloco\""},
      {"[outer]\ndynamic_inner_steps = true\nearly_inner_steps = 10\nearly_steps = 100\n",
       ":4: outer.early_steps: shorter early rounds and outer.dynamic_inner_steps = true cut rounds two ways"},
      {"[outer]\noverlap_update = \"late\"\n",
       ":2: outer.overlap_update: expected one of \"rebase\", \"eager\", found \"late\""},
      {"[[site]]\nname = \"a\"\n[[site]]\nname = \"a\"\n",
       ":4: site[1].name: duplicate site name \"a\" (lines 2 and 4)"},
      {"[[site]]\nname = \"..\"\n[[site]]\nname = \"b\"\n",
       ":2: site[0].name: expected a name of 1 to 64 letters, digits, '_', '-' and '.', not starting with '.' or "
       "'-' (it names the site's directory, its etcd keys and user), found \"..\""},
      {"[[site]]\nname = \"a\"\n[[site]]\nname = \"eu/west\"\n",
       ":4: site[1].name: expected a name of 1 to 64 letters, digits, '_', '-' and '.', not starting with '.' or "
       "'-' (it names the site's directory, its etcd keys and user), found \"eu/west\""},
      {"[[site]]\nname = \"a\"\nport = 7\n[[site]]\nname = \"b\"\nport = 7\n",
       ":6: site[1].port: port clash: 127.0.0.1:7 is also used by site \"a\" (line 3)"},
      {"[[site]]\nname = \"a\"\nreplicas = 0\n", ":3: site[0].replicas: expected an integer >= 1, found 0"},
      {"[[site]]\nhost = \"h\"\n", ":1: site[0].name: missing required key (expected a string: the site's name)"},
      {"[[site]]\nname = \"a\"\nspeeed = 2\n", ":3: site[0].speeed: unknown key (did you mean speed?)"},
      {"[site]\nname = \"a\"\n", ":1: site: expected an array of tables ([[site]]), found a table"},
      {"[[site]]\nname = \"a\"\nprecision = \"fp8\"\n",
       ":3: site[0].precision: expected one of \"fp32\", \"bf16\", \"fp16\", found \"fp8\""},
      {"[[site]]\nname = \"a\"\nprecision = \"bf16\"\n",
       ":3: site[0].precision: expected \"fp32\" on a site with device = \"cpu\" (mixed precision runs on GPUs "
       "only), found \"bf16\""},
      {"[[site]]\nname = \"a\"\nattention = \"tiled\"\n",
       ":3: site[0].attention: expected \"materialized\" on a site with device = \"cpu\" (the other kernels run on "
       "GPUs only), found \"tiled\""},
      {"[[site]]\nname = \"a\"\ndevice = \"cuda\"\nattention = \"cudnn\"\n",
       ":4: site[0].attention: \"cudnn\" needs precision = \"bf16\" or \"fp16\" (cuDNN's flash attention has no fp32 "
       "form); this site's precision is \"fp32\""},
      {"[[site]]\nname = \"a\"\ndevice = \"cuda\"\nattention = \"flash\"\n",
       ":4: site[0].attention: expected one of \"materialized\", \"tiled\", \"cudnn\", found \"flash\""},
      {"[control]\nlease_ttl_s = 2\nkeepalive_ms = 2000\n",
       ":3: control.keepalive_ms: expected less than control.lease_ttl_s * 1000 = 2000"},
      // The defaults' pairing holds against a shorter TTL set alone: 1000 ms is not below 1 s.
      {"[control]\nlease_ttl_s = 1\n",
       ":2: control.keepalive_ms: expected less than control.lease_ttl_s * 1000 = 1000"},
      {"[control]\nend_unreachable_s = -1\n", ":2: control.end_unreachable_s: expected an integer >= 0, found -1"},
      {"[outer]\noverlap = 1\n", ":2: outer.overlap: expected true or false, found integer 1"},
      {"[outer]\nstaleness = \"linear\"\n",
       ":2: outer.staleness: expected one of \"inverse\", \"constant\", found \"linear\""},
      {"[outer]\ndelayed_nesterov = -1\n", ":2: outer.delayed_nesterov: expected an integer >= 0, found -1"},
      {"[outer]\nmomentum_warmup = -2\n", ":2: outer.momentum_warmup: expected an integer >= 0, found -2"},
      {"[outer]\nnesterov = false\ndelayed_nesterov = 2\n",
       ":3: outer.delayed_nesterov: expected 0 or 1 with outer.nesterov = false (delayed Nesterov needs Nesterov "
       "momentum), found 2"},
      {"[outer]\ndeadline_k = 0\n", ":2: outer.deadline_k: expected a number > 0, found 0"},
      {"[outer]\nmax_norm_ratio = 1\n", ":2: outer.max_norm_ratio: expected a number > 1, found 1"},
      {"[outer]\ndynamic_inner_steps = \"yes\"\n",
       ":2: outer.dynamic_inner_steps: expected true or false, found string \"yes\""},
      {"[outer]\nfragments = 0\n", ":2: outer.fragments: expected an integer >= 1, found 0"},
      {"[outer]\nfragments = 4\n",
       ":2: outer.fragments: expected 1 unless outer.algorithm = \"streaming\" (fragments are streaming DiLoCo's), "
       "found 4"},
      {"[outer]\nalgorithm = \"streaming\"\ninner_steps = 3\nfragments = 4\n",
       ":4: outer.fragments: expected at most outer.inner_steps = 3 (one fragment is synchronised every inner_steps / "
       "fragments steps), found 4"},
      {"[model]\npreset = \"tiny\"\nn_layer = 1\n[outer]\nalgorithm = \"streaming\"\ninner_steps = 100\nfragments = "
       "17\n",
       ":7: outer.fragments: expected at most 16 (the model's tensors; a fragment holds whole ones), found 17"},
      {"[control]\nendpoints = [\"10.0.0.1:2379\"]\n", ":2: control.endpoints: expected an array of strings"},
      {"[wan]\nloss = 1.0\n", ":2: wan.loss: expected a number in [0, 1), found 1"},
  };
  for (const auto& [body, expected] : cases) {
    CAPTURE(body);
    CHECK(only_problem(dir, body + kData).starts_with((dir / "job.toml").string() + expected));
  }
}
