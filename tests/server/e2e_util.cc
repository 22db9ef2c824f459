#include "e2e_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "attn/cpu_reference.h"
#include "grpcpp/client_context.h"

namespace attn::testing {
namespace {

namespace pb = ::attnserve::v1;

std::string Bytes(const std::vector<uint16_t>& bits) {
  return std::string(reinterpret_cast<const char*>(bits.data()), bits.size() * 2);
}

}  // namespace

pb::AttendRequest MakeRequest(const HostInputs& in, const std::string& request_id,
                              const std::string& kernel, std::optional<float> softmax_scale) {
  pb::AttendRequest request;
  request.set_request_id(request_id);
  request.set_dtype(in.dtype == DType::kBFloat16 ? pb::DTYPE_BFLOAT16 : pb::DTYPE_FLOAT16);
  request.mutable_shape()->set_batch(in.shape.batch);
  request.mutable_shape()->set_seq_len(in.shape.seq_len);
  request.mutable_shape()->set_num_heads(in.shape.num_heads);
  request.mutable_shape()->set_head_dim(in.shape.head_dim);
  if (softmax_scale.has_value()) request.set_softmax_scale(*softmax_scale);
  request.set_kernel(kernel);
  request.set_q(Bytes(in.q));
  request.set_k(Bytes(in.k));
  request.set_v(Bytes(in.v));
  return request;
}

pb::AttendRequest MakeRequest(const ProblemInputs& in, const std::string& request_id,
                              const std::string& kernel) {
  const AttentionProblem& p = in.problem;
  pb::AttendRequest request;
  request.set_request_id(request_id);
  request.set_dtype(in.dtype == DType::kBFloat16 ? pb::DTYPE_BFLOAT16 : pb::DTYPE_FLOAT16);
  pb::TensorShape* shape = request.mutable_shape();
  shape->set_batch(p.batch);
  shape->set_seq_len(p.seqlen_q);
  shape->set_num_heads(p.heads_q);
  shape->set_head_dim(p.head_dim);
  if (p.seqlen_k != p.seqlen_q) shape->set_kv_seq_len(p.seqlen_k);
  if (p.heads_kv != p.heads_q) shape->set_kv_num_heads(p.heads_kv);
  if (p.softmax_scale != 0.0f) request.set_softmax_scale(p.softmax_scale);
  request.set_kernel(kernel);
  request.set_causal(p.causal);
  if (p.window_left >= 0) request.set_window_left(p.window_left);
  if (p.window_right >= 0) request.set_window_right(p.window_right);
  request.set_return_lse(p.return_lse);
  if (p.varlen) {
    for (int32_t offset : in.cu_seqlens_q) request.add_cu_seqlens_q(offset);
    for (int32_t offset : in.cu_seqlens_k) request.add_cu_seqlens_k(offset);
  }
  request.set_q(Bytes(in.q));
  request.set_k(Bytes(in.k));
  request.set_v(Bytes(in.v));
  return request;
}

std::vector<float> LseValues(const std::string& bytes) {
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

::testing::AssertionResult ProblemOutputMatchesReference(const ProblemInputs& in,
                                                         const std::string& out,
                                                         const std::string& lse,
                                                         double tolerance,
                                                         double lse_tolerance) {
  const AttentionProblem& p = in.problem;
  const int64_t out_bytes = p.QBytes(in.dtype);
  if (static_cast<int64_t>(out.size()) != out_bytes) {
    return ::testing::AssertionFailure() << "out has " << out.size() << " bytes; expected "
                                         << out_bytes << " (" << Describe(in) << ")";
  }
  if (static_cast<int64_t>(lse.size()) != p.LseBytes()) {
    return ::testing::AssertionFailure() << "lse has " << lse.size() << " bytes; expected "
                                         << p.LseBytes() << " (" << Describe(in) << ")";
  }
  const std::vector<uint16_t> bits = ToBits(out);
  const int64_t non_finite = CountNonFinite(bits, in.dtype);
  if (non_finite != 0) {
    return ::testing::AssertionFailure()
           << non_finite << " of " << bits.size() << " output elements are NaN/inf (unwritten?) ("
           << Describe(in) << ")";
  }
  std::vector<double> ref_lse;
  const std::vector<double> ref = AttentionNaiveF64(
      p, in.q_float.data(), in.k_float.data(), in.v_float.data(),
      p.varlen ? in.cu_seqlens_q.data() : nullptr, p.varlen ? in.cu_seqlens_k.data() : nullptr,
      &ref_lse);
  const double error = RelativeL2Error(bits, in.dtype, ref);
  if (!(error < tolerance)) {
    return ::testing::AssertionFailure()
           << "relative L2 error " << error << " >= " << tolerance << " (" << Describe(in) << ")";
  }
  if (!p.return_lse) return ::testing::AssertionSuccess() << "relative L2 error " << error;
  const double lse_error = MaxLseError(LseValues(lse), ref_lse);
  if (!(lse_error < lse_tolerance)) {
    return ::testing::AssertionFailure() << "LSE error " << lse_error << " >= " << lse_tolerance
                                         << " (" << Describe(in) << ")";
  }
  return ::testing::AssertionSuccess() << "relative L2 error " << error << ", LSE error "
                                       << lse_error;
}

std::vector<uint16_t> ToBits(const std::string& bytes) {
  std::vector<uint16_t> bits(bytes.size() / 2);
  std::memcpy(bits.data(), bytes.data(), bits.size() * 2);
  return bits;
}

std::vector<double> ReferenceRow(const HostInputs& in, int64_t b, int64_t h, int64_t row,
                                 double scale) {
  const Shape& s = in.shape;
  const int64_t d = s.head_dim;
  const int64_t stride = s.RowStride();
  const int64_t base = b * s.seq_len * stride + h * d;
  const float* q = &in.q_float[base + row * stride];
  std::vector<double> scores(s.seq_len);
  double max_score = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < s.seq_len; ++j) {
    const float* k = &in.k_float[base + j * stride];
    double dot = 0.0;
    for (int64_t c = 0; c < d; ++c) dot += static_cast<double>(q[c]) * k[c];
    scores[j] = dot * scale;
    max_score = std::max(max_score, scores[j]);
  }
  double sum = 0.0;
  for (double& score : scores) {
    score = std::exp(score - max_score);
    sum += score;
  }
  std::vector<double> out(d, 0.0);
  for (int64_t j = 0; j < s.seq_len; ++j) {
    const float* v = &in.v_float[base + j * stride];
    const double p = scores[j] / sum;
    for (int64_t c = 0; c < d; ++c) out[c] += p * v[c];
  }
  return out;
}

::testing::AssertionResult OutputMatchesReference(const HostInputs& in, double scale,
                                                  const std::string& out, double tolerance,
                                                  int sample_rows) {
  const Shape& s = in.shape;
  if (static_cast<int64_t>(out.size()) != s.NumElements() * 2) {
    return ::testing::AssertionFailure() << "out has " << out.size() << " bytes; expected "
                                         << s.NumElements() * 2 << " (" << Describe(in) << ")";
  }
  const std::vector<uint16_t> bits = ToBits(out);
  const int64_t non_finite = CountNonFinite(bits, in.dtype);
  if (non_finite != 0) {
    return ::testing::AssertionFailure()
           << non_finite << " of " << bits.size() << " output elements are NaN/inf (unwritten?) ("
           << Describe(in) << ")";
  }
  double error = 0.0;
  if (sample_rows <= 0) {
    const std::vector<double> ref =
        AttentionNaiveF64(in.q_float.data(), in.k_float.data(), in.v_float.data(), s, scale);
    error = RelativeL2Error(bits, in.dtype, ref);
  } else {
    // Rows spread evenly over all (b, s, h), including the first and last.
    const int64_t rows = s.batch * s.seq_len * s.num_heads;
    double diff = 0.0, norm = 0.0;
    for (int i = 0; i < sample_rows; ++i) {
      const int64_t r = sample_rows == 1 ? 0 : i * (rows - 1) / (sample_rows - 1);
      const int64_t h = r % s.num_heads;
      const int64_t row = (r / s.num_heads) % s.seq_len;
      const int64_t b = r / (s.num_heads * s.seq_len);
      const std::vector<double> ref = ReferenceRow(in, b, h, row, scale);
      const int64_t offset = r * s.head_dim;
      for (int64_t c = 0; c < s.head_dim; ++c) {
        const double delta = BitsToFloat(bits[offset + c], in.dtype) - ref[c];
        diff += delta * delta;
        norm += ref[c] * ref[c];
      }
    }
    error = std::sqrt(diff) / std::sqrt(norm);
  }
  if (!(error < tolerance)) {
    return ::testing::AssertionFailure()
           << "relative L2 error " << error << " >= " << tolerance << " (" << Describe(in) << ")";
  }
  return ::testing::AssertionSuccess() << "relative L2 error " << error;
}

::testing::AssertionResult TimingConsistent(const pb::Timing& t) {
  const int64_t parts[] = {t.receive_ns(), t.decode_ns(), t.queue_ns(),
                           t.h2d_ns(),     t.kernel_ns(), t.d2h_ns()};
  int64_t sum = 0;
  for (int64_t part : parts) {
    if (part < 0) return ::testing::AssertionFailure() << "negative part: " << t.DebugString();
    sum += part;
  }
  if (t.kernel_ns() <= 0 || t.total_ns() <= 0) {
    return ::testing::AssertionFailure()
           << "kernel_ns and total_ns must be > 0: " << t.ShortDebugString();
  }
  if (sum > t.total_ns()) {
    return ::testing::AssertionFailure() << "parts add up to " << sum << " ns > total "
                                         << t.total_ns() << " ns: " << t.ShortDebugString();
  }
  return ::testing::AssertionSuccess();
}

std::unique_ptr<grpc::ClientContext> ContextWithDeadline(absl::Duration timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return context;
}

pb::AttendStreamRequest HeaderOf(const pb::AttendRequest& request) {
  pb::AttendStreamRequest message;
  *message.mutable_header() = request;
  message.mutable_header()->clear_q();
  message.mutable_header()->clear_k();
  message.mutable_header()->clear_v();
  return message;
}

pb::AttendStreamRequest Chunk(pb::TensorName tensor, int64_t offset, const std::string& data) {
  pb::AttendStreamRequest message;
  pb::TensorChunk* chunk = message.mutable_chunk();
  chunk->set_tensor(tensor);
  chunk->set_offset(offset);
  chunk->set_data(data);
  return message;
}

StreamResult AttendViaStream(Stub& stub, const pb::AttendRequest& request, int64_t chunk_bytes,
                             absl::Duration timeout) {
  StreamResult result;
  auto context = ContextWithDeadline(timeout);
  auto stream = stub.AttendStream(context.get());
  bool writing = stream->Write(HeaderOf(request));
  const std::string* tensors[3] = {&request.q(), &request.k(), &request.v()};
  const pb::TensorName names[3] = {pb::TENSOR_Q, pb::TENSOR_K, pb::TENSOR_V};
  const int64_t longest = static_cast<int64_t>(
      std::max({request.q().size(), request.k().size(), request.v().size()}));
  for (int64_t offset = 0; writing && offset < longest; offset += chunk_bytes) {
    for (int t = 0; writing && t < 3; ++t) {
      const int64_t size = static_cast<int64_t>(tensors[t]->size());
      if (offset >= size) continue;
      const int64_t n = std::min(chunk_bytes, size - offset);
      writing = stream->Write(Chunk(names[t], offset, tensors[t]->substr(offset, n)));
    }
  }
  if (writing) stream->WritesDone();
  pb::AttendStreamResponse response;
  bool have_header = false;
  while (stream->Read(&response)) {
    if (response.has_header()) {
      if (have_header) result.error = "second response header";
      result.header = response.header();
      have_header = true;
    } else if (response.has_chunk()) {
      const pb::TensorChunk& chunk = response.chunk();
      if (!have_header) result.error = "output chunk before the header";
      std::string* tensor = nullptr;
      if (chunk.tensor() == pb::TENSOR_OUT) {
        if (result.lse_chunks > 0) result.error = "TENSOR_OUT chunk after a TENSOR_LSE chunk";
        tensor = &result.out;
        ++result.chunks;
      } else if (chunk.tensor() == pb::TENSOR_LSE) {
        tensor = &result.lse;
        ++result.lse_chunks;
      } else {
        result.error = "chunk.tensor is neither TENSOR_OUT nor TENSOR_LSE";
        continue;
      }
      if (chunk.offset() != static_cast<int64_t>(tensor->size())) {
        result.error = absl::StrCat(pb::TensorName_Name(chunk.tensor()), " chunk at offset ",
                                    chunk.offset(), "; expected ", tensor->size());
      }
      tensor->append(chunk.data());
    }
  }
  result.status = stream->Finish();
  return result;
}

grpc::Status SendRawStream(Stub& stub, const std::vector<pb::AttendStreamRequest>& messages) {
  auto context = ContextWithDeadline(absl::Seconds(60));
  auto stream = stub.AttendStream(context.get());
  for (const pb::AttendStreamRequest& message : messages) {
    if (!stream->Write(message)) break;  // the server already finished the call
  }
  stream->WritesDone();
  pb::AttendStreamResponse response;
  while (stream->Read(&response)) {
  }
  return stream->Finish();
}

}  // namespace attn::testing
