package kafka

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluiceflow/sluice/pkg/isb"
)

func newTestSink(t testing.TB, addrs []string, topic string, setKey bool, props Properties) *Sink {
	t.Helper()
	s, err := NewSink(SinkConfig{Client: ClientConfig{Brokers: addrs, Properties: props, Logger: testLogger(t)}, Topic: topic, SetKey: setKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// consume reads n records of topic from the start, for at most 10s.
func consume(t *testing.T, addrs []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n && ctx.Err() == nil {
		out = append(out, cl.PollFetches(ctx).Records()...)
	}
	if len(out) < n {
		t.Fatalf("consumed %d records of %s; want %d", len(out), topic, n)
	}
	return out
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

func TestSinkWritesKeysAndHeaders(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(3, "out"))
	s := newTestSink(t, c.ListenAddrs(), "out", true, nil)
	msgs := make([]isb.Message, 12)
	for i := range msgs {
		msgs[i] = isb.Message{Keys: []string{"k" + strconv.Itoa(i%3), "x"}, Value: []byte("v" + strconv.Itoa(i)),
			Headers: map[string]string{"h": strconv.Itoa(i)}}
	}
	errs := make([]error, len(msgs))
	if err := s.Write(context.Background(), msgs, errs); err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("errs[%d] = %v", i, err)
		}
	}
	partitionOfKey := map[string]int32{}
	for _, r := range consume(t, c.ListenAddrs(), "out", 12) {
		i, _ := strconv.Atoi(strings.TrimPrefix(string(r.Value), "v"))
		wantKey := "k" + strconv.Itoa(i%3) + ":x"
		if string(r.Key) != wantKey {
			t.Fatalf("record %s has key %q; want %q", r.Value, r.Key, wantKey)
		}
		for k, want := range map[string]string{"h": strconv.Itoa(i), "__key_len": "2", "__key_0": "k" + strconv.Itoa(i%3), "__key_1": "x"} {
			if got, _ := header(r, k); got != want {
				t.Fatalf("record %s has header %s = %q; want %q", r.Value, k, got, want)
			}
		}
		if p, ok := partitionOfKey[wantKey]; ok && p != r.Partition {
			t.Fatalf("key %s went to partitions %d and %d", wantKey, p, r.Partition)
		}
		partitionOfKey[wantKey] = r.Partition
	}
}

func TestSinkWithoutSetKey(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, "out"))
	s := newTestSink(t, c.ListenAddrs(), "out", false, Properties{"compression.type": "zstd", "linger.ms": "50"})
	errs := make([]error, 1)
	if err := s.Write(context.Background(), []isb.Message{{Keys: []string{"k"}, Value: []byte("v")}}, errs); err != nil || errs[0] != nil {
		t.Fatalf("Write = %v, %v", err, errs[0])
	}
	r := consume(t, c.ListenAddrs(), "out", 1)[0]
	if r.Key != nil {
		t.Fatalf("key = %q without setKey; want none", r.Key)
	}
	if n, _ := header(r, "__key_0"); n != "k" {
		t.Fatalf("__key_0 = %q; want k", n)
	}
}

func TestSinkRecordTooLargeFailsAlone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props Properties
		topic map[string]*string
	}{
		{"client message.max.bytes", Properties{"message.max.bytes": "1000"}, nil},
		{"topic max.message.bytes", nil, map[string]*string{"max.message.bytes": kadmString("2000")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			adm, _ := newAdmin(t, c)
			if _, err := adm.CreateTopic(context.Background(), 1, 1, tc.topic, "out"); err != nil {
				t.Fatal(err)
			}
			s := newTestSink(t, c.ListenAddrs(), "out", false, tc.props)
			msgs := []isb.Message{{Value: []byte("small-0")}, {Value: bytes.Repeat([]byte("x"), 5000)}, {Value: []byte("small-2")}}
			errs := make([]error, len(msgs))
			if err := s.Write(context.Background(), msgs, errs); err != nil {
				t.Fatal(err)
			}
			if errs[0] != nil || errs[2] != nil {
				t.Fatalf("errs = %v; want the small records written", errs)
			}
			if !errors.Is(errs[1], kerr.MessageTooLarge) || !strings.Contains(errs[1].Error(), `topic "out"`) {
				t.Fatalf("errs[1] = %v; want MESSAGE_TOO_LARGE naming the topic", errs[1])
			}
			got := consume(t, c.ListenAddrs(), "out", 2)
			if string(got[0].Value) != "small-0" || string(got[1].Value) != "small-2" {
				t.Fatalf("topic holds %q, %q", got[0].Value, got[1].Value)
			}
		})
	}
}

func kadmString(s string) *string { return &s }

func TestSinkMissingTopicFails(t *testing.T) {
	c := newCluster(t)
	s := newTestSink(t, c.ListenAddrs(), "nowhere", false, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make([]error, 2)
	start := time.Now()
	err := s.Write(ctx, []isb.Message{{Value: []byte("a")}, {Value: []byte("b")}}, errs)
	if err != nil {
		t.Fatalf("Write = %v; want the errors per message", err)
	}
	for i, e := range errs {
		if e == nil || !strings.Contains(e.Error(), "nowhere") {
			t.Fatalf("errs[%d] = %v; want an error naming the topic", i, e)
		}
	}
	t.Logf("failed after %v: %v", time.Since(start), errs[0])
}

func TestSinkWriteEndsWithContext(t *testing.T) {
	c := newCluster(t)
	s := newTestSink(t, c.ListenAddrs(), "nowhere", false, Properties{"message.timeout.ms": "0"})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	errs := make([]error, 1)
	done := make(chan error, 1)
	go func() { done <- s.Write(ctx, []isb.Message{{Value: []byte("a")}}, errs) }()
	select {
	case err := <-done:
		if err == nil && errs[0] == nil {
			t.Fatal("a write to a missing topic succeeded")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Write did not end with its context")
	}
}

func TestSinkClosed(t *testing.T) {
	c := newCluster(t, kfake.SeedTopics(1, "out"))
	s := newTestSink(t, c.ListenAddrs(), "out", false, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(context.Background(), []isb.Message{{Value: []byte("a")}}, make([]error, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close = %v; want ErrClosed", err)
	}
}

func TestNewSinkErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  SinkConfig
		want string
	}{
		{"no topic", SinkConfig{Client: ClientConfig{Brokers: []string{"127.0.0.1:1"}}}, "kafka sink: topic is required"},
		{"no brokers", SinkConfig{Topic: "t"}, "kafka sink: brokers is required"},
		{"bad property", SinkConfig{Topic: "t", Client: ClientConfig{Brokers: []string{"127.0.0.1:1"}, Properties: Properties{"acks": "most"}}}, `acks ("most")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSink(tc.cfg)
			if err == nil {
				s.Close()
				t.Fatalf("NewSink succeeded; want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewSink error = %q; want %q", err, tc.want)
			}
		})
	}
}
