// etcd for cozyrender's test control plane: the upstream server's own entry
// point, built from the published Go module go.etcd.io/etcd/server/v3.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
