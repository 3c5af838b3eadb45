package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluiceflow/sluice/pkg/monitor"
	"github.com/sluiceflow/sluice/pkg/observe"
)

// The monitor serves over HTTPS what the processor records: a UDF's error,
// as Numaflow's daemon reads it from GET /runtime/errors.
func TestMonitorServesRecordedErrors(t *testing.T) {
	store := monitor.NewStore(t.TempDir(), 0)
	err := status.Error(codes.Internal, "UDF_EXECUTION_ERROR(udf): panic: boom")
	if rerr := store.Record(monitor.EntryOf(err, time.Unix(1_700_000_000, 0))); rerr != nil {
		t.Fatal(rerr)
	}
	cfg, err := observe.SelfSignedTLS(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveMonitor(ctx, tls.NewListener(ln, cfg), store) }()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get("https://" + ln.Addr().String() + monitor.Path)
	if err != nil {
		t.Fatal(err)
	}
	var body monitor.Response
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	want := monitor.Entry{Container: "udf", Timestamp: 1_700_000_000, Code: "Internal error", Message: "UDF_EXECUTION_ERROR(udf): panic: boom"}
	if err != nil || body.ErrorMessage != nil || len(body.Data) != 1 || body.Data[0] != want {
		t.Fatalf("%+v, %v; want %+v", body, err, want)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("after cancel: %v", err)
	}
}

// TestMonitorAddr checks that an --addr that cannot be bound is one line
// naming the flag and its value, exit 2.
func TestMonitorAddr(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for addr, want := range map[string]string{
		"127.0.0.1:99999":    `vertex: monitor: --addr ("127.0.0.1:99999"): port 99999 is out of range (at most 65535)` + "\n",
		held.Addr().String(): `vertex: monitor: --addr ("` + held.Addr().String() + `"): bind: address already in use` + "\n",
	} {
		if code, _, stderr := runVertex(t, "monitor", "--addr", addr, "--dir", t.TempDir()); code != 2 || stderr != want {
			t.Errorf("--addr %s: exit %d, %q; want 2, %q", addr, code, stderr, want)
		}
	}
}
