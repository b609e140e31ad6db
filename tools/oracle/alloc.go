package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// allocRequest is one scheduling attempt for one node: what the kube-scheduler's
// DynamicResources plugin hands to structured.NewAllocator and Allocate.
type allocRequest struct {
	Features         structured.Features            `json:"features"`
	DeviceTaintRules bool                           `json:"deviceTaintRules"`
	Node             nodeInfo                       `json:"node"`
	Classes          []*resourceapi.DeviceClass     `json:"classes"`
	Slices           []*resourceapi.ResourceSlice   `json:"slices"`
	TaintRules       []*resourceapi.DeviceTaintRule `json:"taintRules"`
	Allocated        []*resourceapi.ResourceClaim   `json:"allocated"`
	Claims           []*resourceapi.ResourceClaim   `json:"claims"`
	TimeoutMs        int                            `json:"timeoutMs"`
	// Allocators, when set, restricts which implementations NewAllocator may pick
	// ("stable", "incubating", "experimental"), as structured.EnableAllocators does.
	Allocators []string `json:"allocators"`
}

type nodeInfo struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

// allocAnswer: exactly one of Results (one per claim, in order), Unsatisfiable, Error
// (Allocate failed: upstream's fatal error) or Timeout is set.
type allocAnswer struct {
	Results       []resourceapi.AllocationResult `json:"results,omitempty"`
	Unsatisfiable bool                           `json:"unsatisfiable,omitempty"`
	Error         string                         `json:"error,omitempty"`
	Timeout       bool                           `json:"timeout,omitempty"`
	// Steps is the search effort: allocateOne invocations (0 where not reported).
	Steps int64 `json:"steps,omitempty"`
}

type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, class := range l {
		out = append(out, class)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if class, ok := l[name]; ok {
		return class, nil
	}
	return nil, fmt.Errorf("device class %s not found", name)
}

func allocate(body json.RawMessage) (any, error) {
	var req allocRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("decode alloc request: %w", err)
	}
	timeout := time.Duration(max(req.TimeoutMs, 1)) * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	slices := req.Slices
	if req.DeviceTaintRules && len(req.TaintRules) > 0 {
		patched, err := patchedSlices(ctx, req)
		if err != nil {
			return nil, err
		}
		slices = patched
	}
	classes := classLister{}
	for _, class := range req.Classes {
		classes[class.Name] = class
	}
	celCache := cel.NewCache(10, cel.Features{
		EnableConsumableCapacity: req.Features.ConsumableCapacity,
		EnableListTypeAttributes: req.Features.ListTypeAttributes,
	})
	state := allocatedState(req.Allocated, req.Features.ConsumableCapacity)
	structured.EnableAllocators(req.Allocators...)
	defer structured.EnableAllocators()
	allocator, err := structured.NewAllocator(ctx, req.Features, state, classes, slices, celCache)
	if err != nil {
		return allocAnswer{Error: err.Error()}, nil
	}
	node := &v1.Node{}
	node.Name = req.Node.Name
	node.Labels = req.Node.Labels
	results, err := allocator.Allocate(ctx, node, req.Claims)
	steps := searchSteps(allocator)
	switch {
	case ctx.Err() != nil:
		return allocAnswer{Timeout: true, Steps: steps}, nil
	case err != nil:
		return allocAnswer{Error: err.Error(), Steps: steps}, nil
	case results == nil:
		return allocAnswer{Unsatisfiable: true, Steps: steps}, nil
	}
	return allocAnswer{Results: results, Steps: steps}, nil
}

// searchSteps reads the allocator's statistics (GetStats, which the newer
// implementations have; its type is internal, hence reflection).
func searchSteps(allocator structured.Allocator) int64 {
	method := reflect.ValueOf(allocator).MethodByName("GetStats")
	if !method.IsValid() {
		return 0
	}
	return method.Call(nil)[0].FieldByName("NumAllocateOneInvocations").Int()
}

// allocatedState is built from claim statuses as the scheduler's allocated-devices
// tracker does: admin-access results are invisible; with consumable capacity, results
// carrying a share ID are shares (with their consumed capacity), all others dedicated.
func allocatedState(claims []*resourceapi.ResourceClaim, consumable bool) structured.AllocatedState {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, result := range claim.Status.Allocation.Devices.Results {
			if ptr.Deref(result.AdminAccess, false) {
				continue
			}
			id := structured.MakeDeviceID(result.Driver, result.Pool, result.Device)
			if consumable && result.ShareID != nil {
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, result.ShareID))
				if result.ConsumedCapacity != nil {
					state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, result.ConsumedCapacity))
				}
				continue
			}
			state.AllocatedDevices.Insert(id)
		}
	}
	return state
}

// patchedSlices applies DeviceTaintRules the way the scheduler sees them: through
// upstream's ResourceSlice tracker, fed by informers over a fake clientset.
func patchedSlices(ctx context.Context, req allocRequest) ([]*resourceapi.ResourceSlice, error) {
	objects := make([]runtime.Object, 0, len(req.Slices)+len(req.TaintRules))
	for _, slice := range req.Slices {
		objects = append(objects, slice)
	}
	for _, rule := range req.TaintRules {
		objects = append(objects, rule)
	}
	client := fake.NewClientset(objects...)
	factory := informers.NewSharedInformerFactory(client, 0)
	trackerCtx, stop := context.WithCancel(ctx)
	sliceTracker, err := tracker.StartTracker(trackerCtx, tracker.Options{
		EnableDeviceTaintRules:   true,
		EnableConsumableCapacity: req.Features.ConsumableCapacity,
		SliceInformer:            factory.Resource().V1().ResourceSlices(),
		TaintInformer:            factory.Resource().V1().DeviceTaintRules(),
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("start slice tracker: %w", err)
	}
	factory.Start(trackerCtx.Done())
	defer func() {
		// Informers end when their stop channel closes; Shutdown waits for them.
		sliceTracker.Stop()
		stop()
		factory.Shutdown()
	}()
	select {
	case <-sliceTracker.HasSyncedChecker().Done():
	case <-trackerCtx.Done():
		return nil, errors.New("slice tracker did not sync")
	}
	patched, err := sliceTracker.ListPatchedResourceSlices()
	if err != nil {
		return nil, fmt.Errorf("list patched slices: %w", err)
	}
	// The tracker lists in its store's order; hand them on in the request's order.
	byName := make(map[string]*resourceapi.ResourceSlice, len(patched))
	for _, slice := range patched {
		byName[slice.Name] = slice
	}
	out := make([]*resourceapi.ResourceSlice, 0, len(req.Slices))
	for _, slice := range req.Slices {
		if found, ok := byName[slice.Name]; ok {
			out = append(out, found)
		}
	}
	return out, nil
}
