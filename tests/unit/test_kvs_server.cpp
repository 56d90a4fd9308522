// SPDX-License-Identifier: BSD-3-Clause
// weftrun's key-value server refuses what is not a rank of its job: a HELLO without the
// job's cookie, a second HELLO for a rank already connected, and a PUT of another rank's
// key. Each connection is one end of a socket pair; the test reads the server's replies
// from the other end.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "bootstrap/kvs_wire.hpp"
#include "weftrun/kvs_server.hpp"

namespace {

constexpr uint64_t kCookie = 0x0123456789abcdefull;

// One client connection: what it says goes to the server as a line from `fd`.
struct client {
  int fd = -1, peer = -1;
  std::string pending;
  client() {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    fd = sv[0];
    peer = sv[1];
  }
  ~client() {
    close(fd);
    close(peer);
  }
  // Sends `line`; returns whether the server keeps the connection, and its reply.
  bool say(weftrun::kvs_server& s, const std::string& line, std::string* reply) {
    const bool keep = s.on_line(fd, line);
    EXPECT_TRUE(weft::bootstrap::read_line(peer, *reply, pending));
    if (!keep) s.on_disconnect(fd);
    return keep;
  }
};

std::string hello(int rank, uint64_t cookie) {
  return "HELLO " + std::to_string(rank) + " " + weft::bootstrap::cookie_hex(cookie);
}

}  // namespace

TEST(KvsServer, HelloDemandsTheJobsCookie) {
  weftrun::kvs_server s(2, kCookie);
  std::string r;
  client none, wrong, bad_hex, right;
  EXPECT_FALSE(none.say(s, "HELLO 0", &r));
  EXPECT_EQ(r.rfind("ERR HELLO without this job's cookie", 0), 0u) << r;
  EXPECT_FALSE(wrong.say(s, hello(0, kCookie ^ 1), &r));
  EXPECT_EQ(r.rfind("ERR HELLO without this job's cookie", 0), 0u) << r;
  EXPECT_FALSE(bad_hex.say(s, "HELLO 0 0123456789ABCDEF", &r));  // not lowercase hex
  EXPECT_EQ(r.rfind("ERR", 0), 0u) << r;
  // Refused connections cannot read or write keys.
  EXPECT_FALSE(s.on_line(wrong.fd, "GET weft-job@0"));  // and closes
  EXPECT_TRUE(weft::bootstrap::read_line(wrong.peer, r, wrong.pending));
  EXPECT_EQ(r, "ERR say HELLO <rank> first");
  EXPECT_TRUE(right.say(s, hello(0, kCookie), &r));
  EXPECT_EQ(r, "OK");
}

TEST(KvsServer, ARankConnectsOnceAndPutsOnlyItsOwnKeys) {
  weftrun::kvs_server s(2, kCookie);
  std::string r;
  client rank0, again, rank1;
  ASSERT_TRUE(rank0.say(s, hello(0, kCookie), &r));
  EXPECT_FALSE(again.say(s, hello(0, kCookie), &r));
  EXPECT_EQ(r, "ERR rank 0 is connected already");
  EXPECT_FALSE(rank0.say(s, hello(1, kCookie), &r));  // a second HELLO on one connection
  EXPECT_EQ(r, "ERR this connection said HELLO already");
  ASSERT_TRUE(rank1.say(s, hello(1, kCookie), &r));
  EXPECT_TRUE(rank1.say(s, "PUT addr@0 6162", &r));
  EXPECT_EQ(r.rfind("ERR PUT of key addr@0: rank 1 may put only its own keys", 0), 0u) << r;
  EXPECT_TRUE(rank1.say(s, "PUT addr@1 6162", &r));
  EXPECT_EQ(r, "OK");
  EXPECT_TRUE(rank1.say(s, "GET addr@1", &r));
  EXPECT_EQ(r, "VAL 6162");
}
