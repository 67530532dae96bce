// A device plugin for the test node: it advertises GPU resource names with a
// count of devices each (for example nvidia.com/GA100=4) to the kubelet through
// the device plugin API (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1), so Node
// allocatable for those names comes from the kubelet and the scheduler and the
// kubelet count the pods that request them. No hardware is behind the devices:
// Allocate hands the container the IDs it was given in an environment variable.
//
//	deviceplugin --resource nvidia.com/GA100=4 [--resource example.com/gpu=2] \
//	    [--plugin-dir /var/lib/kubelet/device-plugins]
//
// One gRPC server per resource name, each on its own socket in the plugin
// folder, made once the kubelet's socket is there and registered with it; made and
// registered again when the kubelet's socket is created anew (a kubelet restart
// forgets its plugins and removes their sockets).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// EnvDevices is the variable Allocate sets to the comma-separated device IDs.
const EnvDevices = "COZYRENDER_GPU_DEVICES"

type resources []string

func (r *resources) String() string     { return strings.Join(*r, ",") }
func (r *resources) Set(v string) error { *r = append(*r, v); return nil }

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	resource string
	devices  []*pluginapi.Device
	socket   string
	server   *grpc.Server
}

func newPlugin(spec, dir string) (*plugin, error) {
	name, countText, ok := strings.Cut(spec, "=")
	count, err := strconv.Atoi(countText)
	if !ok || err != nil || count < 1 || !strings.Contains(name, "/") {
		return nil, fmt.Errorf("--resource %q: want NAME=COUNT with a domain-prefixed name and a count of at least 1", spec)
	}
	devices := make([]*pluginapi.Device, count)
	base := strings.NewReplacer("/", "-", ".", "-").Replace(name)
	for i := range devices {
		devices[i] = &pluginapi.Device{ID: fmt.Sprintf("%s-%d", base, i), Health: pluginapi.Healthy}
	}
	return &plugin{resource: name, devices: devices, socket: filepath.Join(dir, "cozyrender-"+base+".sock")}, nil
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the devices once; they never change health.
func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

func (p *plugin) Allocate(_ context.Context, request *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	response := &pluginapi.AllocateResponse{}
	for _, container := range request.ContainerRequests {
		response.ContainerResponses = append(response.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{EnvDevices: strings.Join(container.DevicesIds, ",")},
		})
	}
	return response, nil
}

func (p *plugin) serve() error {
	_ = os.Remove(p.socket)
	listener, err := net.Listen("unix", p.socket)
	if err != nil {
		return err
	}
	p.server = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.server, p)
	go func() {
		if err := p.server.Serve(listener); err != nil {
			log.Printf("%s: serve: %v", p.resource, err)
		}
	}()
	return nil
}

func (p *plugin) stop() {
	if p.server != nil {
		p.server.Stop()
		p.server = nil
	}
	_ = os.Remove(p.socket)
}

func (p *plugin) register(kubeletSocket string) error {
	conn, err := grpc.NewClient("unix://"+kubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: filepath.Base(p.socket), ResourceName: p.resource,
	})
	return err
}

// registerAll waits for the kubelet's socket, serves every plugin on a fresh socket (a
// starting kubelet empties the folder of sockets made before it) and registers them,
// retrying until the kubelet accepts.
func registerAll(plugins []*plugin, kubeletSocket string, stop <-chan os.Signal) bool {
	for {
		var err error
		if socketID(kubeletSocket) == 0 {
			err = fmt.Errorf("no kubelet socket yet")
		}
		for _, p := range plugins {
			if err != nil {
				break
			}
			p.stop()
			if err = p.serve(); err == nil {
				err = p.register(kubeletSocket)
			}
		}
		if err == nil {
			for _, p := range plugins {
				log.Printf("registered %s: %d devices", p.resource, len(p.devices))
			}
			return true
		}
		log.Printf("register with %s: %v (retrying)", kubeletSocket, err)
		select {
		case <-stop:
			return false
		case <-time.After(time.Second):
		}
	}
}

func socketID(path string) uint64 {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return 0
	}
	return st.Ino
}

func main() {
	var specs resources
	flag.Var(&specs, "resource", "NAME=COUNT to advertise (repeatable), e.g. nvidia.com/GA100=4")
	dir := flag.String("plugin-dir", pluginapi.DevicePluginPath, "the kubelet's device plugin folder")
	flag.Parse()
	if len(specs) == 0 {
		fmt.Fprintln(os.Stderr, "deviceplugin: error: give at least one --resource NAME=COUNT")
		os.Exit(2)
	}
	// The kubelet makes this folder at its start; the plugin may start first.
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "deviceplugin: error: %v\n", err)
		os.Exit(1)
	}
	var plugins []*plugin
	for _, spec := range specs {
		p, err := newPlugin(spec, *dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "deviceplugin: error: %v\n", err)
			os.Exit(2)
		}
		plugins = append(plugins, p)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	kubeletSocket := filepath.Join(*dir, filepath.Base(pluginapi.KubeletSocket))
	if registerAll(plugins, kubeletSocket, stop) {
		registered := socketID(kubeletSocket)
		ticker := time.NewTicker(time.Second)
	watch:
		for {
			select {
			case <-stop:
				break watch
			case <-ticker.C:
				// A restarted kubelet makes its socket anew and has forgotten every plugin.
				if id := socketID(kubeletSocket); id != 0 && id != registered {
					if !registerAll(plugins, kubeletSocket, stop) {
						break watch
					}
					registered = id
				}
			}
		}
	}
	for _, p := range plugins {
		p.stop()
	}
}
