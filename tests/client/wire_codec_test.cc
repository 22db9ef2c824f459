// The zero-copy request encoding and the hand-written health messages must
// be byte-compatible with what protobuf itself produces and parses.
#include "wire_codec.h"

#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "attn/client/attend_types.h"
#include "attnserve/v1/attention.pb.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "gtest/gtest.h"
#include "health_codec.h"

namespace attn::internal {
namespace {

AttendOptions WithLse() {
  AttendOptions options;
  options.return_lse = true;
  return options;
}


namespace pb = ::attnserve::v1;

// `response` serialized and cut into slices of `slice_bytes` (as gRPC may
// hand a message over), read and taken as the client does.
absl::Status Take(const pb::AttendResponse& response, const AttentionInputs& inputs,
                  const AttendOptions& options, AttendResult* result, size_t slice_bytes = 7) {
  const std::string bytes = response.SerializeAsString();
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += slice_bytes) {
    slices.emplace_back(bytes.substr(at, slice_bytes));
  }
  const grpc::ByteBuffer buffer(slices.data(), slices.size());
  SlicedResponse sliced;
  if (absl::Status read = ReadResponse(buffer, &sliced); !read.ok()) return read;
  return TakeResponse(sliced, inputs, options, result);
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  grpc::Slice slice;
  EXPECT_TRUE(buffer.DumpToSingleSlice(&slice).ok());
  return std::string(reinterpret_cast<const char*>(slice.begin()), slice.size());
}

TEST(WireCodecTest, EncodedRequestParsesAsTheFullMessage) {
  auto inputs = std::make_shared<const AttentionInputs>(
      MakeRandomInputs({2, 37, 3, 24}, DType::kBFloat16, 42));  // > 127-byte varint lengths
  AttendOptions options;
  options.kernel = "k07_autotuned";
  options.request_id = "req-1";
  options.softmax_scale = 0.25f;
  const pb::AttendRequest header = MakeRequestHeader(*inputs, options);
  const grpc::ByteBuffer buffer = EncodeAttendRequest(header, inputs);

  pb::AttendRequest full = header;
  full.set_q(inputs->q);
  full.set_k(inputs->k);
  full.set_v(inputs->v);
  EXPECT_EQ(static_cast<int64_t>(buffer.Length()),
            EncodedRequestBytes(header, inputs->QBytes(), inputs->KvBytes()));
  EXPECT_EQ(buffer.Length(), full.ByteSizeLong());

  pb::AttendRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(buffer)));
  EXPECT_EQ(parsed.SerializeAsString(), full.SerializeAsString());
  EXPECT_EQ(parsed.dtype(), pb::DTYPE_BFLOAT16);
  EXPECT_EQ(parsed.shape().seq_len(), 37);
  EXPECT_FLOAT_EQ(parsed.softmax_scale(), 0.25f);
  EXPECT_FALSE(MakeRequestHeader(*inputs, AttendOptions()).has_softmax_scale());
  // Without the newer features none of their fields is encoded.
  EXPECT_EQ(buffer.Length(), full.SerializeAsString().size());
  EXPECT_EQ(Flatten(buffer), full.SerializeAsString());
}

// The bytes of a request without the newer options, written out by hand from
// attention.proto: what every client sent before kv_seq_len, causal, window,
// return_lse and cu_seqlens existed. Servers and proxies that never heard of
// them must keep receiving exactly this.
TEST(WireCodecTest, EncodedStepRequestParsesAsTheFullMessage) {
  pb::AttendSessionsRequest request;
  request.set_request_id("step");
  request.set_lease_id("lease");
  request.set_layer(2);
  request.set_return_lse(true);
  request.add_steps()->set_session_id("a");
  request.mutable_steps(0)->set_tokens(3);
  request.set_q(std::string(3 * 4 * 8 * 2, 'q'));
  request.set_k(std::string(3 * 2 * 8 * 2, 'k'));
  request.set_v("");  // an empty tensor still parses
  const std::string expected = request.SerializeAsString();
  pb::AttendSessionsRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(EncodeStepRequest(request))));
  EXPECT_EQ(parsed.SerializeAsString(), expected);
}

