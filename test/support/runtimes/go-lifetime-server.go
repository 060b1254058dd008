// Work that outlives the request that started it, in Go's usual shapes:
//   - /once: a worker goroutine the first request starts (sync.Once), fed one job per request
//     over a channel; the worker writes <x-request-id>.worker, the handler <x-request-id>.handler;
//   - /loop: a library-style background loop the first request starts, writing loop.<n> every few
//     milliseconds for ever; /loop and /mark answer with the last n written.
//
// Usage: go-lifetime-server DIR (prints its port).
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

type job struct {
	id   string
	done chan struct{}
}

func main() {
	dir := os.Args[1]
	write := func(name string) { os.WriteFile(filepath.Join(dir, name), []byte(name+"\n"), 0o644) }

	jobs := make(chan *job)
	var startWorker sync.Once
	http.HandleFunc("/once", func(w http.ResponseWriter, r *http.Request) {
		startWorker.Do(func() {
			go func() {
				for j := range jobs {
					write(j.id + ".worker")
					close(j.done)
				}
			}()
		})
		id := r.Header.Get("X-Request-Id")
		j := &job{id: id, done: make(chan struct{})}
		jobs <- j
		<-j.done
		write(id + ".handler")
		w.Write([]byte("ok"))
	})

	var written atomic.Int64
	var startLoop sync.Once
	http.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		startLoop.Do(func() {
			go func() {
				for {
					write("loop." + strconv.FormatInt(written.Load()+1, 10))
					written.Add(1)
					time.Sleep(2 * time.Millisecond)
				}
			}()
		})
		w.Write([]byte(strconv.FormatInt(written.Load(), 10)))
	})
	http.HandleFunc("/mark", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strconv.FormatInt(written.Load(), 10)))
	})

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println(listener.Addr().(*net.TCPAddr).Port)
	http.Serve(listener, nil)
}
