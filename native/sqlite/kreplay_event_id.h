/*
 * The event id as core/model/event-id.ts formats it: the store id, then ts in 16 and seq in 12
 * lower-case hex digits. Shared by kreplay_event_id() (kreplay_rowbinary.c) and the OTLP spans'
 * kreplay.event_id (kreplay_otlp.c). `out` takes storeLen + 28 bytes; the length is returned.
 */
#ifndef KREPLAY_EVENT_ID_H
#define KREPLAY_EVENT_ID_H

#include <stdint.h>
#include <string.h>

#define KREPLAY_EVENT_ID_DIGITS (16 + 12)

static inline int kreplay_format_event_id(char *out, const void *store, int storeLen, uint64_t ts, uint64_t seq) {
  static const char kHex[] = "0123456789abcdef";
  memcpy(out, store, (size_t)storeLen);
  for (int i = 15; i >= 0; i--, ts >>= 4) out[storeLen + i] = kHex[ts & 15];
  for (int i = 11; i >= 0; i--, seq >>= 4) out[storeLen + 16 + i] = kHex[seq & 15];
  return storeLen + KREPLAY_EVENT_ID_DIGITS;
}

#endif
