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

// A C string at p[0, n) (one the window cut short ends with it).
std::string CString(const uint8_t* p, size_t n, size_t* used) {
  const void* end = memchr(p, 0, n);
  const size_t len = end ? static_cast<const uint8_t*>(end) - p : n;
  *used = end ? len + 1 : n;
  return std::string(reinterpret_cast<const char*>(p), len);
}

// PostgreSQL's start-up packet: `pg startup user=U database=D` (the user and database it asks for).
std::string PostgresStartup(const uint8_t* p, size_t n) {
  std::string user, database;
  for (size_t i = 8; i < n && p[i] != 0;) {
    size_t used;
    const std::string name = CString(p + i, n - i, &used);
    i += used;
    const std::string value = CString(p + i, n - i, &used);
    i += used;
    if (name == "user") user = value;
    if (name == "database") database = value;
  }
  return "pg startup user=" + user + " database=" + (database.empty() ? user : database);
}

// PostgreSQL's frontend messages: a start-up packet (no type byte), or a type byte and a length. The
// extended protocol names its statements and portals: with a connection's state, a Bind, Describe or
// Execute that leads a request is the statement it runs (`pg execute …`; led by its Parse, `pg query
// …`), else `pg B (unknown statement)`.
bool Postgres(const uint8_t* p, size_t n, Statements* state, std::string* shape) {
  if (n >= 8 && p[0] == 0) {
    const uint32_t len = Be32(p), code = Be32(p + 4);
    if (len < 8 || len > 10'000) return false;
    if (code == 196608)
      *shape = PostgresStartup(p, std::min<size_t>(n, len));
    else if (code == 80877103)
      *shape = "pg ssl";
    else if (code == 80877104)
      *shape = "pg gss";
    else if (code == 80877102)
      *shape = "pg cancel";
    else
      return false;
    if (state && code == 196608) state->Clear();
    return true;
  }
  if (n < 5 || !strchr("QPBEDSCHFXpfdc", p[0]) || p[0] == 0) return false;
  const uint32_t len = Be32(p + 1);
  if (len < 4 || len >= (1u << 30)) return false;
  const uint8_t* body = p + 5;
  const size_t have = std::min<size_t>(n - 5, len - 4);
  size_t used;
  if (p[0] == 'Q') {
    *shape = "pg query " + NormalizeSql(body, have);
  } else if (p[0] == 'P') {
    // Parse: the statement's name, then its query
    const std::string name = CString(body, have, &used);
    const std::string sql = NormalizeSql(body + used, have - used);
    *shape = "pg query " + sql;
    if (state) state->Name(name, sql);
  } else if (p[0] == 'B' || p[0] == 'E' || p[0] == 'D') {
    // Bind: a portal, then the statement it binds; Execute: a portal; Describe: 'S' or 'P' and a name
    const bool describe = p[0] == 'D' && have > 0;
    const uint8_t* at = describe ? body + 1 : body;
    const std::string first = CString(at, have - (describe ? 1 : 0), &used);
    std::string statement;
    if (p[0] == 'B') {
      size_t more;
      const std::string name = CString(at + used, have - used, &more);
      statement = state ? state->Find(name) : "";
      if (state) state->Portal(first, statement);
    } else if (state) {
      statement = describe && body[0] == 'S' ? state->Find(first) : state->FindPortal(first);
    }
    // a statement run without its Parse (a named one parsed before) asks less of the server than its Parse
    *shape = std::string("pg ") + (statement.empty() ? std::string(1, static_cast<char>(p[0])) + " (unknown statement)"
                                                     : "execute " + statement);
  } else {
    *shape = std::string("pg ") + static_cast<char>(p[0]);
  }
  return true;
}

uint32_t Le32(const uint8_t* p) {
  return p[0] | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

// MySQL's HandshakeResponse41, the client's login (sequence 1 after the server's greeting): `mysql
// login user=U database=D`, or `mysql ssl` for the short SSL request before a TLS handshake.
bool MysqlLogin(const uint8_t* p, size_t n, Statements* state, std::string* shape) {
  constexpr uint32_t kProtocol41 = 0x200, kWithDb = 0x8, kSecure = 0x8000, kLenencAuth = 0x200000;
  if (n < 36 || p[3] != 1) return false;
  const uint32_t len = p[0] | (p[1] << 8) | (p[2] << 16);
  const uint32_t caps = Le32(p + 4);
  if (len < 32 || !(caps & kProtocol41)) return false;
  // the filler: 19 zero bytes (MariaDB's extended capabilities may follow in the last 4 of 23)
  for (size_t i = 13; i < 32; i++)
    if (p[i] != 0) return false;
  if (state) state->Clear();
  if (len == 32) {
    *shape = "mysql ssl";
    return true;
  }
  size_t used;
  const size_t end = std::min<size_t>(n, len + 4);
  const std::string user = CString(p + 36, end - 36, &used);
  size_t i = 36 + used;
  std::string database;
  if (i < end) {
    size_t auth = 0;
    if (caps & (kLenencAuth | kSecure)) {
      auth = p[i++];  // a length below 251 is one byte in both encodings; auth data is at most 255
      if ((caps & kLenencAuth) && auth >= 251) auth = end;
    } else {
      CString(p + i, end - i, &auth);
    }
    i = std::min(end, i + auth);
    if ((caps & kWithDb) && i < end) database = CString(p + i, end - i, &used);
  }
  *shape = "mysql login user=" + user + " database=" + database;
  return true;
}

// MySQL's client commands: a 3-byte length, sequence 0, the command byte. A prepared statement's
// commands carry its id, which the server gave in its answer to the prepare: with a connection's
// state they are the statement's text (`mysql execute SELECT …`), else `mysql execute (unknown
// statement)`.
bool Mysql(const uint8_t* p, size_t n, Statements* state, std::string* shape) {
  if (n < 5 || p[3] != 0) return false;
  const uint32_t len = p[0] | (p[1] << 8) | (p[2] << 16);
  if (len == 0) return false;
  const size_t have = std::min<size_t>(n, len + 4);
  switch (p[4]) {
    case 0x03:
      *shape = "mysql query " + NormalizeSql(p + 5, have - 5);
      // SQL's PREPARE takes a statement id of the connection's too
      if (state && Upper(p + 5, std::min<size_t>(have - 5, 8)) == "PREPARE ") state->Prepared("", false);
      return true;
    case 0x16:
      *shape = "mysql prepare " + NormalizeSql(p + 5, have - 5);
      if (state) state->Prepared(shape->substr(14), true);
      return true;
    case 0x17:
    case 0x18:
    case 0x19:
    case 0x1a:
    case 0x1c: {
      static const char* const kVerbs[] = {"execute", "long_data", "close", "reset", "", "fetch"};
      const std::string statement = state && have >= 9 ? state->Id(Le32(p + 5)) : "";
      *shape = std::string("mysql ") + kVerbs[p[4] - 0x17] + " " +
               (statement.empty() ? std::string("(unknown statement)") : statement);
      return true;
    }
    case 0x11:
    case 0x1f:
      // COM_CHANGE_USER, COM_RESET_CONNECTION: the connection's statements are gone
      if (state) state->Clear();
      *shape = "mysql command " + std::to_string(p[4]);
      return true;
    case 0x01:
    case 0x02:
    case 0x0e:
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

std::string Statements::Shape(const uint8_t* data, size_t len) {
  std::string shape;
  // a MySQL login before PostgreSQL's messages: its length's low byte may read as one of their types
  if (Tls(data, len, &shape) || Http(data, len, &shape) || Resp(data, len, &shape) ||
      MysqlLogin(data, len, this, &shape) || Postgres(data, len, this, &shape) || Mysql(data, len, this, &shape) ||
      Line(data, len, &shape))
    return shape;
  return "unknown";
}

uint32_t Statements::Key(const uint8_t* data, size_t len) { return KeyOfShape(Shape(data, len)); }

void Statements::Answer(const uint8_t* data, size_t len) {
  if (!pending_) return;
  pending_ = false;
  // COM_STMT_PREPARE_OK: sequence 1, status 0, the statement's id
  if (len < 9 || data[3] != 1 || data[4] != 0) return;
  Remember(&ids_, Le32(data + 5), pending_text_);
  last_ = pending_text_;
}

void Statements::Prepared(const std::string& text, bool protocol) {
  last_ = text;
  if (!infer_) {
    pending_ = protocol;
    pending_text_ = text;
  } else if (counting_) {
    // the server numbers a connection's statements 1, 2, … in the order they are prepared
    Remember(&ids_, ++counter_, text);
  }
}

std::string Statements::Id(uint32_t id) const {
  // MariaDB's -1: the statement prepared last (prepare and execute sent together)
  if (id == UINT32_MAX) return last_;
  auto found = ids_.find(id);
  return found == ids_.end() ? "" : found->second;
}

void Statements::Clear() {
  ids_.clear();
  names_.clear();
  portals_.clear();
  last_.clear();
  pending_ = false;
  counter_ = 0;
  counting_ = true;
}

template <typename K>
void Statements::Remember(std::unordered_map<K, std::string>* map, const K& key, const std::string& shape) {
  // a client that never closes its statements: the ones past the bound are unknown, never wrong
  if (map->size() >= kMaxStatements && !map->count(key)) return;
  (*map)[key] = shape;
}

void Statements::Name(const std::string& name, const std::string& shape) { Remember(&names_, name, shape); }
void Statements::Portal(const std::string& name, const std::string& shape) { Remember(&portals_, name, shape); }

std::string Statements::Find(const std::string& name) const {
  auto found = names_.find(name);
  return found == names_.end() ? "" : found->second;
}

std::string Statements::FindPortal(const std::string& name) const {
  auto found = portals_.find(name);
  return found == portals_.end() ? "" : found->second;
}

std::string RequestShape(const uint8_t* data, size_t len) {
  // no connection: a statement's later commands are unknown
  Statements none(false);
  return none.Shape(data, len);
}

uint32_t KeyOfShape(const std::string& shape) {
  // FNV-1a
  uint32_t hash = 2166136261u;
  for (const char c : shape) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 16777619u;
  }
  return hash == 0 ? 1 : hash;
}

uint32_t RequestKey(const uint8_t* data, size_t len) { return KeyOfShape(RequestShape(data, len)); }

}  // namespace kreplay
