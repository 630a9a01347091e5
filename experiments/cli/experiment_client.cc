#include "experiments/cli/experiment_client.h"

#include <algorithm>
#include <functional>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "proto/control.grpc.pb.h"

namespace testbed {

namespace {

// Submits `request` and hands every row event to `on_event`.
absl::Status Submit(const std::string& coordinator, const Credentials& credentials,
                    const Tls& tls, proto::SubmitRequest request, int wait_for_workers_s,
                    grpc::ClientContext& context,
                    const std::function<void(const proto::SubmitEvent&)>& on_event,
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
  request.set_wait_for_workers_s(wait_for_workers_s);
  std::unique_ptr<grpc::ClientReader<proto::SubmitEvent>> reader =
      stub->Submit(&context, request);
  proto::SubmitEvent event;
  while (reader->Read(&event)) {
    if (event.has_progress()) {
      progress << event.progress() << std::endl;
    } else {
      on_event(event);
    }
  }
  const grpc::Status status = reader->Finish();
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace

absl::Status SubmitExperiment(const std::string& coordinator, const Credentials& credentials,
                              const Tls& tls,
                              const proto::ExperimentSpec& spec, int wait_for_workers_s,
                              grpc::ClientContext& context, const RowHandler& on_row,
                              std::ostream& progress) {
  proto::SubmitRequest request;
  *request.mutable_spec() = spec;
  return Submit(
      coordinator, credentials, tls, std::move(request), wait_for_workers_s, context,
      [&](const proto::SubmitEvent& event) {
        if (event.has_row()) on_row(event.row());
      },
      progress);
}

absl::Status SubmitTraining(const std::string& coordinator, const Credentials& credentials,
                            const Tls& tls, const proto::TrainingSpec& spec,
                            int wait_for_workers_s, grpc::ClientContext& context,
                            const TrainingRowHandler& on_row, std::ostream& progress) {
  proto::SubmitRequest request;
  *request.mutable_training() = spec;
  return Submit(
      coordinator, credentials, tls, std::move(request), wait_for_workers_s, context,
      [&](const proto::SubmitEvent& event) {
        if (event.has_training_row()) on_row(event.training_row());
      },
      progress);
}

}  // namespace testbed
