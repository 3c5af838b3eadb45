package kafka

import (
	"context"
	"errors"
	"maps"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/pkg/isb"
)

// newCluster starts an in-process Kafka cluster of one broker on 127.0.0.1
// whose groups take short sessions.
func newCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// fastGroup are properties that make a group rebalance in a fraction of a second.
func fastGroup() Properties {
	return Properties{"session.timeout.ms": "3000", "heartbeat.interval.ms": "100", "fetch.wait.max.ms": "100"}
}

func newTestSource(t testing.TB, c *kfake.Cluster, group string, props Properties, topics ...string) *Source {
	t.Helper()
	return newTestSourceWith(t, c, group, props, func(*SourceConfig) {}, topics...)
}

// newTestSourceWith is newTestSource with its config changed by edit.
func newTestSourceWith(t testing.TB, c *kfake.Cluster, group string, props Properties, edit func(*SourceConfig), topics ...string) *Source {
	t.Helper()
	p := fastGroup()
	maps.Copy(p, props)
	cfg := SourceConfig{
		Client: ClientConfig{Brokers: c.ListenAddrs(), Properties: p, Logger: testLogger(t)},
		Topics: topics, Group: group, ReadTimeout: 100 * time.Millisecond,
	}
	edit(&cfg)
	s, err := NewSource(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testLogger is the logger of the sources and sinks of the tests: nothing,
// unless KAFKA_TEST_LOG is set.
func testLogger(t testing.TB) *zap.Logger {
	if os.Getenv("KAFKA_TEST_LOG") == "" {
		return nil
	}
	l, _ := zap.NewDevelopment()
	return l
}

// newAdmin returns an admin client of c, and its kgo client, closed at the end.
func newAdmin(t testing.TB, c *kfake.Cluster) (*kadm.Client, *kgo.Client) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl), cl
}

// produce writes recs, each to the partition it names.
func produce(t testing.TB, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// spread returns n records with values v0, v1... for topic, spread round
// robin over partitions.
func spread(topic string, partitions int32, from, n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := from + i
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(v) % partitions, Value: []byte("v" + strconv.Itoa(v))}
	}
	return recs
}

// committed returns the group's committed offset of topic[partition], or -1.
func committed(t testing.TB, adm *kadm.Client, group, topic string, partition int32) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	offsets, err := adm.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offsets.Lookup(topic, partition); ok {
		return o.At
	}
	return -1
}

// buffered returns how many records s fetched and holds unread.
func buffered(s *Source) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buffered
}

// readN reads with buffers of size until it has n messages, for at most 10s.
func readN(t testing.TB, s *Source, n, size int) []isb.ReadMessage {
	t.Helper()
	var out []isb.ReadMessage
	buf := make([]isb.ReadMessage, size)
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		got, err := s.Read(context.Background(), buf[:min(size, n-len(out))])
		if err != nil {
			t.Fatal(err)
		}
		if got > min(size, n-len(out)) {
			t.Fatalf("Read returned %d messages into a buffer of %d", got, min(size, n-len(out)))
		}
		out = append(out, buf[:got]...)
	}
	if len(out) < n {
		t.Fatalf("read %d messages of %d in 10s", len(out), n)
	}
	return out
}

// ownedCount returns how many partitions s owns.
func ownedCount(s *Source) int {
	n := 0
	for _, ps := range s.owned() {
		n += len(ps)
	}
	return n
}

// revoking reports whether a rebalance is taking partitions from s.
func revoking(s *Source) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.parts {
		if p.revoking {
			return true
		}
	}
	return false
}
