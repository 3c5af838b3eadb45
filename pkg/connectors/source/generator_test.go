package source_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/connectors/source"
	"github.com/sluiceflow/sluice/pkg/isb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is where every manual clock in these tests starts.
var t0 = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// wait bounds every wait on a channel in these tests.
const wait = 5 * time.Second

// waitArmed waits until a timer is armed on clk, so that a test knows a Read is
// waiting before it moves the clock.
func waitArmed(t *testing.T, clk *clock.Manual) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal("no timer armed on the clock")
	}
}

func newGenerator(t *testing.T, cfg source.GeneratorConfig) *source.Generator {
	t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = clock.NewManual(t0)
	}
	g, err := source.NewGenerator(cfg)
	if err != nil {
		t.Fatalf("NewGenerator(%+v) = %v", cfg, err)
	}
	return g
}

func genRead(t *testing.T, r isb.Reader, n int) []isb.ReadMessage {
	t.Helper()
	buf := make([]isb.ReadMessage, n)
	got, err := r.Read(context.Background(), buf)
	if err != nil {
		t.Fatalf("Read = %v", err)
	}
	if got > n {
		t.Fatalf("Read returned %d messages into a buffer of %d", got, n)
	}
	return buf[:got]
}

type genResult struct {
	msgs []isb.ReadMessage
	err  error
}

func genReadAsync(ctx context.Context, r isb.Reader, n int) <-chan genResult {
	ch := make(chan genResult, 1)
	go func() {
		buf := make([]isb.ReadMessage, n)
		got, err := r.Read(ctx, buf)
		ch <- genResult{buf[:got], err}
	}()
	return ch
}

func awaitRead(t *testing.T, ch <-chan genResult) []isb.ReadMessage {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Read = %v", r.err)
		}
		return r.msgs
	case <-time.After(wait):
		t.Fatal("Read did not return")
		return nil
	}
}

// payload is a generator payload taken apart.
type payload struct {
	keys      []string // top-level keys
	dataKeys  []string // keys of Data
	value     string   // Data.value as written
	padding   []byte   // Data.padding decoded; nil when absent
	createdts string   // Createdts as written
}

func parsePayload(t *testing.T, b []byte) payload {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatalf("payload %q is not a JSON object: %v", b, err)
	}
	var p payload
	p.keys = slices.Sorted(maps.Keys(top))
	var data map[string]json.RawMessage
	if err := json.Unmarshal(top["Data"], &data); err != nil {
		t.Fatalf("Data of %q is not a JSON object: %v", b, err)
	}
	p.dataKeys = slices.Sorted(maps.Keys(data))
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(data["value"]))
	dec.UseNumber()
	if err := dec.Decode(&n); err != nil {
		t.Fatalf("Data.value of %q is not a number: %v", b, err)
	}
	p.value = n.String()
	if raw, ok := data["padding"]; ok {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("Data.padding of %q is not a string: %v", b, err)
		}
		pad, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatalf("Data.padding of %q is not base64: %v", b, err)
		}
		p.padding = pad
		if p.padding == nil {
			p.padding = []byte{}
		}
	}
	dec = json.NewDecoder(bytes.NewReader(top["Createdts"]))
	dec.UseNumber()
	if err := dec.Decode(&n); err != nil {
		t.Fatalf("Createdts of %q is not a number: %v", b, err)
	}
	p.createdts = n.String()
	return p
}

func u64(v uint64) *uint64 { return &v }

