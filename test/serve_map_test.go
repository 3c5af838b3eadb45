package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluiceflow/sluice/internal/redistest"
	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
	"github.com/sluiceflow/sluice/pkg/sdk/mapstreamer"
	"github.com/sluiceflow/sluice/pkg/udf/mapclient"
)

// serveMapConfig is a MonoVertex whose udf the map role serves, at most max
// messages a second.
func serveMapConfig(name string, max int) string {
	return fmt.Sprintf(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: %s
spec:
  source:
    generator: {}
  udf:
    container:
      image: user-map
  sink:
    log: {}
  limits:
    readBatchSize: 10
    rateLimit:
      max: %d
`, name, max)
}

// startServeMap starts `vertex serve --role map` on a socket directory of
// its own, with args added, and returns it with that directory.
func startServeMap(t *testing.T, cfg string, args ...string) (*proc, string) {
	t.Helper()
	dir := udsDir(t)
	p := start(t, append([]string{"serve", "--role", "map", "-f", writeConfig(t, cfg), "--uds-dir", dir,
		"--addr", "127.0.0.1:0", "--log-level", "debug"}, args...)...)
	return p, dir
}

// mapThrough sends n messages to the map server in dir, in batches of
// batch, as Numaflow's runtime does, and checks that each comes back
// unchanged, once. It returns how long they took.
func mapThrough(t *testing.T, dir string, n, batch int) time.Duration {
	t.Helper()
	return mapThroughKeys(t, dir, n, batch, true)
}

// mapThroughKeys is mapThrough for a map that keeps the messages' keys
// (keep) or, as numaflow-go's flatmap_stream, gives its results none.
func mapThroughKeys(t *testing.T, dir string, n, batch int, keep bool) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := mapclient.New(dir, zap.NewNop())
	defer c.Close()
	if err := c.Connect(ctx); err != nil {
		t.Fatalf("connecting to the served map: %v", err)
	}
	began := time.Now()
	var out []isb.Message
	for i := 0; i < n; i += batch {
		in := make([]isb.Message, 0, batch)
		for j := i; j < min(n, i+batch); j++ {
			in = append(in, isb.Message{ID: "m" + strconv.Itoa(j), Keys: []string{"k" + strconv.Itoa(j%3)},
				Value: []byte("value-" + strconv.Itoa(j)), EventTime: time.UnixMilli(int64(1000 + j))})
		}
		var err error
		if out, _, err = c.Map(ctx, in, out[:0]); err != nil {
			t.Fatalf("map of messages %d..: %v", i, err)
		}
		if len(out) != len(in) {
			t.Fatalf("map of %d messages gave %d", len(in), len(out))
		}
		for j := range in {
			want := in[j].Keys
			if !keep {
				want = nil
			}
			if out[j].ID != in[j].ID || string(out[j].Value) != string(in[j].Value) || !slices.Equal(out[j].Keys, want) {
				t.Fatalf("message %s came back as %s %q keys %v; want %q keys %v", in[j].ID, out[j].ID, out[j].Value,
					out[j].Keys, in[j].Value, want)
			}
		}
	}
	return time.Since(began)
}

// checkServeEpochs checks that no epoch of p granted more than max and that
// the n messages spanned as many epochs as the limit makes them.
func checkServeEpochs(t *testing.T, p *proc, n, max int) {
	t.Helper()
	granted := checkEpochs(t, p, int64(max), false)
	busy := 0
	for _, g := range granted {
		if g > 0 {
			busy++
		}
	}
	if want := (n + max - 1) / max; busy < want {
		t.Errorf("%d messages at most %d an epoch were granted in %d epochs; want at least %d (%v)", n, max, busy, want, granted)
	}
}

// TestServeMapPassthrough serves a MonoVertex's map at most 20 messages a
// second, as unary map, batch map and stream map (--map-mode), and maps 60
// messages through it with sluice's map client, which speaks the mode the
// server-info file declares: each comes back unchanged, no epoch grants
// more than 20, so they span at least three epochs, and SIGTERM stops the
// server with exit 0.
func TestServeMapPassthrough(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"unary-map", "batch-map", "stream-map"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			const n, max = 60, 20
			p, dir := startServeMap(t, serveMapConfig("serve-map-"+mode, max), "--map-mode", mode)
			checkMapMode(t, dir, mode)
			took := mapThrough(t, dir, n, 10)
			if code, _ := p.stop(syscall.SIGTERM, 15*time.Second); code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
			}
			checkServeEpochs(t, p, n, max)
			if took < time.Second {
				t.Errorf("%d messages at %d a second took %v", n, max, took)
			}
			info, err := os.ReadFile(filepath.Join(dir, "mapper-server-info"))
			if err == nil {
				t.Errorf("the server-info file is left after the stop: %s", info)
			}
		})
	}
}

// checkMapMode checks that the map server in dir declares MAP_MODE mode.
func checkMapMode(t *testing.T, dir, mode string) {
	t.Helper()
	info, err := serverinfo.Wait(context.Background(), filepath.Join(dir, serverinfo.KindMap.InfoFile()), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Metadata[serverinfo.MapModeKey]; got != mode {
		t.Fatalf("the served map declares %s %q; want %q", serverinfo.MapModeKey, got, mode)
	}
}

// TestServeMapForward forwards each message, under the limit, to a user's
// map server beside it: sluice's SDK examples cat, nackmap (which nacks
// every message once, so that each is handed back to the limit and passed
// again), batchcat and streamcat and, with NUMAFLOW_GO_DIR, numaflow-go's
// mapper/cat and mapstreamer/flatmap_stream. Without --map-mode the role
// serves the mode the user's server declares. What comes back is what went
// in, each message once.
func TestServeMapForward(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, mode, sock string }{
		{"cat", "unary-map", "map.sock"},
		{"nackmap", "unary-map", "map.sock"},
		{"batchcat", "batch-map", "batchmap.sock"},
		{"streamcat", "stream-map", "mapstream.sock"},
	} {
		t.Run("sdk "+tt.name, func(t *testing.T) {
			t.Parallel()
			name := tt.name
			user := udsDir(t)
			cmd := exec.Command(example(t, name))
			cmd.Env = append(os.Environ(), "SLUICE_UDS_DIR="+user)
			userProc := startCmd(t, cmd)
			defer userProc.stop(syscall.SIGTERM, 10*time.Second)
			const n, max = 40, 20
			p, dir := startServeMap(t, serveMapConfig("serve-map-"+name, max), "--forward", filepath.Join(user, tt.sock))
			checkMapMode(t, dir, tt.mode)
			mapThrough(t, dir, n, 10)
			if code, _ := p.stop(syscall.SIGTERM, 15*time.Second); code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
			}
			passes := 1
			if name == "nackmap" {
				passes = 2 // nacked once, passed again
			}
			checkServeEpochs(t, p, passes*n, max)
		})
	}
	t.Run("numaflow-go cat", func(t *testing.T) {
		t.Parallel()
		src := os.Getenv(envNumaflowGo)
		if src == "" {
			t.Skipf("%s is not set: numaflow-go's mapper/cat is not run (set it to a numaflow-go source tree)", envNumaflowGo)
		}
		const fixed = "/var/run/numaflow"
		if _, err := os.Stat(filepath.Join(fixed, "map.sock")); err == nil {
			t.Skipf("%s/map.sock exists: another map server holds the only directory numaflow-go's mapper/cat knows", fixed)
		}
		if err := os.MkdirAll(fixed, 0o755); err != nil {
			t.Skipf("%s cannot be had for numaflow-go's mapper/cat: %v", fixed, err)
		}
		bin := numaflowGoExample(t, src, "mapper/cat")
		catProc := startCmd(t, exec.Command(bin))
		defer catProc.stop(syscall.SIGTERM, 10*time.Second)
		const n, max = 40, 20
		p, dir := startServeMap(t, serveMapConfig("serve-map-nfgo", max), "--forward", filepath.Join(fixed, "map.sock"))
		mapThrough(t, dir, n, 10)
		if code, _ := p.stop(syscall.SIGTERM, 15*time.Second); code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
		}
		checkServeEpochs(t, p, n, max)
	})
	t.Run("numaflow-go flatmap_stream", func(t *testing.T) {
		t.Parallel()
		src := os.Getenv(envNumaflowGo)
		if src == "" {
			t.Skipf("%s is not set: numaflow-go's mapstreamer/flatmap_stream is not run (set it to a numaflow-go source tree)", envNumaflowGo)
		}
		const fixed = "/var/run/numaflow"
		if _, err := os.Stat(filepath.Join(fixed, "mapstream.sock")); err == nil {
			t.Skipf("%s/mapstream.sock exists: another map server holds the only directory numaflow-go's flatmap_stream knows", fixed)
		}
		if err := os.MkdirAll(fixed, 0o755); err != nil {
			t.Skipf("%s cannot be had for numaflow-go's flatmap_stream: %v", fixed, err)
		}
		bin := numaflowGoExample(t, src, "mapstreamer/flatmap_stream")
		userProc := startCmd(t, exec.Command(bin))
		defer userProc.stop(syscall.SIGTERM, 10*time.Second)
		const n, max = 40, 20
		p, dir := startServeMap(t, serveMapConfig("serve-map-nfgo-stream", max), "--forward", filepath.Join(fixed, "mapstream.sock"))
		checkMapMode(t, dir, "stream-map")
		mapThroughKeys(t, dir, n, 10, false) // payloads without commas: one message each, without keys as the example makes them
		if code, _ := p.stop(syscall.SIGTERM, 15*time.Second); code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
		}
		checkServeEpochs(t, p, n, max)
	})
}

// TestServeMapStreamForward forwards, at most 20 messages a second, to a
// user's stream map (in the test's process) that streams each payload's
// comma-separated parts one message each: the role serves stream map, the
// mode the user's server declares, and each of 30 messages comes back as
// its three parts, in order, once; no epoch grants more than 20.
func TestServeMapStreamForward(t *testing.T) {
	t.Parallel()
	const n, max, batch = 30, 20, 10
	user := udsDir(t)
	srv := mapstreamer.NewServer(mapstreamer.MapStreamerFunc(func(ctx context.Context, keys []string, d mapstreamer.Datum, out chan<- mapstreamer.Message) {
		for _, part := range strings.Split(string(d.Value()), ",") {
			select {
			case out <- mapstreamer.NewMessage([]byte(part)).WithKeys(keys):
			case <-ctx.Done():
				return
			}
		}
	}), mapstreamer.WithSocketDir(user))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("user's stream map server: %v", err)
		}
	}()
	p, dir := startServeMap(t, serveMapConfig("serve-map-stream", max), "--forward", filepath.Join(user, "mapstream.sock"))
	checkMapMode(t, dir, "stream-map")
	cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer ccancel()
	c := mapclient.New(dir, zap.NewNop())
	defer c.Close()
	if err := c.Connect(cctx); err != nil {
		t.Fatalf("connecting to the served map: %v", err)
	}
	var out []isb.Message
	for i := 0; i < n; i += batch {
		in := make([]isb.Message, 0, batch)
		for j := i; j < i+batch; j++ {
			v := fmt.Sprintf("m%d-a,m%d-b,m%d-c", j, j, j)
			in = append(in, isb.Message{ID: "m" + strconv.Itoa(j), Keys: []string{"k"}, Value: []byte(v), EventTime: time.UnixMilli(int64(1000 + j))})
		}
		var err error
		if out, _, err = c.Map(cctx, in, out[:0]); err != nil {
			t.Fatalf("map of messages %d..: %v", i, err)
		}
		if len(out) != 3*len(in) {
			t.Fatalf("map of %d messages gave %d; want %d", len(in), len(out), 3*len(in))
		}
		for j := range in {
			for k, part := range []string{"a", "b", "c"} {
				m := out[3*j+k]
				if wantID, want := fmt.Sprintf("%s-%d", in[j].ID, k), fmt.Sprintf("%s-%s", in[j].ID, part); m.ID != wantID || string(m.Value) != want {
					t.Fatalf("result %d of %s is %s %q; want %s %q", k, in[j].ID, m.ID, m.Value, wantID, want)
				}
			}
		}
	}
	c.Close() // ends the stream, which the server's stop would wait for
	if code, _ := p.stop(syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
	}
	checkServeEpochs(t, p, n, max)
}

// BenchmarkServeMap measures a message's way through a map server over its
// socket, batches of 500 from sluice's map client, side by side: the map
// role passing each message on under a limit it never reaches, serving
// unary map ("served"), batch map ("served-batch") and stream map
// ("served-stream", --map-mode), and sluice's SDK examples cat ("sdk-cat")
// and streamcat ("sdk-streamcat"), the user-defined maps the role's overhead
// is added to. ns/msg is per message.
//
//	go test -run '^$' -bench BenchmarkServeMap -benchtime 20000x ./test/
func BenchmarkServeMap(b *testing.B) {
	const batch = 500
	cfg := strings.Replace(serveMapConfig("serve-map-bench", 1_000_000_000), "readBatchSize: 10", "readBatchSize: 500", 1) +
		"      min: 1000000000\n      rampUpDuration: 0s\n"
	for _, tt := range []struct {
		name  string
		start func(b *testing.B) string
	}{
		{"served", func(b *testing.B) string { return benchServe(b, cfg, "unary-map") }},
		{"served-batch", func(b *testing.B) string { return benchServe(b, cfg, "batch-map") }},
		{"served-stream", func(b *testing.B) string { return benchServe(b, cfg, "stream-map") }},
		{"sdk-cat", func(b *testing.B) string { return benchExample(b, "cat") }},
		{"sdk-streamcat", func(b *testing.B) string { return benchExample(b, "streamcat") }},
	} {
		b.Run(tt.name, func(b *testing.B) {
			dir := tt.start(b)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			c := mapclient.New(dir, zap.NewNop())
			defer c.Close()
			if err := c.Connect(ctx); err != nil {
				b.Fatal(err)
			}
			in := make([]isb.Message, batch)
			for i := range in {
				in[i] = isb.Message{ID: "m" + strconv.Itoa(i), Value: make([]byte, 100)}
			}
			var out []isb.Message
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				var err error
				if out, _, err = c.Map(ctx, in[:min(batch, b.N-i)], out[:0]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/msg")
		})
	}
}

// benchServe starts `vertex serve --role map` serving map mode (unary-map,
// batch-map) and returns its socket directory.
func benchServe(b *testing.B, cfg, mode string) string {
	dir := benchDir(b)
	startCmd(b, exec.Command(vertexBin, "serve", "--role", "map", "-f", writeConfig(b, cfg), "--uds-dir", dir, "--addr", "127.0.0.1:0",
		"--log-level", "warn", "--map-mode", mode))
	return dir
}

// benchExample starts sluice's SDK example name and returns its socket
// directory.
func benchExample(b *testing.B, name string) string {
	dir := benchDir(b)
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), "../pkg/sdk/examples/"+name).CombinedOutput()
	if err != nil {
		b.Fatalf("building %s: %v\n%s", name, err, out)
	}
	cmd := exec.Command(filepath.Join(dir, name))
	cmd.Env = append(os.Environ(), "SLUICE_UDS_DIR="+dir)
	startCmd(b, cmd)
	return dir
}

// benchDir returns a new directory for sockets, short enough for a unix
// socket path.
func benchDir(b *testing.B) string {
	b.Helper()
	dir, err := os.MkdirTemp("", "uds")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestServeMapShared runs two map servers of one vertex that share its
// limit, at most 20 messages a second, in a real redis-server, and maps 40
// messages through each at once: every message comes back unchanged, and
// no epoch grants more than 20 over both.
func TestServeMapShared(t *testing.T) {
	t.Parallel()
	const n, max = 40, 20
	srv := redistest.Start(t, redistest.Options{})
	cfg := serveMapConfig("serve-map-shared", max) + fmt.Sprintf(`      min: %d
      rampUpDuration: 0s
      store:
        redisStore:
          mode: single
          url: redis://%s
`, max, srv.Addr)
	var procs []*proc
	var dirs []string
	for range 2 {
		p, dir := startServeMap(t, cfg)
		procs, dirs = append(procs, p), append(dirs, dir)
	}
	t.Run("map", func(t *testing.T) { // returns once both have mapped theirs
		for i, dir := range dirs {
			t.Run(strconv.Itoa(i), func(t *testing.T) {
				t.Parallel()
				mapThrough(t, dir, n, 10)
			})
		}
	})
	for _, p := range procs {
		if code, _ := p.stop(syscall.SIGTERM, 15*time.Second); code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
		}
	}
	granted, _ := sumEpochs(t, procs)
	if len(granted) == 0 {
		t.Fatal("no epoch in the debug logs")
	}
	for e, g := range granted {
		if g > max {
			t.Errorf("epoch %d granted %d over both servers; max %d", e, g, max)
		}
	}
}

// TestServeMapBadInput: a file without a rate limit or without the map
// part, a --map-mode that is not one and a --forward that is not a map
// socket: one error naming it, exit 2.
func TestServeMapBadInput(t *testing.T) {
	t.Parallel()
	good := serveMapConfig("serve-map-bad", 10)
	noLimit := writeConfig(t, strings.Replace(good, "    rateLimit:\n      max: 10\n", "", 1))
	noUDF := writeConfig(t, strings.Replace(good, "  udf:\n    container:\n      image: user-map\n", "", 1))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no rate limit", []string{"-f", noLimit}, "spec.limits.rateLimit is not set"},
		{"no udf", []string{"-f", noUDF}, "spec.udf is not set"},
		{"a map mode that is not one", []string{"-f", writeConfig(t, good), "--map-mode", "flat-map"}, `--map-mode ("flat-map") is not a map mode (unary-map, batch-map, stream-map)`},
		{"forward not a map socket", []string{"-f", writeConfig(t, good), "--forward", "/tmp/x/sink.sock"}, `--forward ("/tmp/x/sink.sock") is not a map server's socket`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(vertexBin, append([]string{"serve", "--role", "map", "--uds-dir", udsDir(t), "--addr", "127.0.0.1:0"}, tc.args...)...)
			out, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), tc.want) {
				t.Fatalf("exit %d, output %q; want exit 2 naming %q", code, out, tc.want)
			}
		})
	}
}

