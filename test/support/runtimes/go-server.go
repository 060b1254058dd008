// A realistic Go net/http handler for attribution accuracy: it sleeps 0-20 ms, GETs an upstream
// through the default client's pool, then writes a file named by the request's x-request-id.
// Usage: go-server DIR UPSTREAM_PORT (prints its port).
package main

import (
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
	dir, upstream := os.Args[1], "http://127.0.0.1:"+os.Args[2]+"/"
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		time.Sleep(time.Duration(rand.Intn(20)) * time.Millisecond)
		if answer, err := http.Get(upstream); err == nil {
			io.Copy(io.Discard, answer.Body)
			answer.Body.Close()
		}
		os.WriteFile(filepath.Join(dir, id+".go"), []byte("written by a goroutine\n"), 0o644)
		io.WriteString(w, "ok")
	})
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println(listener.Addr().(*net.TCPAddr).Port)
	http.Serve(listener, nil)
}
