// Unit tests of the server's copy-avoiding pieces: SlicedRequestReader (a
// request read from many slices, tensors left in place; Attend's and
// AttendSessions'), the responses serialized around lent output memory,
// TensorSource and ParallelCopier.
#include <atomic>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "attnserve/v1/attention.pb.h"
#include "backends/parallel_copier.h"
#include "backends/streaming_copy.h"
#include "frontend/sliced_request_reader.h"
#include "frontend/response_writer.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "core/tensor_place.h"

namespace attn::server {
namespace {

namespace pb = ::attnserve::v1;

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// `bytes` as a ByteBuffer of slices of `slice` bytes each (the last shorter).
grpc::ByteBuffer Sliced(const std::string& bytes, size_t slice) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < bytes.size(); at += slice) {
    slices.emplace_back(bytes.data() + at, std::min(slice, bytes.size() - at));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Flatten(const TensorSource& t) {
  std::string out(static_cast<size_t>(t.size()), '\0');
  t.CopyTo(out.data());
  return out;
}

pb::AttendRequest SampleRequest() {
  pb::AttendRequest r;
  r.set_request_id("zero-copy");
  r.set_dtype(pb::DTYPE_BFLOAT16);
  r.mutable_shape()->set_batch(1);
  r.mutable_shape()->set_seq_len(64);
  r.mutable_shape()->set_num_heads(2);
  r.mutable_shape()->set_head_dim(32);
  r.set_causal(true);
  r.set_return_lse(true);
  r.set_q(RandomBytes(8192, 1));
  r.set_k(RandomBytes(8192, 2));
  r.set_v(RandomBytes(8192, 3));
  return r;
}

TEST(AttendRequestReaderTest, ReadsEveryFieldFromAnySlicing) {
  const pb::AttendRequest request = SampleRequest();
  const std::string wire = request.SerializeAsString();
  for (size_t slice : {size_t{1}, size_t{7}, size_t{1000}, size_t{4096}, wire.size()}) {
    AttendRequestReader reader;
    ASSERT_TRUE(reader.Parse(Sliced(wire, slice))) << "slices of " << slice;
    EXPECT_EQ(reader.header().request_id(), "zero-copy");
    EXPECT_TRUE(reader.header().causal());
    EXPECT_TRUE(reader.header().return_lse());
    EXPECT_EQ(reader.header().shape().head_dim(), 32);
    EXPECT_TRUE(reader.header().q().empty()) << "tensors are not copied into the header";
    EXPECT_EQ(Flatten(reader.q()), request.q()) << "slices of " << slice;
    EXPECT_EQ(Flatten(reader.k()), request.k());
    EXPECT_EQ(Flatten(reader.v()), request.v());
    if (slice >= wire.size()) {
      EXPECT_EQ(reader.q().pieces().size(), 1u) << "one slice: one piece, no copy";
    }
  }
}

TEST(StepRequestReaderTest, ReadsEveryFieldFromAnySlicing) {
  pb::AttendSessionsRequest request;
  request.set_request_id("step");
  request.set_lease_id("lease");
  request.set_layer(3);
  request.set_return_lse(true);
  for (int i = 0; i < 3; ++i) {
    pb::SessionStep* step = request.add_steps();
    step->set_session_id("s" + std::to_string(i));
    step->set_tokens(i + 1);
  }
  request.set_q(RandomBytes(6000, 4));
  request.set_k(RandomBytes(3000, 5));
  request.set_v(RandomBytes(3000, 6));
  const std::string wire = request.SerializeAsString();
  for (size_t slice : {size_t{1}, size_t{64}, size_t{2048}, wire.size()}) {
    StepRequestReader reader;
    ASSERT_TRUE(reader.Parse(Sliced(wire, slice))) << "slices of " << slice;
    pb::AttendSessionsRequest expected = request;
    expected.clear_q();
    expected.clear_k();
    expected.clear_v();
    EXPECT_EQ(reader.header().SerializeAsString(), expected.SerializeAsString());
    EXPECT_EQ(Flatten(reader.q()), request.q()) << "slices of " << slice;
    EXPECT_EQ(Flatten(reader.k()), request.k());
    EXPECT_EQ(Flatten(reader.v()), request.v());
  }
  StepRequestReader reader;
  EXPECT_FALSE(reader.Parse(Sliced(wire.substr(0, wire.size() - 1), 100))) << "truncated";
}

TEST(AttendRequestReaderTest, ViewsOutliveTheCallsBuffer) {
  const pb::AttendRequest request = SampleRequest();
  AttendRequestReader reader;
  {
    grpc::ByteBuffer buffer = Sliced(request.SerializeAsString(), 3000);
    ASSERT_TRUE(reader.Parse(buffer));
    buffer.Clear();
  }
  EXPECT_EQ(Flatten(reader.k()), request.k());
}

TEST(AttendRequestReaderTest, FollowsProtobufRules) {
  // The last of repeated tensor fields wins; unknown fields are skipped; a
  // q tag with another wire type is an unknown field.
  pb::AttendRequest first;
  first.set_q("first");
  pb::AttendRequest second;
  second.set_q("second");
  second.set_kernel("k");
  std::string wire = first.SerializeAsString() + second.SerializeAsString();
  wire += std::string("\xf8\x07\x01", 3);  // field 127, varint 1: unknown
  wire += std::string("\x30\x05", 2);      // field 6 (q) as a varint
  AttendRequestReader reader;
  ASSERT_TRUE(reader.Parse(Sliced(wire, 5)));
  EXPECT_EQ(Flatten(reader.q()), "second");
  EXPECT_EQ(reader.header().kernel(), "k");
}

TEST(AttendRequestReaderTest, RejectsWhatTheGeneratedParserRejects) {
  const std::string wire = SampleRequest().SerializeAsString();
  const std::vector<std::string> bad = {
      wire.substr(0, wire.size() - 1),             // truncated tensor
      std::string("\x32\xff\xff\xff\xff\x0f", 6),  // q longer than the body
      std::string("\x0a\x02\xc3\x28", 4),          // request_id not UTF-8
      std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11),  // malformed tag
      // Found by attend_request_fuzzer: a last tag cut short, a tag of 0, a
      // tag of 8 bytes (protobuf reads at most 5), and lengths of 6 bytes.
      wire + std::string("\x96\xb5", 2),
      wire + std::string("\x00", 1),
      std::string("\xb9\xff\xff\xff\xff\xff\xff\x00", 8) + std::string(8, '\0'),
      std::string("\x0a\x80\x80\x80\x80\x80\x00", 7),  // request_id
      std::string("\x32\x80\x80\x80\x80\x80\x00", 7),  // q
  };
  for (const std::string& body : bad) {
    pb::AttendRequest generated;
    EXPECT_FALSE(generated.ParseFromString(body));
    AttendRequestReader reader;
    EXPECT_FALSE(reader.Parse(Sliced(body, 2))) << "body of " << body.size() << " bytes";
  }
}

class FakeOutput : public OutputBuffer {
 public:
  FakeOutput(std::string out, std::string lse, std::atomic<int>* destroyed)
      : out_(std::move(out)), lse_(std::move(lse)), destroyed_(destroyed) {}
  ~FakeOutput() override { destroyed_->fetch_add(1); }
  absl::string_view out() const override { return out_; }
  absl::string_view lse() const override { return lse_; }

