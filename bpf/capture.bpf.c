// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Every kernel program of kreplay, one object for the loader, one concern
 * per header of bpf/capture/: the syscall types (writes and sends, reads,
 * fsync, connect), request-head sniffing (contexts), target resolution,
 * task tracking and block I/O. Records go into one ring buffer in the
 * layouts of capture.h.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "capture.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#include "capture/maps.h"
#include "capture/restarts.h"
#include "capture/targets.h"
#include "capture/lifetime.h"
#include "capture/units.h"
#include "capture/goprocs.h"
#include "capture/heads.h"
#include "capture/tls.h"
#include "capture/golang.h"
#include "capture/uvpool.h"
#include "capture/calls.h"
#include "capture/writes.h"
#include "capture/reads.h"
#include "capture/fsync.h"
#include "capture/connect.h"
#include "capture/signals.h"
#include "capture/tasks.h"
#include "capture/block.h"
