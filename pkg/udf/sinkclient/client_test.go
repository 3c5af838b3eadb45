package sinkclient_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/sinker"
	"github.com/sluiceflow/sluice/pkg/udf/sinkclient"
)

// startSinker serves a sinker in a short temporary directory until the test ends.
func startSinker(t *testing.T, kind serverinfo.Kind, sk sinker.Sinker) (dir string, got chan string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if kind == serverinfo.KindFallbackSink {
		t.Setenv(serverinfo.EnvContainerType, serverinfo.ContainerTypeFallbackSink)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sinker.NewServer(sk, sinker.WithSocketDir(dir)).Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return dir, got
}

// connect connects to the sink of kind served in dir, within 10s, and
// closes it when the test ends; the context is the test's, until then.
func connect(t *testing.T, dir string, kind serverinfo.Kind) (*sinkclient.Client, context.Context) {
	t.Helper()
	s := sinkclient.New(dir, kind, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	if err := s.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ctx
}

// byPayload answers by the payload: "fail" fails, "fallback" falls back, and
// everything else is written.
func byPayload(_ context.Context, datums <-chan sinker.Datum) sinker.Responses {
	var out sinker.Responses
	for d := range datums {
		switch v := string(d.Value()); {
		case strings.Contains(v, "fallback"):
			out = append(out, sinker.ResponseFallback(d.ID()))
		case strings.Contains(v, "fail"):
			out = append(out, sinker.ResponseFailure(d.ID(), "cannot take "+v))
		default:
			out = append(out, sinker.ResponseOK(d.ID()))
		}
	}
	return out
}

func TestUDSinkStatuses(t *testing.T) {
	for _, kind := range []serverinfo.Kind{serverinfo.KindSink, serverinfo.KindFallbackSink} {
		t.Run(string(kind), func(t *testing.T) {
			dir, _ := startSinker(t, kind, sinker.SinkerFunc(byPayload))
			s, ctx := connect(t, dir, kind)
			for range 3 { // batch after batch on one stream
				msgs := []isb.Message{{Value: []byte("ok")}, {Value: []byte("fail me")}, {Value: []byte("fallback")}, {Value: []byte("fine")}}
				errs := make([]error, len(msgs))
				if err := s.Write(ctx, msgs, errs); err != nil {
					t.Fatal(err)
				}
				if errs[0] != nil || errs[3] != nil || !errors.Is(errs[2], isb.ErrFallback) ||
					errs[1] == nil || !strings.Contains(errs[1].Error(), "cannot take fail me") {
					t.Fatalf("statuses %v", errs)
				}
			}
		})
	}
}

func TestUDSinkNackAndMetadata(t *testing.T) {
	nackOdd := sinker.SinkerFunc(func(_ context.Context, datums <-chan sinker.Datum) sinker.Responses {
		var out sinker.Responses
		for d := range datums {
			if string(d.UserMetadata().Value("g", "k")) == "odd" {
				delay := uint64(1500)
				out = append(out, sinker.ResponseNack(d.ID(), &sinker.NackOptions{Delay: &delay}))
				continue
			}
			out = append(out, sinker.ResponseOK(d.ID()))
		}
		return out
	})
	dir, _ := startSinker(t, serverinfo.KindSink, nackOdd)
	s, ctx := connect(t, dir, serverinfo.KindSink)
	msgs := []isb.Message{{Value: []byte("0")}, {Value: []byte("1"), Metadata: isb.Metadata{"g": {"k": []byte("odd")}}}}
	errs := make([]error, len(msgs))
	if err := s.Write(ctx, msgs, errs); err != nil {
		t.Fatal(err)
	}
	var nack *isb.NackError
	if errs[0] != nil || !errors.Is(errs[1], isb.ErrNack) || !errors.As(errs[1], &nack) || nack.Options.Delay != 1500*time.Millisecond {
		t.Fatalf("statuses %v; want nil, then a nack with a delay of 1.5s", errs)
	}
}

// An ON_SUCCESS answer comes back as an isb.OnSuccessError: with the sink's
// message when it sent one (its user metadata, or the input's when it sent
// none), else the input as it is.
func TestUDSinkOnSuccess(t *testing.T) {
	onSuccess := sinker.SinkerFunc(func(_ context.Context, datums <-chan sinker.Datum) sinker.Responses {
		var out sinker.Responses
		for d := range datums {
			switch v := string(d.Value()); v {
			case "as is":
				out = append(out, sinker.ResponseOnSuccess(d.ID()))
			case "receipt":
				md := sinker.NewUserMetadata()
				md.AddKV("r", "k", []byte("v"))
				out = append(out, sinker.ResponseOnSuccessMessage(d.ID(), sinker.OnSuccessMessage{
					Value: []byte("receipt of " + v), Keys: []string{"r"}, UserMetadata: md}))
			default:
				out = append(out, sinker.ResponseOnSuccessMessage(d.ID(), sinker.OnSuccessMessage{Value: []byte("plain")}))
			}
		}
		return out
	})
	dir, _ := startSinker(t, serverinfo.KindSink, onSuccess)
	s, ctx := connect(t, dir, serverinfo.KindSink)
	in := isb.Metadata{"g": {"k": []byte("in")}}
	msgs := []isb.Message{
		{ID: "0", Value: []byte("as is"), Keys: []string{"a"}, Metadata: in},
		{ID: "1", Value: []byte("receipt"), Keys: []string{"a"}, Metadata: in},
		{ID: "2", Value: []byte("other"), Keys: []string{"a"}, Metadata: in},
	}
	errs := make([]error, len(msgs))
	if err := s.Write(ctx, msgs, errs); err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if !errors.Is(err, isb.ErrOnSuccess) {
			t.Fatalf("message %d: %v; want ErrOnSuccess", i, err)
		}
	}
	describe := func(m isb.Message) string {
		return m.ID + " " + string(m.Value) + " " + strings.Join(m.Keys, ",") + " " + string(m.Metadata["g"]["k"]) + string(m.Metadata["r"]["k"])
	}
	want := []string{"0 as is a in", "1 receipt of receipt r v", "2 plain  in"}
	for i, w := range want {
		if got := describe(isb.OnSuccessMessage(msgs[i], errs[i])); got != w {
			t.Errorf("message %d goes on as %q; want %q", i, got, w)
		}
	}
}

// TestUDSinkLimitsInFlight: after the sink says it is rate limited, a
// batch is sent half at a time and what follows a refused part is not sent;
// exchanges without a refusal raise the limit by one until it is gone.
func TestUDSinkLimitsInFlight(t *testing.T) {
	var received atomic.Int64
	var refusing atomic.Bool
	refusing.Store(true)
	dir, _ := startSinker(t, serverinfo.KindSink, sinker.SinkerFunc(func(_ context.Context, datums <-chan sinker.Datum) sinker.Responses {
		var out sinker.Responses
		for d := range datums {
			received.Add(1)
			if refusing.Load() {
				out = append(out, sinker.ResponseRateLimited(d.ID(), 2*time.Second, "quota"))
			} else {
				out = append(out, sinker.ResponseOK(d.ID()))
			}
		}
		return out
	}))
	s, ctx := connect(t, dir, serverinfo.KindSink)
	write := func() []error {
		t.Helper()
		msgs := make([]isb.Message, 100)
		for i := range msgs {
			msgs[i].Value = []byte("m")
		}
		errs := make([]error, len(msgs))
		received.Store(0)
		if err := s.Write(ctx, msgs, errs); err != nil {
			t.Fatal(err)
		}
		return errs
	}
	signalled := func(err error) bool {
		var te *isb.ThrottledError
		return errors.As(err, &te) && te.Signal == isb.SignalSinkRateLimited && te.RetryAfter == 2*time.Second
	}
	// The first batch is all sent, and all refused.
	errs := write()
	if got := received.Load(); got != 100 || !signalled(errs[0]) || !signalled(errs[99]) || s.Limit() != 50 {
		t.Fatalf("first batch: the sink received %d, limit %d, errs[0] %v; want 100, 50, refused", got, s.Limit(), errs[0])
	}
	// The next one sends 50, refused, and not the other 50.
	errs = write()
	var te *isb.ThrottledError
	if got := received.Load(); got != 50 || !signalled(errs[49]) || !errors.As(errs[50], &te) ||
		te.Signal != isb.SignalUnknown || te.RetryAfter != 2*time.Second || s.Limit() != 25 {
		t.Fatalf("second batch: the sink received %d, limit %d, errs[49] %v, errs[50] %v; want 50, 25, refused, not sent",
			got, s.Limit(), errs[49], errs[50])
	}
	// Answered, the batches go in parts of 25, 26, 27 and the rest, then larger.
	refusing.Store(false)
	for i, want := range []int{29, 33, 36} {
		for _, err := range write() {
			if err != nil {
				t.Fatalf("batch %d: %v", i, err)
			}
		}
		if got := received.Load(); got != 100 || s.Limit() != want {
			t.Fatalf("answered batch %d: the sink received %d, limit %d; want 100, %d", i, got, s.Limit(), want)
		}
	}
	for range 40 {
		write()
	}
	if s.Limit() != 0 {
		t.Errorf("limit %d after 43 batches answered; want none", s.Limit())
	}
}

// TestUDSinkServerFailureIsUnavailable: a write whose server fails (here, a
// sink that panics, which the SDK answers with Internal and shuts down)
// returns an error matching isb.ErrUnavailable with the server's message;
// once a server is back on the same directory the next write reconnects and
// is answered.
func TestUDSinkServerFailureIsUnavailable(t *testing.T) {
	dir, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	boom := sinker.SinkerFunc(func(ctx context.Context, datums <-chan sinker.Datum) sinker.Responses {
		var out sinker.Responses
		for d := range datums {
			if string(d.Value()) == "boom" {
				panic("boom")
			}
			out = append(out, sinker.ResponseOK(d.ID()))
		}
		return out
	})
	serveOnce := func() chan error {
		done := make(chan error, 1)
		go func() { done <- sinker.NewServer(boom, sinker.WithSocketDir(dir)).Start(context.Background()) }()
		return done
	}
	first := serveOnce()
	s, ctx := connect(t, dir, serverinfo.KindSink)
	msgs := []isb.Message{{Value: []byte("boom")}}
	err = s.Write(ctx, msgs, make([]error, 1))
	if !errors.Is(err, isb.ErrUnavailable) || !strings.Contains(err.Error(), "UDF_EXECUTION_ERROR") {
		t.Fatalf("Write = %v; want an error matching isb.ErrUnavailable with the server's message", err)
	}
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the server that panicked did not stop")
	}
	ctx2, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sinker.NewServer(boom, sinker.WithSocketDir(dir)).Start(ctx2) }()
	t.Cleanup(func() { cancel(); <-done })
	t.Cleanup(func() { s.Close() }) // before the server stops: it waits for the streams to end
	errs := make([]error, 1)
	if err := s.Write(ctx, []isb.Message{{Value: []byte("ok")}}, errs); err != nil || errs[0] != nil {
		t.Fatalf("Write after the restart = %v, %v; want it written", err, errs[0])
	}
}
