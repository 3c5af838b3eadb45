package monitor_test

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

	"github.com/sluiceflow/sluice/internal/monitor"
	"github.com/sluiceflow/sluice/pkg/observe"
)

// Serve serves over HTTPS what the processor records: a UDF's error,
// as Numaflow's daemon reads it from GET /runtime/errors.
func TestServe(t *testing.T) {
	store := monitor.NewStore(t.TempDir(), 0)
	err := status.Error(codes.Internal, "UDF_EXECUTION_ERROR(udf): panic: boom")
	if rerr := store.RecordUDFError(err, time.Unix(1_700_000_000, 0)); rerr != nil {
		t.Fatal(rerr)
	}
	// An error of sluice's own is no UDF's: it is not recorded.
	if rerr := store.RecordUDFError(status.Error(codes.Unavailable, "connection refused"), time.Unix(1_700_000_001, 0)); rerr != nil {
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
	go func() { done <- monitor.Serve(ctx, tls.NewListener(ln, cfg), store) }()
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
