#include "proto/credentials.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace testbed {
namespace {

constexpr char kJobKey[] = "x-testbed-job";
constexpr char kTokenKey[] = "x-testbed-token";

std::string Lookup(const grpc::ServerContext& context, const char* key) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(key);
  return it == metadata.end() ? "" : std::string(it->second.data(), it->second.size());
}

}  // namespace

absl::StatusOr<Credentials> CredentialsFromEnvironment() {
  Credentials c;
  for (auto [name, field] : {std::pair{"TESTBED_JOB_ID", &c.job_id},
                             std::pair{"TESTBED_TOKEN", &c.token}}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') {
      return absl::FailedPreconditionError(absl::StrCat(
          name, " is not set: every daemon and client of one job needs the same TESTBED_JOB_ID "
                "and TESTBED_TOKEN in its environment"));
    }
    *field = value;
  }
  return c;
}

void AttachCredentials(const Credentials& credentials, grpc::ClientContext& context) {
  context.AddMetadata(kJobKey, credentials.job_id);
  context.AddMetadata(kTokenKey, credentials.token);
}

grpc::Status CheckCredentials(const Credentials& expected, const grpc::ServerContext& context) {
  const std::string job = Lookup(context, kJobKey);
  if (job.empty() || Lookup(context, kTokenKey).empty()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "call without job id and token (set TESTBED_JOB_ID and TESTBED_TOKEN)");
  }
  if (job != expected.job_id) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "this coordinator serves job '" + expected.job_id + "', not '" + job + "'");
  }
  if (Lookup(context, kTokenKey) != expected.token) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "wrong token for job " + job);
  }
  return grpc::Status::OK;
}

}  // namespace testbed