func TestGeneratorPayload(t *testing.T) {
	tests := []struct {
		name       string
		cfg        source.GeneratorConfig
		wantValues []string
		wantPad    int // padding bytes; -1 for none
	}{
		{"no size", source.GeneratorConfig{}, []string{"0", "1", "2"}, -1},
		{"size 8 has no padding", source.GeneratorConfig{MsgSize: 8}, []string{"0", "1", "2"}, -1},
		{"size 9 pads one byte", source.GeneratorConfig{MsgSize: 9}, []string{"0", "1", "2"}, 1},
		{"size 100", source.GeneratorConfig{MsgSize: 100}, []string{"0", "1", "2"}, 92},
		{"size 1 KiB", source.GeneratorConfig{MsgSize: 1024}, []string{"0", "1", "2"}, 1016},
		{"fixed value", source.GeneratorConfig{Value: u64(42), MsgSize: 20}, []string{"42", "42", "42"}, 12},
		{"fixed value zero", source.GeneratorConfig{Value: u64(0)}, []string{"0", "0", "0"}, -1},
		{"largest value", source.GeneratorConfig{Value: u64(math.MaxUint64)},
			[]string{"18446744073709551615", "18446744073709551615", "18446744073709551615"}, -1},
		{"values are per generator, not per replica", source.GeneratorConfig{Replica: 3}, []string{"0", "1", "2"}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.RPU, tt.cfg.Duration = 3, time.Second
			g := newGenerator(t, tt.cfg)
			msgs := genRead(t, g, 10)
			if len(msgs) != 3 {
				t.Fatalf("Read %d messages, want 3", len(msgs))
			}
			var pad0 []byte
			for i, m := range msgs {
				p := parsePayload(t, m.Value)
				if want := []string{"Createdts", "Data"}; !slices.Equal(p.keys, want) {
					t.Errorf("message %d: keys %q, want %q", i, p.keys, want)
				}
				wantData := []string{"padding", "value"}
				if tt.wantPad < 0 {
					wantData = []string{"value"}
				}
				if !slices.Equal(p.dataKeys, wantData) {
					t.Errorf("message %d: Data keys %q, want %q", i, p.dataKeys, wantData)
				}
				if p.value != tt.wantValues[i] {
					t.Errorf("message %d: value %s, want %s", i, p.value, tt.wantValues[i])
				}
				if tt.wantPad >= 0 && len(p.padding) != tt.wantPad {
					t.Errorf("message %d: %d bytes of padding, want %d", i, len(p.padding), tt.wantPad)
				}
				if i == 0 {
					pad0 = p.padding
				}
				if want := strconv.FormatInt(t0.UnixNano(), 10); p.createdts != want {
					t.Errorf("message %d: Createdts %s, want %s", i, p.createdts, want)
				}
			}
			if tt.wantPad > 8 && bytes.Equal(pad0, make([]byte, tt.wantPad)) {
				t.Errorf("padding is all zeros, want random bytes")
			}
		})
	}
}

func TestGeneratorPayloadValueCountsAcrossReads(t *testing.T) {
	clk := clock.NewManual(t0)
	g := newGenerator(t, source.GeneratorConfig{RPU: 4, Duration: time.Second, Clock: clk, MsgSize: 16})
	var all []isb.ReadMessage
	all = append(all, genRead(t, g, 3)...)
	all = append(all, genRead(t, g, 3)...)
	clk.Advance(1500 * time.Millisecond)
	later := genRead(t, g, 10)
	all = append(all, later...)
	if len(all) != 8 {
		t.Fatalf("read %d messages, want 8", len(all))
	}
	for i, m := range all {
		p := parsePayload(t, m.Value)
		if p.value != strconv.Itoa(i) {
			t.Errorf("message %d: value %s, want %d", i, p.value, i)
		}
		// Createdts is the time of the Read that made the message.
		created := t0
		if i >= 4 {
			created = t0.Add(1500 * time.Millisecond)
		}
		if want := strconv.FormatInt(created.UnixNano(), 10); p.createdts != want {
			t.Errorf("message %d: Createdts %s, want %s", i, p.createdts, want)
		}
		if !m.EventTime.Equal(created) {
			t.Errorf("message %d: EventTime %v, want %v", i, m.EventTime, created)
		}
	}
	// The messages of an earlier Read are not overwritten by a later one.
	if p := parsePayload(t, all[0].Value); p.value != "0" || all[0].ID != "-0-0" {
		t.Errorf("first message now has value %s and id %q", p.value, all[0].ID)
	}
}

