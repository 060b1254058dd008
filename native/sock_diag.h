// Questions to the kernel's socket tables through NETLINK_SOCK_DIAG, in the caller's network namespace.
#pragma once

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace kreplay {

// Asks sock_diag in our network namespace for every socket of `family` and `protocol` in `states`
// (a bit per TCP state) and stops at the first that `match` takes: 1 when one did, 0 when none did,
// -1 when the kernel cannot say. Binary and walked once, where /proc/net/tcp formats every
// connection as text and walks the connections' buckets again for each page read: milliseconds on
// a host with many connections.
template <typename Match>
int DiagFind(int family, int protocol, uint32_t states, Match match) {
  const int sock = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (sock < 0) return -1;
  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } message{};
  message.header.nlmsg_len = sizeof message;
  message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  message.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  message.request.sdiag_family = static_cast<uint8_t>(family);
  message.request.sdiag_protocol = static_cast<uint8_t>(protocol);
  message.request.idiag_states = states;
  int found = -1;
  if (send(sock, &message, sizeof message, 0) == static_cast<ssize_t>(sizeof message)) {
    found = 0;
    alignas(nlmsghdr) char buf[32768];
    for (bool done = false; !done && found == 0;) {
      const ssize_t got = recv(sock, buf, sizeof buf, 0);
      if (got <= 0) {
        found = -1;
        break;
      }
      int left = static_cast<int>(got);
      for (auto* header = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(header, left); header = NLMSG_NEXT(header, left)) {
        if (header->nlmsg_type == NLMSG_DONE || header->nlmsg_type == NLMSG_ERROR) {
          if (header->nlmsg_type == NLMSG_ERROR) found = -1;
          done = true;
          break;
        }
        if (match(*static_cast<const inet_diag_msg*>(NLMSG_DATA(header)))) {
          found = 1;
          break;
        }
      }
    }
  }
  close(sock);
  return found;
}

}  // namespace kreplay
