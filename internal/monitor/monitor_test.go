package monitor_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluiceflow/sluice/internal/monitor"
)

func udfError(t *testing.T, msg, detail string) error {
	t.Helper()
	st := status.New(codes.Internal, msg)
	if detail != "" {
		var err error
		if st, err = st.WithDetails(&errdetails.DebugInfo{Detail: detail}); err != nil {
			t.Fatal(err)
		}
	}
	return st.Err()
}

func TestEntryOf(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	cases := []struct {
		name string
		err  error
		want monitor.Entry
	}{
		{"a panic with its stack", udfError(t, "UDF_EXECUTION_ERROR(udf): boom", "goroutine 1 [running]"),
			monitor.Entry{Container: "udf", Timestamp: 1_700_000_000, Code: "Internal error", Message: "UDF_EXECUTION_ERROR(udf): boom", Details: "goroutine 1 [running]"}},
		{"no container named", status.Error(codes.Unavailable, "gone"),
			monitor.Entry{Container: "numa", Timestamp: 1_700_000_000, Code: "The service is currently unavailable", Message: "gone"}},
		{"not a path", udfError(t, "UDF_EXECUTION_ERROR(..): x", ""),
			monitor.Entry{Container: "numa", Timestamp: 1_700_000_000, Code: "Internal error", Message: "UDF_EXECUTION_ERROR(..): x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := monitor.EntryOf(tc.err, at); got != tc.want {
				t.Fatalf("EntryOf = %+v; want %+v", got, tc.want)
			}
		})
	}
	if !monitor.IsUDFError(cases[0].err) || monitor.IsUDFError(cases[1].err) || monitor.IsUDFError(errors.New("UDF_EXECUTION_ERROR")) {
		t.Fatal("IsUDFError takes only a gRPC status naming UDF_EXECUTION_ERROR")
	}
}

// The store keeps the newest files of each container, and the endpoint
// serves them all in Numaflow's shape.
func TestStoreAndHandler(t *testing.T) {
	dir := t.TempDir()
	s := monitor.NewStore(dir, 2)
	for i, c := range []string{"udf", "udf", "udsink", "udf"} {
		e := monitor.Entry{Container: c, Timestamp: int64(100 + i), Code: "Internal error", Message: "m" + string(rune('0'+i))}
		if err := s.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	names, _ := filepath.Glob(filepath.Join(dir, "udf", "*"))
	for i := range names {
		names[i] = filepath.Base(names[i])
	}
	if want := []string{"101-1-numa.json", "103-3-numa.json"}; !slices.Equal(names, want) {
		t.Fatalf("udf's files %v; want %v (the oldest removed)", names, want)
	}

	srv := httptest.NewServer(monitor.Handler(s))
	defer srv.Close()
	resp, err := http.Get(srv.URL + monitor.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	if string(body["errorMessage"]) != "null" {
		t.Fatalf("errorMessage %s; want null", body["errorMessage"])
	}
	var data []map[string]any
	if err := json.Unmarshal(body["data"], &data); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range data {
		if len(e) != 5 {
			t.Fatalf("entry %v; want container, timestamp, code, message and details", e)
		}
		got = append(got, e["container"].(string)+" "+e["message"].(string))
	}
	slices.Sort(got)
	if want := []string{"udf m1", "udf m3", "udsink m2"}; !slices.Equal(got, want) {
		t.Fatalf("served %v; want %v", got, want)
	}
}

func TestNoDirectoryIsNoErrors(t *testing.T) {
	s := monitor.NewStore(filepath.Join(t.TempDir(), "none"), 0)
	rec := httptest.NewRecorder()
	monitor.Handler(s).ServeHTTP(rec, httptest.NewRequest("GET", monitor.Path, nil))
	if rec.Code != 200 || rec.Body.String() != "{\"errorMessage\":null,\"data\":[]}\n" {
		t.Fatalf("%d %q", rec.Code, rec.Body.String())
	}
	// A directory that cannot be read is a 500 that says why.
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rec = httptest.NewRecorder()
	monitor.Handler(monitor.NewStore(f, 0)).ServeHTTP(rec, httptest.NewRequest("GET", monitor.Path, nil))
	if rec.Code != 500 || !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("%d %q", rec.Code, rec.Body.String())
	}
}

// TestStoreOneSecond keeps every error of one second, up to the maximum,
// and the newest of them: none overwrites another, nor a file an earlier
// process left in that second.
func TestStoreOneSecond(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "udf"), 0o777); err != nil {
		t.Fatal(err)
	}
	// Left by an earlier process: its sequence started at 0 too.
	if err := os.WriteFile(filepath.Join(dir, "udf", "100-0-numa.json"), []byte(`{"container":"udf","timestamp":100,"message":"earlier"}`), 0o666); err != nil {
		t.Fatal(err)
	}
	s := monitor.NewStore(dir, 4)
	for i := range 5 {
		if err := s.Record(monitor.Entry{Container: "udf", Timestamp: 100, Message: "m" + string(rune('0'+i))}); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := s.Entries()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Message)
	}
	slices.Sort(got)
	if want := []string{"m1", "m2", "m3", "m4"}; !slices.Equal(got, want) {
		t.Fatalf("kept %v; want the newest 4, %v", got, want)
	}
}
