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
#include <unordered_map>

#include "capture.h"

namespace kreplay {

// Bytes of a request its key is made from: the capture keeps as many.
constexpr size_t kRequestBytes = KR_REQUEST_DATA_LEN;

// The shape of the request whose first bytes are data[0, len), with nothing known of its connection.
std::string RequestShape(const uint8_t* data, size_t len);

// What one connection's earlier requests named, so that a later request that names a statement by
// id or name is keyed by the statement's text: MySQL's COM_STMT_EXECUTE, SEND_LONG_DATA, RESET,
// CLOSE and FETCH carry the id the server gave the COM_STMT_PREPARE; PostgreSQL's Bind names a
// statement a Parse named, Execute and Describe a portal a Bind named.
class Statements {
 public:
  // infer: the capture's side, which sees no answer: a MySQL statement's id is the server's count of
  // the connection's prepares (1, 2, …), known only on a connection whose login it saw; the relay's
  // side reads each id from the server's answer (Answer).
  explicit Statements(bool infer) : infer_(infer), counting_(!infer) {}
  // The shape and key of the connection's next request, data[0, len) its first bytes.
  std::string Shape(const uint8_t* data, size_t len);
  uint32_t Key(const uint8_t* data, size_t len);
  // The first bytes of the answer to the last request (the relay: a prepare's statement id).
  void Answer(const uint8_t* data, size_t len);

  // Called by the protocols' parsers.
  void Prepared(const std::string& text, bool protocol);
  std::string Id(uint32_t id) const;
  void Name(const std::string& name, const std::string& shape);
  std::string Find(const std::string& name) const;
  void Portal(const std::string& name, const std::string& shape);
  std::string FindPortal(const std::string& name) const;
  // a new session on the connection (a login, a start-up, a reset): nothing it named before holds
  void Clear();

 private:
  static constexpr size_t kMaxStatements = 1024;
  template <typename K>
  static void Remember(std::unordered_map<K, std::string>* map, const K& key, const std::string& shape);

  const bool infer_;
  // infer: whether the connection's prepares are counted from its start
  bool counting_;
  uint32_t counter_ = 0;
  bool pending_ = false;
  std::string pending_text_, last_;
  std::unordered_map<uint32_t, std::string> ids_;
  std::unordered_map<std::string, std::string> names_, portals_;
};

// A 32-bit key of RequestShape (never 0, which stands for "not recorded").
uint32_t RequestKey(const uint8_t* data, size_t len);
uint32_t KeyOfShape(const std::string& shape);

}  // namespace kreplay
