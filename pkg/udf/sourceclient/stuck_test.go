package sourceclient_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/udstest"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
	"github.com/sluiceflow/sluice/pkg/udf/sourceclient"
)

// stuckSource reads, acks, nacks and tells its pending count, but the call
// named in stuck is taken and never answered.
type stuckSource struct {
	stuck atomic.Value // the call that hangs: "read", "ack", "nack", "pending" or ""
	h     *udstest.Hang
	next  atomic.Int64
}

func (s *stuckSource) hang(ctx context.Context, call string) bool {
	if s.stuck.Load() != call {
		return false
	}
	s.h.Wait(ctx)
	return true
}

func (s *stuckSource) Read(ctx context.Context, r sourcer.ReadRequest, out chan<- sourcer.Message) {
	if s.hang(ctx, "read") {
		return
	}
	for range r.Count {
		n := s.next.Add(1)
		out <- sourcer.Message{Value: []byte("x"), Offset: sourcer.Offset{Value: []byte(strconv.FormatInt(n, 10))}, EventTime: time.UnixMilli(n)}
	}
}
func (s *stuckSource) Ack(ctx context.Context, _ []sourcer.Offset)  { s.hang(ctx, "ack") }
func (s *stuckSource) Nack(ctx context.Context, _ []sourcer.Offset) { s.hang(ctx, "nack") }
func (s *stuckSource) Pending(ctx context.Context) int64 {
	s.hang(ctx, "pending")
	return 5
}
func (s *stuckSource) Partitions(context.Context) []int32 { return []int32{0} }

// Each call to a user-defined source — read, ack, nack, pending — that the
// source takes and never answers is warned about and abandoned at its
// deadline (a read's comes its read timeout later) with an error naming
// the source, the call and the deadline; the source is stuck until a call
// succeeds.
func TestStuckSourceIsAbandoned(t *testing.T) {
	const timeout, readTimeout = 30 * time.Second, time.Second
	for _, tc := range []struct {
		call, rpc string
		messages  int
		deadline  time.Duration
		do        func(ctx context.Context, s *sourceclient.Client, read []isb.ReadMessage) error
	}{
		{"read", "ReadFn", 3, timeout + readTimeout, func(ctx context.Context, s *sourceclient.Client, _ []isb.ReadMessage) error {
			_, err := s.Read(ctx, make([]isb.ReadMessage, 3))
			return err
		}},
		{"ack", "AckFn", 2, timeout, func(ctx context.Context, s *sourceclient.Client, read []isb.ReadMessage) error {
			return s.Ack(ctx, read)
		}},
		{"nack", "NackFn", 2, timeout, func(ctx context.Context, s *sourceclient.Client, read []isb.ReadMessage) error {
			return s.Nack(ctx, read, 0)
		}},
		{"pending", "PendingFn", 0, timeout, func(ctx context.Context, s *sourceclient.Client, _ []isb.ReadMessage) error {
			_, err := s.Pending(ctx)
			return err
		}},
	} {
		t.Run(tc.call, func(t *testing.T) {
			dir := udstest.SocketDir(t, "s")
			src := &stuckSource{h: udstest.NewHang()}
			src.stuck.Store("")
			udstest.Start(t, sourcer.NewServer(src, sourcer.WithSocketDir(dir)).Start)
			t.Cleanup(src.h.Release)

			st := udstest.NewStuck(timeout)
			s := sourceclient.New(dir, readTimeout, st.Logger, st.WithCalls())
			t.Cleanup(func() { s.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			read := make([]isb.ReadMessage, 2)
			if n, err := s.Read(ctx, read); err != nil || n != 2 {
				t.Fatalf("Read = %d, %v", n, err)
			}

			src.stuck.Store(tc.call)
			done := udstest.Go(func() error { return tc.do(ctx, s, read) })
			src.h.Taken(t, ctx)
			first := 5 * time.Second
			if tc.call == "read" {
				first += readTimeout
			}
			st.Warn(t, ctx, first, map[string]any{"function": "source", "call": tc.rpc, "messages": int64(tc.messages)})
			if o := st.Oldest(t, "source"); o.Call != tc.rpc || o.Deadline != tc.deadline {
				t.Errorf("Oldest = %+v; want call %s, deadline %v", o, tc.rpc, tc.deadline)
			}
			st.Abandon(t, tc.deadline, done, "source call "+tc.rpc+" of "+strconv.Itoa(tc.messages)+" messages",
				"no answer within the deadline of "+tc.deadline.String())
			udstest.NotReadyStuck(t, s.Ready)
			src.stuck.Store("")
			if n, err := s.Read(ctx, read); err != nil || n != 2 {
				t.Fatalf("Read once the source answers = %d, %v", n, err)
			}
			udstest.Ready(t, s.Ready, "once a call succeeded")
		})
	}
}
