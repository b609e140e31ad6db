package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"sort"

	"cel.dev/expr/conformance/test"
	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"

	// The suite's Any values name these messages: linking them registers them with the
	// global registry that prototext and protojson resolve Any types from.
	_ "cel.dev/expr/conformance/proto2"
	_ "cel.dev/expr/conformance/proto3"
)

// celSpecRequest: cel-spec "simple" test files (textproto SimpleTestFile) to decode and,
// with Run, to run through upstream's DRA CEL environment as well.
type celSpecRequest struct {
	Files []string `json:"files"`
	Run   bool     `json:"run"`
}

type celSpecAnswer struct {
	// ExprVersion is the cel.dev/expr module linked in (the suite's schema), so the
	// harness can check that it reads the files of the version it pins.
	ExprVersion string `json:"exprVersion"`
	// Functions and Macros: every name upstream's DRA environment declares.
	Functions []string       `json:"functions"`
	Macros    []string       `json:"macros"`
	Tests     []celSpecEntry `json:"tests"`
}

type celSpecEntry struct {
	File    string          `json:"file"`
	Section string          `json:"section"`
	Test    json.RawMessage `json:"test"` // the SimpleTest as protojson
	// The test's expected value and bindings in the tagged form of encode(), and its
	// deduced type as cel-go prints types: what the harness compares with.
	Expected     any            `json:"expected,omitempty"`
	ExpectedType string         `json:"expectedType,omitempty"`
	Bindings     map[string]any `json:"bindings,omitempty"`
	Problem      string         `json:"problem,omitempty"` // a value the Go types cannot hold
	Upstream     *celSpecRun    `json:"upstream,omitempty"`
}

// celSpecRun: what upstream's DRA environment does with one test.
type celSpecRun struct {
	Setup        string `json:"setup,omitempty"` // declarations or bindings it cannot take
	CompileError string `json:"compileError,omitempty"`
	Type         string `json:"type,omitempty"`
	Value        any    `json:"value,omitempty"`
	Error        string `json:"error,omitempty"`
}

// celSpec decodes each file with the suite's own schema and returns every test, in file
// order, as protojson plus its expectations in the oracle's tagged form.
func celSpec(body json.RawMessage) (any, error) {
	var req celSpecRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("decode celspec request: %w", err)
	}
	env := draEnv()
	answer := celSpecAnswer{
		ExprVersion: moduleVersion("cel.dev/expr"),
		Functions:   functionNames(env),
		Macros:      macroNames(env),
		Tests:       []celSpecEntry{},
	}
	for _, path := range req.Files {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var file test.SimpleTestFile
		if err := prototext.Unmarshal(raw, &file); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, section := range file.GetSection() {
			for _, t := range section.GetTest() {
				entry, err := specEntry(env, t, req.Run)
				if err != nil {
					return nil, fmt.Errorf("%s/%s/%s: %w", file.GetName(), section.GetName(), t.GetName(), err)
				}
				entry.File, entry.Section = file.GetName(), section.GetName()
				answer.Tests = append(answer.Tests, entry)
			}
		}
	}
	return answer, nil
}

// draEnv: the environment of the "value" mode (the DRA compiler's, default features).
func draEnv() *celgo.Env {
	return cel.GetCompiler(cel.Features{}).CompileCELExpression("true", cel.Options{}).Environment
}

func specEntry(env *celgo.Env, t *test.SimpleTest, run bool) (celSpecEntry, error) {
	encoded, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(t)
	if err != nil {
		return celSpecEntry{}, err
	}
	entry := celSpecEntry{Test: encoded}
	adapter := env.CELTypeAdapter()
	expected := t.GetValue()
	if typed := t.GetTypedResult(); typed != nil {
		expected = typed.GetResult()
		if typed.GetDeducedType() != nil {
			if deduced, err := types.ProtoAsType(typed.GetDeducedType()); err == nil {
				entry.ExpectedType = deduced.String()
			} else {
				entry.Problem = "deduced type: " + err.Error()
			}
		}
	}
	if expected != nil {
		if val, err := celgo.ProtoAsValue(adapter, expected); err == nil {
			entry.Expected = safeEncode(val)
		} else {
			entry.Problem = "expected value: " + err.Error()
		}
	}
	if bindings, err := specBindings(env, t); err == nil {
		entry.Bindings = map[string]any{}
		for name, val := range bindings {
			entry.Bindings[name] = safeEncode(val)
		}
	} else {
		entry.Problem = "bindings: " + err.Error()
	}
	if run {
		entry.Upstream = runSpecTest(env, t)
	}
	return entry, nil
}

