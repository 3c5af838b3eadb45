// Package expr evaluates Numaflow's filter and event-time expressions over a
// message's payload. An expression sees one variable, payload (the message's bytes
// as a string), and the functions of Numaflow's built-ins: json(x) parses a JSON
// object, int(x) and string(x) convert, and sprig.<name>(...) is any of the sprig
// template library's generic functions — besides the expression language's own
// operators and functions (github.com/expr-lang/expr):
//
//	int(json(payload).id) % 2 == 0
//	sprig.contains('James', json(payload).name)
package expr

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"unsafe"

	sprig "github.com/Masterminds/sprig/v3"
	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
)

// Program is a compiled expression. It is safe for concurrent use.
type Program struct {
	src  string
	prog *vm.Program
	vms  sync.Pool
}

type env struct {
	Payload string         `expr:"payload"`
	Sprig   map[string]any `expr:"sprig"`
}

var sprigFuncs = sync.OnceValue(func() map[string]any {
	m := map[string]any{}
	for name, f := range sprig.GenericFuncMap() {
		m[name] = f
	}
	return m
})

func jsonFunc(args ...any) (any, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("json takes 1 argument, got %d", len(args))
	}
	var b []byte
	switch v := args[0].(type) {
	case nil:
		return nil, nil
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return nil, fmt.Errorf("json: cannot parse %T", v)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("json: not a JSON object: %w", err)
	}
	return m, nil
}

func compile(src string, opts ...expr.Option) (*Program, error) {
	if src == "" {
		return nil, errors.New("expression is empty")
	}
	opts = append([]expr.Option{expr.Env(env{}), expr.Function("json", jsonFunc)}, opts...)
	p, err := expr.Compile(src, opts...)
	if err != nil {
		return nil, err
	}
	return &Program{src: src, prog: p}, nil
}

// CompileBool compiles an expression that must give true or false.
func CompileBool(src string) (*Program, error) { return compile(src, expr.AsBool()) }

// CompileString compiles an expression whose result is used as text.
func CompileString(src string) (*Program, error) { return compile(src) }

// String returns the expression's source.
func (p *Program) String() string { return p.src }

func (p *Program) run(payload []byte) (any, error) {
	m, _ := p.vms.Get().(*vm.VM)
	if m == nil {
		m = &vm.VM{}
	}
	defer p.vms.Put(m)
	// The payload is only read while the expression runs.
	return m.Run(p.prog, env{Payload: unsafe.String(unsafe.SliceData(payload), len(payload)), Sprig: sprigFuncs()})
}

// Bool evaluates a program compiled with CompileBool.
func (p *Program) Bool(payload []byte) (bool, error) {
	out, err := p.run(payload)
	if err != nil {
		return false, err
	}
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("expression gave %T, want a bool", out)
	}
	return b, nil
}

// Text evaluates a program and formats its result as text.
func (p *Program) Text(payload []byte) (string, error) {
	out, err := p.run(payload)
	if err != nil {
		return "", err
	}
	switch v := out.(type) {
	case string:
		return v, nil
	case float64:
		// JSON numbers are float64: write whole ones as integers, not 1.7e+12.
		if v == math.Trunc(v) && math.Abs(v) < 1<<63 {
			return strconv.FormatInt(int64(v), 10), nil
		}
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	}
	return fmt.Sprint(out), nil
}
