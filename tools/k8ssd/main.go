// Command cozyrender-k8s-sd runs Prometheus' own Kubernetes service discovery (the
// github.com/prometheus/prometheus/discovery/kubernetes package, through its discovery
// manager) for the kubernetes_sd_configs of each job in a scrape configuration, and serves
// what it discovers as HTTP service discovery: GET /sd/<job_name> answers the job's targets,
// one group per target, with every __meta_kubernetes_* label Prometheus' Kubernetes SD gives.
//
// Debian's prometheus is built without the Kubernetes SD (it keeps http_sd_configs), so the
// tests pair it with this command: the scrape configuration is the one an operator generates
// (tools/scrape_objects.py), its kubernetes_sd_configs handed here unchanged and replaced, in
// what Debian's Prometheus reads, by an http_sd_configs entry pointing here. Relabeling,
// honor_labels, TLS and scraping stay Prometheus' own.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/kubernetes"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"gopkg.in/yaml.v2"
)

type job struct {
	Name       string                 `yaml:"job_name"`
	Kubernetes []*kubernetes.SDConfig `yaml:"kubernetes_sd_configs"`
	Rest       map[string]interface{} `yaml:",inline"`
}

type group struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

func main() {
	config := flag.String("config", "", "a Prometheus configuration: its scrape_configs' kubernetes_sd_configs are run")
	listen := flag.String("listen", "127.0.0.1:0", "where to serve /sd/<job_name>")
	flag.Parse()
	if err := run(*config, *listen); err != nil {
		fmt.Fprintf(os.Stderr, "cozyrender-k8s-sd: error: %v\n", err)
		os.Exit(2)
	}
}

func run(path, listen string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var file struct {
		ScrapeConfigs []job `yaml:"scrape_configs"`
	}
	if err := yaml.UnmarshalStrict(raw, &file); err != nil {
		return err
	}
	configs := map[string]discovery.Configs{}
	for _, j := range file.ScrapeConfigs {
		for _, c := range j.Kubernetes {
			configs[j.Name] = append(configs[j.Name], c)
		}
	}
	logger := promslog.New(&promslog.Config{})
	registry := prometheus.NewRegistry()
	metrics, err := discovery.CreateAndRegisterSDMetrics(registry)
	if err != nil {
		return err
	}
	ctx := context.Background()
	manager := discovery.NewManager(ctx, logger, registry, metrics)
	if manager == nil {
		return fmt.Errorf("the discovery manager did not start")
	}
	go manager.Run()
	if err := manager.ApplyConfig(configs); err != nil {
		return err
	}
	var mu sync.Mutex
	current := map[string][]group{}
	go func() {
		for update := range manager.SyncCh() {
			mu.Lock()
			for name, groups := range update {
				current[name] = flatten(groups)
			}
			mu.Unlock()
		}
	}()
	http.HandleFunc("/sd/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		groups, ok := current[strings.TrimPrefix(r.URL.Path, "/sd/")]
		mu.Unlock()
		if !ok {
			groups = []group{}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(groups)
	})
	return http.ListenAndServe(listen, nil)
}

func flatten(groups []*targetgroup.Group) []group {
	out := []group{}
	for _, g := range groups {
		for _, target := range g.Targets {
			labels := map[string]string{}
			for k, v := range g.Labels {
				labels[string(k)] = string(v)
			}
			for k, v := range target {
				labels[string(k)] = string(v)
			}
			address := labels[model.AddressLabel]
			delete(labels, model.AddressLabel)
			out = append(out, group{Targets: []string{address}, Labels: labels})
		}
	}
	return out
}
