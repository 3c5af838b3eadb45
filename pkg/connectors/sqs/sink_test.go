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

	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/internal/sqsclient"
	"github.com/sluiceflow/sluice/internal/sqstest"
	"github.com/sluiceflow/sluice/pkg/connectors/sqs"
	"github.com/sluiceflow/sluice/pkg/isb"
)

func newSQSSink(t testing.TB, s *sqstest.Server, queue string) *sqs.Sink {
	t.Helper()
	w, err := sqs.NewSink(context.Background(), sqs.SinkConfig{Queue: sqsclient.Config{Field: "spec.sink.sqs",
		Region: sqstest.Region, QueueName: queue, EndpointURL: s.URL(),
		Credentials: credentials.NewStaticCredentialsProvider(sqstest.AccessKey, sqstest.SecretKey, "")}})
	if err != nil {
		t.Fatalf("NewSQS: %v", err)
	}
	return w
}

// receiveAll receives the queue's messages until want have come, deleting
// them, and returns their bodies sorted.
func receiveAll(t *testing.T, s *sqstest.Server, url string, want int) []string {
	t.Helper()
	c := s.Client()
	var got []string
	runtest.WaitFor(t, strconv.Itoa(want)+" messages in the queue", func() bool {
		out, err := c.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		for _, m := range out.Messages {
			got = append(got, aws.ToString(m.Body))
			if _, err := c.DeleteMessage(context.Background(), &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("delete: %v", err)
			}
		}
		return len(got) >= want
	}, runtest.Within(20*time.Second))
	slices.Sort(got)
	return got
}

// TestSQSSinkBatches writes 25 messages: three SendMessageBatch calls of
// 10, 10 and 5 entries, each entry with the message's body and its send
// options from headers and "sqs" metadata, and the queue holds the 25
// (goaws does not apply a batch entry's DelaySeconds).
func TestSQSSinkBatches(t *testing.T) {
	s := sqstest.Start(t)
	qSinkBatches := sqstest.Unique("sink-batches")
	url := s.CreateQueue(t, qSinkBatches, 30)
	w := newSQSSink(t, s, qSinkBatches)
	msgs := make([]isb.Message, 25)
	var want []string
	for i := range msgs {
		msgs[i] = isb.Message{ID: strconv.Itoa(i), Value: []byte("v" + strconv.Itoa(i)),
			Headers: map[string]string{sqs.HeaderGroupID: "g" + strconv.Itoa(i%3), sqs.HeaderDelaySeconds: "3"}}
		want = append(want, string(msgs[i].Value))
	}
	msgs[4].Metadata = isb.Metadata{"sqs": {sqs.HeaderGroupID: []byte("from-metadata"), sqs.HeaderDeduplicationID: []byte("d4")}}
	msgs[5].Headers[sqs.HeaderDelaySeconds] = "not a number" // ignored, as in Numaflow
	errs := make([]error, len(msgs))
	if err := w.Write(context.Background(), msgs, errs); err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	calls := s.Calls("SendMessageBatch")
	if len(calls) != 3 {
		t.Fatalf("%d SendMessageBatch calls, want 3", len(calls))
	}
	for c, f := range calls {
		n := 0
		for k := range f {
			if strings.HasSuffix(k, ".MessageBody") {
				n++
			}
		}
		if wantN := []int{10, 10, 5}[c]; n != wantN {
			t.Errorf("call %d has %d entries, want %d", c, n, wantN)
		}
	}
	e := func(call, entry int, field string) string {
		return calls[call].Get("SendMessageBatchRequestEntry." + strconv.Itoa(entry) + "." + field)
	}
	if e(0, 1, "MessageBody") != "v0" || e(0, 1, "MessageGroupId") != "g0" || e(0, 1, "DelaySeconds") != "3" {
		t.Errorf("entry 1 of call 1: %v", calls[0])
	}
	if e(0, 5, "MessageGroupId") != "from-metadata" || e(0, 5, "MessageDeduplicationId") != "d4" {
		t.Errorf("message 4's options: group %q dedup %q: want the metadata's", e(0, 5, "MessageGroupId"), e(0, 5, "MessageDeduplicationId"))
	}
	if e(0, 6, "DelaySeconds") != "" {
		t.Errorf("message 5's invalid DelaySeconds was sent: %q", e(0, 6, "DelaySeconds"))
	}
	if e(2, 5, "MessageBody") != "v24" {
		t.Errorf("last entry %q, want v24", e(2, 5, "MessageBody"))
	}
	slices.Sort(want)
	if got := receiveAll(t, s, url, 25); !slices.Equal(got, want) {
		t.Fatalf("queue holds %v, want %v", got, want)
	}
}