func TestGeneratorIDs(t *testing.T) {
	tests := []struct {
		name    string
		vertex  string
		replica int
		want    []string
	}{
		{"vertex and replica 0", "in", 0, []string{"in-0-0", "in-0-1", "in-0-2", "in-0-3", "in-0-4"}},
		{"replica 12", "gen", 12, []string{"gen-12-0", "gen-12-1", "gen-12-2", "gen-12-3", "gen-12-4"}},
		{"no vertex name", "", 1, []string{"-1-0", "-1-1", "-1-2", "-1-3", "-1-4"}},
		{"vertex name with dashes", "my-source", 2, []string{"my-source-2-0", "my-source-2-1", "my-source-2-2", "my-source-2-3", "my-source-2-4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGenerator(t, source.GeneratorConfig{RPU: 5, Duration: time.Second, Vertex: tt.vertex, Replica: tt.replica})
			var ids []string
			for _, n := range []int{2, 2, 2} {
				for _, m := range genRead(t, g, n) {
					ids = append(ids, m.ID)
				}
			}
			if !slices.Equal(ids, tt.want) {
				t.Fatalf("ids %q, want %q", ids, tt.want)
			}
		})
	}
}

func TestGeneratorKeys(t *testing.T) {
	tests := []struct {
		name     string
		keyCount int
		keys     []string
		replica  int
		want     [][]string
	}{
		{"no keys", 0, nil, 0, [][]string{nil, nil, nil, nil, nil}},
		{"one key", 1, nil, 0, [][]string{{"key-0-0"}, {"key-0-0"}, {"key-0-0"}, {"key-0-0"}, {"key-0-0"}}},
		{"round robin", 3, nil, 0, [][]string{{"key-0-0"}, {"key-0-1"}, {"key-0-2"}, {"key-0-0"}, {"key-0-1"}}},
		{"replica in the key", 2, nil, 4, [][]string{{"key-4-0"}, {"key-4-1"}, {"key-4-0"}, {"key-4-1"}, {"key-4-0"}}},
		{"more keys than messages", 10, nil, 1, [][]string{{"key-1-0"}, {"key-1-1"}, {"key-1-2"}, {"key-1-3"}, {"key-1-4"}}},
		{"listed keys, the same on every replica", 0, []string{"hot", "hot", "cold"}, 3, [][]string{{"hot"}, {"hot"}, {"cold"}, {"hot"}, {"hot"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGenerator(t, source.GeneratorConfig{RPU: 5, Duration: time.Second, KeyCount: tt.keyCount, Keys: tt.keys, Replica: tt.replica})
			// Read in uneven batches: the round robin goes on across reads.
			var keys [][]string
			for _, n := range []int{2, 1, 2} {
				for _, m := range genRead(t, g, n) {
					keys = append(keys, m.Keys)
				}
			}
			if len(keys) != len(tt.want) {
				t.Fatalf("read %d messages, want %d", len(keys), len(tt.want))
			}
			for i := range keys {
				if !slices.Equal(keys[i], tt.want[i]) || (keys[i] == nil) != (tt.want[i] == nil) {
					t.Errorf("message %d: keys %q, want %q", i, keys[i], tt.want[i])
				}
			}
		})
	}
}

func TestGeneratorValueBlob(t *testing.T) {
	tests := []struct {
		name string
		blob []byte
	}{
		{"text", []byte("hello")},
		{"JSON", []byte(`{"id":1,"name":"x"}`)},
		{"binary", []byte{0, 1, 0xff, '\n'}},
		{"empty", []byte{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGenerator(t, source.GeneratorConfig{RPU: 3, Duration: time.Second, ValueBlob: tt.blob,
				MsgSize: 100, Value: u64(9), KeyCount: 2, Vertex: "v"})
			msgs := genRead(t, g, 10)
			if len(msgs) != 3 {
				t.Fatalf("Read %d messages, want 3", len(msgs))
			}
			for i, m := range msgs {
				if !bytes.Equal(m.Value, tt.blob) || m.Value == nil {
					t.Errorf("message %d: payload %q, want %q", i, m.Value, tt.blob)
				}
				if want := "v-0-" + strconv.Itoa(i); m.ID != want {
					t.Errorf("message %d: id %q, want %q", i, m.ID, want)
				}
				if want := []string{"key-0-" + strconv.Itoa(i%2)}; !slices.Equal(m.Keys, want) {
					t.Errorf("message %d: keys %q, want %q", i, m.Keys, want)
				}
			}
		})
	}
}

func TestGeneratorRate(t *testing.T) {
	clk := clock.NewManual(t0)
	g := newGenerator(t, source.GeneratorConfig{RPU: 5, Duration: time.Second, Clock: clk})
	steps := []struct {
		name    string
		advance time.Duration
		bufLen  int
		want    int
	}{
		{"RPU at once", 0, 10, 5},
		{"then nothing", 0, 10, 0},
		{"nothing just before the next tick", 999 * time.Millisecond, 10, 0},
		{"RPU at the next tick", time.Millisecond, 10, 5},
		{"nothing in the same tick", 500 * time.Millisecond, 10, 0},
		{"unread ticks add up", 3 * time.Second, 10, 10},
		{"the rest of them", 0, 10, 5},
		{"empty again", 0, 10, 0},
		{"a small buffer", 2 * time.Second, 3, 3},
		{"the small buffer again", 0, 3, 3},
		{"what is left", 0, 3, 3},
		{"the last", 0, 3, 1},
		{"a zero-length buffer", time.Second, 0, 0},
		{"a tick kept for the next read", 0, 1, 1},
	}
	for _, s := range steps {
		clk.Advance(s.advance)
		if got := len(genRead(t, g, s.bufLen)); got != s.want {
			t.Fatalf("%s (at %v): Read %d messages, want %d", s.name, clk.Now().Sub(t0), got, s.want)
		}
	}
}

func TestGeneratorReadNeverMoreThanBuffer(t *testing.T) {
	tests := []struct {
		name   string
		rpu    int64
		bufLen int
	}{
		{"buffer of one", 100, 1},
		{"buffer of seven", 100, 7},
		{"buffer larger than RPU", 5, 50},
		{"buffer equal to RPU", 8, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGenerator(t, source.GeneratorConfig{RPU: tt.rpu, Duration: time.Second})
			total := 0
			for {
				n := len(genRead(t, g, tt.bufLen))
				if n == 0 {
					break
				}
				total += n
			}
			if total != int(tt.rpu) {
				t.Fatalf("read %d messages in all, want %d", total, tt.rpu)
			}
		})
	}
}