TEST(WireCodecTest, SelfAttentionRequestBytesAreUnchanged) {
  AttentionInputs in;
  in.dtype = DType::kFloat16;
  in.shape = Shape{1, 1, 1, 2};
  in.q = std::string("\x01\x02\x03\x04", 4);
  in.k = std::string("\x05\x06\x07\x08", 4);
  in.v = std::string("\x09\x0a\x0b\x0c", 4);
  AttendOptions options;
  options.request_id = "r";
  options.kernel = "k";
  options.softmax_scale = 0.5f;
  const std::string expected = std::string("\x0a\x01r", 3) +  // request_id = "r"
                               std::string("\x10\x01", 2) +   // dtype = DTYPE_FLOAT16
                               std::string("\x1a\x08\x08\x01\x10\x01\x18\x01\x20\x02",
                                           10) +                         // shape {1, 1, 1, 2}
                               std::string("\x25\x00\x00\x00\x3f", 5) +  // softmax_scale = 0.5f
                               std::string("\x2a\x01k", 3) +             // kernel = "k"
                               std::string("\x32\x04", 2) +
                               in.q +                               // q
                               std::string("\x3a\x04", 2) + in.k +  // k
                               std::string("\x42\x04", 2) + in.v;   // v
  auto inputs = std::make_shared<const AttentionInputs>(in);
  EXPECT_EQ(Flatten(EncodeAttendRequest(MakeRequestHeader(*inputs, options), inputs)), expected);

  // Options left at their defaults, or set to their "unset" values, change
  // nothing: causal false, window (-1, -1), return_lse false, kv dims 0.
  AttendOptions defaults = options;
  defaults.causal = false;
  defaults.window_left = -1;
  defaults.window_right = -1;
  defaults.return_lse = false;
  EXPECT_EQ(Flatten(EncodeAttendRequest(MakeRequestHeader(*inputs, defaults), inputs)), expected);
}

TEST(WireCodecTest, NewFieldsAreEncoded) {
  AttentionInputs geometry;
  geometry.dtype = DType::kBFloat16;
  geometry.shape = Shape{2, 5, 4, 16};
  geometry.kv_seq_len = 9;
  geometry.kv_num_heads = 2;
  auto inputs = std::make_shared<const AttentionInputs>(MakeRandomInputs(geometry, 7));
  ASSERT_TRUE(inputs->Validate().ok()) << inputs->Validate();
  EXPECT_EQ(inputs->QBytes(), 2 * 5 * 4 * 16 * 2);
  EXPECT_EQ(inputs->KvBytes(), 2 * 9 * 2 * 16 * 2);
  AttendOptions options;
  options.causal = true;
  options.window_left = 3;
  options.return_lse = true;
  const pb::AttendRequest header = MakeRequestHeader(*inputs, options);
  const grpc::ByteBuffer buffer = EncodeAttendRequest(header, inputs);
  EXPECT_EQ(static_cast<int64_t>(buffer.Length()),
            EncodedRequestBytes(header, inputs->QBytes(), inputs->KvBytes()));

  pb::AttendRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(buffer)));
  EXPECT_EQ(parsed.shape().kv_seq_len(), 9);
  EXPECT_EQ(parsed.shape().kv_num_heads(), 2);
  EXPECT_TRUE(parsed.causal());
  EXPECT_TRUE(parsed.has_window_left());
  EXPECT_EQ(parsed.window_left(), 3);
  EXPECT_FALSE(parsed.has_window_right());  // -1: unbounded, not sent
  EXPECT_TRUE(parsed.return_lse());
  EXPECT_EQ(parsed.q(), inputs->q);
  EXPECT_EQ(parsed.k(), inputs->k);
  EXPECT_EQ(parsed.v(), inputs->v);
  EXPECT_EQ(parsed.cu_seqlens_q_size(), 0);

  options.window_left = -1;
  options.window_right = 0;
  EXPECT_TRUE(MakeRequestHeader(*inputs, options).has_window_right());
  EXPECT_FALSE(MakeRequestHeader(*inputs, options).has_window_left());
}