func specBindings(env *celgo.Env, t *test.SimpleTest) (map[string]ref.Val, error) {
	out := map[string]ref.Val{}
	for name, bound := range t.GetBindings() {
		if bound.GetValue() == nil {
			return nil, fmt.Errorf("%s is not a value", name)
		}
		val, err := celgo.ProtoAsValue(env.CELTypeAdapter(), bound.GetValue())
		if err != nil {
			return nil, err
		}
		out[name] = val
	}
	return out, nil
}

// runSpecTest: the test through upstream's DRA environment extended with its
// declarations and container, parsed only where it disables the checker, with the DRA
// run-time cost limit. A panic in upstream's code is reported as that test's error.
func runSpecTest(base *celgo.Env, t *test.SimpleTest) (result *celSpecRun) {
	defer func() {
		if r := recover(); r != nil {
			result = &celSpecRun{Error: fmt.Sprintf("panic: %v", r)}
		}
	}()
	env, err := specEnv(base, t)
	if err != nil {
		return &celSpecRun{Setup: err.Error()}
	}
	activation, err := specBindings(env, t)
	if err != nil {
		return &celSpecRun{Setup: err.Error()}
	}
	compile := env.Compile
	if t.GetDisableCheck() {
		compile = env.Parse
	}
	ast, issues := compile(t.GetExpr())
	if issues != nil && issues.Err() != nil {
		return &celSpecRun{CompileError: issues.String()}
	}
	out := &celSpecRun{Type: ast.OutputType().String()}
	if t.GetCheckOnly() {
		return out
	}
	program, err := env.Program(ast, celgo.CostLimit(resourceapi.CELSelectorExpressionMaxCost))
	if err != nil {
		return &celSpecRun{CompileError: "program instantiation failed: " + err.Error()}
	}
	val, _, err := program.Eval(map[string]any(toAny(activation)))
	if err != nil {
		out.Error = err.Error()
		return out
	}
	out.Value = safeEncode(val)
	return out
}

func specEnv(base *celgo.Env, t *test.SimpleTest) (*celgo.Env, error) {
	var options []celgo.EnvOption
	if t.GetContainer() != "" {
		options = append(options, celgo.Container(t.GetContainer()))
	}
	for _, decl := range t.GetTypeEnv() {
		option, err := celgo.ProtoAsDeclaration(decl)
		if err != nil {
			return nil, err
		}
		options = append(options, option)
	}
	if len(options) == 0 {
		return base, nil
	}
	return base.Extend(options...)
}

func toAny(vals map[string]ref.Val) map[string]any {
	out := make(map[string]any, len(vals))
	for k, v := range vals {
		out[k] = v
	}
	return out
}

// safeEncode: encode(), or a description of the panic a value's methods raised.
func safeEncode(val ref.Val) (out any) {
	defer func() {
		if r := recover(); r != nil {
			out = map[string]string{"object": "unencodable", "text": fmt.Sprint(r)}
		}
	}()
	return encode(val)
}

func functionNames(env *celgo.Env) []string {
	names := []string{}
	for name := range env.Functions() {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func macroNames(env *celgo.Env) []string {
	seen := map[string]bool{}
	for _, macro := range env.Macros() {
		seen[macro.Function()] = true
	}
	names := []string{}
	for name := range seen {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, dep := range info.Deps {
		if dep.Path == path {
			return dep.Version
		}
	}
	return ""
}