func TestGeneratorReadWaitsForTick(t *testing.T) {
	tests := []struct {
		name        string
		duration    time.Duration
		readTimeout time.Duration
		wantArmed   time.Duration // the wait the Read arms
		want        int
	}{
		{"the tick comes within the timeout", time.Second, 10 * time.Second, time.Second, 4},
		{"the timeout comes first", time.Second, 300 * time.Millisecond, 300 * time.Millisecond, 0},
		{"the tick comes at the timeout", time.Second, time.Second, time.Second, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewManual(t0)
			g := newGenerator(t, source.GeneratorConfig{RPU: 4, Duration: tt.duration, ReadTimeout: tt.readTimeout, Clock: clk})
			if n := len(genRead(t, g, 10)); n != 4 {
				t.Fatalf("first Read %d messages, want 4", n)
			}
			ch := genReadAsync(context.Background(), g, 10)
			waitArmed(t, clk)
			clk.Advance(tt.wantArmed - time.Nanosecond)
			select {
			case r := <-ch:
				t.Fatalf("Read returned %d messages before the clock reached its wait", len(r.msgs))
			default:
			}
			clk.Advance(time.Nanosecond)
			if n := len(awaitRead(t, ch)); n != tt.want {
				t.Fatalf("Read %d messages, want %d", n, tt.want)
			}
			if clk.Pending() != 0 {
				t.Fatalf("Read left %d timers on the clock", clk.Pending())
			}
		})
	}
}