TEST(WireCodecTest, VarlenOffsetsAreEncoded) {
  AttentionInputs geometry;
  geometry.dtype = DType::kFloat16;
  geometry.shape = Shape{3, 0, 2, 8};  // seq_len 0: the longest of cu_seqlens_q
  geometry.cu_seqlens_q = CumulativeSeqlens({3, 0, 5});
  geometry.cu_seqlens_k = CumulativeSeqlens({4, 2, 7});
  auto inputs = std::make_shared<const AttentionInputs>(MakeRandomInputs(geometry, 3));
  ASSERT_TRUE(inputs->Validate().ok()) << inputs->Validate();
  EXPECT_EQ(inputs->TokensQ(), 8);
  EXPECT_EQ(inputs->TokensKv(), 13);
  EXPECT_EQ(inputs->SeqLenQ(), 5);
  EXPECT_EQ(inputs->SeqLenKv(), 7);
  EXPECT_EQ(inputs->QBytes(), 8 * 2 * 8 * 2);
  EXPECT_EQ(inputs->LseElements(), 8 * 2);
  const pb::AttendRequest header = MakeRequestHeader(*inputs, AttendOptions());
  pb::AttendRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(EncodeAttendRequest(header, inputs))));
  EXPECT_EQ(std::vector<int32_t>(parsed.cu_seqlens_q().begin(), parsed.cu_seqlens_q().end()),
            (std::vector<int32_t>{0, 3, 3, 8}));
  EXPECT_EQ(std::vector<int32_t>(parsed.cu_seqlens_k().begin(), parsed.cu_seqlens_k().end()),
            (std::vector<int32_t>{0, 4, 6, 13}));
  EXPECT_EQ(parsed.shape().seq_len(), 0);
  EXPECT_EQ(parsed.q().size(), static_cast<size_t>(inputs->QBytes()));
  EXPECT_EQ(parsed.k().size(), static_cast<size_t>(inputs->KvBytes()));
}

TEST(AttendTypesTest, ValidateNamesTheField) {
  AttentionInputs in = MakeRandomInputs({1, 4, 4, 8}, DType::kFloat16, 1);
  EXPECT_TRUE(in.Validate().ok());
  AttentionInputs bad = in;
  bad.kv_num_heads = 3;
  EXPECT_NE(bad.Validate().message().find("kv_num_heads"), absl::string_view::npos);
  bad = in;
  bad.kv_seq_len = 5;  // k, v now too short
  EXPECT_NE(bad.Validate().message().find("k has"), absl::string_view::npos);
  bad = in;
  bad.cu_seqlens_q = {0, 4};
  EXPECT_NE(bad.Validate().message().find("both"), absl::string_view::npos);
  bad.cu_seqlens_k = {0, 4};
  bad.shape.seq_len = 4;
  EXPECT_TRUE(bad.Validate().ok()) << bad.Validate();
  bad.cu_seqlens_k = {1, 4};
  EXPECT_NE(bad.Validate().message().find("cu_seqlens_k[0]"), absl::string_view::npos);
  bad.cu_seqlens_k = {0, 4, 4};
  EXPECT_NE(bad.Validate().message().find("cu_seqlens_k has 3 offsets"), absl::string_view::npos);
  bad.cu_seqlens_k = {0, 4};
  bad.shape.seq_len = 3;  // max_seqlen_q below the longest sequence
  EXPECT_NE(bad.Validate().message().find("max_seqlen_q"), absl::string_view::npos);
}

TEST(AttendTypesTest, FlopsCountVisiblePairs) {
  AttentionInputs in = MakeRandomInputs({2, 8, 4, 16}, DType::kFloat16, 1);
  AttendOptions options;
  EXPECT_DOUBLE_EQ(in.Flops(options), 4.0 * 2 * 4 * 8 * 8 * 16);
  options.causal = true;  // 1 + 2 + ... + 8 = 36 pairs per sequence
  EXPECT_DOUBLE_EQ(in.Flops(options), 4.0 * 2 * 4 * 36 * 16);
  EXPECT_DOUBLE_EQ(in.Flops(options), in.Problem(options).Flops());

  AttentionInputs varlen;
  varlen.shape = Shape{2, 0, 1, 4};
  varlen.cu_seqlens_q = CumulativeSeqlens({2, 3});
  varlen.cu_seqlens_k = CumulativeSeqlens({2, 5});
  EXPECT_DOUBLE_EQ(varlen.Flops(AttendOptions()), 4.0 * 1 * 4 * (2 * 2 + 3 * 5));
}

