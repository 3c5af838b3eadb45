package udf_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/udf"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// old is the event time messages have before a transformer sets it.
var old = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func msg(payload string) isb.Message {
	return isb.Message{ID: "id-" + payload, Value: []byte(payload), Keys: []string{"k"},
		EventTime: old, Headers: map[string]string{"h": "v"}, Tags: []string{"t"}}
}

func payloads(ms []isb.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Value))
	}
	return out
}

func mapAll(t *testing.T, m udf.Mapper, in ...isb.Message) ([]isb.Message, int) {
	t.Helper()
	out, dropped, err := m.Map(context.Background(), in, nil)
	if err != nil {
		t.Fatalf("Map = %v", err)
	}
	return out, dropped
}

func TestCat(t *testing.T) {
	tests := []struct {
		name string
		in   []isb.Message
		out  []isb.Message // already in out before Map
	}{
		{"none", nil, nil},
		{"one", []isb.Message{msg("a")}, nil},
		{"several", []isb.Message{msg("a"), msg("b"), {Value: []byte("bare")}}, nil},
		{"appends to out", []isb.Message{msg("b")}, []isb.Message{msg("a")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := udf.NewBuiltin("cat", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			out, dropped, err := m.Map(context.Background(), tt.in, slices.Clone(tt.out))
			if err != nil || dropped != 0 {
				t.Fatalf("Map dropped %d, err %v; want 0, nil", dropped, err)
			}
			want := append(slices.Clone(tt.out), tt.in...)
			if !reflect.DeepEqual(out, want) {
				t.Fatalf("Map = %+v, want %+v", out, want)
			}
		})
	}
}

func TestCatType(t *testing.T) {
	out, dropped, err := udf.Cat{}.Map(context.Background(), []isb.Message{msg("x")}, nil)
	if err != nil || dropped != 0 || !reflect.DeepEqual(out, []isb.Message{msg("x")}) {
		t.Fatalf("Cat.Map = %+v, %d, %v", out, dropped, err)
	}
}

func TestFilter(t *testing.T) {
	const even = "int(json(payload).id) % 2 == 0"
	tests := []struct {
		name        string
		expression  string
		in          []string
		want        []string
		wantDropped int
		wantWarns   int // warnings logged: the first failure only
	}{
		{"keeps even ids", even, []string{`{"id":0}`, `{"id":1}`, `{"id":2}`, `{"id":3}`, `{"id":4}`},
			[]string{`{"id":0}`, `{"id":2}`, `{"id":4}`}, 2, 0},
		{"all pass", even, []string{`{"id":2}`, `{"id":"6"}`}, []string{`{"id":2}`, `{"id":"6"}`}, 0, 0},
		{"none pass", even, []string{`{"id":1}`, `{"id":5}`}, nil, 2, 0},
		{"empty batch", even, nil, nil, 0, 0},
		{"drops what is not JSON", even, []string{`{"id":2}`, `not json`, `{"id":4}`, `[]`, ``},
			[]string{`{"id":2}`, `{"id":4}`}, 3, 1},
		{"drops what has no id", even, []string{`{"name":"x"}`, `{"id":8}`}, []string{`{"id":8}`}, 1, 1},
		{"sprig", "sprig.contains('James', json(payload).name)",
			[]string{`{"name":"James Bond"}`, `{"name":"Jane"}`, `{"name":"Jim James"}`},
			[]string{`{"name":"James Bond"}`, `{"name":"Jim James"}`}, 1, 0},
		{"payload text", `payload startsWith "keep"`, []string{"keep me", "drop me"}, []string{"keep me"}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.WarnLevel)
			m, err := udf.NewBuiltin("filter", map[string]string{"expression": tt.expression}, zap.New(core))
			if err != nil {
				t.Fatalf("NewBuiltin = %v", err)
			}
			var in []isb.Message
			for _, p := range tt.in {
				in = append(in, msg(p))
			}
			out, dropped := mapAll(t, m, in...)
			if !slices.Equal(payloads(out), tt.want) {
				t.Fatalf("kept %q, want %q", payloads(out), tt.want)
			}
			if dropped != tt.wantDropped {
				t.Errorf("dropped %d, want %d", dropped, tt.wantDropped)
			}
			for _, o := range out {
				if want := msg(string(o.Value)); !reflect.DeepEqual(o, want) {
					t.Errorf("kept message %+v changed, want %+v", o, want)
				}
			}
			if n := logs.Len(); n != tt.wantWarns {
				t.Errorf("logged %d warnings, want %d: %v", n, tt.wantWarns, logs.All())
			}
		})
	}
}

