package sqs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.uber.org/zap/zaptest"

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/internal/sqsclient"
	"github.com/sluiceflow/sluice/internal/sqstest"
	"github.com/sluiceflow/sluice/pkg/connectors/sqs"
	"github.com/sluiceflow/sluice/pkg/isb"
)

// newSQS opens a source of queue on s's endpoint (or endpoint, when set).
func newSQS(t testing.TB, endpoint, queue string, mod func(*sqs.SourceConfig)) *sqs.Source {
	t.Helper()
	cfg := sqs.SourceConfig{
		Queue: sqsclient.Config{Field: "spec.source.sqs", Region: sqstest.Region, QueueName: queue, EndpointURL: endpoint,
			Credentials: credentials.NewStaticCredentialsProvider(sqstest.AccessKey, sqstest.SecretKey, "")},
		ReadTimeout: time.Second,
	}
	if tl, ok := t.(*testing.T); ok {
		cfg.Logger = zaptest.NewLogger(tl)
	}
	if mod != nil {
		mod(&cfg)
	}
	src, err := sqs.NewSource(context.Background(), cfg)
	if err != nil {
		t.Fatalf("NewSQS: %v", err)
	}
	return src
}

// sendSQS sends n messages m<from>..m<from+n-1>, each with the message
// attribute n=<i>.
func sendSQS(t testing.TB, s *sqstest.Server, url string, from, n int) {
	t.Helper()
	c := s.Client()
	for i := from; i < from+n; i++ {
		_, err := c.SendMessage(context.Background(), &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("m" + strconv.Itoa(i)),
			MessageAttributes: map[string]types.MessageAttributeValue{"n": {DataType: aws.String("String"), StringValue: aws.String(strconv.Itoa(i))}}})
		if err != nil {
			t.Fatalf("send: %v", err)
		}
	}
}

// readAll reads until want messages came, in reads of at most batch, and
// fails when a read returns more than batch.
func readAll(t *testing.T, src *sqs.Source, batch, want int) []isb.ReadMessage {
	t.Helper()
	var got []isb.ReadMessage
	buf := make([]isb.ReadMessage, batch)
	runtest.WaitFor(t, fmt.Sprintf("%d messages", want), func() bool {
		n, err := src.Read(context.Background(), buf)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if n > batch {
			t.Fatalf("read %d messages into a buffer of %d", n, batch)
		}
		got = append(got, slices.Clone(buf[:n])...)
		return len(got) >= want
	}, runtest.Within(20*time.Second))
	if len(got) != want {
		t.Fatalf("read %d messages, want %d", len(got), want)
	}
	return got
}

func bodies(msgs []isb.ReadMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Value)
	}
	slices.Sort(out)
	return out
}

// TestSQSReadNeverMoreThanBuf reads a queue through buffers of several
// sizes: no read returns more than its buffer holds, and every message
// comes once.
func TestSQSReadNeverMoreThanBuf(t *testing.T) {
	s := sqstest.Start(t)
	for _, batch := range []int{1, 3, 10, 15} {
		t.Run(strconv.Itoa(batch), func(t *testing.T) {
			name := sqstest.Unique("read-batch-" + strconv.Itoa(batch))
			url := s.CreateQueue(t, name, 30)
			sendSQS(t, s, url, 0, 23)
			src := newSQS(t, s.URL(), name, nil)
			got := readAll(t, src, batch, 23)
			if err := src.Ack(context.Background(), got); err != nil {
				t.Fatalf("ack: %v", err)
			}
			if b := bodies(got); len(slices.Compact(b)) != 23 {
				t.Fatalf("bodies %v: want 23 distinct", b)
			}
			for _, f := range s.Calls("ReceiveMessage") {
				if n, _ := strconv.Atoi(f.Get("MaxNumberOfMessages")); n > 10 || n > batch {
					t.Fatalf("ReceiveMessage asked for %d (batch %d)", n, batch)
				}
			}
		})
	}
}