 private:
  std::string out_, lse_;
  std::atomic<int>* destroyed_;
};

TEST(ResponseWriterTest, LentOutputParsesAsTheWholeMessageAndIsReleasedOnce) {
  for (bool with_lse : {false, true}) {
    pb::AttendResponse header;
    header.set_request_id("r");
    header.set_kernel("flash_fwd");
    header.mutable_timing()->set_kernel_ns(12345);
    const std::string out = RandomBytes(100000, 7);
    const std::string lse = with_lse ? RandomBytes(4000, 8) : "";
    std::atomic<int> destroyed{0};
    {
      grpc::ByteBuffer buffer = SerializeWithLentOutput(
          header, std::make_unique<FakeOutput>(out, lse, &destroyed));
      EXPECT_EQ(destroyed.load(), 0) << "the slices hold the output";
      grpc::Slice flat;
      ASSERT_TRUE(buffer.DumpToSingleSlice(&flat).ok());
      pb::AttendResponse parsed;
      ASSERT_TRUE(parsed.ParseFromArray(flat.begin(), static_cast<int>(flat.size())));
      pb::AttendResponse expected = header;
      expected.set_out(out);
      expected.set_lse(lse);
      EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());
    }
    EXPECT_EQ(destroyed.load(), 1) << "released exactly once, when the last slice went";
  }
}