TEST(WireCodecTest, MakeRandomInputsKeepsSelfAttentionTensors) {
  // The geometry overload draws the same values as the shape one, so seeds
  // printed by older tools still replay.
  const AttentionInputs a = MakeRandomInputs({1, 6, 2, 8}, DType::kBFloat16, 99);
  AttentionInputs geometry;
  geometry.dtype = DType::kBFloat16;
  geometry.shape = Shape{1, 6, 2, 8};
  geometry.kv_seq_len = 6;
  const AttentionInputs b = MakeRandomInputs(geometry, 99);
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(a.v, b.v);
}

TEST(WireCodecTest, TensorSlicesReferenceTheInputsUntilReleased) {
  auto inputs =
      std::make_shared<const AttentionInputs>(MakeRandomInputs({1, 4, 1, 8}, DType::kFloat16, 1));
  {
    const grpc::ByteBuffer buffer = EncodeAttendRequest(MakeRequestHeader(*inputs, {}), inputs);
    EXPECT_EQ(inputs.use_count(), 4);  // ours plus one per tensor slice
  }
  EXPECT_EQ(inputs.use_count(), 1);
}

TEST(WireCodecTest, ResponseMustMatchTheRequest) {
  const AttentionInputs inputs = MakeRandomInputs({1, 4, 1, 8}, DType::kFloat16, 1);
  pb::AttendResponse response;
  response.set_dtype(pb::DTYPE_FLOAT16);
  *response.mutable_shape() = ToProto(inputs.shape);
  response.set_out(std::string(static_cast<size_t>(inputs.QBytes()), '\0'));
  response.mutable_timing()->set_kernel_ns(5);
  response.set_kernel("cpu_reference");
  AttendResult result;
  pb::AttendResponse copy = response;
  ASSERT_TRUE(Take(copy, inputs, AttendOptions{}, &result).ok());
  EXPECT_EQ(result.out.size(), static_cast<size_t>(inputs.QBytes()));
  EXPECT_EQ(result.server.kernel_ns, 5);
  EXPECT_EQ(result.kernel, "cpu_reference");
  EXPECT_TRUE(result.lse.empty());

  copy = response;
  copy.set_dtype(pb::DTYPE_BFLOAT16);
  EXPECT_EQ(Take(copy, inputs, AttendOptions{}, &result).code(), absl::StatusCode::kInternal);
  copy = response;
  copy.mutable_shape()->set_seq_len(5);
  EXPECT_EQ(Take(copy, inputs, AttendOptions{}, &result).code(), absl::StatusCode::kInternal);
  copy = response;
  copy.mutable_shape()->set_kv_num_heads(2);
  EXPECT_EQ(Take(copy, inputs, AttendOptions{}, &result).code(), absl::StatusCode::kInternal);
  copy = response;
  copy.mutable_out()->pop_back();
  EXPECT_EQ(Take(copy, inputs, AttendOptions{}, &result).code(), absl::StatusCode::kInternal);
  copy = response;  // LSE that was not asked for
  copy.set_lse(std::string(16, '\0'));
  EXPECT_EQ(Take(copy, inputs, AttendOptions{}, &result).code(), absl::StatusCode::kInternal);
}

