// Starts goroutines and receives from channels on command, for tests that count the Go probes' runs
// (go-probe-runs.test.ts). Each stdin line is "OP N"; "done" is printed when it is over.
//
//	spawn N: N goroutines (`go` statements), waited for
//	poll N:  N non-blocking receives (a select with a default), as net/http's context.WithCancel makes
//	recv N:  N blocking sends and N blocking receives on a buffered channel (in batches of its capacity)
//
// The GC is off: its mark workers are goroutines the runtime would start at its first cycle.
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
)

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func main() {
	debug.SetGCPercent(-1)
	empty := make(chan int)
	buffered := make(chan int, 1024)
	in := bufio.NewScanner(os.Stdin)
	fmt.Println("ready")
	for in.Scan() {
		var op string
		var n int
		fmt.Sscan(in.Text(), &op, &n)
		switch op {
		case "spawn":
			var wg sync.WaitGroup
			wg.Add(n)
			for i := 0; i < n; i++ {
				go wg.Done()
			}
			wg.Wait()
		case "poll":
			for i := 0; i < n; i++ {
				select {
				case <-empty:
				default:
				}
			}
		case "recv":
			for left := n; left > 0; left -= cap(buffered) {
				batch := min(left, cap(buffered))
				for i := 0; i < batch; i++ {
					buffered <- i
				}
				for i := 0; i < batch; i++ {
					<-buffered
				}
			}
		}
		fmt.Println("done")
	}
}
