package mapclient_test

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/sdk/batchmapper"
	"github.com/sluiceflow/sluice/pkg/sdk/mapper"
	"github.com/sluiceflow/sluice/pkg/udf/mapclient"
)

// benchBatch is the size of the batches the benchmarks map, a vertex's
// default readBatchSize.
const benchBatch = 500

// benchMessages returns n messages shaped like the generator's: an id, a
// small JSON payload and an event time.
func benchMessages(n int) []isb.Message {
	out := make([]isb.Message, n)
	now := time.Now()
	for i := range out {
		out[i] = isb.Message{ID: "gen-" + strconv.Itoa(i), EventTime: now, Origin: i,
			Value: []byte(`{"Data":{"value":` + strconv.Itoa(i) + `},"Createdts":` + strconv.FormatInt(now.UnixNano(), 10) + `}`)}
	}
	return out
}

// benchCat and benchBatchCat are the cat and batchcat examples.
func benchCat(_ context.Context, keys []string, d mapper.Datum) mapper.Messages {
	return mapper.Messages{mapper.NewMessage(d.Value()).WithKeys(keys).WithUserMetadata(d.UserMetadata())}
}

func benchBatchCat(_ context.Context, datums <-chan batchmapper.Datum) batchmapper.BatchResponses {
	var out batchmapper.BatchResponses
	for d := range datums {
		out = append(out, batchmapper.NewBatchResponse(d.ID(), batchmapper.NewMessage(d.Value()).WithKeys(d.Keys())))
	}
	return out
}

// cpuTime is the CPU time the process has used, user and system: on a
// machine shared with other work, CPU time per message varies less than
// wall time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRemoteMap maps batches of benchBatch messages through a Remote
// and a server of the SDK on a unix socket, both in this process: one op is
// one batch, and msg/s is what a vertex would get from the map alone. The
// allocations, and cpu-ns/msg (the CPU time used per message), are those of
// both sides.
func BenchmarkMap(b *testing.B) {
	cases := []struct {
		name  string
		start func(dir string) func(context.Context) error
	}{
		{"unary", func(dir string) func(context.Context) error {
			return mapper.NewServer(mapper.MapperFunc(benchCat), mapper.WithSocketDir(dir)).Start
		}},
		{"batch", func(dir string) func(context.Context) error {
			return batchmapper.NewServer(batchmapper.BatchMapperFunc(benchBatchCat), batchmapper.WithSocketDir(dir)).Start
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			dir := socketDir(b)
			stop := serve(b, c.start(dir))
			r := mapclient.New(dir, nil)
			connect(b, r)
			in := benchMessages(benchBatch)
			out := make([]isb.Message, 0, benchBatch)
			ctx := context.Background()
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for range b.N {
				var err error
				if out, _, err = r.Map(ctx, in, out[:0]); err != nil {
					b.Fatal(err)
				}
				if len(out) != len(in) {
					b.Fatalf("%d messages out of %d", len(out), len(in))
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "msg/s")
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N*benchBatch), "cpu-ns/msg")
			r.Close()
			stop()
		})
	}
}
