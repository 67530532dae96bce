// The pod sandbox ("pause") process of the test node's containerd: it holds the
// pod's namespaces open, reaps the zombies it inherits as the pod's PID 1 and
// exits 0 on SIGINT or SIGTERM. Built here (no registry is reachable), static,
// into the one-file image tools/image/build.py writes.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		os.Stdout.WriteString("pause (cozyrender test node)\n")
		return
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
