package test

import (
	"syscall"
	"testing"
	"time"
)

// BenchmarkServeSource measures the time a message takes from a generator
// to a client's log sink, side by side: "builtin" is `vertex run` of the
// generator; "served" is the generator behind `vertex serve --role source`,
// read by `vertex run` of a udsource over the unix socket. Neither has a
// rate limit; the difference of ns/msg is the served source's overhead per
// message.
//
//	go test -run '^$' -bench BenchmarkServeSource -benchtime 3x ./test/
func BenchmarkServeSource(b *testing.B) {
	const n = 20000
	gen := `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: gen
spec:
  limits:
    readBatchSize: 500
    readTimeout: 100ms
  source:
    generator:
      rpu: 5000
      duration: 10ms
  sink:
    log: {}
`
	measure := func(b *testing.B, run func(b *testing.B) *proc) {
		var total time.Duration
		for range b.N {
			p := run(b)
			p.waitFor(30*time.Second, "the first message", func() bool { return len(p.lines) > 0 })
			t0, k0 := time.Now(), len(p.stdoutLines())
			p.waitFor(120*time.Second, "the messages", func() bool { return len(p.lines) >= k0+n })
			total += time.Since(t0)
			p.stop(syscall.SIGKILL, 10*time.Second)
		}
		b.ReportMetric(float64(total.Nanoseconds())/float64(b.N*n), "ns/msg")
	}
	b.Run("builtin", func(b *testing.B) {
		measure(b, func(b *testing.B) *proc {
			return start(b, "run", "-f", writeConfig(b, gen), "--metrics-addr", "127.0.0.1:0")
		})
	})
	b.Run("served", func(b *testing.B) {
		measure(b, func(b *testing.B) *proc {
			dir := b.TempDir()
			serveSource(b, dir, gen)
			return servedSourceClientBatch(b, dir, 500)
		})
	})
}
