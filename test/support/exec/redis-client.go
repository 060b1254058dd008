// An ordinary Go Redis client: GET cart:42 over RESP from a goroutine (the standard library only,
// as golang-go from apt builds it offline), with a deadline. It prints how long the reply took and
// exits 0 on a reply, 1 when the deadline passed or the call failed.
// Usage: redis-client PORT TIMEOUT_SECONDS
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

func get(port string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+port, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte("*2\r\n$3\r\nGET\r\n$7\r\ncart:42\r\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(conn).ReadString('\n')
}

func main() {
	seconds, _ := strconv.ParseFloat(os.Args[2], 64)
	done := make(chan error)
	start := time.Now()
	// the call runs on a goroutine, so on whichever of Go's threads the scheduler gives it
	go func() {
		_, err := get(os.Args[1], time.Duration(seconds*float64(time.Second)))
		done <- err
	}()
	err := <-done
	fmt.Fprintf(os.Stderr, "redis GET: %.3f s\n", time.Since(start).Seconds())
	if err != nil {
		fmt.Fprintf(os.Stderr, "redis failed: %v\n", err)
		os.Exit(1)
	}
}
