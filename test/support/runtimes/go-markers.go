// Goroutines that each write a KREPLAY-CTX marker, then files across sleeps (so they resume on
// other threads): each file belongs to the transaction its goroutine's marker named.
// Usage: go-markers DIR GOROUTINES (prints "ready", starts on a line from stdin).
package main

import (
	"bufio"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

func main() {
	dir := os.Args[1]
	n, _ := strconv.Atoi(os.Args[2])
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			os.WriteFile("/dev/null", []byte(fmt.Sprintf("KREPLAY-CTX txn=marker-%d\n", i)), 0)
			for j := 0; j < 3; j++ {
				time.Sleep(time.Duration(rand.Intn(5)) * time.Millisecond)
				os.WriteFile(filepath.Join(dir, fmt.Sprintf("marker-%d.%d", i, j)), []byte("x\n"), 0o644)
			}
		}(i)
	}
	wg.Wait()
}
