// A Go net/http server over TLS, the ordinary way (ServeTLS: HTTP/2 negotiated by ALPN; with
// "http1", HTTP/1.1 only, as a server with an empty TLSNextProto), for attribution accuracy on
// multiplexed streams and keep-alive connections: each request sleeps 0-20 ms, writes a file named
// by its x-request-id, and has a goroutine it spawns write another.
// Usage: go-h2-server DIR CERT KEY [http1] (prints its port).
package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

func main() {
	dir, cert, key := os.Args[1], os.Args[2], os.Args[3]
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		time.Sleep(time.Duration(rand.Intn(20)) * time.Millisecond)
		os.WriteFile(filepath.Join(dir, id+".go"), []byte("written by the handler\n"), 0o644)
		spawned := make(chan struct{})
		go func() {
			os.WriteFile(filepath.Join(dir, id+".spawned"), []byte("written by a goroutine it spawned\n"), 0o644)
			close(spawned)
		}()
		<-spawned
		io.WriteString(w, r.Proto)
	})
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println(listener.Addr().(*net.TCPAddr).Port)
	server := &http.Server{}
	if len(os.Args) > 4 && os.Args[4] == "http1" {
		server.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	panic(server.ServeTLS(listener, cert, key))
}
