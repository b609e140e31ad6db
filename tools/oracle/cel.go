package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"
)

// celRequest: one selector, compiled as the allocator does (cel.Cache's options:
// estimation on, the DRA run-time cost limit) and run against each device.
type celRequest struct {
	Expression string       `json:"expression"`
	Features   cel.Features `json:"features"`
	Devices    []celDevice  `json:"devices"`
	// NewExpression compiles as the API server does for an expression being written
	// (the features decide the environment) instead of as a stored one.
	NewExpression bool `json:"newExpression"`
}

type celDevice struct {
	Driver                   string                                                    `json:"driver"`
	AllowMultipleAllocations *bool                                                     `json:"allowMultipleAllocations"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity"`
}

type celAnswer struct {
	CompileError string     `json:"compileError,omitempty"`
	Cost         *uint64    `json:"cost,omitempty"`
	Results      []celMatch `json:"results,omitempty"`
}

type celMatch struct {
	Match bool   `json:"match"`
	Error string `json:"error,omitempty"`
}

func selector(body json.RawMessage) (any, error) {
	var req celRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("decode cel request: %w", err)
	}
	options := cel.Options{}
	if req.NewExpression {
		options.EnvType = ptr.To(environment.NewExpressions)
	}
	compiled := cel.GetCompiler(req.Features).CompileCELExpression(req.Expression, options)
	if compiled.Error != nil {
		return celAnswer{CompileError: compiled.Error.Error()}, nil
	}
	answer := celAnswer{Cost: &compiled.MaxCost}
	for _, device := range req.Devices {
		match, _, err := compiled.DeviceMatches(context.Background(), cel.Device{
			Driver:                   device.Driver,
			AllowMultipleAllocations: device.AllowMultipleAllocations,
			Attributes:               device.Attributes,
			Capacity:                 device.Capacity,
		})
		result := celMatch{Match: match}
		if err != nil {
			result.Error = err.Error()
		}
		answer.Results = append(answer.Results, result)
	}
	return answer, nil
}

// valueRequest: a plain expression (no device) in the DRA environment, to compare
// values of the language and its libraries rather than only a selector's bool.
type valueRequest struct {
	Expression string       `json:"expression"`
	Features   cel.Features `json:"features"`
}

type valueAnswer struct {
	CompileError string  `json:"compileError,omitempty"`
	Cost         *uint64 `json:"cost,omitempty"`
	Type         string  `json:"type,omitempty"` // the checked type, as cel-go prints it
	Value        any     `json:"value,omitempty"`
	Error        string  `json:"error,omitempty"`
}

func value(body json.RawMessage) (any, error) {
	var req valueRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("decode value request: %w", err)
	}
	// The DRA compiler's own environment (base library, versioned options, device).
	env := cel.GetCompiler(req.Features).CompileCELExpression("true", cel.Options{}).Environment
	ast, issues := env.Compile(req.Expression)
	if issues != nil && issues.Err() != nil {
		return valueAnswer{CompileError: "compilation failed: " + issues.String()}, nil
	}
	program, err := env.Program(ast, celgo.CostLimit(resourceapi.CELSelectorExpressionMaxCost))
	if err != nil {
		return valueAnswer{CompileError: "program instantiation failed: " + err.Error()}, nil
	}
	answer := valueAnswer{Type: ast.OutputType().String()}
	if estimate, err := env.EstimateCost(ast, &library.CostEstimator{}); err == nil {
		answer.Cost = &estimate.Max
	}
	result, _, err := program.Eval(map[string]any{})
	if err != nil {
		answer.Error = err.Error()
		return answer, nil
	}
	answer.Value = encode(result)
	return answer, nil
}

// encode writes a CEL value as tagged JSON: {"int": "5"}, {"list": [...]}, ...
// Numbers travel as strings so that 64-bit values keep every digit.
func encode(val ref.Val) any {
	switch v := val.(type) {
	case types.Int:
		return map[string]string{"int": strconv.FormatInt(int64(v), 10)}
	case types.Uint:
		return map[string]string{"uint": strconv.FormatUint(uint64(v), 10)}
	case types.Double:
		return map[string]string{"double": strconv.FormatFloat(float64(v), 'g', -1, 64)}
	case types.String:
		return map[string]string{"string": string(v)}
	case types.Bytes:
		return map[string]string{"bytes": base64.StdEncoding.EncodeToString(v)}
	case types.Bool:
		return map[string]bool{"bool": bool(v)}
	case types.Null:
		return map[string]bool{"null": true}
	case *types.Type:
		return map[string]string{"type": v.TypeName()}
	case *types.Optional:
		if !v.HasValue() {
			return map[string]any{"optional": nil}
		}
		return map[string]any{"optional": encode(v.GetValue())}
	case traits.Lister:
		items := []any{}
		for it := v.Iterator(); it.HasNext() == types.True; {
			items = append(items, encode(it.Next()))
		}
		return map[string]any{"list": items}
	case traits.Mapper:
		entries := [][2]any{}
		for it := v.Iterator(); it.HasNext() == types.True; {
			key := it.Next()
			entries = append(entries, [2]any{encode(key), encode(v.Get(key))})
		}
		sort.Slice(entries, func(i, j int) bool {
			return fmt.Sprint(entries[i][0]) < fmt.Sprint(entries[j][0])
		})
		return map[string]any{"map": entries}
	}
	// Library objects (quantity, semver, ip, cidr, url, ...): their type and how they print.
	text := fmt.Sprint(val.Value())
	if s, ok := val.ConvertToType(types.StringType).(types.String); ok {
		text = string(s)
	}
	return map[string]string{"object": val.Type().TypeName(), "text": text}
}
