package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// endpointResolver resolves a webhook's Service to one of its ready endpoints' addresses, as
// kube-apiserver does with --enable-aggregator-routing, instead of to `<name>.<namespace>.svc`
// (the default, which needs cluster DNS: the test node has none). The TLS server name stays
// `<name>.<namespace>.svc` either way (the webhook client sets it), so the webhook's
// certificate is checked exactly as cozystack-api checks it on Cozystack.
type endpointResolver struct {
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
}

func newEndpointResolver(factory informers.SharedInformerFactory) *endpointResolver {
	return &endpointResolver{services: factory.Core().V1().Services().Lister(),
		slices: factory.Discovery().V1().EndpointSlices().Lister()}
}

func (r *endpointResolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	service, err := r.services.Services(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	portName, found := "", false
	for _, p := range service.Spec.Ports {
		if p.Port == port {
			portName, found = p.Name, true
		}
	}
	if !found {
		return nil, fmt.Errorf("service %s/%s has no port %d", namespace, name, port)
	}
	slices, err := r.slices.EndpointSlices(namespace).List(labels.SelectorFromSet(labels.Set{
		discoveryv1.LabelServiceName: name}))
	if err != nil {
		return nil, err
	}
	// The Service port `port` is the slice port carrying the Service port's name (its number
	// there is the pods' target port).
	var addresses []string
	for _, slice := range slices {
		target := int32(0)
		for _, p := range slice.Ports {
			if p.Port != nil && p.Name != nil && *p.Name == portName {
				target = *p.Port
			}
		}
		if target == 0 {
			continue
		}
		for _, endpoint := range slice.Endpoints {
			if endpoint.Conditions.Ready != nil && !*endpoint.Conditions.Ready {
				continue
			}
			for _, address := range endpoint.Addresses {
				addresses = append(addresses, net.JoinHostPort(address, strconv.Itoa(int(target))))
			}
		}
	}
	if len(addresses) == 0 {
		return nil, fmt.Errorf("service %s/%s has no ready endpoint for port %d", namespace, name, port)
	}
	return &url.URL{Scheme: "https", Host: addresses[rand.IntN(len(addresses))]}, nil
}
