package source_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluiceflow/sluice/pkg/clock"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcer"
	"github.com/sluiceflow/sluice/pkg/source"
	"github.com/sluiceflow/sluice/pkg/udsconn"
)

// stuckSource reads, acks, nacks and tells its pending count, but the call
// named in stuck is taken and never answered.
type stuckSource struct {
	stuck   atomic.Value // the call that hangs: "read", "ack", "nack", "pending" or ""
	got     chan struct{}
	release chan struct{}
	next    atomic.Int64
}

func (s *stuckSource) hang(ctx context.Context, call string) bool {
	if s.stuck.Load() != call {
		return false
	}
	s.got <- struct{}{}
	select {
	case <-ctx.Done():
	case <-s.release:
	}
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
		do        func(ctx context.Context, s *source.UD, read []isb.ReadMessage) error
	}{
		{"read", "ReadFn", 3, timeout + readTimeout, func(ctx context.Context, s *source.UD, _ []isb.ReadMessage) error {
			_, err := s.Read(ctx, make([]isb.ReadMessage, 3))
			return err
		}},
		{"ack", "AckFn", 2, timeout, func(ctx context.Context, s *source.UD, read []isb.ReadMessage) error {
			return s.Ack(ctx, read)
		}},
		{"nack", "NackFn", 2, timeout, func(ctx context.Context, s *source.UD, read []isb.ReadMessage) error {
			return s.Nak(ctx, read, 0)
		}},
		{"pending", "PendingFn", 0, timeout, func(ctx context.Context, s *source.UD, _ []isb.ReadMessage) error {
			_, err := s.Pending(ctx)
			return err
		}},
	} {
		t.Run(tc.call, func(t *testing.T) {
			dir, err := os.MkdirTemp("", "s")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			src := &stuckSource{got: make(chan struct{}, 10), release: make(chan struct{})}
			src.stuck.Store("")
			sctx, stop := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- sourcer.NewServer(src, sourcer.WithSocketDir(dir)).Start(sctx) }()
			t.Cleanup(func() { close(src.release); stop(); <-served })

			start := time.Unix(1_700_000_000, 0)
			clk := clock.NewManual(start)
			calls := udsconn.NewCalls(timeout, clk)
			core, logs := observer.New(zapcore.InfoLevel)
			s := source.NewUD(dir, readTimeout, zap.New(core), udsconn.WithCalls(calls))
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
			done := make(chan error, 1)
			go func() { done <- tc.do(ctx, s, read) }()
			select {
			case <-src.got:
			case <-ctx.Done():
				t.Fatal("the source never got the call")
			}
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			first := 5 * time.Second
			if tc.call == "read" {
				first += readTimeout
			}
			clk.Set(start.Add(first))
			warns := logs.FilterMessage("a call to the UDF server is outstanding").All()
			if len(warns) != 1 {
				t.Fatalf("%d warnings at %v; want 1", len(warns), first)
			}
			if w := warns[0].ContextMap(); w["function"] != "source" || w["call"] != tc.rpc || w["messages"] != int64(tc.messages) {
				t.Errorf("the warning says %v; want function source, call %s, %d messages", w, tc.rpc, tc.messages)
			}
			if o := calls.Oldest(); len(o) != 1 || o[0].Call != tc.rpc || o[0].Age != first || o[0].Deadline != tc.deadline {
				t.Errorf("Oldest = %+v", o)
			}
			clk.Set(start.Add(tc.deadline))
			err = <-done
			if !errors.Is(err, udsconn.ErrDeadline) || !strings.Contains(err.Error(), "source call "+tc.rpc+" of "+strconv.Itoa(tc.messages)+" messages") ||
				!strings.Contains(err.Error(), "no answer within the deadline of "+tc.deadline.String()) {
				t.Fatalf("%s = %v; want ErrDeadline naming the source, %s and the deadline %v", tc.call, err, tc.rpc, tc.deadline)
			}
			if err := s.Ready(); err == nil || !strings.Contains(err.Error(), "stuck") {
				t.Fatalf("Ready = %v; want stuck", err)
			}
			src.stuck.Store("")
			if n, err := s.Read(ctx, read); err != nil || n != 2 {
				t.Fatalf("Read once the source answers = %d, %v", n, err)
			}
			if err := s.Ready(); err != nil {
				t.Fatalf("Ready = %v once a call succeeded", err)
			}
		})
	}
}
