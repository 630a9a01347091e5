// The job id and shared token every control-plane call carries as metadata,
// and the one place that checks them. Both come from the environment
// (TESTBED_JOB_ID, TESTBED_TOKEN) so they never show in `ps`.
#pragma once

#include <string>

#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "absl/status/statusor.h"

namespace testbed {

struct Credentials {
  std::string job_id;
  std::string token;
};

// From TESTBED_JOB_ID and TESTBED_TOKEN; an error names the missing variable.
absl::StatusOr<Credentials> CredentialsFromEnvironment();

// Client side: attach to every call.
void AttachCredentials(const Credentials& credentials, grpc::ClientContext& context);

// Server side: PERMISSION_DENIED / UNAUTHENTICATED unless the call carries `expected`.
grpc::Status CheckCredentials(const Credentials& expected, const grpc::ServerContext& context);

}  // namespace testbed