func TestFilterLogsFirstFailureOnly(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	m, err := udf.NewBuiltin("filter", map[string]string{"expression": "json(payload).ok == true"}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, dropped := mapAll(t, m, msg("x"), msg("y"))
		if dropped != 2 {
			t.Fatalf("dropped %d, want 2", dropped)
		}
	}
	if logs.Len() != 1 {
		t.Fatalf("logged %d warnings for 6 failures, want 1", logs.Len())
	}
	// A nil logger is allowed.
	m, err = udf.NewBuiltin("filter", map[string]string{"expression": "json(payload).ok == true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, dropped := mapAll(t, m, msg("x")); dropped != 1 {
		t.Fatalf("dropped %d, want 1", dropped)
	}
}

func TestFilterAppendsToOut(t *testing.T) {
	m, err := udf.NewBuiltin("filter", map[string]string{"expression": `payload != "b"`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, dropped, err := m.Map(context.Background(), []isb.Message{msg("a"), msg("b"), msg("c")}, []isb.Message{msg("before")})
	if err != nil || dropped != 1 {
		t.Fatalf("Map dropped %d, err %v", dropped, err)
	}
	if want := []string{"before", "a", "c"}; !slices.Equal(payloads(out), want) {
		t.Fatalf("out %q, want %q", payloads(out), want)
	}
}

func TestFilterConcurrentUse(t *testing.T) {
	m, err := udf.NewBuiltin("filter", map[string]string{"expression": "int(json(payload).id) % 2 == 0"}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			var in []isb.Message
			for i := range 100 {
				in = append(in, msg(`{"id":`+strconv.Itoa(g*100+i)+`}`))
			}
			in = append(in, msg("bad"))
			out, dropped, err := m.Map(context.Background(), in, nil)
			if err != nil || len(out) != 50 || dropped != 51 {
				errs <- errors.New("goroutine " + strconv.Itoa(g) + ": kept " + strconv.Itoa(len(out)) + ", dropped " + strconv.Itoa(dropped))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestNewBuiltinErrors(t *testing.T) {
	tests := []struct {
		name    string
		builtin string
		kwargs  map[string]string
		wantKey string // the KWArgError's key; "" for another error
	}{
		{"unknown name", "nosuch", nil, ""},
		{"cat with a kwarg", "cat", map[string]string{"expression": "true"}, "expression"},
		{"transformer name is not a map", "eventTimeExtractor", map[string]string{"expression": "payload"}, ""},
		{"filter without kwargs", "filter", nil, "expression"},
		{"filter without expression", "filter", map[string]string{}, "expression"},
		{"filter with an unknown kwarg", "filter", map[string]string{"expression": "true", "exprssion": "x"}, "exprssion"},
		{"filter with only an unknown kwarg", "filter", map[string]string{"filterExpr": "true"}, "filterExpr"},
		{"filter with an empty expression", "filter", map[string]string{"expression": ""}, "expression"},
		{"filter with a syntax error", "filter", map[string]string{"expression": "1 +"}, "expression"},
		{"filter not bool", "filter", map[string]string{"expression": "1 + 2"}, "expression"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := udf.NewBuiltin(tt.builtin, tt.kwargs, nil)
			checkBuiltinError(t, m, err, tt.wantKey)
		})
	}
}

func checkBuiltinError(t *testing.T, m udf.Mapper, err error, wantKey string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got %T, want an error", m)
	}
	var kw *udf.KWArgError
	switch {
	case wantKey == "" && errors.As(err, &kw):
		t.Fatalf("error %v is a KWArgError, want another error", err)
	case wantKey == "":
	case !errors.As(err, &kw):
		t.Fatalf("error %v (%T) is not a *udf.KWArgError", err, err)
	case kw.Key != wantKey:
		t.Fatalf("KWArgError.Key = %q, want %q (%v)", kw.Key, wantKey, err)
	case kw.Unwrap() == nil || kw.Error() == "":
		t.Fatalf("KWArgError %#v has no cause", kw)
	}
}

func TestNewBuiltinTransformerErrors(t *testing.T) {
	tests := []struct {
		name    string
		builtin string
		kwargs  map[string]string
		wantKey string
	}{
		{"unknown name", "nosuch", nil, ""},
		{"map name is not a transformer", "cat", nil, ""},
		{"filter without expression", "filter", nil, "expression"},
		{"filter with an unknown kwarg", "filter", map[string]string{"expression": "true", "format": "x"}, "format"},
		{"extractor without expression", "eventTimeExtractor", map[string]string{"format": time.RFC3339}, "expression"},
		{"extractor with an unknown kwarg", "eventTimeExtractor", map[string]string{"expression": "payload", "formt": "x"}, "formt"},
		{"extractor with a syntax error", "eventTimeExtractor", map[string]string{"expression": "json(payload"}, "expression"},
		{"extractor with an empty expression", "eventTimeExtractor", map[string]string{"expression": ""}, "expression"},
		{"time filter without filterExpr", "timeExtractionFilter", map[string]string{"eventTimeExpr": "payload"}, "filterExpr"},
		{"time filter without eventTimeExpr", "timeExtractionFilter", map[string]string{"filterExpr": "true"}, "eventTimeExpr"},
		{"time filter with expression instead", "timeExtractionFilter", map[string]string{"expression": "true"}, "expression"},
		{"time filter with an unknown kwarg", "timeExtractionFilter",
			map[string]string{"filterExpr": "true", "eventTimeExpr": "payload", "eventTimeFormt": time.RFC3339}, "eventTimeFormt"},
		{"time filter not bool", "timeExtractionFilter", map[string]string{"filterExpr": "payload", "eventTimeExpr": "payload"}, "filterExpr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := udf.NewBuiltinTransformer(tt.builtin, tt.kwargs, nil)
			checkBuiltinError(t, m, err, tt.wantKey)
		})
	}
}

func TestEventTimeExtractor(t *testing.T) {
	tests := []struct {
		name       string
		expression string
		format     string
		payload    string
		want       time.Time
	}{
		{"RFC 3339", "json(payload).time", "", `{"time":"2024-05-06T07:08:09Z"}`,
			time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)},
		{"RFC 3339 with nanoseconds and an offset", "json(payload).time", "", `{"time":"2024-05-06T09:08:09.123456789+02:00"}`,
			time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)},
		{"date and time", "json(payload).time", "", `{"time":"2024-05-06 07:08:09"}`,
			time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)},
		{"date and time with a T", "json(payload).time", "", `{"time":"2024-05-06T07:08:09"}`,
			time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)},
		{"date", "json(payload).time", "", `{"time":"2024-05-06"}`, time.Date(2024, 5, 6, 0, 0, 0, 0, time.UTC)},
		{"RFC 1123", "json(payload).time", "", `{"time":"Mon, 06 May 2024 07:08:09 +0000"}`,
			time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)},
		{"surrounding spaces", "json(payload).time", "", `{"time":"  2024-05-06T07:08:09Z "}`,
			time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)},
		{"epoch seconds", "json(payload).time", "", `{"time":"1700000000"}`, time.Unix(1700000000, 0)},
		{"epoch seconds, few digits", "json(payload).time", "", `{"time":"86400"}`, time.Unix(86400, 0)},
		{"epoch milliseconds", "json(payload).time", "", `{"time":"1700000000123"}`, time.UnixMilli(1700000000123)},
		{"epoch microseconds", "json(payload).time", "", `{"time":"1700000000123456"}`, time.UnixMicro(1700000000123456)},
		{"epoch nanoseconds", "json(payload).time", "", `{"time":"1700000000123456789"}`, time.Unix(0, 1700000000123456789)},
		{"negative epoch seconds", "json(payload).time", "", `{"time":"-86400"}`, time.Unix(-86400, 0)},
		{"epoch milliseconds as a JSON number through int", "int(json(payload).time)", "", `{"time":1700000000123}`,
			time.UnixMilli(1700000000123)},
		{"whole payload", "payload", "", "2024-05-06T07:08:09Z", time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)},
		{"Go layout", "json(payload).time", "2006/01/02 15:04", `{"time":"2024/05/06 07:08"}`,
			time.Date(2024, 5, 6, 7, 8, 0, 0, time.UTC)},
		{"Go layout RFC 3339", "json(payload).time", time.RFC3339, `{"time":"2024-05-06T07:08:09Z"}`,
			time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)},
		{"Go layout with a zone", "json(payload).time", "02 Jan 06 15:04 -0700", `{"time":"06 May 24 09:08 +0200"}`,
			time.Date(2024, 5, 6, 7, 8, 0, 0, time.UTC)},
		// Extraction that fails keeps the event time.
		{"payload not JSON keeps the event time", "json(payload).time", "", `not json`, old},
		{"missing field keeps the event time", "json(payload).time", "", `{"other":"2024-05-06"}`, old},
		{"not a time keeps the event time", "json(payload).time", "", `{"time":"yesterday"}`, old},
		{"empty keeps the event time", "json(payload).time", "", `{"time":""}`, old},
		{"layout mismatch keeps the event time", "json(payload).time", "2006/01/02", `{"time":"2024-05-06"}`, old},
		{"epoch with a layout keeps the event time", "json(payload).time", time.RFC3339, `{"time":"1700000000"}`, old},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kwargs := map[string]string{"expression": tt.expression}
			if tt.format != "" {
				kwargs["format"] = tt.format
			}
			m, err := udf.NewBuiltinTransformer("eventTimeExtractor", kwargs, nil)
			if err != nil {
				t.Fatalf("NewBuiltinTransformer = %v", err)
			}
			in := []isb.Message{msg(tt.payload)}
			out, dropped := mapAll(t, m, in...)
			if dropped != 0 || len(out) != 1 {
				t.Fatalf("Map gave %d messages, dropped %d; want 1, 0", len(out), dropped)
			}
			if !out[0].EventTime.Equal(tt.want) {
				t.Errorf("EventTime = %v, want %v", out[0].EventTime, tt.want)
			}
			want := msg(tt.payload)
			want.EventTime = out[0].EventTime
			if !reflect.DeepEqual(out[0], want) {
				t.Errorf("message %+v changed beyond its event time", out[0])
			}
			if !in[0].EventTime.Equal(old) {
				t.Errorf("input message's event time changed to %v", in[0].EventTime)
			}
		})
	}
}

