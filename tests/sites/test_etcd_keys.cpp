// A job's etcd secrets (sites/keys/etcd_keys, sites/keys/certificates): the CA and each site's
// certificate as `meridian keys` writes them, checked with OpenSSL's own verifier, mapped to a
// site's files from its job, and accepted by a real etcd member and client.
#include <doctest/doctest.h>

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <chrono>
#include <memory>

#include "core/util/error.hpp"
#include "sites/keys/certificates.hpp"
#include "sites/keys/etcd_keys.hpp"
#include "sites/launch/etcd_member.hpp"
#include "crosssite/control/etcd_auth.hpp"
#include "crosssite/control/etcd_client.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using namespace std::chrono_literals;

namespace {

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
using Cert = std::unique_ptr<X509, X509Free>;

Cert load(const std::filesystem::path& file) {
  FILE* f = std::fopen(file.c_str(), "r");
  REQUIRE(f != nullptr);
  Cert cert(PEM_read_X509(f, nullptr, nullptr, nullptr));
  std::fclose(f);
  REQUIRE(cert != nullptr);
  return cert;
}

// OpenSSL's verdict on `leaf` under `ca` for one end of TLS: X509_V_OK when it holds.
int verify(X509* ca, X509* leaf, int purpose) {
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), X509_STORE_free);
  X509_STORE_add_cert(store.get(), ca);
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx(X509_STORE_CTX_new(), X509_STORE_CTX_free);
  X509_STORE_CTX_init(ctx.get(), store.get(), leaf, nullptr);
  X509_STORE_CTX_set_purpose(ctx.get(), purpose);
  X509_verify_cert(ctx.get());
  return X509_STORE_CTX_get_error(ctx.get());
}

JobConfig two_sites(const std::filesystem::path& keys) {
  JobConfig config;
  config.job.name = "keys-test";
  config.sites.resize(2);
  config.sites[0].name = "a";
  config.sites[0].host = "10.1.0.1";
  config.sites[1].name = "b";
  config.control.ca_file = keys / "{site}" / "ca.crt";
  config.control.cert_file = keys / "{site}" / "etcd.crt";
  config.control.key_file = keys / "{site}" / "etcd.key";
  config.control.password_file = keys / "{site}" / "etcd.password";
  return config;
}

}  // namespace

TEST_CASE("each site's certificate chains to the job's CA, for both ends of TLS, and names its host") {
  testing::TempDir dir("etcd-keys");
  const auto keys = dir.path() / "keys";
  const JobConfig config = two_sites(keys);
  write_etcd_keys(config, keys);
  const Cert ca = load(keys / "ca" / "ca.crt");
  for (const char* site : {"a", "b"}) {
    const Cert leaf = load(keys / site / "etcd.crt");
    CHECK(verify(ca.get(), leaf.get(), X509_PURPOSE_SSL_SERVER) == X509_V_OK);
    CHECK(verify(ca.get(), leaf.get(), X509_PURPOSE_SSL_CLIENT) == X509_V_OK);
    CHECK(X509_check_ip_asc(leaf.get(), "127.0.0.1", 0) == 1);
    CHECK(X509_check_host(leaf.get(), "localhost", 0, 0, nullptr) == 1);
    // No common name: etcd's gateway refuses a client certificate with one.
    CHECK(X509_NAME_get_index_by_NID(X509_get_subject_name(leaf.get()), NID_commonName, -1) < 0);
  }
  CHECK(X509_check_ip_asc(load(keys / "a" / "etcd.crt").get(), "10.1.0.1", 0) == 1);
  CHECK(X509_check_ip_asc(load(keys / "b" / "etcd.crt").get(), "10.1.0.1", 0) != 1);
  // Another job's CA vouches for none of them.
  testing::TempDir other("etcd-keys-other");
  write_certificate_authority(other.path(), "another job");
  CHECK(verify(load(other.path() / "ca.crt").get(), load(keys / "a" / "etcd.crt").get(), X509_PURPOSE_SSL_CLIENT) !=
        X509_V_OK);
  // Never overwritten.
  CHECK(testing::error_of(ErrorKind::Config, [&] { write_etcd_keys(config, keys); }).find("never overwritten") !=
        std::string::npos);
  CHECK(testing::error_of(ErrorKind::Config, [&] { write_certificate(keys / "ca", dir.path() / "x.crt", dir.path() / "x.key", {}); })
            .find("no host names") != std::string::npos);
}

TEST_CASE("a site's files from its job: {site} replaced, a key open to others refused, a missing file named") {
  testing::TempDir dir("etcd-keys-site");
  const auto keys = dir.path() / "keys";
  const JobConfig config = two_sites(keys);
  write_etcd_keys(config, keys);
  const auto tls = etcd_tls(config, "b");
  REQUIRE(tls.has_value());
  CHECK(tls->cert_file == keys / "b" / "etcd.crt");
  CHECK(tls->key_file == keys / "b" / "etcd.key");
  CHECK_FALSE(etcd_tls(JobConfig{}, "a").has_value());
  const auto who = etcd_credentials(config, "b");
  REQUIRE(who.has_value());
  CHECK(who->password.size() == 64);  // 32 random bytes, as hex
  ::chmod((keys / "a" / "etcd.key").c_str(), 0644);
  CHECK(testing::error_of(ErrorKind::Config, [&] { etcd_tls(config, "a"); }).find("chmod 600") != std::string::npos);
  std::filesystem::remove(keys / "b" / "ca.crt");
  CHECK(testing::error_of(ErrorKind::Config, [&] { etcd_tls(config, "b"); }).find((keys / "b" / "ca.crt").string()) !=
        std::string::npos);
}

TEST_CASE("an etcd member shows site a's certificate, site b's client its own and its user: its own records only") {
  testing::TempDir dir("etcd-keys-member");
  const auto keys = dir.path() / "keys";
  const JobConfig config = two_sites(keys);
  const auto passwords = write_etcd_keys(config, keys);
  EtcdMember member(dir.path() / "etcd-a", etcd_tls(config, "a"));
  {  // The operator's grants, as `meridian keys` prints them, then etcd's auth on.
    EtcdOptions admin{{member.endpoint()}, 3000ms};
    admin.tls = etcd_tls(config, "a");
    EtcdClient root(admin);
    grant_job(root, config.job.name, passwords);
    enable_auth(root, "root-password");
  }
  JobConfig located = config;
  located.control.endpoints = {member.endpoint()};
  EtcdOptions options = etcd_options(located, "b");
  REQUIRE(options.credentials.has_value());
  CHECK(options.credentials->user == "meridian/keys-test/b");
  options.timeout = 3000ms;
  EtcdClient client(options);
  client.put("/meridian/keys-test/members/b", "from b");
  CHECK(client.get("/meridian/keys-test/members/b") == std::optional<std::string>("from b"));
  for (const char* key : {"/meridian/other-job/members/b", "/meridian/keys-test/members/a"})
    CHECK(testing::error_of(ErrorKind::Peer, [&] { client.put(key, "from b"); }).find("permission denied") !=
          std::string::npos);
}
