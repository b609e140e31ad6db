// Command oracle answers kubedra's conformance harness with upstream's own code:
// k8s.io/dynamic-resource-allocation's structured allocator and DRA CEL environment, at
// the versions pinned in go.mod. It reads one JSON request per line on stdin and writes
// one JSON answer per line on stdout, so one process serves a whole test run.
//
// Requests carry "mode": "alloc" (see alloc.go), "cel" and "value" (see cel.go), "types"
// (see types.go), "celspec" (see celspec.go) or "bench" (see bench.go: timings for
// kubedra's allocator benchmark, not a conformance check). Anything that goes wrong with
// one request is reported in that request's answer as {"fault": "..."}; the process only
// exits when stdin closes.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

type request struct {
	Mode string          `json:"mode"`
	Body json.RawMessage `json:"body"`
}

func main() {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	encoder := json.NewEncoder(out)
	encoder.SetEscapeHTML(false)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			if err := encoder.Encode(answer(line)); err != nil {
				fmt.Fprintln(os.Stderr, "oracle: write:", err)
				os.Exit(1)
			}
			if err := out.Flush(); err != nil {
				os.Exit(1)
			}
		}
		if err != nil {
			return
		}
	}
}

// answer decodes one request and runs it; a panic in upstream's code becomes a fault
// answer, so one bad input cannot end a run of thousands.
func answer(line []byte) (result any) {
	defer func() {
		if r := recover(); r != nil {
			result = map[string]string{"fault": fmt.Sprintf("panic: %v", r)}
		}
	}()
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return map[string]string{"fault": "decode request: " + err.Error()}
	}
	var err error
	switch req.Mode {
	case "alloc":
		result, err = allocate(req.Body)
	case "cel":
		result, err = selector(req.Body)
	case "value":
		result, err = value(req.Body)
	case "types":
		result, err = typeTree()
	case "celspec":
		result, err = celSpec(req.Body)
	case "bench":
		result, err = benchmark(req.Body)
	default:
		err = fmt.Errorf("unknown mode %q", req.Mode)
	}
	if err != nil {
		return map[string]string{"fault": err.Error()}
	}
	return result
}