// TestSQSMessage checks what a message read carries: its ID and key, its
// system attributes as headers, its event time and its message attributes.
func TestSQSMessage(t *testing.T) {
	s := sqstest.Start(t)
	qMessage := sqstest.Unique("message")
	url := s.CreateQueue(t, qMessage, 30)
	before := time.Now().Add(-time.Second)
	sendSQS(t, s, url, 7, 1)
	src := newSQS(t, s.URL(), qMessage, nil)
	m := readAll(t, src, 10, 1)[0]
	if m.ID == "" || len(m.Keys) != 1 || m.Keys[0] != m.ID {
		t.Errorf("ID %q keys %q: want the message ID as both", m.ID, m.Keys)
	}
	if string(m.Value) != "m7" {
		t.Errorf("value %q", m.Value)
	}
	if m.Headers["SentTimestamp"] == "" || m.Headers["ApproximateReceiveCount"] != "1" {
		t.Errorf("headers %v: want the system attributes", m.Headers)
	}
	if m.EventTime.Before(before) || m.EventTime.After(time.Now().Add(time.Second)) {
		t.Errorf("event time %v", m.EventTime)
	}
	if got := string(m.Metadata[sqs.MetadataKey]["n"]); got != "7" {
		t.Errorf("metadata %v: want sqs.n=7", m.Metadata)
	}
	f := s.Calls("ReceiveMessage")[0]
	if f.Get("AttributeName.1") != "All" || f.Get("MessageAttributeName.1") != "All" {
		t.Errorf("receive asked for %v: want All attributes", f)
	}
	if err := src.Ack(context.Background(), []isb.ReadMessage{m}); err != nil {
		t.Fatal(err)
	}
}

// TestSQSAckNackVisibility acks some messages, nacks others and leaves the
// rest: the acked never come back, the nacked come back at once, the rest
// once their visibility timeout has passed.
func TestSQSAckNackVisibility(t *testing.T) {
	s := sqstest.Start(t)
	qAcknack := sqstest.Unique("acknack")
	url := s.CreateQueue(t, qAcknack, 2)
	sendSQS(t, s, url, 0, 30)
	src := newSQS(t, s.URL(), qAcknack, nil)
	ctx := context.Background()
	first := readAll(t, src, 30, 30)
	acked, nacked, left := first[:12], first[12:17], first[17:]
	if err := src.Ack(ctx, acked); err != nil {
		t.Fatalf("ack: %v", err)
	}
	for _, f := range s.Calls("DeleteMessageBatch") {
		if f.Get("DeleteMessageBatchRequestEntry.11.ReceiptHandle") != "" {
			t.Fatalf("a DeleteMessageBatch of more than 10 entries: %v", f)
		}
	}
	if n := len(s.Calls("DeleteMessageBatch")); n != 2 {
		t.Fatalf("%d DeleteMessageBatch calls for 12 acks, want 2", n)
	}
	if err := src.Nack(ctx, nacked, 0); err != nil {
		t.Fatalf("nack: %v", err)
	}
	cmv := s.Calls("ChangeMessageVisibility")
	if len(cmv) != 5 || cmv[0].Get("VisibilityTimeout") != "0" {
		t.Fatalf("nack made %d ChangeMessageVisibility calls (%v), want 5 with VisibilityTimeout 0", len(cmv), cmv)
	}
	again := readAll(t, src, 30, 5)
	if got, want := bodies(again), bodies(nacked); !slices.Equal(got, want) {
		t.Fatalf("after the nack read %v, want %v", got, want)
	}
	if err := src.Ack(ctx, again); err != nil {
		t.Fatal(err)
	}
	// The 13 left come back once the 2s visibility timeout has passed.
	late := readAll(t, src, 30, len(left))
	if got, want := bodies(late), bodies(left); !slices.Equal(got, want) {
		t.Fatalf("after the visibility timeout read %v, want %v", got, want)
	}
	if late[0].Headers["ApproximateReceiveCount"] == "1" {
		t.Logf("goaws counts receives its own way: %v", late[0].Headers)
	}
	if err := src.Ack(ctx, late); err != nil {
		t.Fatal(err)
	}
	if n, err := src.Pending(ctx); err != nil || n != 0 {
		t.Fatalf("pending %d, %v: want 0", n, err)
	}
}