// TestServeMapRateLimitedSignal forwards to a user's map (in the test's
// process) that answers each message rate-limited the first time it sees
// it, with adaptive throttling on: every message comes back, once, and the
// served vertex's limit takes the signals (sluice_ratelimit_cuts_total).
func TestServeMapRateLimitedSignal(t *testing.T) {
	t.Parallel()
	const n, max = 20, 50
	user := udsDir(t)
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := mapper.NewServer(mapper.MapperFunc(func(_ context.Context, keys []string, d mapper.Datum) mapper.Messages {
		mu.Lock()
		first := !seen[string(d.Value())]
		seen[string(d.Value())] = true
		mu.Unlock()
		if first {
			return mapper.Messages{mapper.MessageRateLimited(100 * time.Millisecond)}
		}
		return mapper.Messages{mapper.NewMessage(d.Value()).WithKeys(keys)}
	}), mapper.WithSocketDir(user))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("user's map server: %v", err)
		}
	}()
	cfg := serveMapConfig("serve-map-signal", max) + "      adaptive:\n        cutPercentage: 20\n"
	p, dir := startServeMap(t, cfg, "--forward", filepath.Join(user, "map.sock"))
	mapThrough(t, dir, n, 10)
	cuts := metricValues(t, p.metricsAddr(), "sluice_ratelimit_cuts_total")
	total := 0.0
	for _, v := range cuts {
		total += v
	}
	if total < 1 {
		t.Errorf("sluice_ratelimit_cuts_total %v after %d rate-limited answers; want at least one cut", cuts, n)
	}
	if code, _ := p.stop(syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderrText())
	}
}