// O arrives in many slices; it is copied once, in order, into the caller's
// out_destination (result.out stays empty) or into result.out.
TEST(WireCodecTest, OutputInSlicesIsCopiedWhereTheCallerAsked) {
  const AttentionInputs inputs = MakeRandomInputs({1, 16, 2, 8}, DType::kFloat16, 3);
  std::string out(static_cast<size_t>(inputs.QBytes()), '\0');
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(i * 7 + 1);
  pb::AttendResponse response;
  response.set_dtype(pb::DTYPE_FLOAT16);
  *response.mutable_shape() = ToProto(inputs.shape);
  response.set_out(out);
  response.set_kernel("cpu_reference");
  for (size_t slice_bytes : {size_t{1}, size_t{5}, size_t{64}, size_t{1} << 20}) {
    AttendResult result;
    ASSERT_TRUE(Take(response, inputs, AttendOptions{}, &result, slice_bytes).ok());
    EXPECT_EQ(result.out, out) << slice_bytes;
    EXPECT_EQ(result.kernel, "cpu_reference");

    std::string destination(out.size(), 'x');
    AttendOptions options;
    options.out_destination = destination.data();
    AttendResult placed;
    ASSERT_TRUE(Take(response, inputs, options, &placed, slice_bytes).ok());
    EXPECT_EQ(destination, out) << slice_bytes;
    EXPECT_TRUE(placed.out.empty());
  }
  // Not an AttendResponse at all (a length past the end).
  const grpc::Slice broken(std::string("\x22\x7f", 2));
  SlicedResponse sliced;
  EXPECT_EQ(ReadResponse(grpc::ByteBuffer(&broken, 1), &sliced).code(),
            absl::StatusCode::kInternal);
}

TEST(WireCodecTest, LseIsDecodedAsFloat32) {
  AttentionInputs geometry;
  geometry.dtype = DType::kFloat16;
  geometry.shape = Shape{1, 2, 2, 8};
  geometry.kv_seq_len = 3;
  geometry.kv_num_heads = 1;
  const AttentionInputs inputs = MakeRandomInputs(geometry, 1);
  const float values[] = {0.5f, -1.25f, 3.0f, -std::numeric_limits<float>::infinity()};
  pb::AttendResponse response;
  response.set_dtype(pb::DTYPE_FLOAT16);
  *response.mutable_shape() = ToProto(inputs.shape);
  response.mutable_shape()->set_kv_seq_len(3);
  response.mutable_shape()->set_kv_num_heads(1);
  response.set_out(std::string(static_cast<size_t>(inputs.QBytes()), '\0'));
  response.set_lse(std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  AttendResult result;
  pb::AttendResponse copy = response;
  ASSERT_TRUE(Take(copy, inputs, WithLse(), &result).ok());
  EXPECT_EQ(result.lse, std::vector<float>(std::begin(values), std::end(values)));
  copy = response;
  copy.mutable_lse()->resize(12);
  EXPECT_EQ(Take(copy, inputs, WithLse(), &result).code(), absl::StatusCode::kInternal);
  copy = response;
  copy.clear_lse();
  EXPECT_EQ(Take(copy, inputs, WithLse(), &result).code(), absl::StatusCode::kInternal);
}

TEST(HealthCodecTest, RequestEncoding) {
  EXPECT_EQ(EncodeHealthCheckRequest(""), "");
  EXPECT_EQ(EncodeHealthCheckRequest("attnserve.v1.Attention"),
            std::string("\x0a\x16") + "attnserve.v1.Attention");
}

TEST(HealthCodecTest, ResponseDecoding) {
  EXPECT_EQ(*DecodeHealthCheckResponse(""), 0);
  EXPECT_EQ(*DecodeHealthCheckResponse(std::string("\x08\x01", 2)), 1);
  EXPECT_EQ(*DecodeHealthCheckResponse(std::string("\x08\x02", 2)), 2);
  // Unknown fields of every wire type are skipped.
  const std::string with_unknown = std::string("\x12\x03xyz", 5) + std::string("\x18\x96\x01", 3) +
                                   std::string("\x25\x00\x00\x00\x00", 5) + std::string("\x29", 1) +
                                   std::string(8, '\0') + std::string("\x08\x01", 2);
  EXPECT_EQ(*DecodeHealthCheckResponse(with_unknown), 1);
  EXPECT_FALSE(DecodeHealthCheckResponse(std::string("\x08", 1)).ok());
  EXPECT_FALSE(DecodeHealthCheckResponse(std::string("\x12\x05xy", 4)).ok());
  EXPECT_FALSE(DecodeHealthCheckResponse(std::string("\x0f", 1)).ok());
}

}  // namespace
}  // namespace attn::internal
