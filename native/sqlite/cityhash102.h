/* CityHash128 as of CityHash v1.0.2: the checksum of ClickHouse's compressed blocks. */
#ifndef KREPLAY_CITYHASH102_H
#define KREPLAY_CITYHASH102_H

#include <stddef.h>
#include <stdint.h>

/* out[0] is the low half, out[1] the high half, as ClickHouse writes them (little-endian, low first) */
void kreplay_cityhash102_128(const unsigned char *s, size_t len, uint64_t out[2]);

#endif
