// A DRA driver for the test node: a kubelet plugin, on the kubeletplugin helper of
// k8s.io/dynamic-resource-allocation, that publishes one ResourceSlice for the node with
// N GPU devices of driver gpu.cozyrender.io (gpu-0, gpu-1, ...), each with the attribute
// `model` (a string) and the capacity `memory` (a quantity), so the real kube-scheduler
// allocates ResourceClaims from them and the real kubelet asks this plugin to prepare them.
// No hardware is behind the devices.
//
//	draplugin --node-name NODE --kubeconfig FILE --devices 4 --model A100 --memory 40Gi \
//	    --registry-dir KUBELET_ROOT/plugins_registry --plugin-dir KUBELET_ROOT/plugins/gpu.cozyrender.io \
//	    --cdi-dir DIR
//
// Rule: preparing a claim writes one CDI spec file for it, DIR/gpu.cozyrender.io-<claim uid>.json
// (kind gpu.cozyrender.io/gpu), with a CDI device per allocated device of this driver, named
// <claim uid>-<device> (the claim's UID keeps a name from ever being reused) and setting
// COZYRENDER_DRA_<DEVICE>=<namespace>/<claim> in the container; the kubelet gets those CDI
// device IDs and hands them to the container runtime. Unpreparing a claim removes its file;
// the file is the only state, so both are idempotent and survive a restart of the plugin.
// A device already prepared for another claim is refused.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
)

const (
	// DriverName is the driver of every device published and the DeviceClass's selector.
	DriverName = "gpu.cozyrender.io"
	// CDIKind is the CDI "vendor/class" of the devices handed to the container runtime.
	CDIKind = DriverName + "/gpu"
	// EnvPrefix starts the variable each prepared device sets in the container.
	EnvPrefix = "COZYRENDER_DRA_"
	// CDIVersion is the CDI specification version the spec files follow.
	CDIVersion = "0.6.0"
)

// cdiSpec is a CDI specification file (github.com/cncf-tags/container-device-interface, SPEC.md):
// only the fields this driver writes.
type cdiSpec struct {
	Version string      `json:"cdiVersion"`
	Kind    string      `json:"kind"`
	Devices []cdiDevice `json:"devices"`
}

type cdiDevice struct {
	Name           string         `json:"name"`
	ContainerEdits cdiContainerEd `json:"containerEdits"`
}

type cdiContainerEd struct {
	Env []string `json:"env,omitempty"`
}

type driver struct {
	nodeName string
	cdiDir   string
	cancel   context.CancelCauseFunc
}

var notEnvChar = regexp.MustCompile(`[^A-Za-z0-9]`)

func (d *driver) specPath(uid types.UID) string {
	return filepath.Join(d.cdiDir, fmt.Sprintf("%s-%s.json", DriverName, uid))
}

// inUse maps each device named in another claim's spec file to that claim's UID.
func (d *driver) inUse(except types.UID) (map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(d.cdiDir, DriverName+"-*.json"))
	if err != nil {
		return nil, err
	}
	used := map[string]string{}
	for _, file := range files {
		uid := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(file), DriverName+"-"), ".json")
		if uid == string(except) {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			continue // removed meanwhile
		}
		var spec cdiSpec
		if err := json.Unmarshal(data, &spec); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		for _, device := range spec.Devices {
			used[strings.TrimPrefix(device.Name, uid+"-")] = uid
		}
	}
	return used, nil
}

func (d *driver) prepare(claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	if claim.Status.Allocation == nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)}
	}
	used, err := d.inUse(claim.UID)
	if err != nil {
		return kubeletplugin.PrepareResult{Err: err}
	}
	spec := cdiSpec{Version: CDIVersion, Kind: CDIKind}
	var result kubeletplugin.PrepareResult
	for _, allocated := range claim.Status.Allocation.Devices.Results {
		if allocated.Driver != DriverName {
			continue
		}
		if allocated.Pool != d.nodeName {
			return kubeletplugin.PrepareResult{Err: fmt.Errorf("device %s/%s is not this node's", allocated.Pool, allocated.Device)}
		}
		if other, ok := used[allocated.Device]; ok {
			return kubeletplugin.PrepareResult{Err: fmt.Errorf("device %s is already prepared for claim %s", allocated.Device, other)}
		}
		name := fmt.Sprintf("%s-%s", claim.UID, allocated.Device)
		spec.Devices = append(spec.Devices, cdiDevice{Name: name, ContainerEdits: cdiContainerEd{Env: []string{
			fmt.Sprintf("%s%s=%s/%s", EnvPrefix, strings.ToUpper(notEnvChar.ReplaceAllString(allocated.Device, "_")),
				claim.Namespace, claim.Name)}}})
		result.Devices = append(result.Devices, kubeletplugin.Device{
			Requests: []string{allocated.Request}, PoolName: allocated.Pool, DeviceName: allocated.Device,
			CDIDeviceIDs: []string{CDIKind + "=" + name},
		})
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err == nil {
		err = writeAtomically(d.specPath(claim.UID), data)
	}
	if err != nil {
		return kubeletplugin.PrepareResult{Err: err}
	}
	klog.Infof("prepared claim %s/%s (%s): %d device(s)", claim.Namespace, claim.Name, claim.UID, len(result.Devices))
	return result
}

