package monitor_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluiceflow/sluice/internal/monitor"
	"github.com/sluiceflow/sluice/internal/runtest"
	"github.com/sluiceflow/sluice/pkg/observe"
)

var insecure = &http.Client{Timeout: 5 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	cfg, err := observe.SelfSignedTLS(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// freeAddr returns a loopback address no process listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestStartRuntime serves the errors as the numa container of Numaflow's
// main-branch pods does on port 2470: GET /runtime/errors over HTTPS with
// the recorded errors, HEAD (the MonoVertex daemon's check that a pod is
// active) 200; stop shuts the port.
func TestStartRuntime(t *testing.T) {
	store := monitor.NewStore(t.TempDir(), 0)
	if err := store.RecordUDFError(status.Error(codes.Internal, "UDF_EXECUTION_ERROR(udsink): boom"), time.Unix(1_700_000_000, 0)); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	core, logs := observer.New(zap.InfoLevel)
	stop, err := monitor.StartRuntime(addr, selfSigned(t), store, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if logs.FilterMessage("serving runtime errors").Len() != 1 {
		t.Errorf("logs %v; want it to say it serves the runtime errors", logs.All())
	}
	resp, err := insecure.Get("https://" + addr + monitor.Path)
	if err != nil {
		t.Fatal(err)
	}
	var body monitor.Response
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	want := monitor.Entry{Container: "udsink", Timestamp: 1_700_000_000, Code: "Internal error", Message: "UDF_EXECUTION_ERROR(udsink): boom"}
	if err != nil || resp.StatusCode != 200 || body.ErrorMessage != nil || len(body.Data) != 1 || body.Data[0] != want {
		t.Fatalf("GET: %d %+v, %v; want 200 and %+v", resp.StatusCode, body, err, want)
	}
	resp, err = insecure.Head("https://" + addr + monitor.Path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("HEAD: %d; want 200", resp.StatusCode)
	}
	stop()
	stop() // twice is fine
	if _, err := insecure.Get("https://" + addr + monitor.Path); err == nil {
		t.Error("the port still answers after stop")
	}
}

// TestStartRuntimeHeld leaves the port to the process that holds it, the
// monitor sidecar of a v1.8 pod, and says so; no address serves nothing;
// another bind error is returned.
func TestStartRuntimeHeld(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	core, logs := observer.New(zap.InfoLevel)
	stop, err := monitor.StartRuntime(held.Addr().String(), selfSigned(t), monitor.NewStore(t.TempDir(), 0), zap.New(core))
	if err != nil {
		t.Fatalf("a held port: %v; want no error", err)
	}
	stop()
	if logs.FilterMessageSnippet("monitor sidecar serves them").Len() != 1 {
		t.Errorf("logs %v; want one line that the monitor sidecar serves them", logs.All())
	}
	if _, err := monitor.Listen(held.Addr().String()); !errors.Is(err, monitor.ErrHeld) {
		t.Errorf("Listen of a held port: %v; want ErrHeld", err)
	}
	stop, err = monitor.StartRuntime("", nil, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if _, err := monitor.StartRuntime("127.0.0.1:99999", selfSigned(t), monitor.NewStore(t.TempDir(), 0), zap.NewNop()); err == nil ||
		errors.Is(err, monitor.ErrHeld) || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("port 99999: %v; want out of range", err)
	}
}

// TestListenWhenFree waits, as the monitor sidecar does, while another
// process holds the port, and binds it once it is free; it gives up without
// an error when its context ends first.
func TestListenWhenFree(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := held.Addr().String()
	core, logs := observer.New(zap.InfoLevel)
	var (
		mu   sync.Mutex
		got  net.Listener
		gerr error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ln, err := monitor.ListenWhenFree(context.Background(), addr, zap.New(core))
		mu.Lock()
		got, gerr = ln, err
		mu.Unlock()
	}()
	runtest.WaitFor(t, "the line that it waits", func() bool { return logs.FilterMessageSnippet("waiting for it to be free").Len() == 1 })
	held.Close()
	select {
	case <-done:
	case <-time.After(10 * monitor.RetryHeld):
		t.Fatal("the port is free and ListenWhenFree still waits")
	}
	mu.Lock()
	defer mu.Unlock()
	if gerr != nil || got == nil || got.Addr().String() != addr {
		t.Fatalf("ListenWhenFree = %v, %v; want a listener on %s", got, gerr, addr)
	}
	if n := logs.FilterMessageSnippet("waiting for it to be free").Len(); n != 1 {
		t.Errorf("it said it waits %d times; want once", n)
	}

	// Held until the end.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ln, err := monitor.ListenWhenFree(ctx, addr, zap.NewNop())
	if ln != nil || err != nil {
		t.Errorf("with its context ended: %v, %v; want nil, nil", ln, err)
	}
	got.Close()
	if _, err := monitor.ListenWhenFree(context.Background(), "127.0.0.1:99999", zap.NewNop()); err == nil {
		t.Error("port 99999: no error")
	}
}
