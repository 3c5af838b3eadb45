package serve

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
)

// mapDatum is a mapper.Datum of the test.
type mapDatum struct{ value string }

func (d mapDatum) ID() string                         { return "d" }
func (d mapDatum) Keys() []string                     { return []string{"k"} }
func (d mapDatum) Value() []byte                      { return []byte(d.value) }
func (d mapDatum) EventTime() time.Time               { return time.UnixMilli(1) }
func (d mapDatum) Watermark() time.Time               { return time.Time{} }
func (d mapDatum) Headers() map[string]string         { return nil }
func (d mapDatum) UserMetadata() *mapper.UserMetadata { return mapper.NewUserMetadata() }

// TestMapQueue plays the forwarder against the queue: a message whose
// writes are several results is answered with them all, one with none with
// a drop, and one nacked comes back to Read and is answered only once
// acked.
func TestMapQueue(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		nack   bool
		writes []string // the IDs' suffixes and values written
		want   []string // the answer's values; "drop" for a drop
	}{
		{"one result", false, []string{"", "a"}, []string{"a"}},
		{"several results", false, []string{"-0", "a", "-1", "b"}, []string{"a", "b"}},
		{"no result", false, nil, []string{"drop"}},
		{"nacked once", true, []string{"", "a"}, []string{"a"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := newMapQueue(time.Minute)
			answered := make(chan mapper.Messages, 1)
			go func() { answered <- q.Map(ctx, []string{"k"}, mapDatum{"in"}) }()
			buf := make([]isb.ReadMessage, 4)
			read := func() isb.ReadMessage {
				n, err := q.Read(ctx, buf)
				if err != nil || n != 1 {
					t.Fatalf("Read: %d messages, %v; want 1", n, err)
				}
				if string(buf[0].Value) != "in" {
					t.Fatalf("read %q; want in", buf[0].Value)
				}
				return buf[0]
			}
			m := read()
			if tt.nack {
				if err := q.Write(ctx, []isb.Message{{ID: m.ID, Value: []byte("early")}}, make([]error, 1)); err != nil {
					t.Fatal(err)
				}
				if err := q.Nack(ctx, []isb.ReadMessage{m}, 0); err != nil {
					t.Fatal(err)
				}
				select {
				case a := <-answered:
					t.Fatalf("answered %v before the ack", a)
				default:
				}
				m = read()
			}
			for i := 0; i < len(tt.writes); i += 2 {
				errs := make([]error, 1)
				if err := q.Write(ctx, []isb.Message{{ID: m.ID + tt.writes[i], Value: []byte(tt.writes[i+1])}}, errs); err != nil || errs[0] != nil {
					t.Fatalf("Write: %v %v", err, errs[0])
				}
			}
			if err := q.Ack(ctx, []isb.ReadMessage{m}); err != nil {
				t.Fatal(err)
			}
			a := <-answered
			var got []string
			for _, msg := range a {
				if msg.IsDrop() {
					got = append(got, "drop")
					continue
				}
				got = append(got, string(msg.Value()))
			}
			if len(got) != len(tt.want) {
				t.Fatalf("answered %v; want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("answered %v; want %v", got, tt.want)
				}
			}
			if len(q.pending) != 0 {
				t.Fatalf("%d requests still pending", len(q.pending))
			}
		})
	}
}

// TestMapQueueStream plays the forwarder against the queue's MapStream: a
// message written as several results streams them in the order written,
// once acked; one whose stream ends first streams nothing.
func TestMapQueueStream(t *testing.T) {
	t.Run("several results", func(t *testing.T) {
		ctx := context.Background()
		q := newMapQueue(time.Minute)
		out := make(chan mapper.Message, 4)
		done := make(chan struct{})
		go func() {
			defer close(done)
			q.MapStream(ctx, []string{"k"}, mapDatum{"in"}, out)
		}()
		buf := make([]isb.ReadMessage, 4)
		n, err := q.Read(ctx, buf)
		if err != nil || n != 1 || string(buf[0].Value) != "in" {
			t.Fatalf("Read: %d messages (%q), %v; want 1, in", n, buf[0].Value, err)
		}
		m := buf[0]
		for i, v := range []string{"a", "b", "c"} {
			errs := make([]error, 1)
			if err := q.Write(ctx, []isb.Message{{ID: m.ID + "-" + strconv.Itoa(i), Value: []byte(v)}}, errs); err != nil || errs[0] != nil {
				t.Fatalf("Write: %v %v", err, errs[0])
			}
		}
		select {
		case r := <-out:
			t.Fatalf("streamed %q before the ack", r.Value())
		default:
		}
		if err := q.Ack(ctx, []isb.ReadMessage{m}); err != nil {
			t.Fatal(err)
		}
		<-done
		close(out)
		var got []string
		for r := range out {
			got = append(got, string(r.Value()))
		}
		if strings.Join(got, ",") != "a,b,c" {
			t.Fatalf("streamed %v; want [a b c]", got)
		}
	})
	t.Run("stream ended first", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		q := newMapQueue(time.Minute)
		out := make(chan mapper.Message, 1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			q.MapStream(ctx, []string{"k"}, mapDatum{"in"}, out)
		}()
		buf := make([]isb.ReadMessage, 1)
		if n, err := q.Read(context.Background(), buf); err != nil || n != 1 {
			t.Fatalf("Read: %d messages, %v; want 1", n, err)
		}
		cancel()
		<-done
		if len(out) != 0 {
			t.Fatalf("streamed %d messages after the stream ended", len(out))
		}
	})
}
