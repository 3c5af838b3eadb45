package source_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap/zaptest"

	"github.com/sluiceflow/sluice/internal/jsconsumer"
	"github.com/sluiceflow/sluice/internal/natstest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/connectors/source"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// jsServer starts a server with the file stream S on subjects s.>, and
// returns it with a publishing connection and its JetStream context.
func jsServer(t testing.TB, opts natstest.Options) (*natstest.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	s := natstest.Start(t, opts)
	nc := s.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(natsCtx(t), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	return s, nc, js
}

// newJS starts a JetStream source on s reading stream S (its own durable
// p-v unless cfg names a consumer), closed when the test ends.
func newJS(t testing.TB, s *natstest.Server, cfg source.JetStreamConfig) *source.JetStream {
	t.Helper()
	j, err := startJS(t, s, cfg)
	if err != nil {
		t.Fatalf("NewJetStream: %v", err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j
}

func startJS(t testing.TB, s *natstest.Server, cfg source.JetStreamConfig) (*source.JetStream, error) {
	if cfg.URL == "" {
		cfg.URL = s.URL
	}
	if cfg.Stream == "" {
		cfg.Stream = "S"
	}
	if cfg.Consumer == "" && cfg.DurableName == "" {
		cfg.DurableName = "p-v"
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 100 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = zaptest.NewLogger(t)
	}
	return source.NewJetStream(natsCtx(t), cfg)
}

// publishJS publishes n messages "<prefix><i>" to subject with the headers
// of publish, and waits for the stream to store them.
func publishJS(t testing.TB, js jetstream.JetStream, subject, prefix string, n int) {
	t.Helper()
	for i := range n {
		m := nats.NewMsg(subject)
		m.Data = fmt.Appendf(nil, "%s%d", prefix, i)
		m.Header.Set("X-I", fmt.Sprint(i))
		m.Header["X-Two"] = []string{"first", "second"}
		if _, err := js.PublishMsg(natsCtx(t), m); err != nil {
			t.Fatal(err)
		}
	}
}

// readN reads until it has n messages, in reads of at most batch, failing
// after 10 s.
func readN(t testing.TB, r isb.Reader, n, batch int) []isb.ReadMessage {
	t.Helper()
	var out []isb.ReadMessage
	runtest.WaitFor(t, fmt.Sprintf("%d messages read (have %d)", n, len(out)), func() bool {
		out = append(out, readBatch(t, r, min(batch, n-len(out)))...)
		return len(out) >= n
	})
	return out
}

func consumerInfo(t testing.TB, js jetstream.JetStream, name string) *jetstream.ConsumerInfo {
	t.Helper()
	c, err := js.Consumer(natsCtx(t), "S", name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(natsCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func ack(t testing.TB, r isb.Reader, msgs []isb.ReadMessage) {
	t.Helper()
	if err := r.Ack(natsCtx(t), msgs); err != nil {
		t.Fatalf("Ack: %v", err)
	}
}

func TestJetStreamReadAck(t *testing.T) {
	t.Parallel()
	s, _, js := jsServer(t, natstest.Options{})
	publishJS(t, js, "s.a", "m", 25)
	src := newJS(t, s, source.JetStreamConfig{})
	if src.Consumer() != "numaflow-p-v-S" {
		t.Fatalf("consumer %q", src.Consumer())
	}
	pendingIs(t, src, 25)

	var got []isb.ReadMessage
	for _, want := range []int{10, 10, 5} {
		b := readBatch(t, src, 10)
		if len(b) != want {
			t.Fatalf("read %d, want %d", len(b), want)
		}
		got = append(got, b...)
	}
	pendingIs(t, src, 25) // 25 delivered, none acked
	stream, err := js.Stream(natsCtx(t), "S")
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range got {
		if m.ID != strconv.Itoa(i+1) || string(m.Value) != fmt.Sprintf("m%d", i) || m.Keys != nil {
			t.Fatalf("message %d: id %q, value %q, keys %v", i, m.ID, m.Value, m.Keys)
		}
		if want := map[string]string{"X-I": fmt.Sprint(i), "X-Two": "first"}; !equalMaps(m.Headers, want) {
			t.Fatalf("message %d: headers %v, want %v", i, m.Headers, want)
		}
		raw, err := stream.GetMsg(natsCtx(t), uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if !m.EventTime.Equal(raw.Time) {
			t.Fatalf("message %d: event time %v, stored at %v", i, m.EventTime, raw.Time)
		}
	}
	ack(t, src, got[:10])
	pendingIs(t, src, 15)
	ack(t, src, got[10:])
	ack(t, src, got[10:]) // again: harmless
	info := consumerInfo(t, js, src.Consumer())
	if info.AckFloor.Stream != 25 || info.NumAckPending != 0 || info.NumPending != 0 {
		t.Fatalf("ack floor %d, ack pending %d, pending %d", info.AckFloor.Stream, info.NumAckPending, info.NumPending)
	}
	if info.Config.AckWait != jsconsumer.DefaultAckWait || info.Config.AckPolicy != jetstream.AckExplicitPolicy {
		t.Fatalf("consumer config %+v", info.Config)
	}
	if got := readBatch(t, src, 10); len(got) != 0 {
		t.Fatalf("read %d after all were acked", len(got))
	}
}

// A message another reader took and never acked (it died) is delivered again
// once AckWait has passed; a message this source holds is kept in progress
// past AckWait, so no other reader gets it.
func TestJetStreamAckWait(t *testing.T) {
	t.Parallel()
	const ackWait = 400 * time.Millisecond
	s, _, js := jsServer(t, natstest.Options{})
	publishJS(t, js, "s.a", "m", 2)
	a := newJS(t, s, source.JetStreamConfig{AckWait: ackWait, ReadTimeout: 5 * time.Second})
	cons, err := js.Consumer(natsCtx(t), "S", a.Consumer())
	if err != nil {
		t.Fatal(err)
	}
	dead, err := cons.Fetch(1) // a reader that dies before it acks
	if err != nil {
		t.Fatal(err)
	}
	if m := <-dead.Messages(); m == nil || string(m.Data()) != "m0" {
		t.Fatalf("fetched %v", m)
	}
	start := time.Now()
	first := readBatch(t, a, 10)
	if v := values(first); !slices.Equal(v, []string{"m1"}) {
		t.Fatalf("read %v, want m1", v)
	}
	again := readBatch(t, a, 10) // waits for m0 to come back
	if v := values(again); !slices.Equal(v, []string{"m0"}) || time.Since(start) < ackWait/2 {
		t.Fatalf("read %v after %v, want m0 after AckWait %v", v, time.Since(start), ackWait)
	}
	b := newJS(t, s, source.JetStreamConfig{AckWait: ackWait, ReadTimeout: 3 * ackWait})
	if got := readBatch(t, b, 10); len(got) != 0 {
		t.Fatalf("another reader got %v, held in progress by the first", values(got))
	}
	ack(t, a, append(first, again...))
	if info := consumerInfo(t, js, a.Consumer()); info.AckFloor.Stream != 2 {
		t.Fatalf("ack floor %d", info.AckFloor.Stream)
	}
}

// A nacked message comes back after the nack's delay, or at once.
func TestJetStreamNack(t *testing.T) {
	t.Parallel()
	const delay = 500 * time.Millisecond
	s, _, js := jsServer(t, natstest.Options{})
	publishJS(t, js, "s.a", "m", 3)
	src := newJS(t, s, source.JetStreamConfig{ReadTimeout: 5 * time.Second})
	got := readBatch(t, src, 10)
	if len(got) != 3 {
		t.Fatalf("read %d", len(got))
	}
	start := time.Now()
	if err := src.Nack(natsCtx(t), got[:1], delay); err != nil {
		t.Fatal(err)
	}
	if err := src.Nack(natsCtx(t), got[1:2], 0); err != nil {
		t.Fatal(err)
	}
	if err := src.Nack(natsCtx(t), got[1:2], 0); err != nil { // already nacked: left alone
		t.Fatal(err)
	}
	now := readBatch(t, src, 10)
	if v := values(now); !slices.Equal(v, []string{"m1"}) || time.Since(start) > delay/2 {
		t.Fatalf("read %v after %v, want m1 at once", v, time.Since(start))
	}
	later := readBatch(t, src, 10)
	if v := values(later); !slices.Equal(v, []string{"m0"}) || time.Since(start) < delay*8/10 {
		t.Fatalf("read %v after %v, want m0 after %v", v, time.Since(start), delay)
	}
	ack(t, src, slices.Concat(got[2:], now, later))
	pendingIs(t, src, 0)
}

// Sources on one durable share its messages: each goes to one of them and
// none is lost.
func TestJetStreamSharedDurable(t *testing.T) {
	t.Parallel()
	const n, batch = 300, 7
	s, _, js := jsServer(t, natstest.Options{})
	srcs := []*source.JetStream{newJS(t, s, source.JetStreamConfig{}), newJS(t, s, source.JetStreamConfig{})}
	done := make(chan struct{})
	var published sync.WaitGroup
	published.Go(func() {
		defer close(done)
		publishJS(t, js, "s.a", "m", n)
	})
	var mu sync.Mutex
	seen := map[string]int{}
	total := 0
	var readers sync.WaitGroup
	for _, src := range srcs {
		readers.Go(func() {
			buf := make([]isb.ReadMessage, batch)
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) {
				got, err := src.Read(context.Background(), buf)
				if err != nil || got > batch {
					t.Errorf("Read = %d, %v", got, err)
					return
				}
				if err := src.Ack(context.Background(), buf[:got]); err != nil {
					t.Errorf("Ack: %v", err)
					return
				}
				mu.Lock()
				for _, m := range buf[:got] {
					seen[string(m.Value)]++
				}
				total += got
				all := total >= n
				mu.Unlock()
				if all {
					return
				}
			}
		})
	}
	readers.Wait()
	published.Wait()
	if total != n || len(seen) != n {
		t.Fatalf("read %d messages, %d distinct; want %d", total, len(seen), n)
	}
	pendingIs(t, srcs[0], 0)
}

// A consumer named in the config is used as it is; one that does not exist
// is created, as Numaflow does.
func TestJetStreamNamedConsumer(t *testing.T) {
	t.Parallel()
	s, _, js := jsServer(t, natstest.Options{})
	_, err := js.CreateConsumer(natsCtx(t), "S", jetstream.ConsumerConfig{Durable: "mine",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, FilterSubject: "s.a"})
	if err != nil {
		t.Fatal(err)
	}
	publishJS(t, js, "s.a", "a", 3)
	publishJS(t, js, "s.b", "b", 3)
	src := newJS(t, s, source.JetStreamConfig{Consumer: "mine", AckWait: 5 * time.Second, FilterSubjects: []string{"s.b"}})
	got := readN(t, src, 3, 10)
	if v := values(got); !slices.Equal(v, names("a", 3)) {
		t.Fatalf("read %v from the consumer filtered on s.a", v)
	}
	if got := readBatch(t, src, 10); len(got) != 0 {
		t.Fatalf("read %v more", values(got))
	}
	ack(t, src, got)
	info := consumerInfo(t, js, "mine")
	if info.Config.AckWait != 30*time.Second || info.Config.FilterSubject != "s.a" || info.AckFloor.Consumer != 3 {
		t.Fatalf("consumer changed: %+v, ack floor %d", info.Config, info.AckFloor.Consumer)
	}

	created := newJS(t, s, source.JetStreamConfig{Consumer: "absent",
		DeliverPolicy: source.DeliverFrom{Policy: source.DeliverByStartSequence, StartSeq: 5},
		AckWait:       5 * time.Second})
	if v := values(readN(t, created, 2, 10)); !slices.Equal(v, []string{"b1", "b2"}) {
		t.Fatalf("read %v from the created consumer", v)
	}
	info = consumerInfo(t, js, "absent")
	if info.Config.AckWait != 5*time.Second || info.Config.DeliverPolicy != jetstream.DeliverByStartSequencePolicy {
		t.Fatalf("created consumer %+v", info.Config)
	}
}

// The deliver policies Numaflow takes, for a consumer the source creates.
// Stream S holds a0 (s.a), b0 (s.b), a1, b1, a2 at sequences 1 to 5; n0 is
// published once the source is bound.
func TestJetStreamDeliverPolicy(t *testing.T) {
	t.Parallel()
	s, _, js := jsServer(t, natstest.Options{})
	for i := range 3 {
		publishJS(t, js, "s.a", fmt.Sprintf("a%d", i), 1)
		if i < 2 {
			publishJS(t, js, "s.b", fmt.Sprintf("b%d", i), 1)
		}
	}
	stream, err := js.Stream(natsCtx(t), "S")
	if err != nil {
		t.Fatal(err)
	}
	// The messages stored at or after t, then n0.
	var stored []*jetstream.RawStreamMsg
	for seq := uint64(1); seq <= 5; seq++ {
		m, err := stream.GetMsg(natsCtx(t), seq)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, m)
	}
	from := func(at time.Time) []string {
		var out []string
		for _, m := range stored {
			if !m.Time.Before(at) {
				out = append(out, string(m.Data))
			}
		}
		return append(out, "n0")
	}
	third := stored[2].Time
	cases := []struct {
		policy string
		want   []string
	}{
		{"", []string{"a00", "b00", "a10", "b10", "a20", "n0"}},
		{"ALL", []string{"a00", "b00", "a10", "b10", "a20", "n0"}},
		{"new", []string{"n0"}},
		{"last", []string{"a20", "n0"}},
		{"last_per_subject", []string{"b10", "a20", "n0"}},
		{"by_start_sequence 4", []string{"b10", "a20", "n0"}},
		{"by_start_time " + strconv.FormatInt(third.UnixMilli(), 10), from(third.Truncate(time.Millisecond))},
		{"by_start_time " + third.Format(time.RFC3339Nano), from(third)},
	}
	var srcs []*source.JetStream
	for i, c := range cases {
		dp, err := source.ParseDeliverFrom(c.policy)
		if err != nil {
			t.Fatal(err)
		}
		cfg := source.JetStreamConfig{DurableName: fmt.Sprint("p", i), DeliverPolicy: dp}
		if c.policy == "last_per_subject" {
			cfg.FilterSubjects = []string{"s.>"} // nats-server 2.9 needs one
		}
		srcs = append(srcs, newJS(t, s, cfg))
	}
	m := nats.NewMsg("s.n")
	m.Data = []byte("n0")
	if _, err := js.PublishMsg(natsCtx(t), m); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		t.Run(c.policy, func(t *testing.T) {
			got := readN(t, srcs[i], len(c.want), 100)
			if v := values(got); !slices.Equal(v, c.want) {
				t.Fatalf("read %v, want %v", v, c.want)
			}
		})
	}
}

// Filter subjects choose what the source's own consumer delivers; a changed
// filter updates it. More than one filter needs nats-server 2.10.
func TestJetStreamFilterSubjects(t *testing.T) {
	t.Parallel()
	s, nc, js := jsServer(t, natstest.Options{})
	publishJS(t, js, "s.a", "a", 2)
	publishJS(t, js, "s.b", "b", 2)
	publishJS(t, js, "s.c", "c", 2)
	src := newJS(t, s, source.JetStreamConfig{FilterSubjects: []string{"s.b"}})
	if v := values(readN(t, src, 2, 10)); !slices.Equal(v, names("b", 2)) {
		t.Fatalf("read %v", v)
	}
	if got := readBatch(t, src, 10); len(got) != 0 {
		t.Fatalf("read %v more", values(got))
	}
	src.Close()
	wide := newJS(t, s, source.JetStreamConfig{FilterSubjects: []string{"s.*"}})
	if info := consumerInfo(t, js, wide.Consumer()); info.Config.FilterSubject != "s.*" {
		t.Fatalf("the filter was not updated: %+v", info.Config)
	}

	_, err := startJS(t, s, source.JetStreamConfig{DurableName: "two", FilterSubjects: []string{"s.a", "s.c"}})
	if v := nc.ConnectedServerVersion(); strings.HasPrefix(v, "2.9.") || strings.HasPrefix(v, "2.8.") {
		if !errors.Is(err, source.ErrNATSConfig) || !strings.Contains(err.Error(), "filterSubjects") {
			t.Fatalf("two filters on nats-server %s: %v, want an error naming filterSubjects", v, err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestJetStreamPending(t *testing.T) {
	t.Parallel()
	s, _, js := jsServer(t, natstest.Options{})
	src := newJS(t, s, source.JetStreamConfig{})
	pendingIs(t, src, 0)
	publishJS(t, js, "s.a", "m", 10)
	pendingIs(t, src, 10)
	got := readBatch(t, src, 4)
	pendingIs(t, src, 10) // 6 not delivered, 4 not acked
	ack(t, src, got)
	pendingIs(t, src, 6)
}

// Close hands back what was read and not acked: another source gets it at
// once. Reads after Close fail.
func TestJetStreamClose(t *testing.T) {
	t.Parallel()
	s, _, js := jsServer(t, natstest.Options{})
	publishJS(t, js, "s.a", "m", 5)
	a := newJS(t, s, source.JetStreamConfig{})
	got := readBatch(t, a, 3)
	ack(t, a, got[:1])
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Read(natsCtx(t), make([]isb.ReadMessage, 1)); !errors.Is(err, source.ErrNATSClosed) {
		t.Fatalf("Read after Close = %v", err)
	}
	b := newJS(t, s, source.JetStreamConfig{})
	// The two handed back may come before or after the two never read.
	if v := values(readN(t, b, 4, 10)); !slices.Equal(slices.Sorted(slices.Values(v)), []string{"m1", "m2", "m3", "m4"}) {
		t.Fatalf("read %v", v)
	}
}

// A Read waits up to the read timeout for a message, returns one as soon as
// it comes, and returns at once when ctx is done; a message delivered to the
// wait given up on is handed back, not left until AckWait.
func TestJetStreamReadWaits(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	s, _, js := jsServer(t, natstest.Options{})
	src := newJS(t, s, source.JetStreamConfig{ReadTimeout: timeout})
	start := time.Now()
	if got := readBatch(t, src, 10); len(got) != 0 {
		t.Fatalf("read %d", len(got))
	}
	if d := time.Since(start); d < timeout*9/10 || d > timeout+time.Second {
		t.Fatalf("an empty Read took %v, want about %v", d, timeout)
	}

	slow := newJS(t, s, source.JetStreamConfig{DurableName: "slow", ReadTimeout: 20 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	// Well under the source's 20s, and far over the context's 100ms, for a
	// busy machine.
	if n, err := slow.Read(ctx, make([]isb.ReadMessage, 5)); n != 0 || err != nil || time.Since(start) > 10*time.Second {
		t.Fatalf("Read with ctx ending = %d, %v after %v", n, err, time.Since(start))
	}
	// The server may still hold the pull given up on: what it delivers
	// there is handed back.
	publishJS(t, js, "s.a", "m", 1)
	start = time.Now()
	got := readBatch(t, slow, 5)
	if v := values(got); !slices.Equal(v, []string{"m0"}) || time.Since(start) > 5*time.Second {
		t.Fatalf("read %v after %v", v, time.Since(start))
	}
	ack(t, slow, got)
}

func TestJetStreamAuth(t *testing.T) {
	t.Parallel()
	for _, c := range authCases(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, _, js := jsServer(t, c.server)
			publishJS(t, js, "s.a", "m", 1)
			src := newJS(t, s, source.JetStreamConfig{Auth: c.good})
			readN(t, src, 1, 1)
			_, err := startJS(t, s, source.JetStreamConfig{Auth: c.wrong})
			if !errors.Is(err, source.ErrNATSAuth) || !strings.Contains(err.Error(), c.method) {
				t.Fatalf("wrong credentials: %v, want ErrNATSAuth naming %s", err, c.method)
			}
			for _, secret := range c.secrets {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q shows a secret", err)
				}
			}
		})
	}
}

func TestJetStreamConfigErrors(t *testing.T) {
	t.Parallel()
	s, _, _ := jsServer(t, natstest.Options{})
	cases := []struct {
		name  string
		cfg   source.JetStreamConfig
		field string
	}{
		{"no stream", source.JetStreamConfig{URL: s.URL, DurableName: "d"}, "stream"},
		{"no consumer", source.JetStreamConfig{URL: s.URL, Stream: "S"}, "durableName"},
		{"deliver policy", source.JetStreamConfig{URL: s.URL, Stream: "S", DurableName: "d",
			DeliverPolicy: source.DeliverFrom{Policy: source.DeliverByStartSequence}}, "deliverPolicy"},
		{"ack wait", source.JetStreamConfig{URL: s.URL, Stream: "S", DurableName: "d", AckWait: time.Millisecond}, "ackWait"},
		{"two auths", source.JetStreamConfig{URL: s.URL, Stream: "S", DurableName: "d",
			Auth: source.NATSAuth{Token: "t0ken", User: "u", Password: "p4ss"}}, "auth"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := source.NewJetStream(natsCtx(t), c.cfg)
			if !errors.Is(err, source.ErrNATSConfig) || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("NewJetStream = %v, want an error naming %s", err, c.field)
			}
		})
	}
	_, err := source.NewJetStream(natsCtx(t), source.JetStreamConfig{URL: s.URL, Stream: "T", DurableName: "d"})
	if !errors.Is(err, jetstream.ErrStreamNotFound) || !strings.Contains(err.Error(), `"T"`) {
		t.Fatalf("a stream that does not exist: %v", err)
	}
}
