// The client side of Submit: sends a spec to the coordinator, prints its
// progress lines, hands each result row to the caller as it arrives.
#pragma once

#include <functional>
#include <ostream>
#include <string>

#include <grpcpp/client_context.h>

#include "absl/status/status.h"
#include "proto/credentials.h"
#include "proto/experiment.pb.h"
#include "proto/tls.h"
#include "proto/training.pb.h"

namespace testbed {

using RowHandler = std::function<void(const proto::ResultRow&)>;
using TrainingRowHandler = std::function<void(const proto::TrainingRow&)>;

// Blocks until the experiment ends. `context` is the caller's, so another
// thread can TryCancel() it (Ctrl-C). The error, if any, is the coordinator's
// own message: it names a lost rank when one was lost. The channel uses TLS
// when `tls` is on.
absl::Status SubmitExperiment(const std::string& coordinator, const Credentials& credentials,
                              const Tls& tls,
                              const proto::ExperimentSpec& spec, int wait_for_workers_s,
                              grpc::ClientContext& context, const RowHandler& on_row,
                              std::ostream& progress);

// The same for a training run (`testbed train` on daemons): one run, its
// sweep axes empty; rank 0's rows are handed to `on_row` as they arrive.
absl::Status SubmitTraining(const std::string& coordinator, const Credentials& credentials,
                            const Tls& tls, const proto::TrainingSpec& spec,
                            int wait_for_workers_s, grpc::ClientContext& context,
                            const TrainingRowHandler& on_row, std::ostream& progress);

}  // namespace testbed
