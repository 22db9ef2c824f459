// Unit tests of OpenConnections (server/limits/open_connections.h): what
// --max_connections counts, without gRPC telling it when a connection ends.
#include "limits/open_connections.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace attn::server {
namespace {

// One end of a new socket pair (the other closed).
int NewSocket() {
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) return -1;
  close(ends[1]);
  return ends[0];
}

TEST(OpenConnectionsTest, CountsUntilTheDescriptorCloses) {
  OpenConnections connections;
  const int a = NewSocket();
  const int b = NewSocket();
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  EXPECT_TRUE(connections.AddIfBelow(a, 2));
  EXPECT_TRUE(connections.AddIfBelow(b, 2));
  EXPECT_EQ(connections.Count(), 2);
  const int c = NewSocket();
  EXPECT_FALSE(connections.AddIfBelow(c, 2)) << "two of two are open";
  EXPECT_EQ(connections.Count(), 2);
  close(a);  // what gRPC does when the connection ends
  EXPECT_EQ(connections.Count(), 1);
  EXPECT_TRUE(connections.AddIfBelow(c, 2)) << "one closed, so there is room";
  EXPECT_EQ(connections.Count(), 2);
  close(b);
  close(c);
  EXPECT_EQ(connections.Count(), 0);
  EXPECT_FALSE(connections.AddIfBelow(c, 2)) << "a closed descriptor is not recorded";
}

// A number reused for something else is not the old connection.
TEST(OpenConnectionsTest, AReusedNumberIsNotTheOldConnection) {
  OpenConnections connections;
  const int socket_fd = NewSocket();
  ASSERT_GE(socket_fd, 0);
  ASSERT_TRUE(connections.AddIfBelow(socket_fd, 10));
  const int other = NewSocket();
  ASSERT_GE(other, 0);
  ASSERT_EQ(dup2(other, socket_fd), socket_fd);  // same number, another socket
  EXPECT_EQ(connections.Count(), 0);

  ASSERT_TRUE(connections.AddIfBelow(other, 10));
  const int file = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(file, 0);
  ASSERT_EQ(dup2(file, other), other);  // same number, not a socket at all
  EXPECT_EQ(connections.Count(), 0);
  close(file);
  close(other);
  close(socket_fd);
}

}  // namespace
}  // namespace attn::server