TEST(ResponseWriterTest, LentStepOutputParsesAsTheWholeAttendSessionsResponse) {
  pb::AttendSessionsResponse header;
  header.set_request_id("step");
  header.add_layer_tokens(17);
  header.add_layer_tokens(4);
  header.set_device("cuda:0");
  const std::string out = RandomBytes(50000, 9);
  const std::string lse = RandomBytes(800, 10);
  std::atomic<int> destroyed{0};
  {
    grpc::ByteBuffer buffer =
        SerializeWithLentOutput(header, std::make_unique<FakeOutput>(out, lse, &destroyed));
    grpc::Slice flat;
    ASSERT_TRUE(buffer.DumpToSingleSlice(&flat).ok());
    pb::AttendSessionsResponse parsed;
    ASSERT_TRUE(parsed.ParseFromArray(flat.begin(), static_cast<int>(flat.size())));
    pb::AttendSessionsResponse expected = header;
    expected.set_out(out);
    expected.set_lse(lse);
    EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());
  }
  EXPECT_EQ(destroyed.load(), 1);
}

TEST(TensorBytesTest, ContiguousGathersOnlyWhenItMust) {
  const std::string a = "abc", b = "defg";
  const std::string aligned(64, 'x');  // heap memory: aligned for any type
  TensorSource one{absl::string_view(aligned)};
  std::string scratch;
  EXPECT_EQ(one.Contiguous(&scratch, 8).data(), aligned.data()) << "used in place";
  TensorSource odd{absl::string_view(aligned).substr(1)};
  const absl::string_view gathered = odd.Contiguous(&scratch, 2);
  EXPECT_NE(gathered.data(), aligned.data() + 1) << "an odd offset is gathered";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(gathered.data()) % 2, 0u);
  EXPECT_EQ(gathered, absl::string_view(aligned).substr(1));
  TensorSource two;
  two.Append(a);
  two.Append(b);
  two.Append("");
  EXPECT_EQ(two.size(), 7);
  EXPECT_EQ(two.pieces().size(), 2u);
  EXPECT_EQ(two.Contiguous(&scratch, 1), "abcdefg");
}

TEST(ParallelCopierTest, CopiesEveryByteFromManyCallersAtOnce) {
  // Streaming from 0 bytes (always), from 20 MiB (some calls), never.
  constexpr size_t kNever = std::numeric_limits<size_t>::max();
  for (const auto& [helpers, streaming] : std::vector<std::pair<int, size_t>>{
           {0, kNever}, {3, kNever}, {0, 0}, {3, 0}, {3, size_t{20} << 20}}) {
    ParallelCopier copier(helpers, streaming);
    std::vector<std::thread> callers;
    std::atomic<int> mismatches{0};
    for (int caller = 0; caller < 4; ++caller) {
      callers.emplace_back([&, caller] {
        // Three tensors of uneven pieces, some above the 1 MiB chunk size.
        std::vector<std::string> storage;
        std::vector<TensorSource> tensors(3);
        std::vector<std::string> expected(3);
        std::mt19937 rng(caller);
        for (int t = 0; t < 3; ++t) {
          for (int p = 0; p < 5; ++p) {
            storage.push_back(RandomBytes(1 + rng() % (3 << 20), rng()));
          }
        }
        for (int t = 0; t < 3; ++t) {
          for (int p = 0; p < 5; ++p) {
            tensors[t].Append(storage[t * 5 + p]);
            expected[t] += storage[t * 5 + p];
          }
        }
        std::vector<std::string> out(3);
        std::vector<ParallelCopier::Task> tasks;
        for (int t = 0; t < 3; ++t) {
          out[t].assign(expected[t].size(), '\0');
          tasks.push_back({&tensors[t], out[t].data()});
        }
        copier.Copy(tasks);
        for (int t = 0; t < 3; ++t) {
          if (out[t] != expected[t]) mismatches.fetch_add(1);
        }
      });
    }
    for (std::thread& t : callers) t.join();
    EXPECT_EQ(mismatches.load(), 0) << helpers << " helper threads, streaming from " << streaming;
  }
}

