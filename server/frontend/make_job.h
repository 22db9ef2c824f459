// server/frontend/make_job.h
//
// MakeJob: the Job of one Attend or AttendStream call, built in one place:
// what to compute, where its tensors are (message pieces and response or
// host destinations here; ResolveRegionRefs may then point some at
// regions), when it arrived, its deadline and cancellation flag, and what
// runs when it is done.
#ifndef ATTN_SERVER_FRONTEND_MAKE_JOB_H_
#define ATTN_SERVER_FRONTEND_MAKE_JOB_H_

#include <atomic>
#include <memory>
#include <utility>

#include "absl/time/time.h"
#include "core/job.h"
#include "grpcpp/server_context.h"

namespace attn::server {

// The tensors of a call as its front end received them and sends them back.
struct CallTensors {
  TensorSource q, k, v;
  TensorDestination out, lse;  // lse unset unless the problem returns it
};

inline std::unique_ptr<Job> MakeJob(RequestSpec spec, CallTensors tensors, absl::Time arrival,
                                    const grpc::CallbackServerContext& context,
                                    const std::atomic<bool>* cancelled, JobDone done) {
  auto job = std::make_unique<Job>();
  job->spec = std::move(spec);
  job->q = std::move(tensors.q);
  job->k = std::move(tensors.k);
  job->v = std::move(tensors.v);
  job->out = tensors.out;
  if (job->spec.problem.return_lse) job->lse = tensors.lse;
  job->arrival = arrival;
  job->deadline = absl::FromChrono(context.deadline());
  job->cancelled = cancelled;
  job->done = std::move(done);
  return job;
}

}  // namespace attn::server

#endif  // ATTN_SERVER_FRONTEND_MAKE_JOB_H_
