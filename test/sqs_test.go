package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluiceflow/sluice/internal/sqstest"
)

// sqsEnv is the environment of a vertex that uses s: the AWS chain's
// credentials, and no instance metadata service to ask.
func sqsEnv(s *sqstest.Server, extra ...string) []string {
	return append(append(os.Environ(), "AWS_ACCESS_KEY_ID="+sqstest.AccessKey, "AWS_SECRET_ACCESS_KEY="+sqstest.SecretKey,
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE="+os.DevNull, "AWS_SHARED_CREDENTIALS_FILE="+os.DevNull), extra...)
}

func startSQSVertex(t *testing.T, s *sqstest.Server, cfg string, extraEnv ...string) *proc {
	t.Helper()
	cmd := exec.Command(vertexBin, "run", "-f", cfg, "--metrics-addr", "127.0.0.1:0", "--log-level", "debug")
	cmd.Env = sqsEnv(s, extraEnv...)
	p := startCmd(t, cmd)
	p.metricsAddr()
	return p
}

// sendSQSBatch sends the bodies prefix0..prefix<n-1> to the queue at url.
func sendSQSBatch(t *testing.T, s *sqstest.Server, url, prefix string, n int) {
	t.Helper()
	c := s.Client()
	for i := 0; i < n; i += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for j := i; j < min(i+10, n); j++ {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j - i)), MessageBody: aws.String(prefix + strconv.Itoa(j))})
		}
		if _, err := c.SendMessageBatch(context.Background(), &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries}); err != nil {
			t.Fatal(err)
		}
	}
}

// sqsCollector counts the bodies that reach a queue, deleting them.
type sqsCollector struct {
	t      *testing.T
	c      *awssqs.Client
	url    string
	counts map[string]int
}

// poll receives what the queue holds now, up to 100 messages.
func (c *sqsCollector) poll() {
	for range 10 {
		out, err := c.c.ReceiveMessage(context.Background(), &awssqs.ReceiveMessageInput{QueueUrl: &c.url, MaxNumberOfMessages: 10})
		if err != nil {
			return // the server may be stopped
		}
		if len(out.Messages) == 0 {
			return
		}
		var del []types.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			c.counts[aws.ToString(m.Body)]++
			del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if _, err := c.c.DeleteMessageBatch(context.Background(), &awssqs.DeleteMessageBatchInput{QueueUrl: &c.url, Entries: del}); err != nil {
			c.t.Fatalf("delete: %v", err)
		}
	}
}

// waitDistinct polls until n distinct bodies have come, for timeout at most.
func (c *sqsCollector) waitDistinct(n int, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for len(c.counts) < n {
		if time.Now().After(deadline) {
			c.t.Fatalf("%d distinct messages at the sink queue after %v, want %d", len(c.counts), timeout, n)
		}
		c.poll()
		time.Sleep(50 * time.Millisecond)
	}
}

