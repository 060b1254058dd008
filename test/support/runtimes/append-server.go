// The server-cost benchmark's Go net/http server (bench/server-cost.ts): each request appends a line
// to one file and is answered, over keep-alive connections.
// Usage: append-server FILE (prints its port).
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	f, err := os.OpenFile(os.Args[1], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		panic(err)
	}
	line := []byte("a request\n")
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		f.Write(line)
		w.Write([]byte("ok\n"))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	http.Serve(ln, nil)
}
