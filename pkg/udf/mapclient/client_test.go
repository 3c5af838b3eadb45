package mapclient_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/batchmapper"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
	"github.com/sluiceflow/sluice/pkg/sdk/mapstreamer"
	"github.com/sluiceflow/sluice/pkg/sdk/sourcetransformer"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/udf/mapclient"
)

// socketDir returns a short temporary directory: unix socket paths are limited.
func socketDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "u")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// serve runs start until the test ends and waits for it to return.
func serve(t testing.TB, start func(ctx context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- start(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("server did not stop")
		}
	}
	t.Cleanup(stop)
	return stop
}

func connect(t testing.TB, r *mapclient.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
}

func messages(values ...string) []isb.Message {
	out := make([]isb.Message, len(values))
	for i, v := range values {
		out[i] = isb.Message{ID: "m" + v, Value: []byte(v), Keys: []string{"k"}, EventTime: time.UnixMilli(1_700_000_000_000)}
	}
	return out
}

func values(msgs []isb.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Value)+"/"+strings.Join(m.Keys, ",")+"/"+strings.Join(m.Tags, ","))
	}
	return out
}

// evenOdd keys and tags integers by parity, drops the rest, and makes "slow"
// wait.
func evenOdd(ctx context.Context, _ []string, d mapper.Datum) mapper.Messages {
	switch v := string(d.Value()); {
	case v == "slow":
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
		}
		return mapper.Messages{mapper.NewMessage(d.Value())}
	case v == "panic":
		panic("boom")
	case v == "x":
		return mapper.Messages{mapper.MessageToDrop()}
	case (v[len(v)-1]-'0')%2 == 0:
		return mapper.Messages{mapper.NewMessage(d.Value()).WithKeys([]string{"even"}).WithTags([]string{"even-tag"})}
	default:
		return mapper.Messages{mapper.NewMessage(d.Value()).WithKeys([]string{"odd"}).WithTags([]string{"odd-tag"})}
	}
}

