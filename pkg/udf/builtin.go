package udf

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/expr"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// Names of the built-in map functions (spec.udf.builtin.name) and source
// transformers (spec.source.transformer.builtin.name).
var (
	BuiltinMaps         = []string{"cat", "filter"}
	BuiltinTransformers = []string{"filter", "eventTimeExtractor", "timeExtractionFilter"}
)

// NewBuiltin returns the built-in map function name configured by kwargs.
func NewBuiltin(name string, kwargs map[string]string, log *zap.Logger) (Mapper, error) {
	switch name {
	case "cat":
		if err := checkArgs(kwargs); err != nil {
			return nil, err
		}
		return Cat{}, nil
	case "filter":
		return newFilter(kwargs, "expression", log)
	}
	return nil, fmt.Errorf("unknown built-in function %q (want %s)", name, strings.Join(BuiltinMaps, " or "))
}

// NewBuiltinTransformer returns the built-in source transformer name configured by
// kwargs.
func NewBuiltinTransformer(name string, kwargs map[string]string, log *zap.Logger) (Mapper, error) {
	switch name {
	case "filter":
		return newFilter(kwargs, "expression", log)
	case "eventTimeExtractor":
		return newExtractor(kwargs, "expression", "format", log)
	case "timeExtractionFilter":
		if err := checkArgs(kwargs, "filterExpr", "eventTimeExpr", "eventTimeFormat"); err != nil {
			return nil, err
		}
		f, err := newFilter(kwargs, "filterExpr", log)
		if err != nil {
			return nil, err
		}
		x, err := newExtractor(kwargs, "eventTimeExpr", "eventTimeFormat", log)
		if err != nil {
			return nil, err
		}
		return chain{f, x}, nil
	}
	return nil, fmt.Errorf("unknown built-in transformer %q (want %s)", name, strings.Join(BuiltinTransformers, ", "))
}

// KWArgError is a missing or bad kwarg of a built-in.
type KWArgError struct {
	Key string
	Err error
}

func (e *KWArgError) Error() string { return fmt.Sprintf("kwargs.%s: %v", e.Key, e.Err) }
func (e *KWArgError) Unwrap() error { return e.Err }

func compileArg(kwargs map[string]string, key string, compile func(string) (*expr.Program, error)) (*expr.Program, error) {
	src, ok := kwargs[key]
	if !ok {
		return nil, &KWArgError{Key: key, Err: fmt.Errorf("is required")}
	}
	p, err := compile(src)
	if err != nil {
		return nil, &KWArgError{Key: key, Err: err}
	}
	return p, nil
}

// checkArgs rejects kwargs the built-in does not know.
func checkArgs(kwargs map[string]string, known ...string) error {
	var unknown []string
	for k := range kwargs {
		if !contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	if len(known) == 0 {
		return &KWArgError{Key: unknown[0], Err: fmt.Errorf("unknown argument (this built-in takes none)")}
	}
	return &KWArgError{Key: unknown[0], Err: fmt.Errorf("unknown argument (want %s)", strings.Join(known, ", "))}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// firstError logs the first evaluation error of a built-in and counts the rest, so
// that an expression that fails on every message is seen without flooding the log.
type firstError struct {
	log    *zap.Logger
	what   string
	errors atomic.Uint64
}

func (f *firstError) note(err error) {
	if f.errors.Add(1) == 1 && f.log != nil {
		f.log.Warn("expression failed; later failures are counted, not logged", zap.String("builtin", f.what), zap.Error(err))
	}
}

// Filter keeps the messages for which its expression is true and drops the rest
// (to_drop), including those for which it fails.
type Filter struct {
	prog *expr.Program
	firstError
}

func newFilter(kwargs map[string]string, key string, log *zap.Logger) (*Filter, error) {
	if key == "expression" {
		if err := checkArgs(kwargs, "expression"); err != nil {
			return nil, err
		}
	}
	p, err := compileArg(kwargs, key, expr.CompileBool)
	if err != nil {
		return nil, err
	}
	return &Filter{prog: p, firstError: firstError{log: log, what: "filter"}}, nil
}

// Map appends the messages that pass.
func (f *Filter) Map(_ context.Context, in, out []isb.Message) ([]isb.Message, int, error) {
	dropped := 0
	for i := range in {
		ok, err := f.prog.Bool(in[i].Value)
		if err != nil {
			f.note(err)
		}
		if !ok {
			dropped++
			continue
		}
		out = append(out, in[i])
	}
	return out, dropped, nil
}

// Extractor sets each message's event time from an expression, parsed with a Go
// time layout or, without one, as RFC 3339, a date and time, or a Unix time in
// seconds, milliseconds, microseconds or nanoseconds. A message whose time cannot
// be extracted keeps its event time.
type Extractor struct {
	prog   *expr.Program
	layout string
	firstError
}

func newExtractor(kwargs map[string]string, key, formatKey string, log *zap.Logger) (*Extractor, error) {
	if key == "expression" {
		if err := checkArgs(kwargs, "expression", "format"); err != nil {
			return nil, err
		}
	}
	p, err := compileArg(kwargs, key, expr.CompileString)
	if err != nil {
		return nil, err
	}
	return &Extractor{prog: p, layout: kwargs[formatKey], firstError: firstError{log: log, what: "eventTimeExtractor"}}, nil
}

// Map appends in with event times set.
func (x *Extractor) Map(_ context.Context, in, out []isb.Message) ([]isb.Message, int, error) {
	for i := range in {
		m := in[i]
		s, err := x.prog.Text(m.Value)
		if err == nil {
			var t time.Time
			if t, err = parseTime(strings.TrimSpace(s), x.layout); err == nil {
				m.EventTime = t
			}
		}
		if err != nil {
			x.note(err)
		}
		out = append(out, m)
	}
	return out, 0, nil
}

var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05", "2006-01-02", time.RFC1123Z, time.RFC1123}

func parseTime(s, layout string) (time.Time, error) {
	if layout != "" {
		return time.Parse(layout, s)
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		switch digits := len(strings.TrimPrefix(s, "-")); {
		case digits <= 10:
			return time.Unix(n, 0), nil
		case digits <= 13:
			return time.UnixMilli(n), nil
		case digits <= 16:
			return time.UnixMicro(n), nil
		default:
			return time.Unix(0, n), nil
		}
	}
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("cannot parse %q as a time", s)
}

// chain applies mappers in turn.
type chain []Mapper

func (c chain) Map(ctx context.Context, in, out []isb.Message) ([]isb.Message, int, error) {
	dropped := 0
	for i, m := range c {
		var n int
		var err error
		if i == len(c)-1 {
			out, n, err = m.Map(ctx, in, out)
		} else {
			var mid []isb.Message
			mid, n, err = m.Map(ctx, in, nil)
			in = mid
		}
		if err != nil {
			return out, dropped, err
		}
		dropped += n
	}
	return out, dropped, nil
}
