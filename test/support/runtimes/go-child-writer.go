// A Go program a request starts (attribution-lifetime.test.ts): for each line NAME on stdin it writes
// the file DIR/NAME, then prints "ok". Usage: go-child-writer DIR
package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		name := in.Text()
		if err := os.WriteFile(filepath.Join(os.Args[1], name), []byte(name+"\n"), 0o644); err != nil {
			panic(err)
		}
		fmt.Println("ok")
	}
}