func TestGeneratorReadWaitsAgain(t *testing.T) {
	// A long read timeout spans several ticks, each taken by another reader: the
	// Read waits for the tick after.
	clk := clock.NewManual(t0)
	g := newGenerator(t, source.GeneratorConfig{RPU: 2, Duration: time.Second, ReadTimeout: time.Minute, Clock: clk})
	genRead(t, g, 10)
	ch := genReadAsync(context.Background(), g, 10)
	waitArmed(t, clk)
	clk.Advance(time.Second - time.Nanosecond)
	select {
	case r := <-ch:
		t.Fatalf("Read returned %d messages before the next tick", len(r.msgs))
	default:
	}
	clk.Advance(time.Nanosecond)
	if n := len(awaitRead(t, ch)); n != 2 {
		t.Fatalf("Read %d messages, want 2", n)
	}
}

func TestGeneratorReadReturnsOnCancel(t *testing.T) {
	clk := clock.NewManual(t0)
	g := newGenerator(t, source.GeneratorConfig{RPU: 1, Duration: time.Hour, ReadTimeout: 2 * time.Hour, Clock: clk})
	genRead(t, g, 1)
	ctx, cancel := context.WithCancel(context.Background())
	ch := genReadAsync(ctx, g, 1)
	waitArmed(t, clk)
	cancel()
	if n := len(awaitRead(t, ch)); n != 0 {
		t.Fatalf("Read %d messages, want 0", n)
	}
}

func TestGeneratorEventTime(t *testing.T) {
	tests := []struct {
		name   string
		jitter time.Duration
	}{
		{"no jitter", 0},
		{"a nanosecond", time.Nanosecond},
		{"a second", time.Second},
		{"an hour", time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewManual(t0)
			g := newGenerator(t, source.GeneratorConfig{RPU: 2000, Duration: time.Second, Jitter: tt.jitter, Clock: clk})
			clk.Advance(2500 * time.Millisecond) // event times follow the read, not the tick
			now := clk.Now()
			msgs := genRead(t, g, 2000)
			if len(msgs) != 2000 {
				t.Fatalf("Read %d messages, want 2000", len(msgs))
			}
			distinct := map[time.Time]bool{}
			for i, m := range msgs {
				if m.EventTime.After(now) || m.EventTime.Before(now.Add(-tt.jitter)) {
					t.Fatalf("message %d: EventTime %v outside [%v, %v]", i, m.EventTime, now.Add(-tt.jitter), now)
				}
				distinct[m.EventTime] = true
			}
			if tt.jitter >= time.Second && len(distinct) < 2 {
				t.Errorf("jitter %v gave a single event time to 2000 messages", tt.jitter)
			}
			if tt.jitter == 0 && len(distinct) != 1 {
				t.Errorf("no jitter gave %d event times, want 1", len(distinct))
			}
		})
	}
}

func TestGeneratorInvalidConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  source.GeneratorConfig
	}{
		{"RPU 0", source.GeneratorConfig{RPU: 0, Duration: time.Second}},
		{"negative RPU", source.GeneratorConfig{RPU: -1, Duration: time.Second}},
		{"duration 0", source.GeneratorConfig{RPU: 1, Duration: 0}},
		{"negative duration", source.GeneratorConfig{RPU: 1, Duration: -time.Second}},
		{"negative message size", source.GeneratorConfig{RPU: 1, Duration: time.Second, MsgSize: -1}},
		{"negative key count", source.GeneratorConfig{RPU: 1, Duration: time.Second, KeyCount: -1}},
		{"negative jitter", source.GeneratorConfig{RPU: 1, Duration: time.Second, Jitter: -time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if g, err := source.NewGenerator(tt.cfg); err == nil {
				t.Fatalf("NewGenerator(%+v) = %v, want an error", tt.cfg, g)
			}
		})
	}
}

