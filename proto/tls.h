// TLS for every gRPC listener and channel of the testbed, in one place: the
// --tls-cert/--tls-key/--tls-ca (or --tls-dir) flags, the PEM files they name,
// and the gRPC credentials made from them - Ssl* when TLS is on, Insecure*
// when no flag is given.
//
// What is verified:
//  - Channels (workers, `testbed run`/`local`, a joining shard) check the
//    server's certificate chain against --tls-ca (the system's roots when no
//    CA is given) and that it is valid for the host name or IP address dialed
//    (its subjectAltName). They present --tls-cert/--tls-key when given.
//  - A listener (testbed-server) presents --tls-cert/--tls-key. With --tls-ca
//    it also requires every client to present a certificate signed by that CA
//    (mutual TLS) and refuses the connection otherwise; without --tls-ca it
//    accepts any client at the TLS level.
//  - Either way the job id and token (proto/credentials.h) are still checked on
//    every call: TLS keeps them, and all control and parameter-server traffic,
//    from being read or changed on the network. UCX data between workers is not
//    covered.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"

namespace testbed {

// The flags as given. --tls-dir DIR stands for DIR/cert.pem, DIR/key.pem and
// DIR/ca.pem (ca.pem may be absent); it excludes the three single flags.
struct TlsFlags {
  std::string cert{}, key{}, ca{}, dir{};
  bool enabled() const { return !cert.empty() || !key.empty() || !ca.empty() || !dir.empty(); }
  // The same flags for a daemon this process starts (paths made absolute).
  std::vector<std::string> AsArgs() const;
};

// Adds --tls-cert, --tls-key, --tls-ca and --tls-dir to `app`.
void AddTlsFlags(CLI::App& app, TlsFlags& flags);

// PEM text read from the files; all empty when TLS is off.
struct Tls {
  bool enabled = false;
  std::string cert{}, key{}, ca{};
};

// Reads the files the flags name. `need_identity`: this process listens, so a
// certificate and key are required. Errors are one line naming the flag and
// the file ("--tls-key /x/key.pem: cannot read: No such file or directory").
absl::StatusOr<Tls> LoadTls(const TlsFlags& flags, bool need_identity);

// The listener's credentials: Ssl (mutual when a CA is given) or Insecure.
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const Tls& tls);
// A channel's credentials: Ssl (with the client certificate when given) or Insecure.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const Tls& tls);

// Whether HOST:PORT (or HOST) is a loopback address: 127.0.0.0/8, ::1, localhost.
bool IsLoopback(const std::string& address);

// The one warning a daemon logs at start when `address` (what it listens on,
// or dials) is not loopback and TLS is off; "" when there is nothing to say.
std::string PlaintextWarning(const Tls& tls, const std::string& address);

// A hint for "cannot reach / cannot listen" errors: what TLS mismatch may be
// behind it, given this side's setting.
std::string TlsHint(const Tls& tls);

}  // namespace testbed
