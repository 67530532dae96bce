// cozyrender-cert-manager-controller: cert-manager v1.21's certificate controllers, run from
// the github.com/cert-manager/cert-manager library module. The proxy does not serve the
// upstream command module (github.com/cert-manager/cert-manager/cmd/controller: 404), so this
// small command wires the library's registered controllers itself.
//
// Only what a self-signed or CA-backed Certificate needs is linked in: Issuer readiness,
// CertificateRequest approval, the selfSigned and ca signers and the Certificate life-cycle
// controllers. No ACME, Vault or Venafi code is compiled in, so nothing here resolves or
// dials anything but the API server.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	// Each import registers its controller (controllerpkg.Register) or issuer type in init().
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file; empty: the pod's service account")
	master := flag.String("master", "", "API server address; overrides the kubeconfig's")
	namespace := flag.String("namespace", "", "watch only this namespace; empty: all")
	clusterNS := flag.String("cluster-resource-namespace", "cert-manager", "namespace of ClusterIssuers' Secrets")
	healthAddr := flag.String("health-address", ":9403", "address of /healthz (empty: off)")
	workers := flag.Int("workers", 2, "workers per controller")
	klog.InitFlags(nil)
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "cozyrender-cert-manager-controller: error: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := logf.Log.WithName("controller")
	ctx = logf.NewContext(ctx, log)

	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		APIServerHost: *master,
		Kubeconfig:    *kubeconfig,
		Namespace:     *namespace,
		IssuerOptions: controllerpkg.IssuerOptions{ClusterResourceNamespace: *clusterNS},
		CertificateOptions: controllerpkg.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Minute,
			CertificateRequestMaximumBackoffDuration: time.Hour,
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "cozyrender-cert-manager-controller: error: %v\n", err)
		os.Exit(2)
	}

	known := controllerpkg.Known()
	names := make([]string, 0, len(known))
	for name := range known {
		names = append(names, name)
	}
	sort.Strings(names)
	controllers := make([]controllerpkg.Interface, 0, len(names))
	for _, name := range names {
		c, err := known[name](factory)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cozyrender-cert-manager-controller: error: controller %s: %v\n", name, err)
			os.Exit(1)
		}
		controllers = append(controllers, c)
	}
	log.Info("controllers", "names", names)

	// The informer factories are shared by every Context the factory builds; start them once
	// all controllers have asked for their informers.
	shared, err := factory.Build()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cozyrender-cert-manager-controller: error: %v\n", err)
		os.Exit(1)
	}

	g, gctx := errgroup.WithContext(ctx)
	for _, c := range controllers {
		c := c
		g.Go(func() error { return c.Run(*workers, gctx) })
	}
	shared.KubeSharedInformerFactory.Start(gctx.Done())
	shared.SharedInformerFactory.Start(gctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(gctx.Done())

	if *healthAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		srv := &http.Server{Addr: *healthAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		g.Go(func() error {
			go func() { <-gctx.Done(); _ = srv.Close() }()
			if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
				return err
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "cozyrender-cert-manager-controller: error: %v\n", err)
		os.Exit(1)
	}
}