// writeAtomically writes through a temporary file and a rename, so a runtime never reads half a spec.
func writeAtomically(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (d *driver) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	results := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		results[claim.UID] = d.prepare(claim)
	}
	return results, nil
}

func (d *driver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	results := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		err := os.Remove(d.specPath(claim.UID))
		if errors.Is(err, os.ErrNotExist) {
			err = nil // never prepared here, or unprepared already
		}
		if err == nil {
			klog.Infof("unprepared claim %s (%s)", claim.NamespacedName, claim.UID)
		}
		results[claim.UID] = err
	}
	return results, nil
}

// HandleError logs background errors (publishing the slice); a fatal one stops the plugin.
func (d *driver) HandleError(_ context.Context, err error, msg string) {
	klog.ErrorS(err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.cancel(fmt.Errorf("%s: %w", msg, err))
	}
}

// devices are the published devices: gpu-0 .. gpu-(count-1), each with the model and memory given.
func devices(count int, model string, memory resource.Quantity) []resourceapi.Device {
	list := make([]resourceapi.Device, count)
	for i := range list {
		list[i] = resourceapi.Device{
			Name:       fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: &model}},
			Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: memory}},
		}
	}
	return list
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "draplugin: error: "+format+"\n", args...)
	os.Exit(code)
}

func main() {
	nodeName := flag.String("node-name", "", "the node whose ResourceSlice this plugin publishes (required)")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the plugin's identity (required)")
	count := flag.Int("devices", 4, "how many devices to publish")
	model := flag.String("model", "A100", "the devices' `model` attribute")
	memoryText := flag.String("memory", "40Gi", "the devices' `memory` capacity")
	registryDir := flag.String("registry-dir", kubeletplugin.KubeletRegistryDir, "the kubelet's plugin registration folder")
	pluginDir := flag.String("plugin-dir", filepath.Join(kubeletplugin.KubeletPluginsDir, DriverName), "the folder of this plugin's DRA socket")
	cdiDir := flag.String("cdi-dir", "/var/run/cdi", "the folder the CDI spec files are written to")
	flag.Parse()
	memory, err := resource.ParseQuantity(*memoryText)
	if err != nil {
		fail(2, "--memory %q: %v", *memoryText, err)
	}
	if *nodeName == "" || *kubeconfig == "" || *count < 1 {
		fail(2, "give --node-name, --kubeconfig and --devices of at least 1")
	}
	for _, dir := range []string{*registryDir, *pluginDir, *cdiDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fail(1, "%v", err)
		}
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(2, "--kubeconfig: %v", err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fail(1, "%v", err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-stop; cancel(errors.New("signalled")) }()

	d := &driver{nodeName: *nodeName, cdiDir: *cdiDir, cancel: cancel}
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(DriverName), kubeletplugin.KubeClient(client), kubeletplugin.NodeName(*nodeName),
		kubeletplugin.RegistrarDirectoryPath(*registryDir), kubeletplugin.PluginDataDirectoryPath(*pluginDir))
	if err != nil {
		fail(1, "%v", err)
	}
	err = helper.PublishResources(ctx, resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		*nodeName: {Slices: []resourceslice.Slice{{Devices: devices(*count, *model, memory)}}},
	}})
	if err != nil {
		helper.Stop()
		fail(1, "%v", err)
	}
	klog.Infof("driver %s on node %s: %d device(s) of model %s, %s each", DriverName, *nodeName, *count, *model, memory.String())
	<-ctx.Done()
	helper.Stop()
	klog.Infof("stopped: %v", context.Cause(ctx))
}
