#include "fake_attention_service.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attn/cpu_reference.h"
#include "attn/problem.h"
#include "attn/tensor.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace attn::testing {
namespace {

namespace pb = ::attnserve::v1;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

grpc::Status Invalid(const std::string& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}

}  // namespace

grpc::Status FakeAttentionService::Compute(grpc::ServerContext* context,
                                           const pb::AttendRequest& request,
                                           pb::AttendResponse* response, std::string* out,
                                           std::string* lse) {
  const int64_t start = NowNs();
  if (request.kernel() == "fail_invalid") return Invalid("fake: kernel fail_invalid refuses");
  const bool fail_first = request.kernel() == "fail_first";
  if (fail_first && fail_first_calls_.fetch_add(1) == 0) {
    return Invalid("fake: kernel fail_first refuses its first call");
  }
  if (request.kernel() == "wait_cancel" || fail_first) {
    for (int i = 0; i < 6000 && !context->IsCancelled(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return grpc::Status(grpc::StatusCode::CANCELLED, "fake: cancelled");
  }
  if (request.kernel() == "hold") {
    std::unique_lock<std::mutex> lock(hold_mu_);
    while (!released_ && !context->IsCancelled()) {
      hold_cv_.wait_for(lock, std::chrono::milliseconds(5));
    }
    if (!released_) return grpc::Status(grpc::StatusCode::CANCELLED, "fake: cancelled");
  }
  if (request.dtype() != pb::DTYPE_FLOAT16 && request.dtype() != pb::DTYPE_BFLOAT16) {
    return Invalid("fake: dtype");
  }
  const DType dtype = request.dtype() == pb::DTYPE_FLOAT16 ? DType::kFloat16 : DType::kBFloat16;
  const pb::TensorShape& shape = request.shape();
  AttentionProblem problem;
  problem.batch = shape.batch();
  problem.seqlen_q = shape.seq_len();
  problem.seqlen_k = shape.kv_seq_len() > 0 ? shape.kv_seq_len() : shape.seq_len();
  problem.heads_q = shape.num_heads();
  problem.heads_kv = shape.kv_num_heads() > 0 ? shape.kv_num_heads() : shape.num_heads();
  problem.head_dim = shape.head_dim();
  problem.causal = request.causal();
  problem.window_left = request.has_window_left() ? request.window_left() : -1;
  problem.window_right = request.has_window_right() ? request.window_right() : -1;
  problem.softmax_scale = request.has_softmax_scale() ? request.softmax_scale() : 0.0f;
  problem.return_lse = request.return_lse();
  problem.varlen = request.cu_seqlens_q_size() > 0;
  if (problem.varlen) {
    if (request.cu_seqlens_q_size() != problem.batch + 1 ||
        request.cu_seqlens_k_size() != problem.batch + 1) {
      return Invalid("fake: cu_seqlens sizes");
    }
    problem.total_q = request.cu_seqlens_q(static_cast<int>(problem.batch));
    problem.total_k = request.cu_seqlens_k(static_cast<int>(problem.batch));
    for (int b = 0; b < problem.batch; ++b) {
      problem.seqlen_q = std::max<int64_t>(problem.seqlen_q,
                                           request.cu_seqlens_q(b + 1) - request.cu_seqlens_q(b));
      problem.seqlen_k = std::max<int64_t>(problem.seqlen_k,
                                           request.cu_seqlens_k(b + 1) - request.cu_seqlens_k(b));
    }
  }
  if (problem.batch < 1 || problem.seqlen_q < 1 || problem.seqlen_k < 1 || problem.heads_q < 1 ||
      problem.heads_kv < 1 || problem.heads_q % problem.heads_kv != 0 || problem.head_dim < 1 ||
      problem.head_dim > 512) {
    return Invalid(absl::StrCat("fake: shape ", problem.ToString()));
  }
  if (static_cast<int64_t>(request.q().size()) != problem.QBytes(dtype) ||
      static_cast<int64_t>(request.k().size()) != problem.KVBytes(dtype) ||
      static_cast<int64_t>(request.v().size()) != problem.KVBytes(dtype)) {
    return Invalid("fake: tensor sizes do not match the shape");
  }
  const int64_t decoded = NowNs();
  out->resize(static_cast<size_t>(problem.QBytes(dtype)));
  std::vector<float> lse_values(static_cast<size_t>(problem.LseElements()));
  AttentionArgs args = AttentionArgs::Contiguous(
      problem, dtype, request.q().data(), request.k().data(), request.v().data(), out->data(),
      problem.return_lse ? lse_values.data() : nullptr);
  if (problem.varlen) {
    args.cu_seqlens_q = request.cu_seqlens_q().data();
    args.cu_seqlens_k = request.cu_seqlens_k().data();
  }
  AttentionCpu(args, /*num_threads=*/1);
  if (lse != nullptr) {
    lse->assign(reinterpret_cast<const char*>(lse_values.data()), lse_values.size() * 4);
  }
  const int64_t computed = NowNs();

  response->set_request_id(request.request_id().empty() ? "fake-id" : request.request_id());
  response->set_dtype(request.dtype());
  *response->mutable_shape() = request.shape();
  response->set_kernel("cpu_reference");
  response->set_backend("cpu");
  response->set_device("fake cpu");
  pb::Timing* timing = response->mutable_timing();
  timing->set_decode_ns(decoded - start);
  timing->set_kernel_ns(computed - decoded);
  timing->set_total_ns(NowNs() - start);
  return grpc::Status::OK;
}

grpc::Status FakeAttentionService::Attend(grpc::ServerContext* context,
                                          const pb::AttendRequest* request,
                                          pb::AttendResponse* response) {
  ++unary_calls_;
  std::string out;
  grpc::Status status = Compute(context, *request, response, &out, response->mutable_lse());
  if (!status.ok()) return status;
  if (request->kernel() == "short_output") out.pop_back();
  if (request->kernel() == "short_lse" && !response->lse().empty())
    response->mutable_lse()->pop_back();
  *response->mutable_out() = std::move(out);
  return grpc::Status::OK;
}

grpc::Status FakeAttentionService::AttendStream(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<pb::AttendStreamResponse, pb::AttendStreamRequest>* stream) {
  ++stream_calls_;
  pb::AttendStreamRequest message;
  if (!stream->Read(&message) || !message.has_header()) return Invalid("fake: no header");
  pb::AttendRequest request = std::move(*message.mutable_header());
  while (stream->Read(&message)) {
    if (!message.has_chunk()) return Invalid("fake: second header");
    const pb::TensorChunk& chunk = message.chunk();
    std::string* tensor = chunk.tensor() == pb::TENSOR_Q   ? request.mutable_q()
                          : chunk.tensor() == pb::TENSOR_K ? request.mutable_k()
                          : chunk.tensor() == pb::TENSOR_V ? request.mutable_v()
                                                           : nullptr;
    if (tensor == nullptr) return Invalid("fake: chunk names no input tensor");
    if (chunk.offset() != static_cast<int64_t>(tensor->size())) {
      return Invalid(
          absl::StrCat("fake: chunk offset ", chunk.offset(), " after ", tensor->size(), " bytes"));
    }
    tensor->append(chunk.data());
  }
  pb::AttendStreamResponse reply;
  std::string out, lse;
  grpc::Status status = Compute(context, request, reply.mutable_header(), &out, &lse);
  if (!status.ok()) return status;
  if (!stream->Write(reply)) return grpc::Status(grpc::StatusCode::CANCELLED, "fake: gone");
  // The output's chunks, then (with return_lse) the LSE's.
  const std::pair<pb::TensorName, const std::string*> tensors[] = {{pb::TENSOR_OUT, &out},
                                                                   {pb::TENSOR_LSE, &lse}};
  for (const auto& [name, bytes] : tensors) {
    int64_t offset = 0;
    int chunk_index = 0;
    while (offset < static_cast<int64_t>(bytes->size())) {
      const int64_t size =
          std::min<int64_t>(options_.out_chunk_bytes, static_cast<int64_t>(bytes->size()) - offset);
      pb::TensorChunk* chunk = reply.mutable_chunk();
      chunk->set_tensor(name);
      const bool skip = request.kernel() == "bad_offset" && chunk_index == 1;
      chunk->set_offset(skip ? offset + 1 : offset);
      chunk->set_data(bytes->substr(static_cast<size_t>(offset), static_cast<size_t>(size)));
      if (!stream->Write(reply)) return grpc::Status(grpc::StatusCode::CANCELLED, "fake: gone");
      offset += size;
      ++chunk_index;
    }
  }
  return grpc::Status::OK;
}

void FakeAttentionService::ReleaseHeld() {
  std::lock_guard<std::mutex> lock(hold_mu_);
  released_ = true;
  hold_cv_.notify_all();
}

grpc::Status FakeAttentionService::ListKernels(grpc::ServerContext*,
                                               const pb::ListKernelsRequest*,
                                               pb::ListKernelsResponse* response) {
  pb::KernelDescriptor* kernel = response->add_kernels();
  kernel->set_name("cpu_reference");
  kernel->set_description("fake CPU kernel");
  kernel->set_backend("cpu");
  kernel->set_max_head_dim(512);
  kernel->set_seq_multiple(1);
  kernel->set_is_default(true);
  return grpc::Status::OK;
}

grpc::Status FakeAttentionService::GetServerInfo(grpc::ServerContext*,
                                                 const pb::GetServerInfoRequest*,
                                                 pb::ServerInfo* response) {
  response->set_version("fake");
  response->set_backend("cpu");
  response->set_default_kernel("cpu_reference");
  response->mutable_limits()->set_max_message_bytes(options_.max_message_bytes);
  response->mutable_limits()->set_workers(options_.workers);
  response->mutable_limits()->set_max_tokens_per_request(options_.max_tokens_per_request);
  response->add_dtypes(pb::DTYPE_FLOAT16);
  response->add_dtypes(pb::DTYPE_BFLOAT16);
  return grpc::Status::OK;
}

grpc::Status FakeAttentionService::GetStats(grpc::ServerContext*, const pb::GetStatsRequest*,
                                            pb::ServerStats* response) {
  std::this_thread::sleep_for(std::chrono::milliseconds(options_.get_stats_delay_ms));
  response->set_requests_ok(unary_calls_.load() + stream_calls_.load());
  return grpc::Status::OK;
}

std::unique_ptr<FakeServer> StartFakeServer(FakeAttentionService::Options options) {
  auto fake = std::make_unique<FakeServer>();
  fake->service = std::make_unique<FakeAttentionService>(options);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(
      "127.0.0.1:0",
      options.credentials != nullptr ? options.credentials : grpc::InsecureServerCredentials(),
      &port);
  builder.SetMaxReceiveMessageSize(-1);
  builder.SetMaxSendMessageSize(-1);
  builder.RegisterService(fake->service.get());
  fake->server = builder.BuildAndStart();
  if (fake->server == nullptr || port == 0) return nullptr;
  fake->address = absl::StrCat("127.0.0.1:", port);
  return fake;
}

}  // namespace attn::testing