func TestUnaryMap(t *testing.T) {
	dir := socketDir(t)
	serve(t, mapper.NewServer(mapper.MapperFunc(evenOdd), mapper.WithSocketDir(dir)).Start)
	r := mapclient.New(dir, nil)
	connect(t, r)
	out, dropped, err := r.Map(context.Background(), messages("1", "2", "x", "4"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(values(out), " "); got != "1/odd/odd-tag 2/even/even-tag 4/even/even-tag" || dropped != 1 {
		t.Fatalf("got %s, dropped %d", got, dropped)
	}
	if out[0].ID != "m1" || !out[0].EventTime.Equal(time.UnixMilli(1_700_000_000_000)) {
		t.Fatalf("id %q, event time %v; want the input's", out[0].ID, out[0].EventTime)
	}
	// One slow message does not hold up the batch: all are in flight at once.
	batch := messages("slow")
	for range 60 {
		batch = append(batch, messages("slow")...)
	}
	start := time.Now()
	if out, _, err := r.Map(context.Background(), batch, nil); err != nil || len(out) != 61 {
		t.Fatalf("%d results, %v", len(out), err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("61 messages of 300ms each took %v; want them processed concurrently", took)
	}
}

func TestBatchMap(t *testing.T) {
	dir := socketDir(t)
	split := batchmapper.BatchMapperFunc(func(_ context.Context, datums <-chan batchmapper.Datum) batchmapper.BatchResponses {
		var out batchmapper.BatchResponses
		for d := range datums {
			resp := batchmapper.NewBatchResponse(d.ID())
			for part := range strings.SplitSeq(string(d.Value()), ",") {
				resp = resp.Append(batchmapper.NewMessage([]byte(part)))
			}
			out = append(out, resp)
		}
		return out
	})
	serve(t, batchmapper.NewServer(split, batchmapper.WithSocketDir(dir)).Start)
	r := mapclient.New(dir, nil)
	connect(t, r)
	for range 3 { // the stream is reused batch after batch
		out, _, err := r.Map(context.Background(), messages("a,b", "c"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 3 || string(out[0].Value) != "a" || out[0].ID != "ma,b-0" || out[1].ID != "ma,b-1" || string(out[2].Value) != "c" {
			t.Fatalf("got %v", values(out))
		}
	}
}

func TestMapStream(t *testing.T) {
	dir := socketDir(t)
	repeat := mapstreamer.MapStreamerFunc(func(_ context.Context, _ []string, d mapstreamer.Datum, out chan<- mapstreamer.Message) {
		for range len(d.Value()) {
			out <- mapstreamer.NewMessage(d.Value())
		}
	})
	serve(t, mapstreamer.NewServer(repeat, mapstreamer.WithSocketDir(dir)).Start)
	r := mapclient.New(dir, nil)
	connect(t, r)
	out, dropped, err := r.Map(context.Background(), messages("aaa", "b", ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(values(out), " "); got != "aaa// aaa// aaa// b//" || dropped != 1 {
		t.Fatalf("got %s, dropped %d", got, dropped)
	}
}

func TestTransformer(t *testing.T) {
	dir := socketDir(t)
	stamp := sourcetransformer.SourceTransformerFunc(func(_ context.Context, keys []string, d sourcetransformer.Datum) sourcetransformer.Messages {
		if string(d.Value()) == "drop" {
			return sourcetransformer.Messages{sourcetransformer.MessageToDrop(d.EventTime())}
		}
		return sourcetransformer.Messages{sourcetransformer.NewMessage(d.Value(), time.UnixMilli(42)).WithKeys(keys)}
	})
	serve(t, sourcetransformer.NewServer(stamp, sourcetransformer.WithSocketDir(dir)).Start)
	r := mapclient.NewTransformer(dir, nil)
	connect(t, r)
	out, dropped, err := r.Map(context.Background(), messages("a", "drop", "b"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || dropped != 1 || !out[0].EventTime.Equal(time.UnixMilli(42)) || out[1].Keys[0] != "k" {
		t.Fatalf("got %+v, dropped %d", out, dropped)
	}
}

func TestReconnectsAfterCrash(t *testing.T) {
	dir := socketDir(t)
	stop := serve(t, mapper.NewServer(mapper.MapperFunc(evenOdd), mapper.WithSocketDir(dir)).Start)
	r := mapclient.New(dir, nil)
	connect(t, r)
	// A panic in the function: the error carries the UDF's own message and the
	// server shuts down.
	_, _, err := r.Map(context.Background(), messages("panic"), nil)
	if err == nil || !strings.Contains(err.Error(), "UDF_EXECUTION_ERROR") {
		t.Fatalf("Map = %v; want the UDF's panic message", err)
	}
	if r.Ready() == nil {
		t.Fatal("ready after the server failed")
	}
	stop()
	// The restarted server is found again.
	serve(t, mapper.NewServer(mapper.MapperFunc(evenOdd), mapper.WithSocketDir(dir)).Start)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, _, err := r.Map(ctx, messages("2"), nil)
	if err != nil || len(out) != 1 {
		t.Fatalf("after the restart: %v, %v", values(out), err)
	}
	if err := r.Ready(); err != nil {
		t.Fatalf("not ready after reconnecting: %v", err)
	}
	r.Close() // before the server's stop, which waits for open streams
}

func TestIncompatibleServer(t *testing.T) {
	dir := socketDir(t)
	info := serverinfo.Default(serverinfo.KindMap, "v9.9.9")
	info.MinimumNumaflowVersion = "9.9.9-z"
	if err := serverinfo.Write(filepath.Join(dir, serverinfo.MapInfoFile), info); err != nil {
		t.Fatal(err)
	}
	r := mapclient.New(dir, nil)
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.Connect(ctx)
	if !errors.Is(err, udf.ErrIncompatible) || !strings.Contains(err.Error(), "9.9.9") {
		t.Fatalf("Connect = %v; want an incompatibility naming the versions", err)
	}
}

// nackOrTag nacks "nack" with options and adds a metadata entry to the rest,
// keeping what came in.
func nackOrTag(_ context.Context, keys []string, d mapper.Datum) mapper.Messages {
	if string(d.Value()) == "nack" {
		delay, reason := uint64(250), "not now"
		return mapper.Messages{mapper.MessageToNack(&mapper.NackOptions{Delay: &delay, Reason: &reason, NackMap: map[string]string{"k": "v"}})}
	}
	md := d.UserMetadata()
	md.AddKV("map", "seen", d.Value())
	return mapper.Messages{mapper.NewMessage(d.Value()).WithKeys(keys).WithUserMetadata(md)}
}

func TestNackAndMetadata(t *testing.T) {
	dir := socketDir(t)
	serve(t, mapper.NewServer(mapper.MapperFunc(nackOrTag), mapper.WithSocketDir(dir)).Start)
	r := mapclient.New(dir, nil)
	connect(t, r)
	in := messages("a", "nack", "b")
	for i := range in {
		in[i].Origin = 10 + i
		in[i].Metadata = isb.Metadata{"source": {"n": []byte(in[i].Value)}}
	}
	out, dropped, err := r.Map(context.Background(), in, nil)
	if err != nil || dropped != 0 || len(out) != 3 {
		t.Fatalf("%d results, dropped %d, %v; want 3, 0", len(out), dropped, err)
	}
	want := isb.NackOptions{Delay: 250 * time.Millisecond, Reason: "not now", Values: map[string]string{"k": "v"}}
	if n := out[1]; n.Nack == nil || n.Origin != 11 || n.Value != nil || n.Nack.Delay != want.Delay ||
		n.Nack.Reason != want.Reason || n.Nack.Values["k"] != "v" {
		t.Fatalf("nacked result %+v (options %+v); want origin 11, no value, options %+v", n, n.Nack, want)
	}
	for _, i := range []int{0, 2} {
		m := out[i]
		if m.Nack != nil || m.Origin != 10+i || string(m.Metadata["source"]["n"]) != string(in[i].Value) ||
			string(m.Metadata["map"]["seen"]) != string(in[i].Value) {
			t.Fatalf("result %d: %+v; want origin %d and the metadata of the source and of the map", i, m, 10+i)
		}
	}
}

func TestTransformerNack(t *testing.T) {
	dir := socketDir(t)
	nackAll := sourcetransformer.SourceTransformerFunc(func(_ context.Context, _ []string, d sourcetransformer.Datum) sourcetransformer.Messages {
		return sourcetransformer.Messages{sourcetransformer.MessageToNack(d.EventTime(), nil)}
	})
	serve(t, sourcetransformer.NewServer(nackAll, sourcetransformer.WithSocketDir(dir)).Start)
	r := mapclient.NewTransformer(dir, nil)
	connect(t, r)
	in := messages("a", "b")
	in[1].Origin = 1
	out, dropped, err := r.Map(context.Background(), in, nil)
	if err != nil || dropped != 0 || len(out) != 2 || out[0].Nack == nil || out[1].Nack == nil || out[1].Origin != 1 {
		t.Fatalf("%+v, dropped %d, %v; want two nacks", out, dropped, err)
	}
}

// TestRemoteRateLimited: a map result tagged RateLimitedTag, built by the
// SDK's MessageRateLimited, hands its input back like a nack, with the
// Retry-After as its delay, marked RateLimited.
func TestRateLimited(t *testing.T) {
	dir := socketDir(t)
	serve(t, mapper.NewServer(mapper.MapperFunc(func(_ context.Context, keys []string, d mapper.Datum) mapper.Messages {
		switch string(d.Value()) {
		case "limited":
			return mapper.Messages{mapper.MessageRateLimited(1500 * time.Millisecond)}
		case "limited, no wait":
			return mapper.Messages{mapper.MessageRateLimited(0)}
		}
		return mapper.Messages{mapper.NewMessage(d.Value())}
	}), mapper.WithSocketDir(dir)).Start)
	r := mapclient.New(dir, nil)
	connect(t, r)
	in := messages("a", "limited", "limited, no wait")
	for i := range in {
		in[i].Origin = i
	}
	out, _, err := r.Map(context.Background(), in, nil)
	if err != nil || len(out) != 3 {
		t.Fatalf("%d results, %v; want 3", len(out), err)
	}
	if out[0].Nack != nil {
		t.Errorf("result 0 %+v; want it passed on", out[0])
	}
	for i, wait := range map[int]time.Duration{1: 1500 * time.Millisecond, 2: 0} {
		if n := out[i].Nack; n == nil || !n.RateLimited || n.Delay != wait || out[i].Origin != i {
			t.Errorf("result %d: %+v (options %+v); want handed back, rate limited, after %v", i, out[i], n, wait)
		}
	}
}

// TestFailedInputsComeBack: an input with a result tagged FailTag (the SDKs'
// MessageToFail), alone or among other results, comes back as itself,
// failed (udf.Failed), with its own tags once Unfail takes the tag off; the
// other inputs' results are as the function made them. So for a map and a
// transformer.
func TestFailedInputsComeBack(t *testing.T) {
	failOdd := func(v []byte) bool { n, _ := strconv.Atoi(string(v)); return n%2 == 1 }
	m := mapper.MapperFunc(func(_ context.Context, _ []string, d mapper.Datum) mapper.Messages {
		if failOdd(d.Value()) {
			return mapper.Messages{mapper.NewMessage([]byte("partial")), mapper.MessageToFail()}
		}
		return mapper.Messages{mapper.NewMessage(d.Value())}
	})
	tr := sourcetransformer.SourceTransformerFunc(func(_ context.Context, _ []string, d sourcetransformer.Datum) sourcetransformer.Messages {
		if failOdd(d.Value()) {
			return sourcetransformer.Messages{sourcetransformer.MessageToFail(d.EventTime())}
		}
		return sourcetransformer.Messages{sourcetransformer.NewMessage(d.Value(), d.EventTime())}
	})
	for _, tt := range []struct {
		name  string
		start func(dir string) func(context.Context) error
		new   func(dir string) *mapclient.Client
	}{
		{"map", func(dir string) func(context.Context) error {
			return mapper.NewServer(m, mapper.WithSocketDir(dir)).Start
		}, func(dir string) *mapclient.Client { return mapclient.New(dir, nil) }},
		{"transformer", func(dir string) func(context.Context) error {
			return sourcetransformer.NewServer(tr, sourcetransformer.WithSocketDir(dir)).Start
		}, func(dir string) *mapclient.Client { return mapclient.NewTransformer(dir, nil) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := socketDir(t)
			serve(t, tt.start(dir))
			r := tt.new(dir)
			connect(t, r)
			in := messages("0", "1", "2")
			for i := range in {
				in[i].Origin, in[i].Tags = i, []string{"mine"}
			}
			out, dropped, err := r.Map(context.Background(), in, nil)
			if err != nil || dropped != 0 || len(out) != 3 {
				t.Fatalf("%+v, dropped %d, %v; want 3 messages", out, dropped, err)
			}
			for i, o := range out {
				if failed := udf.Failed(&o); failed != (i == 1) {
					t.Errorf("out[%d] failed = %v; want only message 1 failed", i, failed)
				}
				u := udf.Unfail(o)
				if string(u.Value) != strconv.Itoa(i) || u.Origin != i || (i == 1 && (len(u.Tags) != 1 || u.Tags[0] != "mine")) {
					t.Errorf("out[%d] = %+v, unfailed %+v; want message %d", i, o, u, i)
				}
			}
			if len(in[1].Tags) != 1 {
				t.Errorf("the input's tags were written to: %v", in[1].Tags)
			}
		})
	}
}
