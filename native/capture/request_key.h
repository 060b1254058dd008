// What a request asks, recognised from its first bytes, so that `replay --exec`
// can match a response to the request it answers rather than by order. The
// capture keeps the first KR_REQUEST_DATA_LEN bytes of each request (the first
// send on a socket after a response) and the agent stores their key; the relay
// computes the key of the build's request from the same number of bytes. One
// owner for both sides: docs/replay.md "How a request is recognised".
//
// The shape is the request with its literal values replaced, as
// pg_stat_statements does:
// - Redis (RESP, or an inline command): `redis GET`, `redis CLIENT SETNAME`;
// - PostgreSQL: `pg query SELECT * FROM t WHERE id = ?` (Query and Parse),
//   `pg startup`, `pg ssl`, `pg B` (other messages by type);
// - MySQL: `mysql query SELECT ?`, `mysql prepare …`, `mysql command 14`;
// - HTTP/1.x: `http GET /users/?` (the path without its query, digits
//   replaced);
// - anything else: `unknown` (such responses match by order).
#pragma once

#include <linux/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "capture.h"

namespace kreplay {

// Bytes of a request its key is made from: the capture keeps as many.
constexpr size_t kRequestBytes = KR_REQUEST_DATA_LEN;

// The shape of the request whose first bytes are data[0, len).
std::string RequestShape(const uint8_t* data, size_t len);

// A 32-bit key of RequestShape (never 0, which stands for "not recorded").
uint32_t RequestKey(const uint8_t* data, size_t len);

}  // namespace kreplay
