package reduce

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/reduce/window"
)

// Reducer reduces the messages of one window and key set, in the order
// they were read, to its results. A result's keys are the group's unless
// it sets its own; its event time and ID are set by the Processor.
type Reducer interface {
	Reduce(ctx context.Context, w window.Window, keys []string, msgs []isb.Message) ([]isb.Message, error)
}

// ReducerFunc is a function that is a Reducer.
type ReducerFunc func(ctx context.Context, w window.Window, keys []string, msgs []isb.Message) ([]isb.Message, error)

// Reduce calls f.
func (f ReducerFunc) Reduce(ctx context.Context, w window.Window, keys []string, msgs []isb.Message) ([]isb.Message, error) {
	return f(ctx, w, keys, msgs)
}

// ErrBuiltin is the error of a built-in reducer that cannot be made: an
// unknown name or a missing argument.
var ErrBuiltin = errors.New("reduce: built-in reducer")

// Builtin returns the built-in reducer name with its arguments:
//
//   - count: one result whose value is the number of messages, in decimal.
//   - sum, with kwargs field: one result whose value is the sum of the
//     number at that top-level field of each message's JSON value, in
//     decimal; a message without a number there counts as 0.
func Builtin(name string, kwargs map[string]string) (Reducer, error) {
	switch name {
	case "count":
		return ReducerFunc(count), nil
	case "sum":
		field := kwargs["field"]
		if field == "" {
			return nil, fmt.Errorf("%w: sum needs kwargs.field, the JSON field to add up", ErrBuiltin)
		}
		return ReducerFunc(func(_ context.Context, _ window.Window, keys []string, msgs []isb.Message) ([]isb.Message, error) {
			return []isb.Message{{Keys: keys, Value: []byte(sum(field, msgs))}}, nil
		}), nil
	}
	return nil, fmt.Errorf("%w: unknown %q (want count or sum)", ErrBuiltin, name)
}

func count(_ context.Context, _ window.Window, keys []string, msgs []isb.Message) ([]isb.Message, error) {
	return []isb.Message{{Keys: keys, Value: strconv.AppendInt(nil, int64(len(msgs)), 10)}}, nil
}

// sum adds up field over msgs exactly, as a decimal number.
func sum(field string, msgs []isb.Message) string {
	total := new(big.Rat)
	for _, m := range msgs {
		var obj map[string]json.RawMessage
		if json.Unmarshal(m.Value, &obj) != nil {
			continue
		}
		var n json.Number
		d := json.NewDecoder(bytes.NewReader(obj[field]))
		d.UseNumber()
		if d.Decode(&n) != nil {
			continue
		}
		if r, ok := new(big.Rat).SetString(n.String()); ok {
			total.Add(total, r)
		}
	}
	if total.IsInt() {
		return total.Num().String()
	}
	return total.FloatString(6)
}