// TestSQSNackDelay nacks with a delay of 1.2s, which SQS takes as 2 whole
// seconds.
func TestSQSNackDelay(t *testing.T) {
	s := sqstest.Start(t)
	qNackdelay := sqstest.Unique("nackdelay")
	url := s.CreateQueue(t, qNackdelay, 30)
	sendSQS(t, s, url, 0, 1)
	src := newSQS(t, s.URL(), qNackdelay, nil)
	m := readAll(t, src, 1, 1)
	if err := src.Nack(context.Background(), m, 1200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := s.Calls("ChangeMessageVisibility")[0].Get("VisibilityTimeout"); got != "2" {
		t.Fatalf("VisibilityTimeout %s, want 2", got)
	}
	if err := src.Ack(context.Background(), readAll(t, src, 1, 1)); err != nil {
		t.Fatal(err)
	}
}

// TestSQSBadInput checks the errors of a queue that does not exist, of
// refused credentials and of an endpoint that cannot be reached: Read
// returns each once, naming the field, then reads nothing while the cause
// lasts, and reads again once it has passed.
func TestSQSBadInput(t *testing.T) {
	t.Run("queue does not exist", func(t *testing.T) {
		s := sqstest.Start(t)
		qMadeLater := sqstest.Unique("made-later")
		src := newSQS(t, s.URL(), qMadeLater, nil)
		err := readErr(t, src)
		if !errors.Is(err, sqsclient.ErrQueue) || !strings.Contains(err.Error(), fmt.Sprintf("spec.source.sqs.queueName (%q)", qMadeLater)) {
			t.Fatalf("error %v: want one naming spec.source.sqs.queueName", err)
		}
		quietWhileFailing(t, src)
		url := s.CreateQueue(t, qMadeLater, 30)
		sendSQS(t, s, url, 0, 3)
		_ = readAll(t, src, 10, 3)
	})
	t.Run("credentials refused", func(t *testing.T) {
		s := sqstest.Start(t, sqstest.WithAccessKey(sqstest.AccessKey))
		qCreds := sqstest.Unique("creds")
		s.CreateQueue(t, qCreds, 30)
		src := newSQS(t, s.URL(), qCreds, func(c *sqs.SourceConfig) {
			c.Queue.Credentials = credentials.NewStaticCredentialsProvider("wrong", "wrong", "")
		})
		err := readErr(t, src)
		if !errors.Is(err, sqsclient.ErrCredentials) || !strings.Contains(err.Error(), "spec.source.sqs: the AWS credentials were refused") {
			t.Fatalf("error %v: want refused credentials naming spec.source.sqs", err)
		}
		quietWhileFailing(t, src)
	})
	t.Run("endpoint unreachable", func(t *testing.T) {
		s := sqstest.Start(t)
		qUnreachable := sqstest.Unique("unreachable")
		url := s.CreateQueue(t, qUnreachable, 30)
		sendSQS(t, s, url, 0, 4)
		s.Stop()
		src := newSQS(t, s.URL(), qUnreachable, nil)
		err := readErr(t, src)
		if !errors.Is(err, sqsclient.ErrUnreachable) || !strings.Contains(err.Error(), fmt.Sprintf("spec.source.sqs.endpointUrl (%q)", s.URL())) {
			t.Fatalf("error %v: want one naming spec.source.sqs.endpointUrl", err)
		}
		quietWhileFailing(t, src)
		s.Restart(t)
		_ = readAll(t, src, 10, 4)
	})
}

// readErr reads until a read fails and returns its error.
func readErr(t *testing.T, src *sqs.Source) error {
	t.Helper()
	buf := make([]isb.ReadMessage, 10)
	var err error
	runtest.WaitFor(t, "a failed read", func() bool {
		var n int
		n, err = src.Read(context.Background(), buf)
		if n != 0 {
			t.Fatalf("read %d messages", n)
		}
		return err != nil
	}, runtest.Within(20*time.Second))
	return err
}

// quietWhileFailing reads a few times more: the same failure is not
// returned again, and nothing is read.
func quietWhileFailing(t *testing.T, src *sqs.Source) {
	t.Helper()
	buf := make([]isb.ReadMessage, 10)
	for range 3 {
		n, err := src.Read(context.Background(), buf)
		if n != 0 || err != nil {
			t.Fatalf("read %d, %v while the cause lasts: want 0 and no error (reported once)", n, err)
		}
	}
}

// TestSQSServerRestart stops the server with messages read and not acked
// and an ack in the air: nothing acked comes back, nothing unacked is lost.
func TestSQSServerRestart(t *testing.T) {
	s := sqstest.Start(t)
	qRestart := sqstest.Unique("restart")
	url := s.CreateQueue(t, qRestart, 2)
	sendSQS(t, s, url, 0, 40)
	src := newSQS(t, s.URL(), qRestart, nil)
	ctx := context.Background()
	first := readAll(t, src, 20, 20)
	if err := src.Ack(ctx, first[:10]); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if err := src.Ack(ctx, first[10:]); err == nil {
		t.Fatal("ack with the server stopped succeeded")
	}
	s.Restart(t)
	// The 10 unacked come back after their visibility timeout, the 20 never
	// read at once; each batch is acked as it comes.
	seen := map[string]bool{}
	buf := make([]isb.ReadMessage, 20)
	runtest.WaitFor(t, "the 30 messages not acked", func() bool {
		n, err := src.Read(ctx, buf)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if err := src.Ack(ctx, buf[:n]); err != nil {
			t.Fatalf("ack: %v", err)
		}
		for _, m := range buf[:n] {
			seen[string(m.Value)] = true
		}
		return len(seen) == 30
	}, runtest.Within(20*time.Second))
	for _, m := range first[:10] {
		if seen[string(m.Value)] {
			t.Errorf("%s was acked and came back", m.Value)
		}
	}
	if n, err := src.Pending(ctx); err != nil || n != 0 {
		t.Fatalf("pending %d, %v: want 0", n, err)
	}
}

// BenchmarkSQSSource reads and acks messages 10 at a time.
func BenchmarkSQSSource(b *testing.B) {
	s := sqstest.Start(b)
	qBenchSource := sqstest.Unique("bench-source")
	url := s.CreateQueue(b, qBenchSource, 300)
	fill := func(n int) {
		c := s.Client()
		entries := make([]types.SendMessageBatchRequestEntry, 10)
		for i := 0; i < n; i += 10 {
			for j := range entries {
				entries[j] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String("payload-" + strconv.Itoa(i+j))}
			}
			if _, err := c.SendMessageBatch(context.Background(), &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries}); err != nil {
				b.Fatal(err)
			}
		}
	}
	fill(b.N * 10)
	src := newSQS(b, s.URL(), qBenchSource, nil)
	buf := make([]isb.ReadMessage, 10)
	ctx := context.Background()
	b.ResetTimer()
	read := 0
	for read < b.N*10 {
		n, err := src.Read(ctx, buf)
		if err != nil {
			b.Fatal(err)
		}
		if err := src.Ack(ctx, buf[:n]); err != nil {
			b.Fatal(err)
		}
		read += n
	}
	b.ReportMetric(float64(read)/b.Elapsed().Seconds(), "msgs/s")
}
