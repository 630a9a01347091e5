// `testbed workload`'s generator: a model and a parallel strategy into one
// training step's trace (proto/workload.proto; docs/workloads.md, "The
// strategies"). Per stage and micro-batch, each layer's forward and backward
// compute (a backward costs twice its forward), with
// - tensor parallelism t > 1: an all-reduce of the layer's activations after
//   attention and after the MLP, forward and backward (Megatron-LM's four);
// - pipeline parallelism p > 1: each micro-batch's activations sent to the
//   next stage and its gradient back, in GPipe's or 1F1B's order;
// - data parallelism d > 1, after the step's last backward reached a layer:
//   ZeRO 0 (DDP) all-reduces the gradients in buckets from the last layer
//   back; ZeRO 1 does too, then all-gathers each bucket's updated weights
//   (each rank updated only its shard); ZeRO 2 reduce-scatters the buckets
//   instead, then all-gathers the weights; ZeRO 3 (FSDP) all-gathers each
//   layer's weights before its forward and again before its backward, one
//   layer ahead, and reduce-scatters its gradient.
// Left out: the embedding's and the loss's small tensor-parallel reductions,
// the tied embedding's all-reduce between the first and last stage, the
// optimizer's own compute, and activation recomputation.
//
// Thread-safety: a pure function.
#pragma once

#include "absl/status/statusor.h"
#include "proto/workload.pb.h"

namespace testbed {

absl::StatusOr<proto::WorkloadTrace> GenerateTrace(const proto::Workload& workload);

}  // namespace testbed