// sqsPipeConfig is a MonoVertex from the queue in to the queue out of s,
// at most max messages a second.
func sqsPipeConfig(t *testing.T, s *sqstest.Server, name, in, out string, max int) string {
	return writeConfig(t, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: %s
spec:
  limits:
    readBatchSize: 50
    readTimeout: 200ms
    rateLimit:
      max: %d
      min: %d
      rampUpDuration: 0s
  source:
    sqs:
      awsRegion: %s
      queueName: %s
      endpointUrl: %s
      maxNumberOfMessages: 10
  sink:
    sqs:
      awsRegion: %s
      queueName: %s
      endpointUrl: %s
`, name, max, max, sqstest.Region, in, s.URL(), sqstest.Region, out, s.URL()))
}

// checkSQSDelivery checks that each of the n bodies prefix<i> reached the
// sink queue and that the source queue at in is empty, and returns how many
// came more than once.
func checkSQSDelivery(t *testing.T, s *sqstest.Server, col *sqsCollector, in, prefix string, n int) int {
	t.Helper()
	col.poll()
	twice := 0
	for i := range n {
		switch got := col.counts[prefix+strconv.Itoa(i)]; {
		case got == 0:
			t.Errorf("%s%d lost", prefix, i)
		case got > 1:
			twice += got - 1
		}
	}
	if len(col.counts) != n {
		t.Errorf("%d distinct bodies at the sink queue, want %d", len(col.counts), n)
	}
	if v, h := sqsCounts(t, s, in); v != "0" || h != "0" {
		t.Errorf("source queue holds %s visible and %s hidden messages after the run, want none", v, h)
	}
	return twice
}

// sqsCounts returns the visible and the hidden (received, not deleted)
// messages of the queue at url.
func sqsCounts(t *testing.T, s *sqstest.Server, url string) (visible, hidden string) {
	t.Helper()
	attrs, err := s.Client().GetQueueAttributes(context.Background(), &awssqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	return attrs.Attributes["ApproximateNumberOfMessages"], attrs.Attributes["ApproximateNumberOfMessagesNotVisible"]
}

// waitSQSEmpty waits until the queue at url holds no message, visible or
// hidden, for timeout at most.
func waitSQSEmpty(t *testing.T, s *sqstest.Server, url string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		v, h := sqsCounts(t, s, url)
		if v == "0" && h == "0" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the source queue still holds %s visible and %s hidden messages after %v", v, h, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkEpochs checks that no epoch of p granted more than max, and returns
// the grants by epoch. A process killed may have logged none.
func checkEpochs(t *testing.T, p *proc, max int64, killed bool) map[int64]int64 {
	t.Helper()
	granted, _ := sumEpochs(t, []*proc{p})
	if len(granted) == 0 && !killed {
		t.Fatal("no epoch in the debug log")
	}
	for e, g := range granted {
		if g > max {
			t.Errorf("epoch %d granted %d; max %d", e, g, max)
		}
	}
	return granted
}

// TestSQSMonoVertexRateLimit runs a MonoVertex from one SQS queue to
// another at most 100 messages a second: no epoch grants more than 100,
// 500 messages take at least 3 seconds, every one reaches the sink queue
// and the source queue ends empty.
func TestSQSMonoVertexRateLimit(t *testing.T) {
	t.Parallel()
	const n, max = 500, 100
	s := sqstest.Start(t)
	qE2eRateIn := sqstest.Unique("e2e-rate-in")
	in := s.CreateQueue(t, qE2eRateIn, 30)
	qE2eRateOut := sqstest.Unique("e2e-rate-out")
	out := s.CreateQueue(t, qE2eRateOut, 30)
	sendSQSBatch(t, s, in, "r-", n)
	col := &sqsCollector{t: t, c: s.Client(), url: out, counts: map[string]int{}}
	began := time.Now()
	p := startSQSVertex(t, s, sqsPipeConfig(t, s, "sqs-rate", qE2eRateIn, qE2eRateOut, max))
	col.waitDistinct(n, 30*time.Second)
	took := time.Since(began)
	if code, _ := p.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
	}
	twice := checkSQSDelivery(t, s, col, in, "r-", n)
	if twice != 0 {
		t.Errorf("%d messages delivered twice in a run without failures", twice)
	}
	granted := checkEpochs(t, p, max, false)
	// n/max epochs, the first and the last of which may be cut short.
	if took < time.Duration(n/max-2)*time.Second {
		t.Errorf("%d messages in %v at %d/s", n, took, max)
	}
	t.Logf("%d messages in %v; grants by epoch %v", n, took.Round(time.Millisecond), granted)
}

// TestSQSMonoVertexRestarts runs the MonoVertex of
// TestSQSMonoVertexRateLimit, kills it with SIGKILL and starts it again,
// then stops the SQS server and starts it again: every one of the 400
// messages reaches the sink queue, the source queue ends empty, and no
// epoch of either process grants more than 100.
func TestSQSMonoVertexRestarts(t *testing.T) {
	t.Parallel()
	const n, max = 400, 100
	s := sqstest.Start(t)
	qE2eIn := sqstest.Unique("e2e-in")
	in := s.CreateQueue(t, qE2eIn, 3)
	qE2eOut := sqstest.Unique("e2e-out")
	out := s.CreateQueue(t, qE2eOut, 30)
	sendSQSBatch(t, s, in, "q-", n)
	cfg := sqsPipeConfig(t, s, "sqs-pipe", qE2eIn, qE2eOut, max)
	col := &sqsCollector{t: t, c: s.Client(), url: out, counts: map[string]int{}}
	began := time.Now()
	phase := func(what string) {
		t.Logf("%v: %s (%d distinct at the sink)", time.Since(began).Round(time.Millisecond), what, len(col.counts))
	}
	p1 := startSQSVertex(t, s, cfg)
	col.waitDistinct(100, 30*time.Second)
	p1.cmd.Process.Kill()
	<-p1.done
	phase("first vertex killed")
	p2 := startSQSVertex(t, s, cfg)
	col.waitDistinct(200, 30*time.Second)
	s.Stop()
	phase("server stopped")
	time.Sleep(1500 * time.Millisecond) // the vertex reads, writes and acks against a closed port
	s.Restart(t)
	phase("server restarted")
	col.waitDistinct(n, 60*time.Second)
	phase("every message at the sink")
	// What was written but not acked while the server was away comes back
	// after the 3s visibility timeout, is written again and acked.
	waitSQSEmpty(t, s, in, 30*time.Second)
	phase("source queue empty")
	if code, _ := p2.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p2.stderrText())
	}
	twice := checkSQSDelivery(t, s, col, in, "q-", n)
	// Each process has its own epochs: a vertex restarted within a second
	// of its death does not know what the dead one granted in it (a shared
	// store would).
	g1, g2 := checkEpochs(t, p1, max, true), checkEpochs(t, p2, max, false)
	t.Logf("%d delivered twice; grants by epoch %v, then %v", twice, g1, g2)
}

// TestSQSNumaflowExample runs Numaflow's example 22 as it is, with the
// endpoint from the AWS chain (AWS_ENDPOINT_URL_SQS): what the queue holds
// reaches the log sink.
func TestSQSNumaflowExample(t *testing.T) {
	t.Parallel()
	example := filepath.Join(numaflowSrc(t), "examples", "22-sqs-source-mvtx.yaml")
	s := sqstest.Start(t)
	url := s.CreateQueue(t, "sqs-numa-test", 30)
	sendSQSBatch(t, s, url, "ex-", 20)
	p := startSQSVertex(t, s, example, "AWS_ENDPOINT_URL_SQS="+s.URL())
	p.waitFor(30*time.Second, "every message at the log sink", func() bool { return len(payloadCounts(p.lines)) >= 20 })
	if code, _ := p.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
	}
	counts := payloadCounts(p.stdoutLines())
	for i := range 20 {
		if counts["ex-"+strconv.Itoa(i)] != 1 {
			t.Errorf("ex-%d at the sink %d times, want once", i, counts["ex-"+strconv.Itoa(i)])
		}
	}
}

// TestSQSVertexMissingQueue starts a vertex whose queue does not exist: it
// says so once, naming the field, keeps running, and reads the queue once
// it is made.
func TestSQSVertexMissingQueue(t *testing.T) {
	t.Parallel()
	s := sqstest.Start(t)
	queue := sqstest.Unique("e2e-made-later")
	cfg := writeConfig(t, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: sqs-missing
spec:
  limits:
    readTimeout: 200ms
  source:
    sqs:
      awsRegion: %s
      queueName: %s
      endpointUrl: %s
  sink:
    log: {}
`, sqstest.Region, queue, s.URL()))
	p := startSQSVertex(t, s, cfg)
	want := `spec.source.sqs.queueName (\"` + queue + `\"): the queue does not exist`
	p.waitFor(20*time.Second, "the error naming the field", func() bool { return strings.Contains(p.stderr.String(), want) })
	time.Sleep(2 * time.Second) // several retries
	url := s.CreateQueue(t, queue, 30)
	sendSQSBatch(t, s, url, "late-", 5)
	p.waitFor(30*time.Second, "the messages at the log sink", func() bool { return len(payloadCounts(p.lines)) >= 5 })
	if code, _ := p.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
	}
	if warned := warnings(p, want); warned != 1 {
		t.Errorf("the error is a warning %d times, want once:\n%s", warned, p.stderrText())
	}
}

