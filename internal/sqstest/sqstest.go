// Package sqstest runs an SQS server for tests: goaws
// (github.com/Admiral-Piett/goaws), in this process, on a free loopback port.
//
// goaws speaks SQS's query protocol; the AWS SDK for Go v2 speaks its JSON
// protocol (AWS JSON 1.0, X-Amz-Target). A [Server] turns each JSON request
// into the query form goaws reads, hands it to goaws's own router, and turns
// goaws's XML answer back into JSON. The queues, their messages, visibility
// timeouts, receipt handles and batch checks are goaws's.
//
// goaws keeps its queues in package variables: every Server of a process
// shares them, so each test uses queues of its own names. [Server.Stop] and
// [Server.Restart] take the server off its port and put it back, keeping the
// queues, as a real SQS endpoint that goes away keeps its messages.
//
// goaws checks no credentials; a Server made with [WithAccessKey] refuses,
// as SQS does with InvalidClientTokenId, requests signed with another key.
package sqstest

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Admiral-Piett/goaws/app"
	"github.com/Admiral-Piett/goaws/app/gosqs"
	"github.com/Admiral-Piett/goaws/app/router"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	log "github.com/sirupsen/logrus"
)

// Region, AccountID, AccessKey and SecretKey are what a Server's clients use.
const (
	Region    = "us-west-2"
	AccountID = "100010001000"
	AccessKey = "sqstest-access"
	SecretKey = "sqstest-secret"
)

var (
	setup sync.Once
	names atomic.Int64
)

// Unique returns base with a suffix no other call in the process returns: a
// queue name of its own, since goaws's queues outlive a test (go test
// -count 2 runs a test twice in one process).
func Unique(base string) string { return base + "-" + strconv.FormatInt(names.Add(1), 10) }

// global sets goaws's environment up once per process.
func global() {
	setup.Do(func() {
		log.SetLevel(log.WarnLevel)
		app.CurrentEnvironment.Host = "127.0.0.1"
		app.CurrentEnvironment.Region = Region
		app.CurrentEnvironment.AccountID = AccountID
		app.CurrentEnvironment.QueueAttributeDefaults = app.EnvQueueAttributes{
			VisibilityTimeout: 30, MaximumMessageSize: 262144}
	})
}

// Server is an SQS server on a loopback port; see the package doc.
type Server struct {
	addr      string
	accessKey string
	goaws     http.Handler

	mu    sync.Mutex
	srv   *http.Server
	calls map[string][]url.Values // action -> each call's query form
}

// Option configures a Server.
type Option func(*Server)

// WithAccessKey makes the server refuse requests signed with another
// access key than key.
func WithAccessKey(key string) Option { return func(s *Server) { s.accessKey = key } }

// Start starts a server on a free loopback port; the test's cleanup stops
// it for good.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	global()
	s := &Server{goaws: router.New()}
	for _, o := range opts {
		o(s)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("sqstest: listen: %v", err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	// goaws's periodic task makes messages whose visibility timeout has
	// passed visible again, every second.
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); gosqs.PeriodicTasks(time.Second, quit) }()
	t.Cleanup(func() { s.Stop(); close(quit); <-done })
	return s
}

func (s *Server) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(s.bridge), ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// Calls returns the query forms of the calls of action (ReceiveMessage,
// SendMessageBatch...) the server has served, in order: what a client sent.
func (s *Server) Calls(action string) []url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]url.Values(nil), s.calls[action]...)
}

func (s *Server) note(action string, form url.Values) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = map[string][]url.Values{}
	}
	s.calls[action] = append(s.calls[action], form)
}

// URL is the server's endpoint URL.
func (s *Server) URL() string { return "http://" + s.addr }

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Stop closes the server's port and every connection to it; the queues
// stay. Stop is safe to call twice.
func (s *Server) Stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Restart listens again on the server's port after a Stop, with the queues
// as they were.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port is free again at once but for rare races
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("sqstest: listen again on %s: %v", s.addr, err)
	}
	s.serve(ln)
}

// Client returns an SDK client of the server, with the server's region and
// static credentials.
func (s *Server) Client() *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.URL()),
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	})
}

// CreateQueue creates the queue name with the visibility timeout vis
// (seconds; 0: goaws's default of 30) and returns its URL.
func (s *Server) CreateQueue(t testing.TB, name string, vis int) string {
	t.Helper()
	attrs := map[string]string{}
	if vis > 0 {
		attrs["VisibilityTimeout"] = strconv.Itoa(vis)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := s.Client().CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	if err != nil {
		t.Fatalf("sqstest: create queue %s: %v", name, err)
	}
	return aws.ToString(out.QueueUrl)
}
