#include "ring_reader.h"

#include <linux/bpf.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "capture_error.h"

namespace kreplay {

RingReader::RingReader(int map_fd, uint32_t data_bytes) {
  page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  mask_ = data_bytes - 1;
  // The kernel's layout: the consumer position's page, the producer position's page, then the
  // data (which the kernel offers twice; only the first copy is mapped here).
  void* consumer = mmap(nullptr, page_, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
  if (consumer == MAP_FAILED) throw LibbpfFailure(-errno, "E_CAPTURE_RINGBUF", "cannot map the ring buffer", "");
  consumer_ = static_cast<uint64_t*>(consumer);
  producer_map_bytes_ = page_ + data_bytes;
  void* producer = mmap(nullptr, producer_map_bytes_, PROT_READ, MAP_SHARED, map_fd, static_cast<off_t>(page_));
  if (producer == MAP_FAILED) {
    const int err = errno;
    Unmap();
    throw LibbpfFailure(-err, "E_CAPTURE_RINGBUF", "cannot map the ring buffer", "");
  }
  producer_map_ = producer;
  producer_ = static_cast<const uint64_t*>(producer);
  data_ = static_cast<const uint8_t*>(producer) + page_;
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event event = {};
  event.events = EPOLLIN;
  if (epoll_fd_ < 0 || epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, map_fd, &event) != 0) {
    const int err = errno;
    Unmap();
    throw LibbpfFailure(-err, "E_CAPTURE_RINGBUF", "cannot wait on the ring buffer", "");
  }
}

RingReader::~RingReader() { Unmap(); }

void RingReader::Unmap() {
  if (epoll_fd_ >= 0) close(epoll_fd_);
  epoll_fd_ = -1;
  if (producer_map_) munmap(producer_map_, producer_map_bytes_);
  producer_map_ = nullptr;
  if (consumer_) munmap(consumer_, page_);
  consumer_ = nullptr;
}

int RingReader::Wait(int timeout_ms) {
  struct epoll_event event;
  const int n = epoll_wait(epoll_fd_, &event, 1, timeout_ms);
  return n < 0 ? -errno : n;
}

// The protocol of libbpf's ringbuf_process_ring: a record's length word is
// read with acquire semantics, a busy one ends the round (the producer has
// not committed it yet), and the consumer position is released after each
// record so that the kernel can reuse its space at once.
int RingReader::Consume(const std::function<void(const uint8_t*, size_t)>& sink) {
  constexpr uint32_t kFlags = BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT;
  uint64_t consumer = __atomic_load_n(consumer_, __ATOMIC_ACQUIRE);
  int handed = 0;
  bool progressed = true;
  while (progressed) {
    progressed = false;
    const uint64_t producer = __atomic_load_n(producer_, __ATOMIC_ACQUIRE);
    while (consumer < producer) {
      // Heads are 8-aligned and the data a power of two of at least a page: a head never wraps.
      const auto* head = reinterpret_cast<const uint32_t*>(data_ + (consumer & mask_));
      const uint32_t word = __atomic_load_n(head, __ATOMIC_ACQUIRE);
      if (word & BPF_RINGBUF_BUSY_BIT) return handed;
      progressed = true;
      const uint32_t size = word & ~kFlags;
      const uint64_t start = (consumer + BPF_RINGBUF_HDR_SZ) & mask_;
      consumer += (static_cast<uint64_t>(size) + BPF_RINGBUF_HDR_SZ + 7) & ~uint64_t{7};
      if (!(word & BPF_RINGBUF_DISCARD_BIT)) {
        const uint64_t to_end = mask_ + 1 - start;
        if (size <= to_end) {
          sink(data_ + start, size);
        } else {
          wrapped_.assign(data_ + start, data_ + start + to_end);
          wrapped_.insert(wrapped_.end(), data_, data_ + (size - to_end));
          sink(wrapped_.data(), size);
        }
        handed++;
      }
      __atomic_store_n(consumer_, consumer, __ATOMIC_RELEASE);
    }
  }
  return handed;
}

double RingReader::Fill() const {
  const uint64_t used = __atomic_load_n(producer_, __ATOMIC_ACQUIRE) - __atomic_load_n(consumer_, __ATOMIC_ACQUIRE);
  const double fill = static_cast<double>(used) / static_cast<double>(mask_ + 1);
  return fill > 1 ? 1 : fill;
}

}  // namespace kreplay