// A task's byte range [offset, offset + count) may start and end anywhere:
// inside a piece, on a piece boundary, past pieces of every size; only those
// bytes are written, at the destination's start.
TEST(ParallelCopierTest, CopiesAnyByteRangeOfAManyPieceTensor) {
  std::mt19937 rng(3);
  std::vector<std::string> storage;
  TensorSource tensor;
  std::string whole;
  for (size_t size : {size_t{1}, size_t{4097}, size_t{3} << 20, size_t{7}, size_t{1} << 20}) {
    storage.push_back(RandomBytes(size, rng()));
  }
  for (const std::string& piece : storage) {
    tensor.Append(piece);
    whole += piece;
  }
  const int64_t n = static_cast<int64_t>(whole.size());
  std::vector<std::pair<int64_t, int64_t>> ranges = {
      {0, n}, {0, 1}, {1, 4097}, {1, 4098}, {4098, n - 4098}, {n - 1, 1}, {n, 0}, {5, 0}};
  for (int i = 0; i < 40; ++i) {
    const int64_t offset = static_cast<int64_t>(rng() % static_cast<uint32_t>(n));
    ranges.push_back({offset, static_cast<int64_t>(rng() % static_cast<uint32_t>(n - offset + 1))});
  }
  for (int helpers : {0, 3}) {
    ParallelCopier copier(helpers, std::numeric_limits<size_t>::max());
    for (const auto& [offset, count] : ranges) {
      std::string out(static_cast<size_t>(count) + 64, '\x5a');
      copier.Copy({{&tensor, out.data(), offset, count}});
      EXPECT_EQ(out.substr(0, static_cast<size_t>(count)),
                whole.substr(static_cast<size_t>(offset), static_cast<size_t>(count)))
          << "bytes [" << offset << ", " << offset + count << ") with " << helpers << " helpers";
      EXPECT_EQ(out.substr(static_cast<size_t>(count)), std::string(64, '\x5a'))
          << "written past the range [" << offset << ", " << offset + count << ")";
    }
    std::string rest(static_cast<size_t>(n - 4098), '\0');
    copier.Copy({{&tensor, rest.data(), 4098}});  // count -1: to the end
    EXPECT_EQ(rest, whole.substr(4098));
  }
}

// Every size and alignment of source and destination the streaming path
// distinguishes (below the small-copy cut, an unaligned head, whole lines,
// a tail), copied into the middle of a guarded buffer: every byte arrives
// and none outside [to, to + bytes) is touched.
TEST(StreamingCopyTest, CopiesEveryByteAndNothingElseAtAnyAlignment) {
  std::mt19937 rng(11);
  const std::string source = RandomBytes(70000, 5);
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{255}, size_t{256}, size_t{257},
                       size_t{1000}, size_t{4096}, size_t{65536 + 13}}) {
    for (size_t to_offset = 0; to_offset <= 64; ++to_offset) {
      const size_t from_offset = rng() % 64;
      std::string destination(bytes + 128, '\x5a');
      CopyWithStreamingStores(destination.data() + to_offset, source.data() + from_offset, bytes);
      ASSERT_EQ(destination.compare(to_offset, bytes, source, from_offset, bytes), 0)
          << bytes << " bytes to offset " << to_offset << " from offset " << from_offset;
      for (size_t i = 0; i < destination.size(); ++i) {
        if (i >= to_offset && i < to_offset + bytes) continue;
        ASSERT_EQ(destination[i], '\x5a') << "byte " << i << " outside the copy was written";
      }
    }
  }
}

}  // namespace
}  // namespace attn::server
