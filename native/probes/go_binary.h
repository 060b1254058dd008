// What the Go probes need of a Go binary, read from its file: whether it
// is Go and which version, where a thread's current g is, and the file
// offsets of the runtime and net/http functions bpf/capture/golang.h
// probes. Plain functions of the file: no kernel in here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "go_layout.h"

namespace kreplay {

struct GoBinary {
  bool is_go = false;
  // "go1.19.8", or empty when the build information is not readable
  std::string version;
  // why its goroutines cannot be followed, empty when they can
  std::string unfollowed;
  // where the current g is, from the thread pointer (fsbase)
  int64_t tls_offset = 0;
  // file offsets of runtime.newproc1's entry probe (its stack check's jump: EntrySite in go_binary.cc), of its
  // `CALL runtime.casgstatus` that makes the new goroutine runnable (RunnableSite; 0 when not found), and of its RET
  // instructions, probed instead where that call is not found (the kernel single-steps a RET, emulates a CALL)
  // newproc1's entry is probed only where `layout` is not known: there the creator is read from newproc1's arguments
  uint64_t newproc1 = 0;
  uint64_t newproc1_runnable = 0;
  std::vector<uint64_t> newproc1_returns;
  // net/http's client pool: (*persistConn).roundTrip, readLoop and waitForContinue (which writeLoop calls
  // before each request); 0 when the binary has none
  uint64_t round_trip = 0;
  uint64_t read_loop = 0;
  uint64_t conn_write = 0;
  // net/http's HTTP/2 server: (*http2serverConn).processHeaders' file offset, and the distance from its entry to
  // the return address of its one `go sc.runHandler(...)` (its CALL runtime.newproc); 0 when not found
  uint64_t h2_headers = 0;
  uint64_t h2_handler_go = 0;
  // crypto/tls: (*Conn).Read's file offset and its RET instructions', and the distance from its entry to the itab of
  // (*net.TCPConn, net.Conn) (a server connection's net.Conn on a TCP socket); 0 when either is missing
  uint64_t tls_read = 0;
  std::vector<uint64_t> tls_read_returns;
  uint64_t tls_conn_itab = 0;
  // channel hand-offs: runtime.chansend's entry probe's file offset, runtime.chanrecv's and its RET instructions'
  // (entry probes at the stack check's jump, as newproc1's); 0 when any is
  // missing (a worker fed by a channel then carries what it was created with, until that request ends)
  uint64_t chansend = 0;
  uint64_t chanrecv = 0;
  std::vector<uint64_t> chanrecv_returns;
  // the RET instructions of the blocking receives, runtime.chanrecv1 (`<-ch`) and chanrecv2 (`v, ok := <-ch`), probed
  // instead of chanrecv's when every one the binary has decodes (a select's or non-blocking receive then meets no RET
  // probe, which the kernel single-steps); none when not
  std::vector<uint64_t> chanrecv1_returns;
  std::vector<uint64_t> chanrecv2_returns;
  // with those RETs, the receive's start is looked at in the same two functions, at their one `CALL runtime.chanrecv`
  // (emulated, as the RETs are the blocking receives'): a select's or non-blocking receive then runs no probe at all
  std::vector<uint64_t> chanrecv_calls;
  // where the runtime keeps a goroutine's creator and `go` statement (offsets 0: not known)
  GoLayout layout;
};

GoBinary InspectGoBinary(const std::string& path);

// The Go version in a .go.buildinfo section's bytes (Go 1.18+'s inline form), or "".
std::string GoBuildVersion(const std::vector<uint8_t>& buildinfo);

}  // namespace kreplay
