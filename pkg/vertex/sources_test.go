package vertex_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluiceflow/sluice/config"
	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/vertex"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// freeAddr returns a loopback address no one listens on.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// secretFile writes a secret to a file of its own.
func secretFile(t *testing.T, value string) string {
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// insecure is a client of an http source's self-signed certificate, as
// curl -k is.
var insecure = &http.Client{Timeout: wait, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

// TestHTTPSource posts to an http source with a bearer token from a secret,
// over HTTPS with the source's self-signed certificate and over the plain
// HTTP of ports.http: a request with the token is answered once its message
// is written, one without it is refused.
func TestHTTPSource(t *testing.T) {
	addr, plainAddr := freeAddr(t), freeAddr(t)
	out, sinkOpt := logSink()
	v, err := vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, "web", `  source:
    http:
      ports: {http: 8090}
      auth:
        token:
          file: `+secretFile(t, "t0ken")+`
  sink:
    log: {}
`)), vertex.WithHTTPAddr(addr), vertex.WithPlainHTTPAddr(plainAddr), sinkOpt)
	if err != nil {
		t.Fatal(err)
	}
	runtest.Start(t, v)
	post := func(url, token, body string) int {
		req, _ := http.NewRequest(http.MethodPost, url+"/vertices/web", strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := insecure.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := post("https://"+addr, "wrong", "x"); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", code)
	}
	if code := post("https://"+addr, "t0ken", "hello"); code != http.StatusNoContent {
		t.Fatalf("right token: %d", code)
	}
	if code := post("http://"+plainAddr, "t0ken", "plain"); code != http.StatusNoContent {
		t.Fatalf("plain HTTP: %d", code)
	}
	if code := post("http://"+addr, "t0ken", "x"); code != http.StatusBadRequest {
		t.Fatalf("plain HTTP to the HTTPS address: %d, want 400", code)
	}
	if lines := out.Lines(); len(lines) != 2 || !strings.HasPrefix(lines[0], "Payload - hello ") || !strings.HasPrefix(lines[1], "Payload - plain ") {
		t.Fatalf("log sink: %q", lines)
	}
}

// TestHTTPSourceBatchOfOne: with readBatchSize 1, 8 clients posting 400
// requests at once, each waiting for its answer, are all accepted: the
// source's queue is its own, not the batch size; every message reaches the
// sink once.
func TestHTTPSourceBatchOfOne(t *testing.T) {
	const senders, each = 8, 50
	addr := freeAddr(t)
	out, sinkOpt := logSink()
	v, err := vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, "web", `  limits:
    readBatchSize: 1
  source:
    http: {}
  sink:
    log: {}
`)), vertex.WithHTTPAddr(addr), sinkOpt)
	if err != nil {
		t.Fatal(err)
	}
	runtest.Start(t, v)
	codes := make([][]int, senders)
	var wg sync.WaitGroup
	for i := range senders {
		wg.Go(func() {
			for j := range each {
				res, err := insecure.Post("https://"+addr+"/vertices/web", "text/plain", strings.NewReader(fmt.Sprintf("m-%d-%d", i, j)))
				if err != nil {
					t.Error(err)
					return
				}
				res.Body.Close()
				codes[i] = append(codes[i], res.StatusCode)
			}
		})
	}
	wg.Wait()
	for i, cs := range codes {
		for j, c := range cs {
			if c != http.StatusNoContent {
				t.Errorf("sender %d, request %d: %d, want 204", i, j, c)
			}
		}
	}
	written := map[string]int{}
	for _, l := range out.Lines() {
		payload, _, _ := strings.Cut(strings.TrimPrefix(l, "Payload - "), " ")
		written[payload]++
	}
	for i := range senders {
		for j := range each {
			if n := written[fmt.Sprintf("m-%d-%d", i, j)]; n != 1 {
				t.Errorf("m-%d-%d written %d times", i, j, n)
			}
		}
	}
	if len(written) != senders*each {
		t.Errorf("%d messages written, want %d", len(written), senders*each)
	}
}

