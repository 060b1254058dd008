// The reading side of the capture's BPF ring buffer, with its data mapped
// once. libbpf's ring_buffer maps the data twice, back to back, so that a
// record across the end reads as one piece; both mappings count in the
// agent's RSS (a 64 MiB ring was 128 MiB of it, issue 14). Here the rare
// record across the end is copied together instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace kreplay {

class RingReader {
 public:
  // Maps the ring of the BPF_MAP_TYPE_RINGBUF map `map_fd` (data_bytes, a
  // power of two); throws CaptureFailure.
  RingReader(int map_fd, uint32_t data_bytes);
  ~RingReader();
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;

  // Waits up to timeout_ms until the kernel signals records; >= 0, or a negative errno.
  int Wait(int timeout_ms);
  // Hands every committed record to `sink` in order, freeing its space as it
  // goes, and returns how many it handed (discarded records are skipped).
  int Consume(const std::function<void(const uint8_t*, size_t)>& sink);
  // Share of the ring holding unread records, 0..1.
  double Fill() const;

 private:
  void Unmap();

  int epoll_fd_ = -1;
  uint64_t* consumer_ = nullptr;  // the consumer position's page, the one page user space may write
  void* producer_map_ = nullptr;  // the producer position's page, then the data once
  size_t page_ = 0;
  size_t producer_map_bytes_ = 0;
  const uint64_t* producer_ = nullptr;
  const uint8_t* data_ = nullptr;
  uint64_t mask_ = 0;
  std::vector<uint8_t> wrapped_;
};

}  // namespace kreplay
