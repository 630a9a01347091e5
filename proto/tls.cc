#include "proto/tls.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>
#include <utility>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace testbed {
namespace fs = std::filesystem;

namespace {

constexpr char kFlagsHelp[] = "--tls-dir DIR (cert.pem, key.pem, ca.pem) or --tls-cert/--tls-key/--tls-ca";

// The PEM text of `path`, given as `flag`; an error names both.
absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag, " ", path, ": cannot read: ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag, " ", path, ": cannot read: ", std::strerror(errno)));
  }
  std::string pem = text.str();
  if (!absl::StrContains(pem, "-----BEGIN ")) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag, " ", path, ": not a PEM file (no -----BEGIN line)"));
  }
  return pem;
}

std::string HostOf(const std::string& address) {
  std::string host = address;
  if (absl::StartsWith(host, "ipv4:")) host = host.substr(5);
  if (absl::StartsWith(host, "ipv6:")) host = host.substr(5);
  if (absl::StartsWith(host, "dns:///")) host = host.substr(7);
  if (!host.empty() && host[0] == '[') return host.substr(1, host.find(']') - 1);
  if (std::count(host.begin(), host.end(), ':') == 1) return host.substr(0, host.find(':'));
  return host;
}

}  // namespace

std::vector<std::string> TlsFlags::AsArgs() const {
  std::vector<std::string> args;
  const auto absolute = [](const std::string& path) {
    std::error_code ignored;
    const fs::path full = fs::absolute(path, ignored);
    return full.empty() ? path : full.string();
  };
  for (const auto& [flag, value] : {std::pair{"--tls-dir", &dir}, std::pair{"--tls-cert", &cert},
                                    std::pair{"--tls-key", &key}, std::pair{"--tls-ca", &ca}}) {
    if (value->empty()) continue;
    args.push_back(flag);
    args.push_back(absolute(*value));
  }
  return args;
}

void AddTlsFlags(CLI::App& app, TlsFlags& flags) {
  CLI::Option* dir = app.add_option(
      "--tls-dir", flags.dir,
      "TLS on every gRPC connection, from DIR/cert.pem, DIR/key.pem and DIR/ca.pem (ca.pem "
      "optional; with it, mutual TLS: the server requires a client certificate signed by it)");
  dir->type_name("DIR");
  for (const auto& [name, into, help] :
       {std::tuple{"--tls-cert", &flags.cert,
                   "TLS: this process's certificate chain (PEM); a server needs one"},
        std::tuple{"--tls-key", &flags.key, "TLS: the private key of --tls-cert (PEM)"},
        std::tuple{"--tls-ca", &flags.ca,
                   "TLS: the CA (PEM) that signed the peers' certificates: servers are checked "
                   "against it, and a server given one requires client certificates (mutual "
                   "TLS)"}}) {
    app.add_option(name, *into, help)->type_name("FILE")->excludes(dir);
  }
}

absl::StatusOr<Tls> LoadTls(const TlsFlags& flags, bool need_identity) {
  Tls tls;
  if (!flags.enabled()) return tls;
  tls.enabled = true;
  std::string cert_flag = "--tls-cert", key_flag = "--tls-key", ca_flag = "--tls-ca";
  std::string cert = flags.cert, key = flags.key, ca = flags.ca;
  if (!flags.dir.empty()) {
    std::error_code error;
    if (!fs::is_directory(flags.dir, error)) {
      return absl::FailedPreconditionError(
          absl::StrCat("--tls-dir ", flags.dir, ": not a readable folder"));
    }
    cert_flag = key_flag = ca_flag = "--tls-dir";
    const fs::path dir(flags.dir);
    cert = (dir / "cert.pem").string();
    key = (dir / "key.pem").string();
    ca = (dir / "ca.pem").string();
    // Only the CA may be left out of a folder; a client may also go without
    // a certificate of its own (no mutual TLS then).
    if (!fs::exists(ca, error)) ca.clear();
    if (!need_identity && !fs::exists(cert, error) && !fs::exists(key, error)) {
      cert.clear();
      key.clear();
    }
  }
  if (need_identity && (cert.empty() || key.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS needs this server's certificate and key: give --tls-cert and --tls-key, or ",
        "--tls-dir with cert.pem and key.pem"));
  }
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together: give both or neither");
  }
  for (const auto& [flag, path, into] :
       {std::tuple{cert_flag, cert, &tls.cert}, std::tuple{key_flag, key, &tls.key},
        std::tuple{ca_flag, ca, &tls.ca}}) {
    if (path.empty()) continue;
    absl::StatusOr<std::string> pem = ReadPem(flag, path);
    if (!pem.ok()) return pem.status();
    *into = *std::move(pem);
  }
  return tls;
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const Tls& tls) {
  if (!tls.enabled) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      tls.ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                     : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = tls.ca;
  options.pem_key_cert_pairs.push_back({tls.key, tls.cert});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const Tls& tls) {
  if (!tls.enabled) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = tls.ca;  // empty: gRPC's default roots
  options.pem_private_key = tls.key;
  options.pem_cert_chain = tls.cert;
  return grpc::SslCredentials(options);
}

bool IsLoopback(const std::string& address) {
  if (absl::StartsWith(address, "unix:")) return true;
  const std::string host = HostOf(address);
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

std::string PlaintextWarning(const Tls& tls, const std::string& address) {
  if (tls.enabled || IsLoopback(address)) return "";
  return absl::StrCat("no TLS on ", address,
                      ", which is not loopback: the job token and every control and "
                      "parameter-server message cross the network in clear text; give ",
                      kFlagsHelp);
}

std::string TlsHint(const Tls& tls) {
  if (tls.enabled) {
    return "TLS is on here: the other side must use TLS too, and its certificate must be "
           "valid for the address dialed and signed by --tls-ca (with mutual TLS, ours by its)";
  }
  return absl::StrCat("TLS is off here: if the other side uses TLS, give ", kFlagsHelp);
}

}  // namespace testbed
