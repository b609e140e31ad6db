package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// benchRequest times upstream's allocator for kubedra's benchmarks (bench/bench_allocator.py).
// A request that carries Scenario decodes it and keeps it under Key; later requests name
// the key alone, so a large inventory crosses the pipe once. Each request runs one round:
// Iterations runs of one Mode, timed as a whole in CPU time of this process (getrusage,
// user + system, as the Python side measures itself):
//
//   - "cold": structured.NewAllocator over the scenario's slices, then Allocate on each
//     node in order until one fits (a scheduler's Filter calls of one pod, node by node);
//   - "warm": the same Allocate calls on one allocator made when the scenario was loaded.
//
// Both share one cel.Cache made at load, as a scheduler keeps one across cycles: compiling
// selectors is not part of either figure.
type benchRequest struct {
	Key        string         `json:"key"`
	Scenario   *benchScenario `json:"scenario"`
	Mode       string         `json:"mode"`
	Iterations int            `json:"iterations"`
	Drop       bool           `json:"drop"`
}

type benchScenario struct {
	Features  structured.Features          `json:"features"`
	Nodes     []nodeInfo                   `json:"nodes"`
	Classes   []*resourceapi.DeviceClass   `json:"classes"`
	Slices    []*resourceapi.ResourceSlice `json:"slices"`
	Allocated []*resourceapi.ResourceClaim `json:"allocated"`
	Claims    []*resourceapi.ResourceClaim `json:"claims"`
}

type loadedScenario struct {
	features structured.Features
	nodes    []*v1.Node
	classes  classLister
	slices   []*resourceapi.ResourceSlice
	state    structured.AllocatedState
	claims   []*resourceapi.ResourceClaim
	celCache *cel.Cache
	warm     structured.Allocator
}

// benchAnswer: CPU and wall time of the round, and where the last iteration allocated
// (Node empty when no node fitted) with the devices it chose, for a cross-check.
type benchAnswer struct {
	Iterations int      `json:"iterations"`
	CPUNs      int64    `json:"cpuNs"`
	WallNs     int64    `json:"wallNs"`
	Node       string   `json:"node"`
	Devices    []string `json:"devices"`
}

var benchScenarios = map[string]*loadedScenario{}

func benchmark(body json.RawMessage) (any, error) {
	var req benchRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("decode bench request: %w", err)
	}
	if req.Drop {
		delete(benchScenarios, req.Key)
		return benchAnswer{}, nil
	}
	if req.Scenario != nil {
		loaded, err := loadScenario(req.Scenario)
		if err != nil {
			return nil, err
		}
		benchScenarios[req.Key] = loaded
	}
	sc := benchScenarios[req.Key]
	if sc == nil {
		return nil, fmt.Errorf("no bench scenario %q loaded", req.Key)
	}
	if req.Mode == "" {
		return benchAnswer{}, nil // load only
	}
	if req.Mode != "cold" && req.Mode != "warm" {
		return nil, fmt.Errorf("unknown bench mode %q", req.Mode)
	}
	iterations := max(req.Iterations, 1)
	ctx := context.Background()
	var node string
	var results []resourceapi.AllocationResult
	runtime.GC()
	cpu0, wall0 := cpuNs(), time.Now()
	for range iterations {
		allocator := sc.warm
		if req.Mode == "cold" {
			var err error
			allocator, err = structured.NewAllocator(ctx, sc.features, sc.state, sc.classes, sc.slices, sc.celCache)
			if err != nil {
				return nil, err
			}
		}
		node, results = "", nil
		for _, n := range sc.nodes {
			out, err := allocator.Allocate(ctx, n, sc.claims)
			if err != nil {
				return nil, fmt.Errorf("allocate on node %s: %w", n.Name, err)
			}
			if out != nil {
				node, results = n.Name, out
				break
			}
		}
	}
	answer := benchAnswer{Iterations: iterations, CPUNs: cpuNs() - cpu0, WallNs: time.Since(wall0).Nanoseconds(), Node: node}
	for _, result := range results {
		for _, device := range result.Devices.Results {
			answer.Devices = append(answer.Devices, device.Driver+"/"+device.Pool+"/"+device.Device)
		}
	}
	return answer, nil
}

func loadScenario(in *benchScenario) (*loadedScenario, error) {
	if len(in.Nodes) == 0 {
		return nil, errors.New("bench scenario without nodes")
	}
	sc := &loadedScenario{
		features: in.Features,
		classes:  classLister{},
		slices:   in.Slices,
		state:    allocatedState(in.Allocated, in.Features.ConsumableCapacity),
		claims:   in.Claims,
		celCache: cel.NewCache(10, cel.Features{
			EnableConsumableCapacity: in.Features.ConsumableCapacity,
			EnableListTypeAttributes: in.Features.ListTypeAttributes,
		}),
	}
	for _, class := range in.Classes {
		sc.classes[class.Name] = class
	}
	for _, info := range in.Nodes {
		node := &v1.Node{}
		node.Name = info.Name
		node.Labels = info.Labels
		sc.nodes = append(sc.nodes, node)
	}
	warm, err := structured.NewAllocator(context.Background(), sc.features, sc.state, sc.classes, sc.slices, sc.celCache)
	if err != nil {
		return nil, err
	}
	sc.warm = warm
	return sc, nil
}

// cpuNs is this process's CPU time (user + system) in nanoseconds.
func cpuNs() int64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return usage.Utime.Nano() + usage.Stime.Nano()
}
