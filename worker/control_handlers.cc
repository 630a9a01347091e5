#include "worker/control_handlers.h"

#include <cstdlib>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "allreduce/transport/ucx_settings.h"
#include "common/link_units.h"
#include "common/memory_reuse.h"
#include "proto/enum_text.h"
#include "proto/spec.h"
#include "worker/interface_counters.h"
#include "worker/sweep_runner.h"
#include "worker/train/dataset.h"
#include "worker/train/rank_training.h"
#include "allreduce/collective.h"

namespace testbed {
namespace {

using Stage = Experiment::Stage;
using After = ControlHandlers::After;

// "ucx:tcp/lo.0" - what UCX chose to reach the next rank, for the results.
std::string TransportLabel(const UcxTransport& transport) {
  if (transport.world_size() == 1) return "ucx:none";
  const int next = (transport.rank() + 1) % transport.world_size();
  const std::string lanes = UcxLanes(transport.DescribeEndpoint(next));
  return absl::StrCat("ucx:", lanes.empty() ? "unknown" : lanes);
}

// The spec's timeout for every wait, 60 s where it gives none; a training
// run's, 120 s where it gives none.
std::chrono::seconds Timeout(const Experiment& e) {
  if (e.training) return std::chrono::seconds(e.training->timeout_s() ? e.training->timeout_s() : 120);
  return std::chrono::seconds(e.spec.timeout_s() ? e.spec.timeout_s() : kDefaultTimeoutS);
}

GpuPathRequest GpuPathRequestOf(proto::GpuPath::Kind path) {
  switch (path) {
    case proto::GpuPath::direct: return GpuPathRequest::kDirect;
    case proto::GpuPath::staged: return GpuPathRequest::kStaged;
    default: return GpuPathRequest::kAuto;
  }
}

// TrainingRow.deployment of a run on daemons: where `testbed train` placed
// them (the spec's network), or "run" for daemons already deployed.
std::string TrainingDeployment(const proto::TrainingSpec& spec) {
  if (!spec.has_network()) return "run";
  return spec.network() == proto::Network::netns ? "local-netns" : "local-daemons";
}

// "is prepared": where an experiment is, for refusals.
const char* StageText(Stage stage) {
  switch (stage) {
    case Stage::kPrepared: return "is prepared";
    case Stage::kConnected: return "is connected";
    case Stage::kStarted: return "has started";
  }
  return "is in an unknown stage";
}

}  // namespace

ControlHandlers::ControlHandlers(const WorkerOptions& options, ControlLink& link)
    : options_(options), link_(link) {}

ControlHandlers::~ControlHandlers() = default;

After ControlHandlers::Handle(const proto::CoordinatorMessage& message) {
  switch (message.kind_case()) {
    case proto::CoordinatorMessage::kWelcome: return OnWelcome(message.welcome());
    case proto::CoordinatorMessage::kPrepare: return OnPrepare(message.prepare());
    case proto::CoordinatorMessage::kConnect: return OnConnect(message.connect());
    case proto::CoordinatorMessage::kStart: return OnStart(message.start());
    case proto::CoordinatorMessage::kAbort: return OnAbort(message.abort());
    case proto::CoordinatorMessage::KIND_NOT_SET: break;
  }
  // A kind this build does not know (a newer coordinator): as before, ignored.
  spdlog::warn("ignored a message of a kind this worker does not know from the coordinator");
  return After::kReadOn;
}

After ControlHandlers::OnWelcome(const proto::Welcome& welcome) {
  if (attached_) return Refuse("Welcome", experiment_ ? experiment_->id : 0);
  attached_ = true;
  heartbeat_interval_ = std::chrono::milliseconds(welcome.heartbeat_ms());
  spdlog::info("attached as worker {}", welcome.worker_id());
  return After::kReadOn;
}

After ControlHandlers::OnPrepare(const proto::Prepare& prepare) {
  if (!attached_) return Refuse("Prepare", prepare.experiment_id());
  // The previous experiment's sweep has sent Finished, but its thread may not
  // have ended yet: its destructor joins it.
  experiment_.reset();
  ReturnFreedMemory();  // the last experiment's UCX pools: see common/memory_reuse.h
  experiment_ = std::make_unique<Experiment>();
  experiment_->id = prepare.experiment_id();
  experiment_->spec = prepare.spec();
  if (prepare.has_training()) experiment_->training = prepare.training();
  if (absl::Status st = MakeTransport(prepare); !st.ok()) {
    experiment_->transport.reset();  // the experiment has failed here: nothing more runs in it
    Fail(experiment_->id, std::string(st.message()));
    // Stay for the coordinator's Abort, as a failed sweep does: leaving at
    // once could end the process before the report left it, and the
    // coordinator then named this rank lost (seen once in ~20 refused
    // --gpu-path direct runs) instead of saying why it failed.
    return After::kAwaitVerdict;
  }
  spdlog::info("experiment {}: rank {} of {}", experiment_->id, prepare.rank(),
               prepare.world_size());
  proto::WorkerMessage address;
  address.mutable_address()->set_experiment_id(experiment_->id);
  const std::vector<std::byte> bytes = experiment_->transport->WorkerAddress();
  address.mutable_address()->set_ucx_address(
      std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  link_.Send(address);
  return After::kReadOn;
}

absl::Status ControlHandlers::MakeTransport(const proto::Prepare& prepare) {
  Experiment& e = *experiment_;
  if (prepare.shard_addresses_size() > 0) {
    e.parameter_server = std::make_unique<PsClient>(
        std::vector<std::string>(prepare.shard_addresses().begin(),
                                 prepare.shard_addresses().end()),
        options_.credentials, Timeout(e), options_.tls);
  }
  UcxOptions ucx;
  ucx.wait_timeout = Timeout(e);
  // Validated specs name a known path; a direct request UCX cannot honour is
  // refused here, before any rank connects or moves a byte.
  ucx.gpu_path = GpuPathRequestOf(e.spec.gpu_path());
  ucx.peer_error_handling =
      WantPeerErrorHandling(options_.peer_error_handling, std::getenv("UCX_TLS"));
  auto created = UcxTransport::Create(prepare.rank(), prepare.world_size(), ucx);
  if (absl::IsFailedPrecondition(created.status())) return created.status();  // gpu_path refused
  if (!created.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot create a UCX transport: ", created.status().ToString()));
  }
  e.transport = std::move(*created);
  const MemoryType memory = MemoryTypeOf(e.spec.memory());
  absl::StatusOr<std::string> path =
      ResolveGpuPath(ucx.gpu_path, memory, e.transport->memory_types());
  if (!path.ok()) return path.status();  // e.g. direct for fake-device memory
  return absl::OkStatus();
}

After ControlHandlers::OnConnect(const proto::Connect& connect) {
  if (!At(connect.experiment_id(), Stage::kPrepared)) {
    return Refuse("Connect", connect.experiment_id());
  }
  Experiment& e = *experiment_;
  std::vector<std::vector<std::byte>> addresses;
  for (const std::string& a : connect.ucx_addresses()) {
    const auto* p = reinterpret_cast<const std::byte*>(a.data());
    addresses.emplace_back(p, p + a.size());
  }
  if (absl::Status st = e.transport->Connect(addresses); !st.ok()) {
    Fail(e.id, absl::StrCat("cannot connect to the other ranks: ", st.ToString()));
    return After::kLeave;
  }
  e.transport_label = TransportLabel(*e.transport);
  e.stage = Stage::kConnected;
  spdlog::info("experiment {}: connected over {}", e.id, e.transport_label);
  proto::WorkerMessage ready;
  ready.mutable_ready()->set_experiment_id(e.id);
  link_.Send(ready);
  return After::kReadOn;
}

After ControlHandlers::OnStart(const proto::Start& start) {
  if (!At(start.experiment_id(), Stage::kConnected)) return Refuse("Start", start.experiment_id());
  Experiment& e = *experiment_;
  e.stage = Stage::kStarted;
  spdlog::info("experiment {}: {} started", e.id, e.training ? "training" : "sweep");
  e.sweeping = true;
  if (e.training) {
    e.sweep = std::thread([this, &e] { Conclude(e, Train(e)); });
  } else {
    e.sweep = std::thread([this, &e] { Sweep(e); });
  }
  return After::kReadOn;
}

After ControlHandlers::OnAbort(const proto::Abort& abort) {
  spdlog::error("experiment {} aborted by the coordinator: {}", abort.experiment_id(),
                abort.reason());
  failed_ = true;
  return sweeping() ? After::kExitNow : After::kLeave;
}

void ControlHandlers::Sweep(Experiment& e) {
  SweepEnvironment env;
  env.transport = e.transport.get();
  env.device_direct = e.transport->device_direct();
  // Rows name the lanes their data used: the CUDA ones only for device
  // memory handed to UCX directly.
  const bool cuda_memory = e.spec.memory() == proto::Memory::cuda;
  env.transport_label = env.device_direct && cuda_memory ? e.transport_label
                                                         : WithoutCudaLanes(e.transport_label);
  env.ucx_environment = options_.ucx_environment;
  env.parameter_server = e.parameter_server.get();
  env.tensor_prefix = absl::StrCat("experiment-", e.id);
  env.net_device = RankNetDevice(options_.net_device, std::getenv("UCX_NET_DEVICES"));
  const absl::Status st = RunSweep(e.spec, env, [&](const proto::RankResult& result) {
    proto::WorkerMessage m;
    *m.mutable_result() = result;
    return link_.Send(m) ? absl::OkStatus() : absl::UnavailableError("lost the coordinator");
  });
  Conclude(e, st);
}

absl::Status ControlHandlers::Train(Experiment& e) {
  const proto::TrainingSpec& spec = *e.training;
  absl::StatusOr<TrainingSetup> setup = TrainingSetupFromSpec(spec);
  if (!setup.ok()) return setup.status();
  if (setup->workers != e.transport->world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("the training spec says ", setup->workers,
                                                   " workers, the run has ",
                                                   e.transport->world_size()));
  }
  absl::StatusOr<TrainTestSplit> data =
      LoadFashionMnist(spec.data_dir().empty() ? kFashionMnistDir : spec.data_dir());
  if (!data.ok()) return data.status();
  const int rank = e.transport->rank();
  proto::TrainingRow header = TrainingHeader(*setup, data->train, TrainingDeployment(spec));
  if (spec.has_network()) header.set_network(EnumText(spec.network()));
  if (spec.link_rate_bps() != 0) header.set_link_rate(FormatLinkRate(spec.link_rate_bps()));
  bool lost = false;  // the coordinator's stream closed under a row
  const TrainingRowSink sink = [&](const proto::TrainingRow& row) {
    proto::WorkerMessage m;
    *m.mutable_training_row() = row;
    if (!link_.Send(m)) lost = true;
  };
  SyncFactory make_sync;
  if (RunsOnParameterServer(setup->sync)) {
    if (e.parameter_server == nullptr) {
      return absl::FailedPreconditionError("a ps training run came without the shard map");
    }
    make_sync = [&](WorkerTrainer& trainer) {
      return MakePsSync(*setup, *e.parameter_server,
                        absl::StrCat("experiment-", e.id, "/train/parameters"), rank,
                        trainer.parameters());
    };
  } else {
    make_sync = [&](WorkerTrainer& trainer) {
      return MakeAllReduceSync(*setup, *e.transport,
                               static_cast<std::int64_t>(trainer.parameters().size()));
    };
  }
  absl::Status status = TrainRank(*setup, *data, rank, header, make_sync, sink);
  if (status.ok() && lost) status = absl::UnavailableError("lost the coordinator");
  return status;
}

void ControlHandlers::Conclude(Experiment& e, const absl::Status& st) {
  if (st.ok()) {
    proto::WorkerMessage finished;
    finished.mutable_finished()->set_experiment_id(e.id);
    link_.Send(finished);
    spdlog::info("experiment {}: done", e.id);
    e.sweeping = false;
    // Done here is not done for the peers: this rank's last sends may still
    // owe them bytes that leave only while UCX is progressed.
    e.transport->ServePeersUntil(e.released);
    return;
  }
  Fail(e.id, std::string(st.message()));
  // Stay, endpoints open, for the coordinator's verdict: leaving now would
  // make the ranks that talk to this one see *it* lost and name it, not the
  // rank that really failed.
  link_.AwaitVerdict();
  e.sweeping = false;
}

bool ControlHandlers::At(std::uint64_t id, Stage stage) const {
  return experiment_ && experiment_->transport && experiment_->id == id &&
         experiment_->stage == stage;
}

After ControlHandlers::Refuse(const char* what, std::uint64_t id) {
  Fail(id, absl::StrCat("unexpected ", what, " from the coordinator while ", StateText()));
  return After::kLeave;
}

std::string ControlHandlers::StateText() const {
  if (!attached_) return "attaching (no Welcome yet)";
  if (!experiment_) return "idle";
  if (!experiment_->transport) return absl::StrCat("experiment ", experiment_->id, " has failed");
  return absl::StrCat("experiment ", experiment_->id, " ", StageText(experiment_->stage));
}

void ControlHandlers::Fail(std::uint64_t id, const std::string& why) {
  spdlog::error("experiment {}: {}", id, why);
  proto::WorkerMessage message;
  message.mutable_failure()->set_experiment_id(id);
  message.mutable_failure()->set_message(why);
  link_.Send(message);
  failed_ = true;
}

}  // namespace testbed
