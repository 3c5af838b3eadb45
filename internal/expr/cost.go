package expr

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"unsafe"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
)

// Cost is a compiled cost expression (a rateLimit block's cost): a number
// computed from a message, the tokens it takes from the message limit. It
// sees payload (the message's bytes as a string), headers (its headers, a
// map of strings) and keys (its keys, a list of strings), with the functions
// of the filter's expressions:
//
//	len(payload)
//	"x-weight" in headers ? int(headers["x-weight"]) : 1
//	keys[0] == "bulk" ? 10 : 1
//
// It is safe for concurrent use.
type Cost struct {
	src  string
	prog *vm.Program
	runs sync.Pool // *costRun
	// size computes an expression of the payload's length alone, without
	// the machine; nil for other expressions.
	size func(float64) float64
	// isLen is set for len(payload) itself.
	isLen bool
}

// costEnv is what a cost expression sees.
type costEnv struct {
	Payload string            `expr:"payload"`
	Headers map[string]string `expr:"headers"`
	Keys    []string          `expr:"keys"`
	Sprig   map[string]any    `expr:"sprig"`
}

// costRun is one evaluation's machine and environment, reused.
type costRun struct {
	vm  vm.VM
	env costEnv
}

// ErrCost is the error of a cost expression that gives no cost: a value that
// is not a number, a negative one, or a failed evaluation.
var ErrCost = errors.New("expr: no cost")

// CompileCost compiles a cost expression. It must give a number (or an
// expression whose type is known only when it runs, such as a JSON field).
func CompileCost(src string) (*Cost, error) {
	if src == "" {
		return nil, errors.New("expression is empty")
	}
	p, err := expr.Compile(src, expr.Env(costEnv{}), expr.Function("json", jsonFunc))
	if err != nil {
		return nil, err
	}
	switch t := p.Node().Type(); {
	case t == nil:
	case isNumber(t.Kind()), t.Kind() == reflectInterface:
	default:
		return nil, fmt.Errorf("expression gives a %s, not a number", t)
	}
	c := &Cost{src: src, prog: p, isLen: isLen(p.Node())}
	c.size, _ = sizeFunc(p.Node())
	return c, nil
}

// String returns the expression's source.
func (c *Cost) String() string { return c.src }

// Of evaluates the cost of a message with payload, headers and keys: the
// expression's value rounded up to a whole number. A negative value, one that
// is not a number, or a failed evaluation give 1 and an error matching
// [ErrCost].
func (c *Cost) Of(payload []byte, headers map[string]string, keys []string) (int64, error) {
	if c.isLen {
		return int64(len(payload)), nil
	}
	if c.size != nil {
		return costOfFloat(c.size(float64(len(payload))))
	}
	r, _ := c.runs.Get().(*costRun)
	if r == nil {
		r = &costRun{env: costEnv{Sprig: sprigFuncs()}}
	}
	// The payload is only read while the expression runs.
	r.env.Payload = unsafe.String(unsafe.SliceData(payload), len(payload))
	r.env.Headers, r.env.Keys = headers, keys
	out, err := r.vm.Run(c.prog, &r.env)
	r.env.Payload, r.env.Headers, r.env.Keys = "", nil, nil
	c.runs.Put(r)
	if err != nil {
		return 1, fmt.Errorf("%w: %v", ErrCost, err)
	}
	return costOf(out)
}

// costOf converts an expression's value to a cost.
func costOf(out any) (int64, error) {
	var f float64
	switch v := out.(type) {
	case int:
		if v >= 0 {
			return int64(v), nil
		}
		f = float64(v)
	case int64:
		if v >= 0 {
			return v, nil
		}
		f = float64(v)
	case float64:
		f = v
	case int32:
		f = float64(v)
	case uint64:
		return int64(min(v, math.MaxInt64)), nil
	case uint:
		return int64(min(uint64(v), math.MaxInt64)), nil
	default:
		return 1, fmt.Errorf("%w: the expression gave %T, want a number", ErrCost, out)
	}
	return costOfFloat(f)
}

// costOfFloat converts a number an expression gave to a cost.
func costOfFloat(f float64) (int64, error) {
	switch {
	case math.IsNaN(f) || f < 0:
		return 1, fmt.Errorf("%w: the expression gave %v, want 0 or more", ErrCost, f)
	case f >= math.MaxInt64:
		return math.MaxInt64, nil
	}
	return int64(math.Ceil(f)), nil
}

const reflectInterface = reflect.Interface

func isNumber(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}