func TestEventTimeExtractorJSONNumber(t *testing.T) {
	m, err := udf.NewBuiltinTransformer("eventTimeExtractor", map[string]string{"expression": "json(payload).time"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := mapAll(t, m, msg(`{"time":1700000000123}`))
	if want := time.UnixMilli(1700000000123); !out[0].EventTime.Equal(want) {
		t.Fatalf("EventTime = %v, want %v", out[0].EventTime, want)
	}
}

func TestEventTimeExtractorBatch(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	m, err := udf.NewBuiltinTransformer("eventTimeExtractor", map[string]string{"expression": "json(payload).t"}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	out, dropped, err := m.Map(context.Background(),
		[]isb.Message{msg(`{"t":"1000"}`), msg(`bad`), msg(`{"t":"2000"}`), msg(`{"t":"never"}`)},
		[]isb.Message{msg("before")})
	if err != nil || dropped != 0 {
		t.Fatalf("Map dropped %d, err %v", dropped, err)
	}
	want := []time.Time{old, time.Unix(1000, 0), old, time.Unix(2000, 0), old}
	if len(out) != len(want) {
		t.Fatalf("Map gave %d messages, want %d", len(out), len(want))
	}
	for i := range want {
		if !out[i].EventTime.Equal(want[i]) {
			t.Errorf("message %d: EventTime = %v, want %v", i, out[i].EventTime, want[i])
		}
	}
	if logs.Len() != 1 {
		t.Errorf("logged %d warnings for 2 failures, want 1", logs.Len())
	}
}

func TestTimeExtractionFilter(t *testing.T) {
	tests := []struct {
		name        string
		kwargs      map[string]string
		in          []string
		want        []string
		wantTimes   []time.Time
		wantDropped int
	}{
		{
			name:        "filters then extracts",
			kwargs:      map[string]string{"filterExpr": `json(payload).keep == "yes"`, "eventTimeExpr": "json(payload).t"},
			in:          []string{`{"keep":"yes","t":"1000"}`, `{"keep":"no","t":"2000"}`, `{"keep":"yes","t":"3000"}`},
			want:        []string{`{"keep":"yes","t":"1000"}`, `{"keep":"yes","t":"3000"}`},
			wantTimes:   []time.Time{time.Unix(1000, 0), time.Unix(3000, 0)},
			wantDropped: 1,
		},
		{
			name: "with a format",
			kwargs: map[string]string{"filterExpr": `sprig.contains("ok", payload)`, "eventTimeExpr": "json(payload).t",
				"eventTimeFormat": "2006-01-02 15h04"},
			in:          []string{`{"s":"ok","t":"2024-05-06 07h08"}`, `{"s":"no","t":"2024-05-06 08h08"}`},
			want:        []string{`{"s":"ok","t":"2024-05-06 07h08"}`},
			wantTimes:   []time.Time{time.Date(2024, 5, 6, 7, 8, 0, 0, time.UTC)},
			wantDropped: 1,
		},
		{
			name:        "failed filter drops, failed extraction keeps the event time",
			kwargs:      map[string]string{"filterExpr": `json(payload).keep == "yes"`, "eventTimeExpr": "json(payload).t"},
			in:          []string{`not json`, `{"keep":"yes","t":"soon"}`, `{"keep":"yes"}`},
			want:        []string{`{"keep":"yes","t":"soon"}`, `{"keep":"yes"}`},
			wantTimes:   []time.Time{old, old},
			wantDropped: 1,
		},
		{
			name:        "all dropped",
			kwargs:      map[string]string{"filterExpr": "false", "eventTimeExpr": "payload"},
			in:          []string{`a`, `b`},
			wantDropped: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := udf.NewBuiltinTransformer("timeExtractionFilter", tt.kwargs, nil)
			if err != nil {
				t.Fatalf("NewBuiltinTransformer = %v", err)
			}
			var in []isb.Message
			for _, p := range tt.in {
				in = append(in, msg(p))
			}
			out, dropped, err := m.Map(context.Background(), in, []isb.Message{msg("before")})
			if err != nil {
				t.Fatal(err)
			}
			if dropped != tt.wantDropped {
				t.Errorf("dropped %d, want %d", dropped, tt.wantDropped)
			}
			if got, want := payloads(out), append([]string{"before"}, tt.want...); !slices.Equal(got, want) {
				t.Fatalf("out %q, want %q", got, want)
			}
			for i, wt := range tt.wantTimes {
				if !out[i+1].EventTime.Equal(wt) {
					t.Errorf("message %d: EventTime = %v, want %v", i, out[i+1].EventTime, wt)
				}
			}
		})
	}
}

func TestBuiltinFilterTransformer(t *testing.T) {
	m, err := udf.NewBuiltinTransformer("filter", map[string]string{"expression": "int(json(payload).id) % 2 == 0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, dropped := mapAll(t, m, msg(`{"id":1}`), msg(`{"id":2}`), msg(`x`))
	if !slices.Equal(payloads(out), []string{`{"id":2}`}) || dropped != 2 {
		t.Fatalf("kept %q, dropped %d", payloads(out), dropped)
	}
}

func TestBuiltinNames(t *testing.T) {
	for _, name := range udf.BuiltinMaps {
		t.Run("map "+name, func(t *testing.T) {
			kwargs := map[string]string{"expression": "true"}
			if name == "cat" {
				kwargs = nil
			}
			if _, err := udf.NewBuiltin(name, kwargs, nil); err != nil {
				t.Fatalf("NewBuiltin(%q) = %v", name, err)
			}
		})
	}
	for _, name := range udf.BuiltinTransformers {
		t.Run("transformer "+name, func(t *testing.T) {
			kwargs := map[string]string{"expression": "true"}
			if name == "timeExtractionFilter" {
				kwargs = map[string]string{"filterExpr": "true", "eventTimeExpr": "payload"}
			}
			if _, err := udf.NewBuiltinTransformer(name, kwargs, nil); err != nil {
				t.Fatalf("NewBuiltinTransformer(%q) = %v", name, err)
			}
		})
	}
}