// TestSQSSinkRejectsBinary rejects a value that is not UTF-8 and writes
// the rest of the batch.
func TestSQSSinkRejectsBinary(t *testing.T) {
	s := sqstest.Start(t)
	qSinkBinary := sqstest.Unique("sink-binary")
	url := s.CreateQueue(t, qSinkBinary, 30)
	w := newSQSSink(t, s, qSinkBinary)
	msgs := []isb.Message{{ID: "a", Value: []byte("ok")}, {ID: "b", Value: []byte{0xff, 0xfe}}, {ID: "c", Value: []byte("ok too")}}
	errs := make([]error, len(msgs))
	if err := w.Write(context.Background(), msgs, errs); err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], isb.ErrRejected) {
		t.Fatalf("errs %v: want only b rejected", errs)
	}
	if got := receiveAll(t, s, url, 2); !slices.Equal(got, []string{"ok", "ok too"}) {
		t.Fatalf("queue holds %v", got)
	}
}

// TestSQSSinkBadInput writes to a queue that does not exist and to an
// endpoint that is down: every message fails with an error naming the
// field, none is lost, and the write succeeds once the cause has passed.
func TestSQSSinkBadInput(t *testing.T) {
	s := sqstest.Start(t)
	qSinkLater := sqstest.Unique("sink-later")
	w := newSQSSink(t, s, qSinkLater)
	msgs := []isb.Message{{ID: "a", Value: []byte("a")}, {ID: "b", Value: []byte("b")}}
	errs := make([]error, len(msgs))
	if err := w.Write(context.Background(), msgs, errs); err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		if !errors.Is(err, sqsclient.ErrQueue) || !strings.Contains(err.Error(), fmt.Sprintf("spec.sink.sqs.queueName (%q)", qSinkLater)) {
			t.Fatalf("error %v: want one naming spec.sink.sqs.queueName", err)
		}
	}
	url := s.CreateQueue(t, qSinkLater, 30)
	s.Stop()
	if err := w.Write(context.Background(), msgs, errs); err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		if !errors.Is(err, sqsclient.ErrUnreachable) || !strings.Contains(err.Error(), "spec.sink.sqs.endpointUrl") {
			t.Fatalf("error %v: want one naming spec.sink.sqs.endpointUrl", err)
		}
	}
	s.Restart(t)
	if err := w.Write(context.Background(), msgs, errs); err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("write after the restart: %v %v", err, errs)
	}
	if got := receiveAll(t, s, url, 2); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("queue holds %v", got)
	}
}

// BenchmarkSQSSink writes batches of 10 messages.
func BenchmarkSQSSink(b *testing.B) {
	s := sqstest.Start(b)
	qBenchSink := sqstest.Unique("bench-sink")
	s.CreateQueue(b, qBenchSink, 30)
	w := newSQSSink(b, s, qBenchSink)
	msgs := make([]isb.Message, 10)
	for i := range msgs {
		msgs[i] = isb.Message{ID: strconv.Itoa(i), Value: []byte("payload-" + strconv.Itoa(i))}
	}
	errs := make([]error, len(msgs))
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if err := w.Write(ctx, msgs, errs); err != nil || errs[0] != nil {
			b.Fatal(err, errs[0])
		}
	}
	b.ReportMetric(float64(b.N*len(msgs))/b.Elapsed().Seconds(), "msgs/s")
}
