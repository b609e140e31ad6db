// Command celbench times upstream's DRA CEL (k8s.io/dynamic-resource-allocation/cel, the
// package the kube-scheduler's allocator uses, at the version pinned in go.mod) for
// kubedra's `bench/bench_cel.py`, so that its table puts upstream's figures beside
// kubedra's from one run.
//
// The first line on stdin is the set-up: a device as a ResourceSlice publishes it and the
// selectors to time. Every later line asks for one round, `{"calls": N}`; the answer is
// one JSON line with, per selector, the process CPU time per call of
//
//   - perCall: CompilationResult.DeviceMatches, which builds the device's CEL maps and
//     then runs the program, as the allocator pays for every (selector, device) pair;
//   - program: the compiled program alone, on an activation built once.
//
// The caller alternates rounds of this program with rounds of its own and takes medians.
// The process exits when stdin closes.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/blang/semver/v4"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	resourceapi "k8s.io/api/resource/v1"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"golang.org/x/sys/unix"
	"k8s.io/dynamic-resource-allocation/cel"
)

type device struct {
	Driver                   string                                                    `json:"driver"`
	AllowMultipleAllocations *bool                                                     `json:"allowMultipleAllocations"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity"`
}

type setup struct {
	Device      device   `json:"device"`
	Expressions []string `json:"expressions"`
}

type round struct {
	Calls int `json:"calls"`
}

type timing struct {
	PerCallNs float64 `json:"perCallNs"`
	ProgramNs float64 `json:"programNs"`
	Match     bool    `json:"match"`
	Error     string  `json:"error,omitempty"`
}

type selector struct {
	compiled   cel.CompilationResult
	activation map[string]any
}

func main() {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := json.NewEncoder(os.Stdout)
	line, err := in.ReadBytes('\n')
	if err != nil && len(line) == 0 {
		fail("read set-up: %v", err)
	}
	var s setup
	if err := json.Unmarshal(line, &s); err != nil {
		fail("decode set-up: %v", err)
	}
	input := cel.Device{
		Driver:                   s.Device.Driver,
		AllowMultipleAllocations: s.Device.AllowMultipleAllocations,
		Attributes:               s.Device.Attributes,
		Capacity:                 s.Device.Capacity,
	}
	// As the allocator compiles selectors (cel.Cache): the stored-expressions
	// environment, no cost estimation, the DRA run-time cost limit.
	compiler := cel.GetCompiler(cel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: true})
	selectors := make([]selector, len(s.Expressions))
	for i, expression := range s.Expressions {
		compiled := compiler.CompileCELExpression(expression, cel.Options{DisableCostEstimation: true})
		if compiled.Error != nil {
			fail("compile %q: %v", expression, compiled.Error)
		}
		selectors[i] = selector{compiled, activation(compiled, input)}
	}
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			var r round
			if err := json.Unmarshal(line, &r); err != nil {
				fail("decode round: %v", err)
			}
			answer := make([]timing, len(selectors))
			for i, sel := range selectors {
				answer[i] = measure(sel, input, max(r.Calls, 1))
			}
			if err := out.Encode(answer); err != nil {
				os.Exit(1)
			}
		}
		if err != nil {
			return
		}
	}
}

func measure(sel selector, input cel.Device, calls int) timing {
	ctx := context.Background()
	match, _, err := sel.compiled.DeviceMatches(ctx, input)
	t := timing{Match: match}
	if err != nil {
		t.Error = err.Error()
	}
	began := cpu()
	for range calls {
		_, _, _ = sel.compiled.DeviceMatches(ctx, input)
	}
	t.PerCallNs = float64(cpu()-began) / float64(calls)
	began = cpu()
	for range calls {
		_, _, _ = sel.compiled.Program.ContextEval(ctx, sel.activation)
	}
	t.ProgramNs = float64(cpu()-began) / float64(calls)
	return t
}

// activation is the `device` variable DeviceMatches hands the program, built once here.
func activation(compiled cel.CompilationResult, input cel.Device) map[string]any {
	attributes := map[string]any{}
	for name, attr := range input.Attributes {
		domain, id := split(string(name), input.Driver)
		if attributes[domain] == nil {
			attributes[domain] = map[string]any{}
		}
		attributes[domain].(map[string]any)[id] = value(attr)
	}
	capacity := map[string]any{}
	for name, c := range input.Capacity {
		domain, id := split(string(name), input.Driver)
		if capacity[domain] == nil {
			capacity[domain] = map[string]apiservercel.Quantity{}
		}
		capacity[domain].(map[string]apiservercel.Quantity)[id] = apiservercel.Quantity{Quantity: &c.Value}
	}
	adapter := compiled.Environment.CELTypeAdapter()
	empty := adapter.NativeToValue(map[string]any{})
	multi := input.AllowMultipleAllocations != nil && *input.AllowMultipleAllocations
	return map[string]any{"device": map[string]any{
		"driver":                   input.Driver,
		"allowMultipleAllocations": multi,
		"attributes":               withDefault{adapter.NativeToValue(attributes).(traits.Mapper), empty},
		"capacity":                 withDefault{adapter.NativeToValue(capacity).(traits.Mapper), empty},
	}}
}

// withDefault answers an unknown domain with an empty map, as DRA's device maps do.
type withDefault struct {
	traits.Mapper
	empty ref.Val
}

func (m withDefault) Find(key ref.Val) (ref.Val, bool) {
	if v, ok := m.Mapper.Find(key); ok {
		return v, true
	}
	return m.empty, true
}

func value(attr resourceapi.DeviceAttribute) any {
	switch {
	case attr.IntValue != nil:
		return *attr.IntValue
	case attr.BoolValue != nil:
		return *attr.BoolValue
	case attr.StringValue != nil:
		return *attr.StringValue
	case attr.VersionValue != nil:
		v, err := semver.Parse(*attr.VersionValue)
		if err != nil {
			fail("version %q: %v", *attr.VersionValue, err)
		}
		return apiservercel.Semver{Version: v}
	}
	fail("celbench: only single-valued attributes are supported")
	return nil
}

func split(name, driver string) (string, string) {
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			return name[:i], name[i+1:]
		}
	}
	return driver, name
}

// cpu is the process's CPU time (all threads, the garbage collector's included), the
// clock Python's time.process_time reads.
func cpu() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		fail("clock_gettime: %v", err)
	}
	return ts.Nano()
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "celbench: "+format+"\n", args...)
	os.Exit(2)
}