func TestGeneratorAckDoesNothing(t *testing.T) {
	g := newGenerator(t, source.GeneratorConfig{RPU: 2, Duration: time.Second})
	msgs := genRead(t, g, 2)
	if err := g.Ack(context.Background(), msgs); err != nil {
		t.Fatalf("Ack = %v", err)
	}
	if n := len(genRead(t, g, 2)); n != 0 {
		t.Fatalf("Read after Ack gave %d messages, want 0: acked messages are not made again", n)
	}
}

func TestGeneratorConcurrentReads(t *testing.T) {
	const rpu = 1000
	clk := clock.NewManual(t0)
	g := newGenerator(t, source.GeneratorConfig{RPU: rpu, Duration: time.Second, Clock: clk, Vertex: "c", MsgSize: 12})
	var (
		mu  sync.Mutex
		ids = map[string]string{} // id -> value
		wg  sync.WaitGroup
	)
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			buf := make([]isb.ReadMessage, 7)
			for {
				n, err := g.Read(context.Background(), buf)
				if err != nil {
					errs <- err
					return
				}
				if n == 0 {
					return
				}
				mu.Lock()
				for _, m := range buf[:n] {
					var p struct{ Data struct{ Value uint64 } }
					if err := json.Unmarshal(m.Value, &p); err != nil {
						errs <- err
						mu.Unlock()
						return
					}
					ids[m.ID] = strconv.FormatUint(p.Data.Value, 10)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(ids) != rpu {
		t.Fatalf("read %d distinct ids, want %d", len(ids), rpu)
	}
	for i := range rpu {
		id := "c-0-" + strconv.Itoa(i)
		if v, ok := ids[id]; !ok || v != strconv.Itoa(i) {
			t.Fatalf("id %s: value %q (present %v), want %d", id, v, ok, i)
		}
	}
}

func TestGeneratorRealClock(t *testing.T) {
	g, err := source.NewGenerator(source.GeneratorConfig{RPU: 3, Duration: time.Hour, ReadTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	msgs := genRead(t, g, 10)
	if len(msgs) != 3 {
		t.Fatalf("Read %d messages, want 3", len(msgs))
	}
	if et := msgs[0].EventTime; et.Before(before.Add(-time.Second)) || et.After(time.Now()) {
		t.Errorf("EventTime %v is not the read time", et)
	}
	start := time.Now()
	if n := len(genRead(t, g, 10)); n != 0 {
		t.Fatalf("second Read %d messages, want 0", n)
	}
	if d := time.Since(start); d < 20*time.Millisecond || d > wait {
		t.Fatalf("second Read took %v, want about its 20ms read timeout", d)
	}
}

func TestGeneratorClockBack(t *testing.T) {
	clk := clock.NewManual(t0)
	g := newGenerator(t, source.GeneratorConfig{RPU: 2, Duration: time.Second, Clock: clk})
	genRead(t, g, 10)
	clk.Set(t0.Add(-5 * time.Second))
	if n := len(genRead(t, g, 10)); n != 0 {
		t.Fatalf("Read %d messages with the clock set back, want 0", n)
	}
}

func ExampleGenerator() {
	g, _ := source.NewGenerator(source.GeneratorConfig{RPU: 2, Duration: time.Second, Vertex: "in",
		KeyCount: 1, Clock: clock.NewManual(time.Unix(1700000000, 0))})
	buf := make([]isb.ReadMessage, 5)
	n, _ := g.Read(context.Background(), buf)
	for _, m := range buf[:n] {
		fmt.Println(m.ID, strings.Join(m.Keys, ","), string(m.Value))
	}
	// Output:
	// in-0-0 key-0-0 {"Data":{"value":0},"Createdts":1700000000000000000}
	// in-0-1 key-0-0 {"Data":{"value":1},"Createdts":1700000000000000000}
}