// numaflowSrc returns $NUMAFLOW_DIR, Numaflow's source tree, and skips the
// test, saying so, when it is not set.
func numaflowSrc(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(envNumaflowDir)
	if dir == "" {
		t.Skipf("%s is not set: Numaflow's example is not run (set it to Numaflow's source tree)", envNumaflowDir)
	}
	return dir
}

// warnings counts the warnings of p's log that contain want.
func warnings(p *proc, want string) int {
	n := 0
	for _, l := range strings.Split(p.stderrText(), "\n") {
		if strings.Contains(l, `"level":"warn"`) && strings.Contains(l, want) {
			n++
		}
	}
	return n
}

// TestSQSVertexUnreachable starts a vertex while its SQS endpoint is down:
// it says so once, naming the field, keeps running, and reads the queue
// once the server is back.
func TestSQSVertexUnreachable(t *testing.T) {
	t.Parallel()
	s := sqstest.Start(t)
	queue := sqstest.Unique("e2e-unreachable")
	url := s.CreateQueue(t, queue, 30)
	sendSQSBatch(t, s, url, "u-", 5)
	s.Stop()
	cfg := writeConfig(t, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: sqs-unreachable
spec:
  limits:
    readTimeout: 200ms
  source:
    sqs:
      awsRegion: %s
      queueName: %s
      endpointUrl: %s
  sink:
    log: {}
`, sqstest.Region, queue, s.URL()))
	p := startSQSVertex(t, s, cfg)
	want := `spec.source.sqs.endpointUrl (\"` + s.URL() + `\"): cannot reach SQS`
	p.waitFor(20*time.Second, "the error naming the field", func() bool { return strings.Contains(p.stderr.String(), want) })
	time.Sleep(2 * time.Second) // several retries
	s.Restart(t)
	p.waitFor(30*time.Second, "the messages at the log sink", func() bool { return len(payloadCounts(p.lines)) >= 5 })
	if code, _ := p.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
	}
	if warned := warnings(p, want); warned != 1 {
		t.Errorf("the error is a warning %d times, want once:\n%s", warned, p.stderrText())
	}
}

// TestSQSVertexBadCredentials starts a vertex whose AWS credentials the
// server refuses: it says so once, naming the field, reads nothing, keeps
// running while it retries, and stops cleanly. goaws checks no credentials;
// the test server checks the signing access key.
func TestSQSVertexBadCredentials(t *testing.T) {
	t.Parallel()
	s := sqstest.Start(t, sqstest.WithAccessKey(sqstest.AccessKey))
	queue := sqstest.Unique("e2e-creds")
	url := s.CreateQueue(t, queue, 30)
	sendSQSBatch(t, s, url, "c-", 3)
	cfg := writeConfig(t, fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: sqs-creds
spec:
  limits:
    readTimeout: 200ms
  source:
    sqs:
      awsRegion: %s
      queueName: %s
      endpointUrl: %s
  sink:
    log: {}
`, sqstest.Region, queue, s.URL()))
	p := startSQSVertex(t, s, cfg, "AWS_ACCESS_KEY_ID=not-the-key")
	const want = `spec.source.sqs: the AWS credentials were refused`
	p.waitFor(20*time.Second, "the error naming the field", func() bool { return strings.Contains(p.stderr.String(), want) })
	time.Sleep(2 * time.Second) // several retries
	if code, _ := p.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
	}
	if warned := warnings(p, want); warned != 1 || len(p.stdoutLines()) != 0 {
		t.Errorf("the error is a warning %d times (want once), %d messages at the sink (want none):\n%s", warned, len(p.stdoutLines()), p.stderrText())
	}
	if v, _ := sqsCounts(t, s, url); v != "3" {
		t.Errorf("the queue holds %s visible messages, want the 3 sent", v)
	}
}