// TestHTTPSourcePace: the http source's pace comes from its config, and a
// body that misses it gets 408 and is counted in
// sluice_source_http_body_timeouts_total.
func TestHTTPSourcePace(t *testing.T) {
	addr := freeAddr(t)
	reg := prometheus.NewRegistry()
	v, err := vertex.New(vertexconfig.FromMonoVertex(monoVertex(t, "web", `  source:
    http:
      readBodyTimeout: 200ms
      minBodyBytesPerSecond: 100
      maxConnections: 10
  sink:
    log: {}
`)), vertex.WithHTTPAddr(addr), vertex.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	runtest.Start(t, v)
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	began := time.Now()
	if _, err := io.WriteString(c, "POST /vertices/web HTTP/1.1\r\nHost: sluice\r\nContent-Length: 10\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", res.StatusCode)
	}
	if took := time.Since(began); took < 200*time.Millisecond {
		t.Errorf("cut after %v, before readBodyTimeout", took)
	}
	const want = `# HELP sluice_source_http_body_timeouts_total Requests the http source answered 408 because their body did not arrive at the pace of readBodyTimeout and minBodyBytesPerSecond.
# TYPE sluice_source_http_body_timeouts_total counter
sluice_source_http_body_timeouts_total{replica="0",vertex="web"} 1
# HELP sluice_source_http_connections_evicted_total Connections the http source closed at maxConnections to make room for a new one, the longest waiting for a request first.
# TYPE sluice_source_http_connections_evicted_total counter
sluice_source_http_connections_evicted_total{replica="0",vertex="web"} 0
# HELP sluice_source_http_connections_refused_total Connections the http source refused with 503 at maxConnections, every open one being busy with a request.
# TYPE sluice_source_http_connections_refused_total counter
sluice_source_http_connections_refused_total{replica="0",vertex="web"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_source_http_body_timeouts_total",
		"sluice_source_http_connections_evicted_total", "sluice_source_http_connections_refused_total"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "sluice_source_http_connections"); err != nil || n != 2 {
		t.Errorf("sluice_source_http_connections: %d series, %v; want waiting and busy", n, err)
	}
}

func redisSpec(t *testing.T, name, store string) vertex.Spec {
	return vertexconfig.FromMonoVertex(monoVertex(t, name, `  limits:
    readTimeout: 100ms
    rateLimit:
      max: 21
      min: 21
      rampUpDuration: 0s
      syncInterval: 20ms
      store:
        redisStore:
`+store+`  source:
    generator:
      rpu: 1000
  sink:
    blackhole: {}
`))
}

// TestRedisStore runs two replicas of a vertex in this process sharing a
// limit through a real redis-server: they agree on a replica count of two and split
// the limit exactly.
func TestRedisStore(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	spec := redisSpec(t, "shared", "          mode: single\n          url: redis://"+srv.Addr+"\n")
	var vs []*vertex.Vertex
	for i := range 2 {
		v, err := vertex.New(spec, vertex.WithReplica(i))
		if err != nil {
			t.Fatal(err)
		}
		runtest.Start(t, v)
		vs = append(vs, v)
	}
	runtest.WaitFor(t, "a replica count of two", func() bool {
		a, b := vs[0].Status(), vs[1].Status()
		return a.Replicas == 2 && b.Replicas == 2 && a.Epoch == b.Epoch && a.Share+b.Share == 21
	})
}

// TestRedisStoreErrors checks that credentials Redis refuses are an error of
// the field that holds them, without the secret, and that a Redis that is
// down is not an error at all.
func TestRedisStoreErrors(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{Password: "s3cret"})
	_, err := vertex.New(redisSpec(t, "refused", "          mode: single\n          url: redis://"+srv.Addr+
		"\n          redisAuth:\n            password:\n              file: "+secretFile(t, "wrong")+"\n"))
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Path != "spec.limits.rateLimit.store.redisStore.redisAuth" || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("wrong password: %v", err)
	}

	_, err = vertex.New(redisSpec(t, "unreadable", "          mode: single\n          url: redis://"+srv.Addr+
		"\n          redisAuth:\n            password:\n              file: /nonexistent\n"))
	if !errors.As(err, &fe) || fe.Path != "spec.limits.rateLimit.store.redisStore.redisAuth.password" {
		t.Fatalf("unreadable password: %v", err)
	}

	down := freeAddr(t)
	began := time.Now()
	v, err := vertex.New(redisSpec(t, "down", "          mode: single\n          url: redis://"+down+"\n"))
	if err != nil {
		t.Fatalf("redis down: %v", err)
	}
	defer v.Close()
	if took := time.Since(began); took > 3*time.Second {
		t.Fatalf("New took %v with redis down", took)
	}
	if s := v.Status(); s.Share != 0 {
		t.Fatalf("a replica that never reached its store has a share: %+v", s)
	}
}
