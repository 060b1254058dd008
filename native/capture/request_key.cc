#include "request_key.h"

#include <cctype>
#include <cstring>

namespace kreplay {

namespace {

bool Digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool Word(uint8_t c) { return std::isalnum(c) || c == '_' || c == '$' || c >= 0x80; }

uint32_t Be32(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
         (static_cast<uint32_t>(p[2]) << 8) | p[3];
}

std::string Upper(const uint8_t* p, size_t n) {
  std::string out(reinterpret_cast<const char*>(p), n);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// SQL text with its literal values replaced by `?` and runs of white space by one space. A literal
// the window cut short is still a `?`, so both sides of a match cut the same way.
std::string NormalizeSql(const uint8_t* p, size_t n) {
  std::string out;
  size_t i = 0;
  auto space = [&out] {
    if (!out.empty() && out.back() != ' ') out.push_back(' ');
  };
  while (i < n && p[i] != 0) {
    const uint8_t c = p[i];
    if (std::isspace(c)) {
      space();
      i++;
    } else if (c == '\'') {
      // a string literal; '' is a quote inside it
      for (i++; i < n; i++) {
        if (p[i] != '\'') continue;
        if (i + 1 < n && p[i + 1] == '\'') {
          i++;
          continue;
        }
        i++;
        break;
      }
      out.push_back('?');
    } else if (Digit(c) && (i == 0 || !Word(p[i - 1]))) {
      while (i < n && (Digit(p[i]) || p[i] == '.')) i++;
      if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < n && (p[i] == '+' || p[i] == '-')) i++;
        while (i < n && Digit(p[i])) i++;
      }
      out.push_back('?');
    } else {
      out.push_back(static_cast<char>(c));
      i++;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// RESP: an array of bulk strings, the command first ("*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n").
bool Resp(const uint8_t* p, size_t n, std::string* shape) {
  if (n < 4 || p[0] != '*' || !Digit(p[1])) return false;
  size_t i = 1;
  while (i < n && Digit(p[i])) i++;
  if (i + 1 >= n || p[i] != '\r' || p[i + 1] != '\n') return false;
  i += 2;
  std::string words[2];
  int count = 0;
  for (; count < 2 && i < n && p[i] == '$'; count++) {
    size_t len = 0, j = i + 1;
    while (j < n && Digit(p[j]) && len < 1'000'000) len = len * 10 + (p[j++] - '0');
    if (j + 1 >= n || p[j] != '\r' || p[j + 1] != '\n') break;
    j += 2;
    const size_t have = std::min(len, n - j);
    words[count] = Upper(p + j, have);
    if (have < len) {
      count++;
      break;
    }
    i = j + len + 2;
  }
  if (count == 0) return false;
  // commands whose first argument names what they do, not a value
  static const char* const kContainers[] = {"CLIENT",   "CONFIG", "CLUSTER", "COMMAND", "OBJECT", "MEMORY", "SCRIPT",
                                            "FUNCTION", "XINFO",  "XGROUP",  "ACL",     "MODULE", "DEBUG",  "PUBSUB"};
  *shape = "redis " + words[0];
  for (const char* container : kContainers)
    if (words[0] == container && count > 1) *shape += " " + words[1];
  return true;
}

// HTTP/1.x: the method and the path without its query, digit runs replaced.
bool Http(const uint8_t* p, size_t n, std::string* shape) {
  static const char* const kMethods[] = {"GET ",     "HEAD ",  "POST ",  "PUT ",    "DELETE ",
                                         "OPTIONS ", "PATCH ", "TRACE ", "CONNECT "};
  for (const char* method : kMethods) {
    const size_t m = strlen(method);
    if (n <= m || memcmp(p, method, m) != 0) continue;
    // a request target: a path, `*`, or an absolute URL (else a text command such as Redis's inline GET)
    if (p[m] != '/' && p[m] != '*' && (n < m + 4 || memcmp(p + m, "http", 4) != 0)) return false;
    std::string path;
    for (size_t i = m; i < n && p[i] != ' ' && p[i] != '?' && p[i] != '\r' && p[i] != '\n';) {
      if (Digit(p[i])) {
        while (i < n && Digit(p[i])) i++;
        path.push_back('?');
      } else {
        path.push_back(static_cast<char>(p[i++]));
      }
    }
    *shape = "http " + std::string(method, m - 1) + " " + path;
    return true;
  }
  if (n >= 14 && memcmp(p, "PRI * HTTP/2.0", 14) == 0) {
    *shape = "http2";
    return true;
  }
  return false;
}

// PostgreSQL's frontend messages: a start-up packet (no type byte), or a type byte and a length.
bool Postgres(const uint8_t* p, size_t n, std::string* shape) {
  if (n >= 8 && p[0] == 0) {
    const uint32_t len = Be32(p), code = Be32(p + 4);
    if (len < 8 || len > 10'000) return false;
    if (code == 196608)
      *shape = "pg startup";
    else if (code == 80877103)
      *shape = "pg ssl";
    else if (code == 80877104)
      *shape = "pg gss";
    else if (code == 80877102)
      *shape = "pg cancel";
    else
      return false;
    return true;
  }
  if (n < 5 || !strchr("QPBEDSCHFXpfdc", p[0]) || p[0] == 0) return false;
  const uint32_t len = Be32(p + 1);
  if (len < 4 || len >= (1u << 30)) return false;
  const uint8_t* body = p + 5;
  const size_t have = n - 5;
  if (p[0] == 'Q') {
    *shape = "pg query " + NormalizeSql(body, have);
  } else if (p[0] == 'P') {
    // Parse: the statement's name, then its query
    const void* end = memchr(body, 0, have);
    const size_t skip = end ? static_cast<const uint8_t*>(end) - body + 1 : have;
    *shape = "pg query " + NormalizeSql(body + skip, have - skip);
  } else {
    *shape = std::string("pg ") + static_cast<char>(p[0]);
  }
  return true;
}

// MySQL's client commands: a 3-byte length, sequence 0, the command byte.
bool Mysql(const uint8_t* p, size_t n, std::string* shape) {
  if (n < 5 || p[3] != 0) return false;
  const uint32_t len = p[0] | (p[1] << 8) | (p[2] << 16);
  if (len == 0) return false;
  switch (p[4]) {
    case 0x03:
      *shape = "mysql query " + NormalizeSql(p + 5, n - 5);
      return true;
    case 0x16:
      *shape = "mysql prepare " + NormalizeSql(p + 5, n - 5);
      return true;
    case 0x01:
    case 0x02:
    case 0x0e:
    case 0x17:
    case 0x19:
    case 0x1a:
      *shape = "mysql command " + std::to_string(p[4]);
      return true;
    default:
      return false;
  }
}

// A line-based text command (Redis's inline form, memcached, SMTP…): its first word.
bool Line(const uint8_t* p, size_t n, std::string* shape) {
  size_t i = 0;
  while (i < n && std::isalpha(p[i])) i++;
  if (i == 0 || i > 32 || i >= n || (p[i] != ' ' && p[i] != '\r' && p[i] != '\n')) return false;
  for (size_t j = i; j < n && p[j] != '\n'; j++)
    if (!std::isprint(p[j]) && p[j] != '\r' && p[j] != '\t') return false;
  *shape = "line " + Upper(p, i);
  return true;
}

// A TLS record (SSL 3.0 to TLS 1.3 framing): its plaintext is out of reach of an unprivileged replay,
// so a request is known only by its record type (a ClientHello, other handshake records, a
// ChangeCipherSpec, an alert, application data); equal ones match by order. Never by ciphertext.
bool Tls(const uint8_t* p, size_t n, std::string* shape) {
  // record header: type, version 3.x, a length no record exceeds (2^14 plus expansion)
  if (n < 5 || p[0] < 0x14 || p[0] > 0x17 || p[1] != 3 || p[2] > 4) return false;
  const size_t length = (static_cast<size_t>(p[3]) << 8) | p[4];
  if (length == 0 || length > (1 << 14) + 2048) return false;
  switch (p[0]) {
    case 0x14:
      *shape = "tls change_cipher_spec";
      break;
    case 0x15:
      *shape = "tls alert";
      break;
    case 0x16:
      *shape = n > 5 && p[5] == 1 ? "tls client_hello" : "tls handshake";
      break;
    default:
      *shape = "tls application_data";
  }
  return true;
}

}  // namespace

std::string RequestShape(const uint8_t* data, size_t len) {
  std::string shape;
  if (Tls(data, len, &shape) || Http(data, len, &shape) || Resp(data, len, &shape) || Postgres(data, len, &shape) ||
      Mysql(data, len, &shape) || Line(data, len, &shape))
    return shape;
  return "unknown";
}

uint32_t RequestKey(const uint8_t* data, size_t len) {
  // FNV-1a
  uint32_t hash = 2166136261u;
  for (const char c : RequestShape(data, len)) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 16777619u;
  }
  return hash == 0 ? 1 : hash;
}

}  // namespace kreplay
