#include "sites/keys/certificates.hpp"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <fstream>
#include <functional>
#include <memory>

#include "core/io/secret_file.hpp"
#include "core/util/error.hpp"

namespace meridian {

namespace {

template <auto Free>
struct Freer {
  template <class T>
  void operator()(T* p) const {
    Free(p);
  }
};
using Key = std::unique_ptr<EVP_PKEY, Freer<EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Freer<X509_free>>;
using Bio = std::unique_ptr<BIO, Freer<BIO_free_all>>;

// OpenSSL's reason for the last failure, for a message.
std::string openssl_error() {
  char text[256] = "unknown error";
  if (const unsigned long code = ERR_get_error(); code != 0) ERR_error_string_n(code, text, sizeof text);
  return text;
}

// OpenSSL refusing well-formed input of ours is a bug (or a broken library), not a user's mistake.
void check(bool ok, const char* what) { MERIDIAN_CHECK(ok, "OpenSSL: ", what, " failed: ", openssl_error()); }

Key fresh_key() {
  Key key(EVP_EC_gen("P-256"));
  check(key != nullptr, "EC key generation");
  return key;
}

// A random positive 127-bit serial: unique enough that no two certificates of a CA share one.
void set_serial(X509* cert) {
  std::unique_ptr<BIGNUM, Freer<BN_free>> bn(BN_new());
  check(bn && BN_rand(bn.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY), "serial");
  check(BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert)) != nullptr, "serial");
}

void add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, Freer<X509_EXTENSION_free>> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  check(ext && X509_add_ext(cert, ext.get(), -1), "certificate extension");
}

// A version-3 certificate of `key`, valid from an hour ago (clocks differ) for `days`.
Cert new_certificate(EVP_PKEY* key, int days) {
  Cert cert(X509_new());
  check(cert && X509_set_version(cert.get(), 2), "certificate");
  set_serial(cert.get());
  check(X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) &&
            X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(days) * 86400) &&
            X509_set_pubkey(cert.get(), key),
        "certificate validity");
  return cert;
}

std::string pem_of(const std::function<int(BIO*)>& write) {
  Bio bio(BIO_new(BIO_s_mem()));
  check(bio && write(bio.get()) == 1, "PEM encoding");
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(size));
}

void write_public(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) throw make_error(ErrorKind::Io, "cannot write ", path.string());
}

void write_pair(const Cert& cert, const Key& key, const std::filesystem::path& cert_path,
                const std::filesystem::path& key_path) {
  write_secret_file(key_path, pem_of([&](BIO* b) {
                      return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
                    }));
  write_public(cert_path, pem_of([&](BIO* b) { return PEM_write_bio_X509(b, cert.get()); }));
}

Cert read_certificate(const std::filesystem::path& path) {
  Bio bio(BIO_new_file(path.c_str(), "r"));
  Cert cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) throw make_error(ErrorKind::Config, "CA certificate ", path.string(), ": cannot read it: ", openssl_error());
  return cert;
}

Key read_key(const std::filesystem::path& path) {
  read_secret_file(path, "CA private key");  // refuses a key open to other users
  Bio bio(BIO_new_file(path.c_str(), "r"));
  Key key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) throw make_error(ErrorKind::Config, "CA private key ", path.string(), ": cannot read it: ", openssl_error());
  return key;
}

// subjectAltName entries: IP:... for an address, DNS:... for a name.
std::string alt_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) {
    const bool address = name.find_first_not_of("0123456789.") == std::string::npos || name.find(':') != std::string::npos;
    if (!out.empty()) out += ',';
    out += address ? "IP:" : "DNS:";
    out += name;
  }
  return out;
}

}  // namespace

void write_certificate_authority(const std::filesystem::path& dir, const std::string& name, int days) {
  if (std::filesystem::exists(dir / "ca.key"))
    throw make_error(ErrorKind::Config, "CA key ", (dir / "ca.key").string(),
                     " is there already: every certificate of the job hangs on it, so it is never overwritten");
  std::filesystem::create_directories(dir);
  const Key key = fresh_key();
  Cert cert = new_certificate(key.get(), days);
  X509_NAME* subject = X509_get_subject_name(cert.get());
  const std::string cn = name + " CA";
  check(X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1,
                                   -1, 0) &&
            X509_set_issuer_name(cert.get(), subject),
        "CA name");
  add_extension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
  add_extension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
  add_extension(cert.get(), cert.get(), NID_subject_key_identifier, "hash");
  check(X509_sign(cert.get(), key.get(), EVP_sha256()) > 0, "CA signature");
  write_pair(cert, key, dir / "ca.crt", dir / "ca.key");
}

void write_certificate(const std::filesystem::path& ca_dir, const std::filesystem::path& cert_path,
                       const std::filesystem::path& key_path, const std::vector<std::string>& names, int days) {
  if (names.empty()) throw make_error(ErrorKind::Config, "certificate ", cert_path.string(), ": no host names or addresses");
  const Cert ca = read_certificate(ca_dir / "ca.crt");
  const Key ca_key = read_key(ca_dir / "ca.key");
  const Key key = fresh_key();
  Cert cert = new_certificate(key.get(), days);
  // Its subject names the organisation only (no CN, for etcd's gateway); who it is, is its SAN.
  X509_NAME* subject = X509_get_subject_name(cert.get());
  check(X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>("meridian"), -1,
                                   -1, 0) &&
            X509_set_issuer_name(cert.get(), X509_get_subject_name(ca.get())),
        "certificate name");
  add_extension(cert.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE");
  add_extension(cert.get(), ca.get(), NID_key_usage, "critical,digitalSignature");
  add_extension(cert.get(), ca.get(), NID_ext_key_usage, "serverAuth,clientAuth");
  add_extension(cert.get(), ca.get(), NID_subject_alt_name, alt_names(names));
  add_extension(cert.get(), ca.get(), NID_authority_key_identifier, "keyid:always");
  check(X509_sign(cert.get(), ca_key.get(), EVP_sha256()) > 0, "certificate signature");
  write_pair(cert, key, cert_path, key_path);
}

}  // namespace meridian
