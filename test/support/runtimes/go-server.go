// A realistic Go net/http handler for attribution accuracy: it sleeps 0-20 ms, GETs an upstream
// through the default client's pool (the path names the request in letters, so the upstream
// request's key tells it), writes a file named by the request's x-request-id, and has a goroutine
// it spawns write another.
// Usage: go-server DIR UPSTREAM_PORT [MAX_SLEEP_MS=20 [ADDRESS=127.0.0.1:0]] (prints its port).
package main

import (
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Each byte of s as two letters a-p: a path whose request key (digits blanked) still tells it.
func letters(s string) string {
	out := make([]byte, 0, 2*len(s))
	for _, c := range []byte(s) {
		out = append(out, 'a'+c>>4, 'a'+c&15)
	}
	return string(out)
}

func main() {
	dir, upstream := os.Args[1], "http://127.0.0.1:"+os.Args[2]+"/"
	maxSleep := 20
	if len(os.Args) > 3 {
		maxSleep, _ = strconv.Atoi(os.Args[3])
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if maxSleep > 0 {
			time.Sleep(time.Duration(rand.Intn(maxSleep)) * time.Millisecond)
		}
		if answer, err := http.Get(upstream + letters(id)); err == nil {
			io.Copy(io.Discard, answer.Body)
			answer.Body.Close()
		}
		os.WriteFile(filepath.Join(dir, id+".go"), []byte("written by the handler\n"), 0o644)
		spawned := make(chan struct{})
		go func() {
			os.WriteFile(filepath.Join(dir, id+".spawned"), []byte("written by a goroutine it spawned\n"), 0o644)
			close(spawned)
		}()
		<-spawned
		io.WriteString(w, "ok")
	})
	address := "127.0.0.1:0"
	if len(os.Args) > 4 {
		address = os.Args[4]
	}
	listener, err := net.Listen("tcp", address)
	if err != nil {
		panic(err)
	}
	fmt.Println(listener.Addr().(*net.TCPAddr).Port)
	http.Serve(listener, nil)
}
