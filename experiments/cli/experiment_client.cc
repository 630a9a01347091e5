#include "experiments/cli/experiment_client.h"

#include <algorithm>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "proto/control.grpc.pb.h"

namespace testbed {

absl::Status SubmitExperiment(const std::string& coordinator, const Credentials& credentials,
                              const Tls& tls,
                              const proto::ExperimentSpec& spec, int wait_for_workers_s,
                              grpc::ClientContext& context, const RowHandler& on_row,
                              std::ostream& progress) {
  auto channel = grpc::CreateChannel(coordinator, ChannelCredentials(tls));
  // In swarm or Kubernetes the client may start beside the coordinator: give
  // it as long to come up as the workers get to attach.
  const int connect_s = std::max(10, wait_for_workers_s);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                 std::chrono::seconds(connect_s))) {
    return absl::UnavailableError(absl::StrCat("cannot reach the coordinator at ", coordinator,
                                               " within ", connect_s, " s (", TlsHint(tls),
                                               ")"));
  }
  auto stub = proto::Coordinator::NewStub(channel);
  AttachCredentials(credentials, context);
  proto::SubmitRequest request;
  *request.mutable_spec() = spec;
  request.set_wait_for_workers_s(wait_for_workers_s);
  std::unique_ptr<grpc::ClientReader<proto::SubmitEvent>> reader =
      stub->Submit(&context, request);
  proto::SubmitEvent event;
  while (reader->Read(&event)) {
    if (event.has_progress()) {
      progress << event.progress() << std::endl;
    } else if (event.has_row()) {
      on_row(event.row());
    }
  }
  const grpc::Status status = reader->Finish();
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace testbed
